/**
 * Serving one forwarded CNI request in the daemon: the same dispatcher and handlers as the
 * in-process path (lib/cni/skel.ts `dispatch`, lib/multinet/plugin.ts `manifoldHandlers`),
 * with the request's environment and stdin injected and stdout collected — one
 * implementation, two entry points.
 *
 * Each request gets its own environment (the daemon's own variables overlaid with the
 * forwarded CNI_* and MANIFOLD_* ones; delegates inherit it), its own logger and dependencies;
 * only the API-backed sources (one warm client, the NAD store) are shared.
 *
 * @module
 */

import { dispatch, type SkelHandlers } from "../cni/skel.ts";
import { cniErrorJson, type DaemonAnswer } from "./protocol.ts";
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

/** Options of {@link cniService}. */
export interface CniServiceOptions {
  /** The daemon's own environment, under the forwarded variables. */
  baseEnv: Record<string, string>;
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
  /** The forwarded variables (CNI_* and MANIFOLD_*). */
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
  return async (req) => {
    const started = performance.now();
    const env = { ...base, ...req.env };
    const command = env.CNI_COMMAND ?? "";
    let stdout = "";
    const run = (async (): Promise<DaemonAnswer> => {
      try {
        const code = await dispatch(opts.handlers(env), {
          env,
          readStdin: (max) => Promise.resolve(req.stdin.subarray(0, max + 1)),
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
