/**
 * The daemon's unix socket server: one request per connection in the framing of
 * lib/daemon/protocol.ts, each connection served concurrently (requests for one container are
 * serialized by the container lock the handlers take, not here).
 *
 * Security: the socket's directory is made 0700 and the socket 0600, both owned by the
 * daemon's user (root): the kernel checks write permission on the socket file at `connect(2)`,
 * so only root reaches it. The peer's credentials (SO_PEERCRED) are not checked: Deno 2.9's
 * `Deno.UnixConn` exposes no file descriptor to pass to `getsockopt(2)` through FFI.
 *
 * Bad input never stops the server: a request over {@link MAX_REQUEST_BYTES} (code 7), with a
 * malformed header (code 6), truncated, or not complete within the idle timeout (code 5) gets
 * a CNI error answer (when the peer still listens) and its connection is closed.
 *
 * @module
 */

import { CniError, CniErrorCode } from "../cni/errors.ts";
import type { Logger } from "../log/mod.ts";
import {
  cniErrorJson,
  type DaemonAnswer,
  frame,
  MAX_REQUEST_BYTES,
  PROTOCOL_VERSION,
} from "./protocol.ts";
import type { CniRequest } from "./service.ts";

/** Thrown by the request reader for a connection closed before its first byte. */
const PROBE = Symbol("probe");
/** Default time a client has to send its complete request, ms. */
export const DEFAULT_IDLE_TIMEOUT_MS = 5_000;

/** Options of {@link DaemonServer.listen}. */
export interface DaemonServerOptions {
  /** The socket path; its directory is created (0700) and a stale socket replaced. */
  socketPath: string;
  /** Answers one decoded request; must not reject. */
  serve(req: CniRequest): Promise<DaemonAnswer>;
  /** Time to receive a complete request, ms; default {@link DEFAULT_IDLE_TIMEOUT_MS}. */
  idleTimeoutMs?: number;
  /** Largest request, bytes; default {@link MAX_REQUEST_BYTES}. */
  maxRequestBytes?: number;
  /** Connection-level problems (bad requests, write failures). */
  logger?: Logger;
  /** Called as each connection's handling ends, with the number still in flight. */
  onSettled?: (inFlight: number) => void;
}

/** A listening daemon socket. */
export class DaemonServer {
  #listener: Deno.Listener<Deno.UnixConn, Deno.UnixAddr>;
  #opts: DaemonServerOptions;
  #inFlight = new Set<Promise<void>>();
  #accepting: Promise<void>;
  #closed = false;

  private constructor(
    listener: Deno.Listener<Deno.UnixConn, Deno.UnixAddr>,
    opts: DaemonServerOptions,
  ) {
    this.#listener = listener;
    this.#opts = opts;
    this.#accepting = this.#acceptLoop();
  }

  /**
   * Creates the socket (directory 0700, socket 0600) and starts accepting.
   * @param opts socket path, request server, limits
   * @returns the running server
   * @throws Deno errors when the socket cannot be created
   */
  static async listen(opts: DaemonServerOptions): Promise<DaemonServer> {
    const dir = opts.socketPath.slice(0, opts.socketPath.lastIndexOf("/")) || "/";
    await Deno.mkdir(dir, { recursive: true, mode: 0o700 });
    await Deno.chmod(dir, 0o700);
    await Deno.remove(opts.socketPath).catch(() => {}); // a stale socket of a previous run
    const listener = Deno.listen({ transport: "unix", path: opts.socketPath });
    await Deno.chmod(opts.socketPath, 0o600);
    return new DaemonServer(listener, opts);
  }

  /** Requests being served now. */
  get inFlight(): number {
    return this.#inFlight.size;
  }

