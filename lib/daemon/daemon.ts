/**
 * `manifold daemon`'s core: the socket server (server.ts) answering forwarded CNI requests
 * through the plugin's own dispatcher and handlers (service.ts), with the API-backed sources
 * shared across requests: one warm {@link KubeClient} (keep-alive; a `tokenFile` is re-read on
 * every request, so rotated tokens are picked up) and NADs from an in-memory list+watch that
 * also keeps the on-disk mirror for in-process plugins (nad_store.ts).
 *
 * @module
 */

import { lazyImport } from "../util/lazy.ts";
import type { KubeClient } from "../k8s/mod.ts";
import { watchNetworkAttachmentDefinitions } from "../k8s/mod.ts";
import { disableMarks, type Logger } from "../log/mod.ts";
import type { ManifoldConf } from "../multinet/config.ts";
import {
  apiDraSource,
  apiNadSource,
  apiPodNetworkSource,
  apiPodSource,
} from "../multinet/nad/api_sources.ts";
import { NadMirrorWriter } from "../multinet/nad/mirror.ts";
import { useClearableTimers } from "../util/timer.ts";
import { manifoldHandlers, realDeps } from "../multinet/plugin.ts";
import { ApiStatusSink, KubeEventSink } from "../multinet/status/sinks.ts";
import type { EventSink } from "../multinet/deps.ts";
import { type ApiDeps, eventPolicy } from "../multinet/wiring.ts";
import { NadStore } from "./nad_store.ts";
import { type PodInformer, startPodInformer } from "./pod_informer.ts";
import { type HotPlug, startHotPlug } from "./hotplug/mod.ts";
import { daemonReclaimer, type IdleReclaimer, POD_PAGE_COLLECT_BYTES } from "./memory.ts";
import { AttachmentCache } from "../multinet/cache/cache.ts";
import { AttachmentTally } from "./attachments.ts";
import { countingEventSink, type DaemonObserver } from "./observer.ts";
import type { PolicyAgent } from "./policy/mod.ts";
import { DaemonServer } from "./server.ts";
import type { StatusPublisher } from "./status_publisher.ts";
import { cniService } from "./service.ts";
import { DaemonConf } from "./daemon_conf.ts";
import { LoggerPool } from "./log_pool.ts";
import { SandboxIndex } from "./sandbox_index.ts";

/** Options of {@link ManifoldDaemon.start}. */
export interface DaemonOptions {
  /**
   * The plugin configuration the runtime uses (`--config`): followed from its file
   * ({@link DaemonConf.load}), or fixed. Every request, hot-plug pass and the policy agent use
   * it; a request's own config contributes only its per-invocation fields (daemon_conf.ts).
   */
  conf: ManifoldConf | DaemonConf;
  /** The socket path. */
  socketPath: string;
  /**
   * The API client, or undefined without an API (standalone: requests use their config);
   * closed by {@link ManifoldDaemon.stop}.
   */
  kube?: KubeClient;
  /**
   * Where the on-disk NAD mirror is written (the config's `nadMirrorDir`: in-process fallbacks
   * read it only then); none when undefined.
   */
  mirrorDir?: string;
  /** The daemon's environment (delegates inherit it under the forwarded CNI_* variables). */
  env: Record<string, string>;
  /** This node (`--node-name`, `$NODE_NAME`): with an API, the pod informer's field selector. */
  nodeName?: string;
  /** Bound on one request, ms (service.ts). */
  requestTimeoutMs?: number;
  /** Time a client has to send its request, ms (server.ts). */
  idleTimeoutMs?: number;
  /** Connections served at once; past it clients get code 11 (server.ts). */
  maxConnections?: number;
  /** Receives what the daemon serves. */
  observer: DaemonObserver;
  /** The daemon's log. */
  logger: Logger;
}

/** Readiness: the API answered the NAD list and the watch is running. */
export interface DaemonReadiness {
  /** True when requests are served from a synced NAD store (or there is no API). */
  ok: boolean;
  /** Why not, one sentence each. */
  reasons: string[];
}

