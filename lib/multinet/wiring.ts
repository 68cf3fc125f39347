/**
 * Builds the real {@link ManifoldDeps} for a CNI call from Manifold's configuration
 * and the CNI environment: process-backed delegates, the on-disk cache, and either the
 * Kubernetes API (kubeconfig or in-cluster) or standalone sources (`nadDir`, status files).
 *
 * Modules a mode does not use are never loaded: the Kubernetes client only with an API
 * connection, the NAD directory reader only in standalone mode, netlink only when the
 * kernel is first asked (see `status/kernel.ts`).
 *
 * @module
 */

import { lazyImport } from "../util/lazy.ts";
import type { CniEnv } from "../cni/env.ts";
import { findPlugin, type PluginExec, ProcessPluginExec } from "../cni/invoke.ts";
import { CniRuntime } from "../cni/runtime.ts";
import type { KubeConnection } from "../k8s/connection.ts";
import type { Logger } from "../log/mod.ts";
import { AttachmentCache } from "./cache/cache.ts";
import { delegateGroupTracker } from "./cache/delegate_groups.ts";
import type { ManifoldConf } from "./config.ts";
import type { EventSink, ManifoldDeps, PodDeviceSource, PodSource, StatusSink } from "./deps.ts";
import type { NadSource } from "./nad/source.ts";
import type { PodNetworkSource } from "./plan/pod_networks.ts";
import type { DraSource } from "../devices/dra.ts";
import { netlinkKernel } from "./status/kernel.ts";
import { ApiStatusSink, FileStatusSink, KubeEventSink, LogEventSink } from "./status/sinks.ts";

/** What {@link buildDeps} takes from the process besides the config and the CNI environment. */
export interface WiringOptions {
  /** Environment of the process (delegates inherit it, as from a runtime). */
  processEnv: Record<string, string>;
  /**
   * The API-backed sources, shared across calls (`manifold daemon`); default: a connector
   * built per call from the config (kubeconfig or in-cluster), used only when needed.
   */
  api?: () => Promise<ApiDeps>;
  /**
   * Told of each delegate execution once it ends: `plugin` = the binary's name (its type),
   * `command` = its CNI_COMMAND, `seconds` = wall time (`manifold daemon`'s metrics).
   */
  onDelegate?: (plugin: string, command: string, seconds: number) => void;
  /**
   * A long-lived process serves the calls (`manifold daemon`): delegates are started with
   * Deno.Command and setsid(1), not the per-call plugin's posix_spawn (lib/cni/spawn/native.ts).
   */
  daemon?: boolean;
}

/**
 * Creates the dependencies of one CNI call.
 * @throws {CniError} 7 when the kubeconfig cannot be read or parsed.
 */