  /**
   * Stops accepting (closes the listener and removes the socket, so new requests fall back),
   * then waits for the requests in flight to be answered. Idempotent.
   */
  async close(): Promise<void> {
    if (!this.#closed) {
      this.#closed = true;
      try {
        this.#listener.close();
      } catch { /* already closed */ }
      await Deno.remove(this.#opts.socketPath).catch(() => {});
    }
    await this.#accepting;
    while (this.#inFlight.size > 0) await Promise.all([...this.#inFlight]);
  }

  async #acceptLoop(): Promise<void> {
    for (;;) {
      let conn: Deno.UnixConn;
      try {
        conn = await this.#listener.accept();
      } catch (e) {
        if (this.#closed) return;
        this.#opts.logger?.warn("accept failed", { error: String(e) });
        continue;
      }
      const p = this.#handle(conn).finally(() => {
        this.#inFlight.delete(p);
        this.#opts.onSettled?.(this.#inFlight.size);
      });
      this.#inFlight.add(p);
    }
  }

  async #handle(conn: Deno.UnixConn): Promise<void> {
    let answer: DaemonAnswer;
    try {
      const req = await this.#readRequest(conn);
      answer = await this.#opts.serve(req);
    } catch (e) {
      if (e === PROBE) { // connected and closed without a byte: a liveness probe, not a request
        this.#opts.logger?.debug("connection closed before a request (probe)", {});
        try {
          conn.close();
        } catch { /* already closed */ }
        return;
      }
      const err = e instanceof CniError
        ? e
        : new CniError(CniErrorCode.IoFailure, "failed to read the request", String(e));
      this.#opts.logger?.warn("bad request on the daemon socket", { code: err.code, msg: err.msg });
      answer = { code: 1, stdout: cniErrorJson("1.0.0", err.code, err.msg, err.details) };
    }
    try {
      const bytes = frame(new TextEncoder().encode(JSON.stringify(answer)));
      for (let off = 0; off < bytes.length;) off += await conn.write(bytes.subarray(off));
    } catch (e) {
      this.#opts.logger?.warn("failed to send the answer", { error: String(e) });
    } finally {
      try {
        conn.close();
      } catch { /* already closed */ }
    }
  }

  /**
   * Reads both frames within the idle timeout.
   * @throws {CniError} 5, 6 or 7; `PROBE` when the peer closed before sending any byte
   */
  async #readRequest(conn: Deno.UnixConn): Promise<CniRequest> {
    const max = this.#opts.maxRequestBytes ?? MAX_REQUEST_BYTES;
    const idleMs = this.#opts.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        conn.close(); // the pending read fails: the request is dropped (an idle client)
      } catch { /* already closed */ }
    }, idleMs);
    try {
      let budget = max;
      let received = 0;
      const read = async (n: number): Promise<Uint8Array> => {
        budget -= n;
        if (budget < 0) {
          throw new CniError(
            CniErrorCode.InvalidNetworkConfig,
            `request exceeds the limit of ${max} bytes`,
          );
        }
        const buf = new Uint8Array(n);
        for (let off = 0; off < n;) {
          const got = await conn.read(buf.subarray(off)).catch(() => null);
          if (got === null && received === 0 && !timedOut) throw PROBE;
          if (got === null) {
            throw new CniError(
              CniErrorCode.IoFailure,
              timedOut ? `request not received within ${idleMs} ms` : "truncated request",
            );
          }
          off += got;
          received += got;
        }
        return buf;
      };
      const length = async () => new DataView((await read(4)).buffer).getUint32(0);
      const header = await read(await length());
      let parsed: unknown;
      try {
        parsed = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(header));
      } catch (e) {
        throw new CniError(CniErrorCode.DecodingFailure, "malformed request header", String(e));
      }
      const h = parsed as { v?: unknown; env?: unknown };
      if (
        typeof h !== "object" || h === null || h.v !== PROTOCOL_VERSION ||
        typeof h.env !== "object" || h.env === null || Array.isArray(h.env) ||
        !Object.values(h.env).every((v) => typeof v === "string")
      ) {
        throw new CniError(
          CniErrorCode.DecodingFailure,
          `request header must be {"v": ${PROTOCOL_VERSION}, "env": {NAME: string}}`,
        );
      }
      const stdin = await read(await length());
      return { env: h.env as Record<string, string>, stdin };
    } finally {
      clearTimeout(timer);
    }
  }
}
