/**
 * `manifold daemon`: the resident node agent (lib/daemon). Serves the CNI requests the
 * `manifold` binary forwards over a unix socket (config key `daemonSocket`), keeps one warm API
 * connection and the NADs in memory (list+watch, also written to the on-disk mirror that
 * `manifold mirror` used to keep), until SIGTERM/SIGINT: then it stops accepting, finishes
 * the requests in flight, removes the socket and exits 0.
 *
 * A config that does not exist yet is waited for (the installer beside the daemon writes it once
 * the cluster network's exists); with `--socket` and `--metrics-address`, `/healthz` answers
 * meanwhile and `/readyz` says it waits.
 *
 * Exit codes: 0 stopped by a signal, 1 failure (unreadable config, no socket), 2 usage error.
 *
 * @module
 */

import { lazyImport } from "../util/lazy.ts";
import { parseArgs } from "node:util";
import { outputs, processEnv, stopSignal, type TextOutputs } from "./io.ts";
import { inClusterConnection, KubeClient, loadKubeconfig } from "../k8s/mod.ts";
import { createLogger, type Logger } from "../log/mod.ts";
import type { ManifoldConf } from "../multinet/config.ts";
import { DaemonConf } from "../daemon/daemon_conf.ts";
import { assertChrootDir } from "../multinet/chroot.ts";
import { ManifoldDaemon } from "../daemon/daemon.ts";
import { type DaemonObserver, NO_OBSERVER } from "../daemon/observer.ts";
import { fallbackFile } from "../daemon/forward.ts";
import { DEFAULT_REQUEST_TIMEOUT_MS } from "../daemon/service.ts";
import { DEFAULT_IDLE_TIMEOUT_MS, DEFAULT_MAX_CONNECTIONS } from "../daemon/server.ts";
import { errorText } from "../util/text.ts";
import { waitForFile } from "../fs/mod.ts";

/** The socket path when neither `--socket` nor the config's `daemonSocket` names one. */
export const DEFAULT_DAEMON_SOCKET = "/run/manifold/manifold.sock";

/** Usage text of `manifold daemon`. */
export const DAEMON_USAGE = `Usage: manifold daemon --config PATH [options]

Serves the CNI requests the manifold binary forwards (config key daemonSocket) over a unix
socket, with one warm API connection and NADs kept in memory by a list+watch (also written
to the on-disk mirror nadMirrorDir, when the config names one, that in-process fallbacks
read). With
"multiNetworkPolicy": true in the config it also enforces MultiNetworkPolicies (nftables in
the pods' network namespaces) on this node's pods (--node-name).

Options:
  --config PATH             the plugin config (conf or conflist) the runtime uses
                            (--conf PATH is its old spelling, accepted with a warning)
  --socket PATH             socket (default: the config's daemonSocket, else ${DEFAULT_DAEMON_SOCKET})
  --kubeconfig PATH         kubeconfig (default: the config's, else in-cluster)
  --metrics-address H:P     serve /healthz, /readyz, /metrics there (default off)
  --node-name NAME          this node (default $NODE_NAME): its pods are listed and watched,
                            so ADD reads pods without a GET (and "hotPlug": true works)
  --request-timeout-ms MS   bound on one request; past it the binary gets code 11 (default ${DEFAULT_REQUEST_TIMEOUT_MS})
  --idle-timeout-ms MS      time a client has to send its request (default ${DEFAULT_IDLE_TIMEOUT_MS})
  --max-connections N       requests served at once; past it clients get code 11 (default ${DEFAULT_MAX_CONNECTIONS})
  --log-level LEVEL         debug, verbose (default), error, panic
  -h, --help                this text

Every request runs with the config of --config (re-read when the file changes) plus only the
per-invocation fields of the request (cniVersion, runtimeConfig, args, prevResult; CNI_COMMAND,
CNI_CONTAINERID, CNI_NETNS, CNI_IFNAME, CNI_ARGS); delegates come from its binDir. One daemon per
socket: a second one exits 1 naming the first one's PID (<socket>.lock). A --config that does not
exist yet is waited for (with --socket, /healthz answers and /readyz says so meanwhile).

Stops on SIGTERM/SIGINT: stops accepting, finishes requests in flight, removes the socket, exit 0.
Exit codes: 0 stopped by a signal, 1 failure, 2 usage error.
`;

/** Injected I/O of {@link runDaemon}; defaults are the process's. */
export interface DaemonIO extends TextOutputs {
  /** Environment. */
  env?: Record<string, string>;
  /** Stops the daemon; default SIGTERM/SIGINT. */
  signal?: AbortSignal;
  /** The log; default JSON lines on stderr. */
  logger?: Logger;
}