export async function buildDeps(
  conf: ManifoldConf,
  env: CniEnv,
  logger: Logger,
  opts: WiringOptions,
): Promise<ManifoldDeps> {
  // Tells ADD when its first delegate process exists and has its config, so that main-thread
  // work (API requests, netlink's loading) starts while that process runs instead of delaying
  // its spawn or the write of its config.
  let spawned: () => void = () => {};
  const delegateSpawned = new Promise<void>((resolve) => spawned = resolve);
  // `chrootDir` (lib/multinet/chroot.ts) is evaluated only when configured.
  const chroot = conf.chrootDir
    ? await lazyImport<typeof import("./chroot.ts")>("./chroot.ts", import.meta.url)
    : undefined;
  const root = await chroot?.delegateRoot(conf.chrootDir, logger);
  const cache = new AttachmentCache(conf.cniDir);
  // Each delegate ADD's process group is noted while it runs: a DEL after this process was
  // killed stops it (cache/delegate_groups.ts).
  // posix_spawn through FFI in the per-call plugin (cni/spawn/native.ts: no setsid(1) exec a
  // delegate, Deno's process API never loaded); the daemon, which spawns from a long-lived
  // process and does not pay those costs per pod, keeps Deno.Command.
  const processes = new ProcessPluginExec({
    ...(root ? { chrootDir: root } : {}),
    groups: delegateGroupTracker(cache.delegates, logger),
    nativeSpawn: !opts.api && !opts.daemon,
  });
  const exec: PluginExec = {
    exec(req) {
      const started = performance.now();
      const running = processes.exec(req); // spawns synchronously, before its first await
      // …and has its config once its stdin gate opens (the intent record durable).
      if (req.stdinGate) req.stdinGate.then(spawned, () => {});
      else spawned();
      const { onDelegate } = opts;
      if (onDelegate) {
        const done = () =>
          onDelegate(
            req.path.slice(req.path.lastIndexOf("/") + 1),
            req.env.CNI_COMMAND ?? "",
            (performance.now() - started) / 1000,
          );
        running.then(done, done);
      }
      return running;
    },
  };
  const runtime = new CniRuntime({
    binDirs: [conf.binDir, ...env.path],
    exec,
    timeoutMs: conf.delegateTimeoutMs,
    baseEnv: opts.processEnv,
    logger,
    ...(root ? { findPlugin: (type, dirs) => findPlugin(type, dirs, { root }) } : {}),
  });
  const base = {
    // The readiness file is a host path: the daemon checks it inside the host's root.
    conf: root ? await chroot!.confInRoot(conf, root) : conf,
    env,
    runtime,
    cache,
    logger,
    kernel: root ? chroot!.kernelInRoot(netlinkKernel(logger), root) : netlinkKernel(logger),
    devices: kubeletDevices(conf, logger),
    delegateSpawned,
  };
  const statusDir = `${conf.cniDir}/network-status`;

  if (conf.nadDir) {
    const { DirectoryNadSource } = await lazyImport<typeof import("./nad/source.ts")>(
      "./nad/source.ts",
      import.meta.url,
    );
    return {
      ...base,
      nads: new DirectoryNadSource(conf.nadDir),
      status: new FileStatusSink(statusDir, logger, { ifName: env.ifName }),
      events: new LogEventSink(logger),
    };
  }
  const api = opts.api
    ? { connect: opts.api, checkConfig: () => opts.api!().then(() => {}) }
    : await apiConnector(conf, opts.processEnv, logger);
  if (!api) {
    logger.debug("no Kubernetes API configured: default network and delegates only");
    return {
      ...base,
      status: new FileStatusSink(statusDir, logger, { ifName: env.ifName }),
      events: new LogEventSink(logger),
    };
  }
  // The API sources connect on first use: a DEL or CHECK served from the cache never reads
  // the kubeconfig nor loads the client. ADD needs the API anyway: it reads and checks the
  // kubeconfig now and waits for that (`ready`) before its first delegate, so a bad kubeconfig
  // fails it before anything is attached. The client's modules (≈ 12) load when a pod or NAD
  // GET needs them, else once the first delegate runs, while the main thread waits for it:
  // with the pod's annotations from the runtime and NADs from the mirror, the first request
  // is the network-status PATCH after the last delegate.
  const { connect } = api;
  const ready = env.command === "ADD" ? api.checkConfig() : undefined;
  ready?.catch(() => {}); // awaited by ADD
  // With nothing read from the API before the first delegate (the pod's annotations from the
  // runtime, NADs from the mirror), the status PATCH would also set up the first connection
  // (TCP, TLS, the pin check) after the last delegate: it is opened now instead (a no-op when a
  // GET already opened one).
  if (ready) {
    void delegateSpawned.then(() => connect()).then((a) => a.preconnect?.()).catch(() => {});
  }
  let queued = Promise.resolve();
  return {
    ...base,
    ...(ready ? { ready } : {}),
    nads: conf.nadMirrorDir
      ? mirrorFirst(conf.nadMirrorDir, connect, logger)
      : { get: async (namespace, name) => (await connect()).nads.get(namespace, name) },
    pods: {
      get: async (namespace, name, uid) => (await connect()).pods.get(namespace, name, uid),
    },
    podNetworks: {
      podNetwork: async (name) => (await connect()).podNetworks.podNetwork(name),
      attachment: async (namespace, name) =>
        (await connect()).podNetworks.attachment(namespace, name),
      namespaceLabels: async (name) => {
        const source = (await connect()).podNetworks;
        return source.namespaceLabels ? await source.namespaceLabels(name) : undefined;
      },
    },
    dra: {
      claim: async (namespace, name) => (await draOf(connect)).claim(namespace, name),
      slices: async (filter) => (await draOf(connect)).slices(filter),
    },
    status: {
      kind: "api",
      publish: async (pod, containerId, entries, extra) =>
        await (await connect()).status.publish(pod, containerId, entries, extra),
    },
    events: {
      emit: (pod, ev) => {
        queued = queued.then(() => connect()).then((api) => api.events.emit(pod, ev), () => {});
      },
      flush: () => queued.then(() => connect()).then((api) => api.events.flush(), () => {}),
    },
  };
}

