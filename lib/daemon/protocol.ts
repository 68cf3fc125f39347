/**
 * The wire format between the forwarder (the `manifold` binary run by the runtime) and
 * `manifold daemon`, over a unix stream socket. Import-free: the forwarder loads it.
 *
 * One request per connection. Every frame is a 4-byte big-endian length, then that many bytes.
 * - Request: frame 1 = UTF-8 JSON `{"v": 1, "env": {NAME: value, …}}` (the CNI_* and MANIFOLD_*
 *   variables of the plugin process), frame 2 = the raw stdin bytes (the network config). The
 *   two frames together are at most {@link MAX_REQUEST_BYTES}.
 * - Answer: one frame, UTF-8 JSON `{"code": exit code, "stdout": text}`: what the plugin process
 *   would have printed and exited with; the forwarder reproduces both verbatim.
 * A request the daemon cannot decode gets an answer whose `stdout` is a CNI error JSON (code 5
 * for a truncated or idle request, 6 for bad framing or JSON, 7 over the size limit).
 *
 * @module
 */

/** Protocol version carried in the request header (`v`). */
export const PROTOCOL_VERSION = 1;
/** Largest request (both frames, prefixes included), bytes: 4 MiB (stdin itself is capped at 1 MiB). */
export const MAX_REQUEST_BYTES = 4 * 1024 * 1024;
/** Largest answer the forwarder accepts, bytes: 16 MiB. */
export const MAX_ANSWER_BYTES = 16 * 1024 * 1024;

/** The request header (frame 1). */
export interface RequestHeader {
  /** {@link PROTOCOL_VERSION}. */
  v: number;
  /** The forwarded environment: CNI_* and MANIFOLD_* variables. */
  env: Record<string, string>;
}

/** The daemon's answer: the plugin's exit code and stdout. */
export interface DaemonAnswer {
  /** Exit code: 0 success, 1 error (stdout then holds the CNI error JSON). */
  code: number;
  /** Exactly what the plugin prints on stdout ("" for a successful DEL/CHECK/GC/STATUS). */
  stdout: string;
}

/**
 * Prefixes `payload` with its length as a 4-byte big-endian integer.
 * @param payload the frame's bytes
 * @returns the frame
 */
export function frame(payload: Uint8Array): Uint8Array {
  const out = new Uint8Array(4 + payload.length);
  new DataView(out.buffer).setUint32(0, payload.length);
  out.set(payload, 4);
  return out;
}

/**
 * The variables of a plugin environment that the daemon receives: `CNI_*` (CNI SPEC
 * "Parameters") and `MANIFOLD_*` (the recursion marker, test hooks). Other variables
 * (PATH, proxies, KUBERNETES_SERVICE_*) are the daemon's own.
 * @param env the plugin process's environment
 * @returns the subset to forward
 */
export function forwardedEnv(env: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) {
    if (k.startsWith("CNI_") || k.startsWith("MANIFOLD_")) out[k] = v;
  }
  return out;
}

/**
 * A CNI error document (CNI SPEC "Error"), as the plugin prints it.
 * @param cniVersion the config's version
 * @param code the CNI error code
 * @param msg the message
 * @param details optional details
 * @returns the JSON text
 */
export function cniErrorJson(
  cniVersion: string,
  code: number,
  msg: string,
  details?: string,
): string {
  return JSON.stringify({ cniVersion, code, msg, ...(details ? { details } : {}) });
}
