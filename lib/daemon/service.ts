/**
 * Serving one forwarded CNI request in the daemon: the same dispatcher and handlers as the
 * in-process path (lib/cni/skel.ts `dispatch`, lib/multinet/plugin.ts `manifoldHandlers`),
 * with the request's environment and stdin injected and stdout collected — one
 * implementation, two entry points.
 *
 * Each request gets its own environment: the daemon's own variables plus the request's
 * per-invocation CNI variables (protocol.ts `REQUEST_ENV`; anything else the client sent is
 * dropped) and `CNI_PATH` from the daemon (its own, else the config's `binDir`); delegates
 * inherit it. Its config is the daemon's (`trusted`, daemon_conf.ts) with the request's
 * per-invocation fields. Only the API-backed sources (one warm client, the NAD store) and the
 * loggers (one per destination) are shared.
 *
 * @module
 */

import { dispatch, type SkelHandlers } from "../cni/skel.ts";
import { cniErrorJson, type DaemonAnswer, forwardedEnv } from "./protocol.ts";
import { CniError } from "../cni/errors.ts";
import type { DaemonObserver } from "./observer.ts";
import type { Logger } from "../log/mod.ts";
import type { AttachmentTally } from "./attachments.ts";

/** Default bound on one request in the daemon, ms (2 min, kubelet's CNI call deadline). */
export const DEFAULT_REQUEST_TIMEOUT_MS = 120_000;

/**
 * The daemon's own V8 flags (set for `manifold daemon` by scripts/manifold and the DaemonSet):
 * left out of the requests' environment, so delegates do not inherit them.
 */
export const DAEMON_ONLY_ENV = "DENO_V8_FLAGS";

/** The delegates' `CNI_PATH` when neither the daemon's environment nor `trusted` names one. */
const DEFAULT_CNI_PATH = "/opt/cni/bin";

/** Commands whose config is read (every one but VERSION; the dispatcher rejects others). */
const CONFIG_COMMANDS = new Set(["ADD", "DEL", "CHECK", "GC", "STATUS"]);

/** The daemon's side of a request's config (daemon_conf.ts `DaemonConf`). */
export interface TrustedConfig {
  /**
   * The config to run: the daemon's own with the request's per-invocation fields.
   * @throws {CniError} 6 or 7 for a request that cannot be served
   */
  requestStdin(stdin: Uint8Array): Promise<Uint8Array>;
  /** The configuration as last read: its `binDir` is the delegates' `CNI_PATH`. */
  readonly conf: { binDir: string };
}

/** Options of {@link cniService}. */
export interface CniServiceOptions {
  /** The daemon's own environment, under the request's CNI variables. */
  baseEnv: Record<string, string>;
  /**
   * The daemon's configuration: each request runs with it (module doc). Without it (tests of
   * the dispatch alone) the request's stdin is used as sent.
   */
  trusted?: TrustedConfig;
  /** The handlers for one request, given its environment. */
  handlers(env: Record<string, string>): SkelHandlers;
  /**
   * Bound on one request, ms: past it the forwarder gets CNI code 11 ("try again") while the
   * request runs on to its end holding the container's lock (so a retry waits for it);
   * default {@link DEFAULT_REQUEST_TIMEOUT_MS}.
   */
  requestTimeoutMs?: number;
  /** Receives one `cniRequest` per request. */
  observer: DaemonObserver;
  /** Logs requests that outlive their timeout. */
  logger?: Logger;
  /**
   * Told about every ADD and DEL (the request's record is re-read) and GC (all are), after the
   * answer is ready and without delaying it; feeds the observer's `attachments`.
   */
  attachments?: AttachmentTally;
}

/** One decoded request. */
export interface CniRequest {
  /** The request's variables (protocol.ts `REQUEST_ENV`; any other is ignored). */
  env: Record<string, string>;
  /** The raw stdin bytes. */
  stdin: Uint8Array;
}

/**
 * Builds the request server of the daemon.
 * @param opts environment, handler factory, timeout, observer
 * @returns a function answering one request; never rejects
 */
export function cniService(opts: CniServiceOptions): (req: CniRequest) => Promise<DaemonAnswer> {
  const timeoutMs = opts.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  const base: Record<string, string> = {};
  for (const [k, v] of Object.entries(opts.baseEnv)) {
    if (k.startsWith("CNI_") || k.startsWith("MANIFOLD_") || k === DAEMON_ONLY_ENV) continue;
    base[k] = v;
  }
  const daemonCniPath = opts.baseEnv.CNI_PATH;
  return async (req) => {
    const started = performance.now();
    const env: Record<string, string> = {
      ...base,
      ...forwardedEnv(req.env),
      CNI_PATH: daemonCniPath || opts.trusted?.conf.binDir || DEFAULT_CNI_PATH,
    };
    const command = env.CNI_COMMAND ?? "";
    let stdout = "";
    const run = (async (): Promise<DaemonAnswer> => {
      let stdin = req.stdin;
      if (opts.trusted && CONFIG_COMMANDS.has(command)) {
        try {
          stdin = await opts.trusted.requestStdin(req.stdin);
          env.CNI_PATH = daemonCniPath || opts.trusted.conf.binDir; // as just re-read
        } catch (e) {
          const err = e instanceof CniError ? e : new CniError(999, "daemon failure", String(e));
          opts.logger?.warn("request refused", {
            command,
            containerId: env.CNI_CONTAINERID,
            code: err.code,
            msg: err.msg,
          });
          return {
            code: 1,
            stdout: cniErrorJson(versionOf(req.stdin), err.code, err.msg, err.details),
          };
        }
      }
      try {
        const code = await dispatch(opts.handlers(env), {
          env,
          readStdin: (max) => Promise.resolve(stdin.subarray(0, max + 1)),
          writeStdout: (text) => void (stdout += text),
        });
        return { code, stdout };
      } catch (e) { // dispatch never throws; kept so the daemon never does either
        return { code: 1, stdout: cniErrorJson("1.0.0", 999, "daemon failure", String(e)) };
      }
    })();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timedOut = new Promise<DaemonAnswer>((resolve) => {
      timer = setTimeout(() => {
        opts.logger?.error("request timed out; it keeps running", {
          command,
          containerId: env.CNI_CONTAINERID,
          timeoutMs,
        });
        resolve({
          code: 1,
          stdout: cniErrorJson(
            versionOf(req.stdin),
            11,
            `the manifold daemon did not finish ${command} within ${timeoutMs} ms; try again`,
          ),
        });
      }, timeoutMs);
    });
    const answer = await Promise.race([run, timedOut]);
    clearTimeout(timer);
    const ms = performance.now() - started;
    opts.observer.cniRequest(command, answer.code === 0 ? "success" : "error", ms / 1000);
    if (command === "ADD" || command === "DEL") {
      void opts.attachments?.refresh(env.CNI_CONTAINERID ?? "", env.CNI_IFNAME ?? "");
    } else if (command === "GC") void opts.attachments?.scan();
    opts.logger?.info("served", {
      command,
      containerId: env.CNI_CONTAINERID,
      code: answer.code,
      ms: Math.round(ms * 10) / 10,
    });
    return answer;
  };
}

function versionOf(stdin: Uint8Array): string {
  try {
    const v = JSON.parse(new TextDecoder().decode(stdin)).cniVersion;
    return typeof v === "string" && v ? v : "0.1.0";
  } catch {
    return "0.1.0";
  }
}