/**
 * NADs from the node-local mirror (`nadMirrorDir`), read without waiting for the API
 * connection; the API (connected on first need) answers what the mirror cannot.
 */
function mirrorFirst(
  dir: string,
  connect: () => Promise<ApiDeps>,
  logger: Logger,
): NadSource {
  const fromApi: NadSource = {
    get: async (namespace, name) => (await connect()).nads.get(namespace, name),
  };
  let source: Promise<NadSource> | undefined;
  return {
    get: async (namespace, name) => {
      source ??= lazyImport<typeof import("./nad/mirror.ts")>("./nad/mirror.ts", import.meta.url)
        .then((m) => m.mirrorNadSource(dir, fromApi, logger));
      return await (await source).get(namespace, name);
    },
  };
}

/** The API-backed parts of the dependencies, created together on first use. */
export interface ApiDeps {
  /** NetworkAttachmentDefinitions. */
  nads: NadSource;
  /** Pods (UID and annotations). */
  pods: PodSource;
  /** KEP-3698 PodNetworks and PodNetworkAttachments. */
  podNetworks: PodNetworkSource;
  /** DRA ResourceClaims and ResourceSlices; absent: NADs get devices from kubelet only. */
  dra?: DraSource;
  /** The network-status PATCH. */
  status: StatusSink;
  /** Kubernetes Events. */
  events: EventSink;
  /** Opens the API connection ahead of the next request (`KubeClient.preconnect`). */
  preconnect?: () => Promise<void>;
}

/**
 * Decides whether there is a Kubernetes API (a `kubeconfig`, else the in-cluster service
 * environment) and returns a memoised connector, or undefined without an API. The kubeconfig
 * is read when `checkConfig` or `connect` is first called, the client loaded when `connect` is.
 * @throws {CniError} 7 when the in-cluster environment is set but its token file is missing;
 *   both calls reject with code 7 for an unreadable or invalid kubeconfig.
 */
