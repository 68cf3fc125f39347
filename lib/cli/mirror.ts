/**
 * `manifold mirror`: keeps the node-local NetworkAttachmentDefinition mirror current (a
 * container of the DaemonSet, deploy/40-daemonset.yaml). Lists every NAD of every namespace,
 * writes `<dir>/<namespace>/<name>.json` and `<dir>/.mirror.json`, then watches and applies
 * each change until SIGTERM/SIGINT, resuming after dropped streams and re-listing when the
 * server's history no longer holds its resourceVersion (lib/k8s/watch.ts,
 * lib/multinet/nad/mirror.ts). The plugin reads the mirror when its config sets
 * `nadMirrorDir`, so an ADD with pod annotations from the runtime sends no API read.
 *
 * API failures never end it: they are logged and retried with backoff; meanwhile the
 * mirror's `syncedAt` ages and the plugin falls back to API GETs. On a clean stop the state
 * file is removed (the plugin then uses the API at once); the NAD files stay for the next run.
 *
 * Exit codes: 0 stopped by a signal (or `--once` done), 1 failure (no API connection, the
 * kubeconfig is unusable, `--once` could not list or write), 2 usage error.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { outputs, stopSignal, type TextOutputs } from "./io.ts";
import {
  KUBE_FLAG_OPTIONS,
  kubeConnectionFromFlags,
  type KubeFlags,
  kubeFlags,
  kubeFlagsHelp,
} from "./kube_flags.ts";
import { KubeClient } from "../k8s/client.ts";
import { inClusterConnection, type KubeConnection } from "../k8s/connection.ts";
import { type ListWatchOptions, watchNetworkAttachmentDefinitions } from "../k8s/watch.ts";
import { createLogger, type Logger } from "../log/mod.ts";
import { DEFAULT_NAD_MIRROR_DIR, NadMirrorWriter } from "../multinet/nad/mirror.ts";
import { errorText } from "../util/text.ts";

/** Per-request bound of the mirror's API calls (a list page), ms, unless `--api-timeout-ms`. */
const DEFAULT_API_TIMEOUT_MS = 30_000;

/** Usage text of `manifold mirror`. */
export const MIRROR_USAGE = `Usage: manifold mirror [options]

Keeps a node-local copy of every NetworkAttachmentDefinition (list + watch) for the plugin
(config key nadMirrorDir): <dir>/<namespace>/<name>.json and <dir>/.mirror.json.

Options:
  --dir DIR               mirror directory (default ${DEFAULT_NAD_MIRROR_DIR})
${
  kubeFlagsHelp("the pod's service account, in-cluster", 26)
}  --once                  list, write the mirror and exit (no watch; tests, debugging)
  --log-level LEVEL       debug, verbose (default), error, panic
  --api-timeout-ms MS     bound on each API request (default ${DEFAULT_API_TIMEOUT_MS})
  -h, --help              this text

Stops on SIGTERM/SIGINT (exit 0) and then removes <dir>/.mirror.json, so the plugin reads
NADs from the API until a mirror runs again.
Exit codes: 0 done or stopped by a signal, 1 failure, 2 usage error.
`;

/** Injected I/O of {@link runMirror}; defaults are the process's. */
export interface MirrorIO extends TextOutputs {
  /** Environment (`KUBECONFIG`; `KUBERNETES_SERVICE_HOST`/`PORT` for the in-cluster connection). */
  env?: Record<string, string>;
  /** Stops the mirror; default: SIGTERM and SIGINT of the process. */
  signal?: AbortSignal;
  /** Receives the log; default JSON lines on stderr at `--log-level`. */
  logger?: Logger;
  /** Timing of the list/watch loop (tests); see `ListWatchOptions`. */
  timing?: Omit<ListWatchOptions, "signal" | "logger" | "once">;
}

/** The parsed flags of `manifold mirror`. */
interface MirrorArgs {
  dir: string;
  kube: KubeFlags;
  once: boolean;
  logLevel: string;
  apiTimeoutMs: number;
}

/**
 * `manifold mirror …`: parses the flags, connects to the API, and runs the mirror until a
 * signal (or once with `--once`). Never throws. Logs are JSON lines on stderr.
 *
 * @param args the words after `mirror`
 * @param io stdout, stderr, env, stop signal, logger (default: the process's)
 * @returns 0 done or stopped, 1 failure, 2 usage error
 */