interface DaemonArgs {
  conf: string;
  /** The config was given with the old spelling `--conf`. */
  deprecatedConf: boolean;
  socket?: string;
  kubeconfig?: string;
  metricsAddress?: string;
  nodeName?: string;
  requestTimeoutMs: number;
  idleTimeoutMs: number;
  maxConnections: number;
  logLevel: string;
}

/**
 * `manifold daemon …`: runs the daemon until a signal. Never throws.
 * @param args the words after `daemon`
 * @param io outputs, environment, stop signal, logger
 * @returns 0 stopped, 1 failure, 2 usage error
 */
export async function runDaemon(args: string[], io: DaemonIO = {}): Promise<number> {
  const { stdout, stderr } = outputs(io);
  let opts: DaemonArgs;
  try {
    const parsed = parseDaemonArgs(args);
    if (parsed === "help") {
      stdout(DAEMON_USAGE);
      return 0;
    }
    opts = parsed;
  } catch (e) {
    stderr(`manifold daemon: ${errorText(e)}\nTry 'manifold daemon --help'.\n`);
    return 2;
  }
  if (opts.deprecatedConf) stderr("manifold daemon: --conf is deprecated; use --config PATH\n");
  const env = io.env ?? processEnv();
  const logger = io.logger ??
    createLogger({ level: opts.logLevel, toStderr: true }).with({ cmd: "daemon" });
  const { signal, release } = stopSignal(io.signal);
  let kube: KubeClient | undefined;
  let daemon: ManifoldDaemon | undefined;
  let http: { close(): Promise<void> } | undefined;
  try {
    let observer = NO_OBSERVER;
    let started: ManifoldDaemon | undefined;
    let waiting: string | undefined;
    const startHttp = async (socketPath: string) => {
      if (!opts.metricsAddress || http) return;
      const { startDaemonHttp } = await lazyImport<typeof import("../daemon/http.ts")>(
        "../daemon/http.ts",
        import.meta.url,
      );
      const h = await startDaemonHttp({
        address: opts.metricsAddress,
        ready: () => started?.ready() ?? { ok: false, reasons: [waiting ?? "starting"] },
        fallbackFile: fallbackFile(socketPath),
      });
      observer = h.observer;
      http = h;
    };
    // The installer beside the daemon (deploy/) writes the config once the cluster network's
    // exists: wait for it rather than exit into the kubelet's restart back-off. With --socket,
    // /healthz answers meanwhile (the liveness probe) and /readyz says why it is not ready.
    if (opts.socket) await startHttp(opts.socket);
    await assertConfigDir(opts.conf);
    waiting = `waiting for the config ${opts.conf}`;
    const found = await waitForFile(opts.conf, {
      signal,
      onWait: () => logger.info("waiting for the config", { config: opts.conf }),
    });
    if (!found) return 0; // stopped while waiting
    waiting = undefined;
    const trusted = await DaemonConf.load(opts.conf, logger);
    const conf = trusted.conf;
    await assertChrootDir(conf.chrootDir);
    const socketPath = opts.socket ?? conf.daemonSocket ?? DEFAULT_DAEMON_SOCKET;
    await startHttp(socketPath);
    kube = await apiClient(opts.kubeconfig ?? conf.kubeconfig, env, conf, logger, observer);
    daemon = started = await ManifoldDaemon.start({
      conf: trusted,
      socketPath,
      kube,
      mirrorDir: conf.nadMirrorDir, // none without: no one would read it
      env: opts.nodeName ? { ...env, NODE_NAME: opts.nodeName } : env,
      nodeName: opts.nodeName,
      requestTimeoutMs: opts.requestTimeoutMs,
      idleTimeoutMs: opts.idleTimeoutMs,
      maxConnections: opts.maxConnections,
      observer,
      logger,
    });
    logger.info("daemon serving", { socket: socketPath, api: !!kube, node: opts.nodeName });
    if (!signal.aborted) {
      await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
    }
    logger.info("daemon stopping", { inFlight: daemon.inFlight });
    await daemon.stop();
    logger.info("daemon stopped", {});
    return 0;
  } catch (e) {
    logger.error("daemon failed", { error: errorText(e) });
    stderr(`manifold daemon: ${errorText(e)}\n`);
    await daemon?.stop().catch(() => {});
    return 1;
  } finally {
    await http?.close().catch(() => {});
    kube?.close();
    release();
  }
}