async function apiConnector(
  conf: ManifoldConf,
  processEnv: Record<string, string>,
  logger: Logger,
): Promise<ApiConnector | undefined> {
  let inCluster: KubeConnection | undefined;
  if (!conf.kubeconfig) {
    const { inClusterConnection } = await lazyImport<typeof import("../k8s/connection.ts")>(
      "../k8s/connection.ts",
      import.meta.url,
    );
    try {
      inCluster = inClusterConnection(processEnv);
    } catch (e) {
      throw (await lazyImport<typeof import("./api_errors.ts")>("./api_errors.ts", import.meta.url))
        .cniErrorFromKube(e);
    }
    if (!inCluster) return undefined;
  }
  let connection: Promise<KubeConnection> | undefined;
  const config = () =>
    connection ??= inCluster ? Promise.resolve(inCluster) : (async () => {
      const { loadKubeconfig } = await lazyImport<typeof import("../k8s/kubeconfig/load.ts")>(
        "../k8s/kubeconfig/load.ts",
        import.meta.url,
      );
      return await loadKubeconfig(conf.kubeconfig!).catch(async (e) => {
        throw (await lazyImport<typeof import("./api_errors.ts")>(
          "./api_errors.ts",
          import.meta.url,
        )).cniErrorFromKube(e);
      });
    })();
  let api: Promise<ApiDeps> | undefined;
  const connect = () =>
    api ??= (async () => {
      const [
        connection,
        { KubeClient },
        { apiDraSource, apiNadSource, apiPodSource, apiPodNetworkSource },
        { nativeTlsWanted }, // loaded by main.ts for an ADD; a DEL (no API) never loads it
      ] = await Promise.all([
        config(),
        lazyImport<typeof import("../k8s/client.ts")>("../k8s/client.ts", import.meta.url),
        lazyImport<typeof import("./nad/api_sources.ts")>("./nad/api_sources.ts", import.meta.url),
        lazyImport<typeof import("../k8s/tls_warm.ts")>("../k8s/tls_warm.ts", import.meta.url),
      ]);
      const kube = new KubeClient({
        connection,
        timeoutMs: conf.apiTimeoutMs,
        deadlineMs: conf.apiDeadlineMs,
        logger,
        // A per-call process: its concurrent GETs (the NADs) share one connection instead of
        // each opening one. The daemon (its own client, many concurrent calls) does not.
        pipelineGets: true,
        // A fresh process: OpenSSL's first handshake does not wait for Deno's crypto
        // initialisation (lib/k8s/http1/native_tls.ts); MANIFOLD_NATIVE_TLS=0 keeps Deno's.
        nativeTls: nativeTlsWanted(processEnv),
      });
      return {
        nads: apiNadSource(kube),
        pods: apiPodSource(kube),
        podNetworks: apiPodNetworkSource(kube),
        dra: apiDraSource(kube),
        status: new ApiStatusSink(kube),
        events: eventPolicy(conf.events, new KubeEventSink(kube, logger)),
        preconnect: () => kube.preconnect(),
      };
    })();
  return { connect, checkConfig: () => config().then(() => {}) };
}

/** The API of one call: its sources, and the kubeconfig check alone. */
interface ApiConnector {
  /** The API sources, created on first call (kubeconfig read, client loaded); memoised. */
  connect: () => Promise<ApiDeps>;
  /** Resolves once the kubeconfig is read and valid; rejects with code 7 otherwise. */
  checkConfig: () => Promise<void>;
}

/** The API's DRA source; API deps built without one (an older daemon wiring) have none. */
async function draOf(connect: () => Promise<ApiDeps>): Promise<DraSource> {
  const api = await connect();
  if (api.dra) return api.dra;
  const { CniError, CniErrorCode } = await lazyImport<typeof import("../cni/errors.ts")>(
    "../cni/errors.ts",
    import.meta.url,
  );
  throw new CniError(CniErrorCode.Internal, "no DRA source in this process's API wiring");
}

/**
 * Applies the `events` setting to a sink: `"all"` sends everything, `"warnings"` only
 * `type: "Warning"` events, `"none"` nothing (events are still logged by their emitters).
 */
export function eventPolicy(policy: ManifoldConf["events"], sink: EventSink): EventSink {
  if (policy === "all") return sink;
  return {
    emit: (pod, ev) => {
      if (policy === "warnings" && ev.type === "Warning") sink.emit(pod, ev);
    },
    flush: () => sink.flush(),
  };
}

/**
 * Devices from kubelet: the pod-resources API at `conf.podResourcesSocket`, the checkpoint
 * `conf.deviceCheckpointFile` as fallback. lib/devices (and gRPC, only when the socket exists)
 * is loaded on the first request: pods without device-backed networks never pay for it.
 */
function kubeletDevices(conf: ManifoldConf, logger: Logger): PodDeviceSource {
  return {
    async podDevices(pod) {
      const { readPodDevices } = await lazyImport<typeof import("../devices/allocation.ts")>(
        "../devices/allocation.ts",
        import.meta.url,
      );
      return await readPodDevices(pod, {
        podResourcesSocket: conf.podResourcesSocket,
        checkpointFile: conf.deviceCheckpointFile,
        timeoutMs: conf.podResourcesTimeoutMs,
        logger,
      });
    },
  };
}
