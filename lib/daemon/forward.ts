/**
 * The forwarder: the `manifold` binary's path when its config names a `daemonSocket`. It sends
 * the CNI environment and the stdin bytes to `manifold daemon` (lib/daemon/protocol.ts) and
 * returns the daemon's exit code and stdout, which main.ts reproduces verbatim.
 *
 * Chosen in main.ts before any heavy module loads: this module imports only the import-free
 * protocol (no zod, no Kubernetes client, no netlink).
 *
 * Delivery decides fallback: a socket that is absent or refuses the connection means the
 * request was never delivered (`unavailable`: main.ts may run it in-process); once connected,
 * any failure (the daemon closed the connection before a complete answer, e.g. it died, or no
 * answer within the daemon's request timeout + {@link REPLY_GRACE_MS}) is `lost`: the request
 * may have run, or still be running, so it is never run again here (CNI code 11, "try again").
 *
 * @module
 */

import {
  cniErrorJson,
  type DaemonAnswer,
  forwardedEnv,
  frame,
  MAX_ANSWER_BYTES,
  PROTOCOL_VERSION,
} from "./protocol.ts";

/** The daemon's request timeout when its lock file does not give it, ms (service.ts default). */
export const DEFAULT_DAEMON_REQUEST_TIMEOUT_MS = 120_000;
/** Time the forwarder waits past the daemon's own request timeout, ms. */
export const REPLY_GRACE_MS = 5_000;

/** What became of a forwarded request. */
export type ForwardOutcome =
  | { kind: "answered"; answer: DaemonAnswer }
  | { kind: "unavailable"; reason: string }
  | { kind: "lost"; reason: string };

/** Where to forward, read from the raw plugin config. */
export interface DaemonRoute {
  /** The `daemonSocket` path. */
  socket: string;
  /** `daemonFallback` (default true). */
  fallback: boolean;
  /** The config's `cniVersion`, for error documents ("0.1.0" when absent or not a string). */
  cniVersion: string;
}

/**
 * Reads `daemonSocket` / `daemonFallback` from the stdin config with a plain `JSON.parse` (no
 * schema: the daemon or the in-process path validates everything).
 * @param stdin the raw stdin bytes
 * @returns the route, or undefined when the config names no daemon (or is not a JSON object)
 */
export function daemonRoute(stdin: Uint8Array): DaemonRoute | undefined {
  let config: unknown;
  try {
    config = JSON.parse(new TextDecoder().decode(stdin));
  } catch {
    return undefined;
  }
  if (typeof config !== "object" || config === null) return undefined;
  const c = config as Record<string, unknown>;
  // A relative path is no route: the in-process path then reports the config error (code 7).
  if (typeof c.daemonSocket !== "string" || !c.daemonSocket.startsWith("/")) return undefined;
  return {
    socket: c.daemonSocket,
    fallback: c.daemonFallback !== false,
    cniVersion: typeof c.cniVersion === "string" && c.cniVersion ? c.cniVersion : "0.1.0",
  };
}

/**
 * Sends one request to the daemon and waits for its answer.
 * @param socket the daemon's unix socket path
 * @param env the plugin process's environment (only the five per-call CNI_* variables and
 *   MANIFOLD_DELEGATION_DEPTH are sent: {@link forwardedEnv})
 * @param stdin the raw stdin bytes
 * @param options `timeoutMs`: bound on sending and answering once connected, ms; default the
 *   daemon's request timeout (the `requestTimeoutMs=` line of `<socket>.lock`, else
 *   {@link DEFAULT_DAEMON_REQUEST_TIMEOUT_MS}) + {@link REPLY_GRACE_MS}
 * @returns `answered`, `unavailable` (not delivered: fallback allowed) or `lost` (also when
 *   `timeoutMs` ran out)
 */
export async function forward(
  socket: string,
  env: Record<string, string>,
  stdin: Uint8Array,
  options: { timeoutMs?: number } = {},
): Promise<ForwardOutcome> {
  let conn: Deno.UnixConn;
  try {
    conn = await Deno.connect({ transport: "unix", path: socket });
  } catch (e) {
    return { kind: "unavailable", reason: e instanceof Error ? e.message : String(e) };
  }
  const timeoutMs = options.timeoutMs ?? await replyDeadlineMs(socket);
  let timedOut = false;
  const timer = deadline(timeoutMs, () => {
    timedOut = true;
    try {
      conn.close(); // fails the pending read or write
    } catch { /* closed */ }
  });
  try {
    const header = new TextEncoder().encode(
      JSON.stringify({ v: PROTOCOL_VERSION, env: forwardedEnv(env) }),
    );
    const h = frame(header);
    const body = frame(stdin);
    const all = new Uint8Array(h.length + body.length);
    all.set(h);
    all.set(body, h.length);
    for (let off = 0; off < all.length;) off += await conn.write(all.subarray(off));
    if (env.MANIFOLD_FORWARD_TIMING) {
      // scripts/bench.ts --mode daemon: when the request left, on the wall clock (ms).
      writeStderr(`manifold: forward sent at ${performance.timeOrigin + performance.now()}\n`);
    }
    const prefix = await readExactly(conn, 4);
    const n = new DataView(prefix.buffer).getUint32(0);
    if (n > MAX_ANSWER_BYTES) throw new Error(`answer of ${n} bytes exceeds the limit`);
    const answer = JSON.parse(new TextDecoder().decode(await readExactly(conn, n)));
    if (typeof answer?.code !== "number" || typeof answer?.stdout !== "string") {
      throw new Error("malformed answer");
    }
    return { kind: "answered", answer: { code: answer.code, stdout: answer.stdout } };
  } catch (e) {
    if (timedOut) return { kind: "lost", reason: `no answer within ${timeoutMs} ms` };
    return { kind: "lost", reason: e instanceof Error ? e.message : String(e) };
  } finally {
    timer.cancel();
    try {
      conn.close();
    } catch { /* already closed */ }
  }
}