/** The API client (kubeconfig, else in-cluster), or undefined without an API. */
async function apiClient(
  kubeconfig: string | undefined,
  env: Record<string, string>,
  conf: ManifoldConf,
  logger: Logger,
  observer: DaemonObserver,
): Promise<KubeClient | undefined> {
  if (conf.nadDir) return undefined;
  const connection = kubeconfig ? await loadKubeconfig(kubeconfig) : inClusterConnection(env);
  if (!connection) return undefined;
  return new KubeClient({
    connection,
    timeoutMs: conf.apiTimeoutMs,
    deadlineMs: conf.apiDeadlineMs,
    logger,
    userAgent: "manifold-daemon",
    onRequest: observer === NO_OBSERVER ? undefined : (m, s) => observer.apiRequest(m, s),
    onListPageShrunk: (path) =>
      observer.apiListPageShrunk?.(path.split("?")[0].split("/").pop() ?? ""),
  });
}

/** @throws Error whose message is the usage problem */
function parseDaemonArgs(args: string[]): DaemonArgs | "help" {
  const { values } = parseArgs({
    args,
    options: {
      config: { type: "string" },
      conf: { type: "string" },
      socket: { type: "string" },
      kubeconfig: { type: "string" },
      "metrics-address": { type: "string" },
      "node-name": { type: "string" },
      "request-timeout-ms": { type: "string" },
      "idle-timeout-ms": { type: "string" },
      "max-connections": { type: "string" },
      "log-level": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) return "help";
  if (values.config !== undefined && values.conf !== undefined) {
    throw new Error("--conf is the old spelling of --config: give one of them");
  }
  const config = values.config ?? values.conf;
  if (!config) throw new Error("--config is required");
  for (const k of ["socket", "kubeconfig"] as const) {
    if (values[k] !== undefined && !values[k]!.startsWith("/")) {
      throw new Error(`--${k} must be an absolute path`);
    }
  }
  const ms = (flag: string, v: string | undefined, def: number, max = 3_600_000) => {
    if (v === undefined) return def;
    if (!/^\d+$/.test(v) || Number(v) < 1 || Number(v) > max) {
      throw new Error(`--${flag} must be an integer 1…${max}, got ${JSON.stringify(v)}`);
    }
    return Number(v);
  };
  const m = values["metrics-address"];
  if (m !== undefined && !/^(\[[0-9a-fA-F:.]+\]|[^:\s]+):\d{1,5}$/.test(m)) {
    throw new Error(`--metrics-address must be HOST:PORT, got ${JSON.stringify(m)}`);
  }
  const logLevel = values["log-level"] ?? "verbose";
  if (!["debug", "verbose", "info", "warning", "error", "panic"].includes(logLevel)) {
    throw new Error(`--log-level must be debug, verbose, error or panic, got ${logLevel}`);
  }
  return {
    conf: config,
    deprecatedConf: values.conf !== undefined,
    socket: values.socket,
    kubeconfig: values.kubeconfig,
    metricsAddress: m,
    nodeName: values["node-name"] ?? (Deno.env.get("NODE_NAME") || undefined),
    requestTimeoutMs: ms(
      "request-timeout-ms",
      values["request-timeout-ms"],
      DEFAULT_REQUEST_TIMEOUT_MS,
    ),
    idleTimeoutMs: ms("idle-timeout-ms", values["idle-timeout-ms"], DEFAULT_IDLE_TIMEOUT_MS),
    maxConnections: ms(
      "max-connections",
      values["max-connections"],
      DEFAULT_MAX_CONNECTIONS,
      65_536,
    ),
    logLevel,
  };
}

/**
 * The config's directory must exist when the daemon starts: the installer writes the config
 * into it later (deploy/ mounts /etc/cni/net.d with `DirectoryOrCreate`), so a missing file is
 * waited for, but a missing directory is a wrong `--config` that no installer will fix.
 *
 * @param conf the `--config` path (absolute or relative to the working directory)
 * @throws {Error} naming the path when its directory is absent or not a directory
 *   ("Not a directory", as the kernel's ENOTDIR reads)
 */
async function assertConfigDir(conf: string): Promise<void> {
  const slash = conf.lastIndexOf("/");
  const dir = slash > 0 ? conf.slice(0, slash) : slash === 0 ? "/" : ".";
  let st: Deno.FileInfo;
  try {
    st = await Deno.stat(dir);
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
    throw new Error(
      `--config ${conf}: the directory ${dir} does not exist (the daemon waits for the file, ` +
        "not for its directory)",
    );
  }
  if (!st.isDirectory) throw new Error(`--config ${conf}: Not a directory (${dir})`);
}