export async function runMirror(args: string[], io: MirrorIO = {}): Promise<number> {
  const { stdout, stderr } = outputs(io);
  let opts: MirrorArgs;
  try {
    const parsed = parseMirrorArgs(args);
    if (parsed === "help") {
      stdout(MIRROR_USAGE);
      return 0;
    }
    opts = parsed;
  } catch (e) {
    stderr(`manifold mirror: ${errorText(e)}\nTry 'manifold mirror --help'.\n`);
    return 2;
  }
  const logger = io.logger ??
    createLogger({ level: opts.logLevel, toStderr: true }).with({ cmd: "mirror" });

  const { signal, release } = stopSignal(io.signal);
  let kube: KubeClient | undefined;
  try {
    const connection = await connect(opts.kube, io.env ?? Deno.env.toObject());
    kube = new KubeClient({
      connection,
      timeoutMs: opts.apiTimeoutMs,
      logger,
      userAgent: "manifold-mirror",
      signal,
    });
    const writer = new NadMirrorWriter(opts.dir, { logger });
    logger.info("mirror starting", { dir: opts.dir, server: connection.server, once: opts.once });
    const env = io.env ?? Deno.env.toObject();
    await watchNetworkAttachmentDefinitions(kube, writer, {
      ...watchIdleFromEnv(env),
      ...io.timing,
      signal,
      logger,
      once: opts.once,
    });
    if (opts.once) {
      logger.info("mirror written", { dir: opts.dir, resourceVersion: writer.resourceVersion });
    } else {
      await writer.clear();
      logger.info("mirror stopped", { dir: opts.dir, resourceVersion: writer.resourceVersion });
    }
    return 0;
  } catch (e) {
    logger.error("mirror failed", { error: errorText(e) });
    stderr(`manifold mirror: ${errorText(e)}\n`);
    return 1;
  } finally {
    kube?.close();
    release();
  }
}

/**
 * The API connection: `--kubeconfig` or `KUBECONFIG` (with `--context`), else the in-cluster
 * service account.
 * @throws {KubeError} `"config"` from the kubeconfig loader; Error when there is neither
 */
async function connect(kube: KubeFlags, env: Record<string, string>): Promise<KubeConnection> {
  const fromFlags = await kubeConnectionFromFlags(kube, env);
  if (fromFlags) return fromFlags;
  const conn = inClusterConnection(env);
  if (!conn) {
    throw new Error(
      "no API server: pass --kubeconfig, or run in a pod (KUBERNETES_SERVICE_HOST/PORT)",
    );
  }
  return conn;
}

/**
 * Turns the flags into {@link MirrorArgs}; `"help"` for `--help`.
 * @throws Error whose message is the usage problem
 */
function parseMirrorArgs(args: string[]): MirrorArgs | "help" {
  const { values } = parseArgs({
    args,
    options: {
      dir: { type: "string" },
      ...KUBE_FLAG_OPTIONS,
      once: { type: "boolean" },
      "log-level": { type: "string" },
      "api-timeout-ms": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) return "help";
  const dir = values.dir ?? DEFAULT_NAD_MIRROR_DIR;
  if (!dir.startsWith("/")) throw new Error("--dir must be an absolute path");
  if (dir.replace(/\/+$/, "") === "") throw new Error("--dir must not be /");
  const kube = kubeFlags(values);
  let apiTimeoutMs = DEFAULT_API_TIMEOUT_MS;
  const t = values["api-timeout-ms"];
  if (t !== undefined) {
    if (!/^\d+$/.test(t.trim()) || Number(t) < 1 || Number(t) > 600_000) {
      throw new Error(`--api-timeout-ms must be an integer 1…600000, got ${JSON.stringify(t)}`);
    }
    apiTimeoutMs = Number(t);
  }
  const logLevel = values["log-level"] ?? "verbose";
  if (!["debug", "verbose", "info", "warning", "error", "panic"].includes(logLevel)) {
    throw new Error(`--log-level must be debug, verbose, error or panic, got ${logLevel}`);
  }
  return { dir, kube, once: values.once ?? false, logLevel, apiTimeoutMs };
}

/**
 * The watch liveness timeout from `MANIFOLD_WATCH_IDLE_TIMEOUT_MS` (a test knob: tests of a
 * black-holed stream shorten it so they do not take minutes; production keeps the 60 s
 * default of `LIST_WATCH_DEFAULTS.idleTimeoutMs`). Not a positive integer: ignored.
 * @param env the process environment
 * @returns `{ idleTimeoutMs }` when set, else nothing
 */
function watchIdleFromEnv(env: Record<string, string>): { idleTimeoutMs?: number } {
  const v = env.MANIFOLD_WATCH_IDLE_TIMEOUT_MS;
  if (!v || !/^\d+$/.test(v) || Number(v) <= 0) return {};
  return { idleTimeoutMs: Number(v) };
}
