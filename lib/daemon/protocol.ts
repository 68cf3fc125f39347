/**
 * The wire format between the forwarder (the `manifold` binary run by the runtime) and
 * `manifold daemon`, over a unix stream socket. Import-free: the forwarder loads it.
 *
 * One request per connection. Every frame is a 4-byte big-endian length, then that many bytes.
 * - Request: frame 1 = UTF-8 JSON `{"v": 1, "env": {NAME: value, …}}` (the variables of
 *   {@link REQUEST_ENV} of the plugin process; the daemon drops any other), at most
 *   {@link MAX_HEADER_BYTES}; frame 2 = the raw stdin bytes (the network config), at most
 *   {@link MAX_STDIN_FRAME_BYTES}. Each length is checked before its bytes are read.
 * - Answer: one frame, UTF-8 JSON `{"code": exit code, "stdout": text}`: what the plugin process
 *   would have printed and exited with; the forwarder reproduces both verbatim.
 * A request the daemon cannot decode gets an answer whose `stdout` is a CNI error JSON (code 5
 * for a truncated or idle request, 6 for bad framing or JSON, 7 over the size limit).
 *
 * @module
 */

/** Protocol version carried in the request header (`v`). */
export const PROTOCOL_VERSION = 1;
/** Largest request header (frame 1's payload), bytes: 64 KiB. */
export const MAX_HEADER_BYTES = 64 * 1024;
/**
 * Largest stdin (frame 2's payload), bytes: 1 MiB, the plugin's own stdin cap
 * (lib/cni/stdin.ts `MAX_STDIN_BYTES`).
 */
export const MAX_STDIN_FRAME_BYTES = 1024 * 1024;
/** Largest request (both frames, prefixes included), bytes. */
export const MAX_REQUEST_BYTES: number = 8 + MAX_HEADER_BYTES + MAX_STDIN_FRAME_BYTES;
/** Largest answer the forwarder accepts, bytes: 16 MiB. */
export const MAX_ANSWER_BYTES = 16 * 1024 * 1024;

/**
 * The variables a request may carry, and the only ones the daemon takes from it: the
 * per-invocation parameters of CNI SPEC "Parameters" (`CNI_PATH` is not one: in daemon mode
 * delegates come from the daemon's own `binDir`, as in Multus thick), plus Manifold's
 * recursion marker `MANIFOLD_DELEGATION_DEPTH` (lib/cni/recursion.ts), which can only make the
 * daemon refuse a request.
 */
export const REQUEST_ENV: readonly string[] = [
  "CNI_COMMAND",
  "CNI_CONTAINERID",
  "CNI_NETNS",
  "CNI_IFNAME",
  "CNI_ARGS",
  "MANIFOLD_DELEGATION_DEPTH",
];

/** The request header (frame 1). */
export interface RequestHeader {
  /** {@link PROTOCOL_VERSION}. */
  v: number;
  /** The forwarded environment: the variables of {@link REQUEST_ENV}. */
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
 * The variables of {@link REQUEST_ENV} in an environment, string values only: what the
 * forwarder sends and what the daemon keeps of a request's header. Everything else (`PATH`,
 * `LD_PRELOAD`, `CNI_PATH`, proxies) is the daemon's own.
 * @param env a plugin process's environment, or a request header's `env`
 * @returns the subset
 * @example
 * ```ts
 * forwardedEnv({ CNI_COMMAND: "ADD", LD_PRELOAD: "/x.so", CNI_PATH: "/tmp" }); // { CNI_COMMAND: "ADD" }
 * ```
 */
export function forwardedEnv(env: Record<string, unknown>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of REQUEST_ENV) {
    const v = Object.hasOwn(env, k) ? env[k] : undefined;
    if (typeof v === "string") out[k] = v;
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