/**
 * The forwarder's reply deadline for a daemon socket: the daemon's request timeout, read from
 * the `requestTimeoutMs=<ms>` line of its lock file (socket_owner.ts), + {@link REPLY_GRACE_MS}.
 * @param socket the daemon socket path
 * @returns the deadline, ms
 */
export async function replyDeadlineMs(socket: string): Promise<number> {
  const text = await Deno.readTextFile(`${socket}.lock`).catch(() => "");
  const m = /^requestTimeoutMs=(\d{1,9})$/m.exec(text);
  return (m ? Number(m[1]) : DEFAULT_DAEMON_REQUEST_TIMEOUT_MS) + REPLY_GRACE_MS;
}

/**
 * Calls `fire` after `ms` unless cancelled. Not `setTimeout`: its first use loads Deno's timer
 * module, ≈ 6 ms of every forwarded call (measured); `Atomics.waitAsync`'s timeout is V8's own
 * (≈ 0.07 ms) and fires while the socket read keeps the event loop alive.
 */
function deadline(ms: number, fire: () => void): { cancel(): void } {
  const cell = new Int32Array(new SharedArrayBuffer(4));
  let cancelled = false;
  const waiting = Atomics.waitAsync(cell, 0, 0, ms);
  if (!waiting.async) { // cannot happen (the cell holds 0); kept for the type
    return { cancel() {} };
  }
  waiting.value.then((v) => {
    if (!cancelled && v === "timed-out") fire();
  });
  return {
    cancel() {
      cancelled = true;
      Atomics.notify(cell, 0);
    },
  };
}

/**
 * The file counting the forwarder's fallbacks for a daemon socket: `<socket dir>/fallbacks`.
 * @param socket the daemon socket path
 * @returns the path
 * @example
 * ```ts
 * fallbackFile("/run/manifold/manifold.sock"); // "/run/manifold/fallbacks"
 * ```
 */
export function fallbackFile(socket: string): string {
  const dir = socket.slice(0, Math.max(socket.lastIndexOf("/"), 0)) || ".";
  return `${dir}/fallbacks`;
}

/**
 * Appends one line `<unix ms> <reason>` to {@link fallbackFile} (the metrics side counts them
 * as `manifold_fallback_total`). Best effort: failures are ignored.
 * @param socket the daemon socket path the request was meant for
 * @param reason why the daemon was not used
 */
export async function recordFallback(socket: string, reason: string): Promise<void> {
  try {
    await Deno.writeTextFile(
      fallbackFile(socket),
      `${Date.now()} ${reason.replace(/\s+/g, " ")}\n`,
      {
        append: true,
        mode: 0o600,
      },
    );
  } catch { /* best effort */ }
}

async function readExactly(conn: Deno.UnixConn, n: number): Promise<Uint8Array> {
  const buf = new Uint8Array(n);
  let off = 0;
  while (off < n) {
    const got = await conn.read(buf.subarray(off));
    if (got === null) throw new Error("the daemon closed the connection before answering");
    off += got;
  }
  return buf;
}

/**
 * main.ts's forwarder step: when the config names a daemon, forward the request and print
 * the answer; when the daemon is unavailable and fallback is on, log a warning on stderr,
 * count the fallback and let main.ts run the request in-process.
 * @param stdin the raw stdin bytes (read once by main.ts)
 * @param env the process environment
 * @returns the exit code to end with, or undefined: run in-process
 */
export async function forwardOrFallback(
  stdin: Uint8Array,
  env: Record<string, string>,
): Promise<number | undefined> {
  const route = daemonRoute(stdin);
  if (!route) return undefined;
  const out = await forward(route.socket, env, stdin);
  if (out.kind === "answered") {
    writeAll(out.answer.stdout);
    return out.answer.code;
  }
  if (out.kind === "unavailable" && route.fallback) {
    writeStderr(
      `manifold: warning: daemon socket ${route.socket} unavailable (${out.reason}); ` +
        "running the request in-process\n",
    );
    await recordFallback(route.socket, out.reason);
    return undefined;
  }
  const msg = out.kind === "lost"
    ? "the manifold daemon did not answer the request; try again"
    : "the manifold daemon is unavailable and daemonFallback is false; try again";
  writeAll(cniErrorJson(route.cniVersion, 11, msg, `${route.socket}: ${out.reason}`));
  return 1;
}

function writeAll(text: string): void {
  const bytes = new TextEncoder().encode(text);
  for (let off = 0; off < bytes.length;) off += Deno.stdout.writeSync(bytes.subarray(off));
}

function writeStderr(text: string): void {
  try {
    Deno.stderr.writeSync(new TextEncoder().encode(text));
  } catch { /* nowhere to report */ }
}