/** A running daemon. */
export class ManifoldDaemon {
  #server: DaemonServer;
  #store: NadStore | undefined;
  #stopWatch: AbortController;
  #watching: Promise<void>;
  #writer: NadMirrorWriter | undefined;
  #kube: KubeClient | undefined;
  #parts: {
    pods?: PodInformer;
    hotPlug?: HotPlug;
    policy?: PolicyAgent;
    reclaimer?: IdleReclaimer;
    loggers?: LoggerPool;
    publisher?: StatusPublisher;
  };

  private constructor(
    server: DaemonServer,
    store: NadStore | undefined,
    stopWatch: AbortController,
    watching: Promise<void>,
    writer: NadMirrorWriter | undefined,
    kube: KubeClient | undefined,
    parts: {
      pods?: PodInformer;
      hotPlug?: HotPlug;
      policy?: PolicyAgent;
      reclaimer?: IdleReclaimer;
      loggers?: LoggerPool;
      publisher?: StatusPublisher;
    },
  ) {
    this.#parts = parts;
    this.#kube = kube;
    this.#server = server;
    this.#store = store;
    this.#stopWatch = stopWatch;
    this.#watching = watching;
    this.#writer = writer;
  }

  /**
   * Starts the NAD watch (with an API) and the socket server.
   * @param opts see {@link DaemonOptions}
   * @returns the running daemon
   * @throws Deno errors when the socket cannot be created
   */
  static async start(options: DaemonOptions): Promise<ManifoldDaemon> {
    const trusted = options.conf instanceof DaemonConf
      ? options.conf
      : DaemonConf.fixed(options.conf);
    const opts = { ...options, conf: trusted.conf }; // the start-up values (daemon_conf.ts RESTART_KEYS)
    const { kube, logger } = opts;
    disableMarks(); // the trace timeline is per process: requests here run concurrently
    useClearableTimers(); // a request's cancelled timers are freed at once (lib/util/timer.ts)
    const stopWatch = new AbortController();
    let store: NadStore | undefined;
    let writer: NadMirrorWriter | undefined;
    let watching = Promise.resolve();
    let api: (() => Promise<ApiDeps>) | undefined;
    let pods: PodInformer | undefined;
    // One event sink for the daemon's life: CNI requests, policy and hot-plug all post through
    // it, and it counts what it posts (manifold_events_total).
    const kubeEvents = kube
      ? countingEventSink(new KubeEventSink(kube, logger), opts.observer)
      : undefined;
    if (kube) {
      const nodeName = opts.nodeName;
      if (nodeName) pods = startPodInformer(kube, nodeName, { signal: stopWatch.signal, logger });
      writer = opts.mirrorDir ? new NadMirrorWriter(opts.mirrorDir, { logger }) : undefined;
      store = new NadStore({ writer, logger });
      watching = watchNetworkAttachmentDefinitions(kube, store, {
        signal: stopWatch.signal,
        logger,
      }).catch((e) => logger.error("NAD watch ended", { error: String(e) }));
      const shared: ApiDeps = {
        nads: store.source(apiNadSource(kube)),
        pods: pods ? pods.store.source(apiPodSource(kube)) : apiPodSource(kube),
        podNetworks: apiPodNetworkSource(kube),
        dra: apiDraSource(kube),
        status: new ApiStatusSink(kube),
        events: eventPolicy(opts.conf.events, kubeEvents!),
      };
      api = () => Promise.resolve(shared);
    }
    let publisher: StatusPublisher | undefined;
    if (kube && api && opts.conf.statusPublish === "async") {
      if (pods) publisher = await startPublisher(opts, kube, pods, kubeEvents!);
      else logger.warn('"statusPublish": "async" needs --node-name; publishing synchronously', {});
    }
    let observer = opts.observer;
    const reclaimer = daemonReclaimer();
    // One pod → sandbox index for the policy agent and hot-plug (issue 31 §2).
    const sandboxes = new SandboxIndex(new AttachmentCache(opts.conf.cniDir));
    let policy: PolicyAgent | undefined;
    if (kube && opts.conf.multiNetworkPolicy) {
      const { PolicyAgent, kickingObserver } = await lazyImport<typeof import("./policy/mod.ts")>(
        "./policy/mod.ts",
        import.meta.url,
      );
      policy = PolicyAgent.start({
        kube,
        cniDir: opts.conf.cniDir,
        sandboxes,
        nodeName: opts.nodeName,
        events: eventPolicy(opts.conf.events, kubeEvents!),
        observer,
        logger: logger.with({ component: "policy" }),
        noSandboxGraceMs: opts.conf.policyNoSandboxGraceMs,
        // A list of every pod of the cluster leaves its pages as garbage: give it back.
        afterPodList: () => reclaimer.reclaim(),
        // A page of 500 pods leaves ≈ 5–10 MiB of garbage: collect it before the next one.
        afterPodPage: () => reclaimer.collect(POD_PAGE_COLLECT_BYTES),
        afterPodChange: () => reclaimer.background(),
      });
      observer = kickingObserver(observer, policy);
    }
    const attachments = tally(opts);
    const loggers = new LoggerPool();
    const serve = cniService({
      baseEnv: opts.env,
      trusted,
      handlers: (env) =>
        manifoldHandlers(
          realDeps(env, {
            api,
            onDelegate: (p, c, s) => opts.observer.delegate(p, c, s),
            logger: (dest) => loggers.get(dest),
            statusQueue: publisher,
            daemon: true,
          }),
          { processEnv: env },
        ),
      requestTimeoutMs: opts.requestTimeoutMs,
      observer,
      logger,
      attachments,
    });
    let server: DaemonServer;
    try {
      server = await DaemonServer.listen({
        socketPath: opts.socketPath,
        serve,
        idleTimeoutMs: opts.idleTimeoutMs,
        maxConnections: opts.maxConnections,
        requestTimeoutMs: opts.requestTimeoutMs,
        onAcceptError: () => opts.observer.acceptError?.(),
        logger,
        onSettled: (n) => reclaimer.settled(n),
      });
    } catch (e) {
      // Nothing started above may outlive the failure (the caller keeps the API client).
      await publisher?.stop(0);
      stopWatch.abort();
      await Promise.all([watching, policy?.stop(), pods?.done]);
      loggers.close();
      throw e;
    }
    const hotPlug = opts.conf.hotPlug && kube && pods && api
      ? startHotPlug({
        conf: opts.conf,
        currentConf: () => trusted.current(),
        pods: pods.store,
        sandboxes,
        api,
        events: kubeEvents!, // hot-plug's own policy (hotplug.ts)
        observer: opts.observer,
        env: opts.env,
        logger,
        nadChanges: store?.onChange.bind(store),
        // manifold_attachments: hot-plug adds and removes attachments outside any CNI request.
        onOutcome: (_, o) => {
          if (o.added.length > 0 || o.removed.length > 0) void attachments.scan();
        },
      })
      : undefined;
    if (opts.conf.hotPlug && !hotPlug) logger.warn("hotPlug needs an API and --node-name", {});
    return new ManifoldDaemon(server, store, stopWatch, watching, writer, kube, {
      pods,
      hotPlug,
      policy,
      reclaimer,
      loggers,
      publisher,
    });
  }

  /** MultiNetworkPolicy enforcement (`"multiNetworkPolicy": true` with an API), if on. */
  get policy(): PolicyAgent | undefined {
    return this.#parts.policy;
  }

  /** Requests being served now. */
  get inFlight(): number {
    return this.#server.inFlight;
  }

  /** Whether the daemon is ready to serve from memory (see {@link DaemonReadiness}). */
  ready(): DaemonReadiness {
    const reasons: string[] = [];
    if (this.#store && !this.#store.synced) {
      reasons.push("the NAD list has not been received from the API yet");
    }
    if (this.#parts.policy) reasons.push(...this.#parts.policy.notReady());
    if (this.#parts.pods && !this.#parts.pods.store.synced) {
      reasons.push("the list of this node's pods has not been received from the API yet");
    }
    return { ok: reasons.length === 0, reasons };
  }

  /**
   * SIGTERM: stops accepting (the socket is removed, so new requests fall back to the
   * in-process path), waits for the requests in flight, stops the watch, closes the API
   * client (the daemon owns it from `start`) and marks the on-disk mirror stale (its state
   * file is removed). Idempotent.
   */
  async stop(): Promise<void> {
    await this.#server.close();
    await this.#parts.hotPlug?.stop();
    this.#parts.loggers?.close();
    await this.#parts.publisher?.stop(); // what is left is re-driven at the next start
    this.#parts.reclaimer?.close();
    this.#stopWatch.abort();
    const policyStopped = this.#parts.policy?.stop();
    this.#kube?.close(); // ends the open watch stream at once (an abort alone waits for data)
    await this.#watching;
    await policyStopped;
    await this.#parts.pods?.done;
    await this.#writer?.clear().catch(() => {});
  }
}

/**
 * The background writer of `"statusPublish": "async"`, with its own API sink (UID
 * precondition) and the `events` setting over the daemon's one event sink; once the pod informer has synced, it re-drives the
 * statuses a killed daemon left unwritten (status_publisher.ts).
 */
async function startPublisher(
  opts: DaemonOptions & { conf: ManifoldConf },
  kube: KubeClient,
  pods: PodInformer,
  events: EventSink,
): Promise<StatusPublisher> {
  const { StatusPublisher } = await lazyImport<typeof import("./status_publisher.ts")>(
    "./status_publisher.ts",
    import.meta.url,
  );
  const { logger, observer } = opts;
  const publisher = new StatusPublisher({
    sink: new ApiStatusSink(kube),
    events: eventPolicy(opts.conf.events, events),
    cache: new AttachmentCache(opts.conf.cniDir),
    observer: {
      published: (s) => observer.statusPublished?.(s),
      gaveUp: () => observer.statusGaveUp?.(),
      pending: (n) => observer.statusPending?.(n),
    },
    logger: logger.with({ component: "status" }),
  });
  void (async () => {
    while (!pods.store.synced) {
      if (await Promise.race([pods.done.then(() => true), delay(200)])) return;
    }
    await publisher.redrive((ns, name) => pods.store.get(ns, name));
  })().catch((e) => logger.warn("network-status re-drive failed", { error: String(e) }));
  return publisher;
}

function delay(ms: number): Promise<false> {
  return new Promise((r) => setTimeout(() => r(false), ms));
}

/** The `manifold_attachments` count of the daemon's cache (`cniDir` of `--config`), scanned now. */
function tally(opts: DaemonOptions & { conf: ManifoldConf }): AttachmentTally {
  const t = new AttachmentTally(
    new AttachmentCache(opts.conf.cniDir),
    (n) => opts.observer.attachments(n),
    opts.logger,
  );
  void t.scan();
  return t;
}
