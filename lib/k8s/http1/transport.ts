/**
 * A minimal HTTP/1.1 client over `Deno.connectTls` / `Deno.connect`, the API transport of the
 * per-pod hot path. Why not `fetch`: a fresh Deno 2.9 process pays ≈ 20 ms for its first
 * `fetch` (loading the fetch/streams machinery), measured against a loopback server, while a
 * request written to a socket costs ≈ 1–2 ms; the plugin makes 1–4 requests per process, so
 * that start-up cost is most of its API time. kube-apiserver speaks HTTP/1.1 (ALPN
 * `http/1.1` is offered, so it never switches to HTTP/2).
 *
 * What it does (RFC 9112): keep-alive connections reused for later requests (a request on a reused
 * connection that the server closed or reset before answering — its write failing with EPIPE or
 * ECONNRESET, a TLS connection dropped without `close_notify` included — is sent again once on a
 * new connection, for idempotent methods only: a POST/PATCH may have reached the server; RFC 9112
 * §9.3.2, as Go's `persistConn.shouldRetryRequest`). A request aborted while its connection is set
 * up writes nothing, also when the abort comes after the handshake (the pin check); that
 * connection is kept. One request at a time per connection, unless
 * {@link Http1Options.pipelineGets} asks for pipelining (§9.3.2; the per-call plugin's client,
 * `pipelineGets`): then a GET that finds no idle connection is written at once on a busy one whose
 * outstanding requests are all GETs (at most {@link MAX_PIPELINE_DEPTH} outstanding), or behind
 * the GET a connection is being opened for, and its response is read after theirs, in order —
 * saving a TCP + TLS set-up: 2 round trips to a distant server; on loopback its ≈ 2–3 ms of
 * main-thread work are won back by the server, which serves one connection's requests one after
 * the other. Never a non-GET, never behind one, nor behind a response whose head ends the
 * connection (`Connection: close`, a body read to the close: RFC 9112 §9.6). When that connection
 * ends before a queued GET's response (`Connection: close` on an earlier one, a close or reset, a
 * framing error, an abort of the one being read), the queued GETs are sent again once, together:
 * the first opens a new connection and the others are pipelined on it (up to the depth; never on
 * an idle one, which the server may have closed too); a queued GET whose caller aborts is answered
 * at once and, when its turn comes, closes the connection (its response is not read), so the GETs
 * behind it are sent again too. `manifold daemon` leaves it off: a GET there would wait behind a
 * slow LIST. `Content-Length` and `chunked` bodies, or read-to-close; no compression (none is
 * asked for); bodies capped at {@link MAX_RESPONSE_BYTES} ({@link ResponseTooLargeError}, final).
 * Connections are set up by open.ts (TCP, TLS with the kubeconfig CA pinned). Not done (the `fetch`
 * transport covers them, see `transport.ts`): proxies, HTTP/2.
 *
 * @module
 */

import { abortable } from "../../util/abortable.ts";
import { IDEMPOTENT_METHODS } from "../http_semantics.ts";
import type { KubeConnection } from "../connection.ts";
import type { Transport, TransportRequest, TransportResponse } from "../transport_types.ts";
import { openConnection } from "./open.ts";
import { idleNow } from "../../util/idle.ts";
import {
  Connection,
  connectionBroken,
  ConnectionClosedError,
  encodeRequest,
  readResponse,
} from "./wire.ts";

/** Idle keep-alive connections kept per transport. */
const MAX_IDLE = 4;

/** Options of {@link Http1Transport}. */
export interface Http1Options {
  /**
   * Pipeline GETs (RFC 9112 §9.3.2): a GET that finds no idle connection is written at once on
   * a busy connection whose outstanding requests are all GETs, while fewer than
   * {@link MAX_PIPELINE_DEPTH} are, instead of opening another connection. For a process
   * making a few requests (the per-call plugin, `KubeClientOptions.pipelineGets`), not for one
   * sharing its connections between many (`manifold daemon`: a GET would wait behind a slow
   * LIST). Default false.
   */
  pipelineGets?: boolean;
  /**
   * Requests one connection may have outstanding, 1 to {@link MAX_PIPELINE_DEPTH}; default
   * {@link MAX_PIPELINE_DEPTH} with {@link Http1Options.pipelineGets}, else 1 (no
   * pipelining). A depth of its own, for tests; callers say
   * {@link Http1Options.pipelineGets}.
   */
  pipelineDepth?: number;
  /**
   * TLS through OpenSSL (native_tls.ts) for a server with a pinned CA, when `libssl.so.3` can
   * be opened; else Deno's (open.ts). For a fresh process making a few requests (the per-call
   * plugin, `KubeClientOptions.nativeTls`). Default false.
   */
  nativeTls?: boolean;
}

/** The most requests one connection may have outstanding, whatever {@link Http1Options} asks. */
export const MAX_PIPELINE_DEPTH = 4;

/**
 * HTTP/1.1 over TLS (or plain TCP for `http:` servers) to one API server, with a small pool of
 * kept-alive connections, optionally pipelining GETs ({@link Http1Options.pipelineGets}).
 */
export class Http1Transport implements Transport {
  #conn: KubeConnection;
  #base: URL;
  #depth: number;
  #nativeTls: boolean;
  #idle: Connection[] = [];
  #busy = new Set<Connection>();
  /** Connections being opened for a GET, and how many GETs wait to be pipelined on each. */
  #opening = new Set<{ conn: Promise<Connection>; joined: number }>();
  /** A connection {@link preconnect} is opening, until a request claims it or it is pooled. */
  #warming: Promise<Connection | undefined> | undefined;
  /**
   * Requests waiting for a connection being opened (their own, a GET's they join, or the one
   * {@link preconnect} opens): {@link preconnect} then opens none.
   */
  #connecting = 0;
  #closed = false;

  /**
   * Creates it; nothing is opened until the first request.
   * @param conn the server and TLS material
   * @param opts pipelining (off by default)
   */
  constructor(conn: KubeConnection, opts: Http1Options = {}) {
    this.#conn = conn;
    this.#base = new URL(conn.server);
    const depth = opts.pipelineDepth ?? (opts.pipelineGets ? MAX_PIPELINE_DEPTH : 1);
    this.#depth = Math.max(1, Math.min(MAX_PIPELINE_DEPTH, Math.floor(depth)));
    this.#nativeTls = opts.nativeTls ?? false;
  }

  async send(req: TransportRequest): Promise<TransportResponse> {
    if (this.#closed) throw new Error("Transport is closed");
    req.signal.throwIfAborted();
    const head = encodeRequest(req);
    // Taken synchronously: in the pool's count (busy) before another request looks.
    const reused = this.#reusable(req.method, false);
    const { conn, shared } = reused
      ? { conn: reused, shared: true }
      : await this.#connect(req, false);
    try {
      return await this.#exchange(conn, req, head);
    } catch (err) {
      // A kept-alive or pipelined connection ended before this request's response (closed,
      // reset, the write failed): once more on a new connection, shared by the GETs sent again
      // with it. Only for idempotent methods (a POST/PATCH may have reached the server), and
      // only once (RFC 9112 §9.3.2; Go's persistConn.shouldRetryRequest).
      if (
        shared && err instanceof ConnectionClosedError && err.beforeResponse &&
        !req.signal.aborted && !this.#closed && IDEMPOTENT_METHODS.has(req.method)
      ) {
        const again = this.#reusable(req.method, true) ?? (await this.#connect(req, true)).conn;
        return await this.#exchange(again, req, head);
      }
      throw err;
    }
  }

  preconnect(signal: AbortSignal): Promise<void> {
    if (
      this.#closed || signal.aborted || this.#warming || this.#idle.length > 0 ||
      this.#busy.size > 0 || this.#opening.size > 0 || this.#connecting > 0
    ) {
      return Promise.resolve();
    }
    const warming = this.#open(signal).catch(() => undefined);
    this.#warming = warming;
    return warming.then((conn) => {
      // Not claimed by a request meanwhile ({@link #connect}): kept idle for the next one.
      if (this.#warming !== warming) return;
      this.#warming = undefined;
      if (conn) this.#release(conn);
    });
  }

  close(): void {
    this.#closed = true;
    for (const c of [...this.#idle, ...this.#busy]) c.close();
    this.#idle = [];
    this.#busy.clear();
  }

  /**
   * A connection already open that a request may use now: an idle one, else (a GET,
   * pipelining on) a busy one it may be pipelined on. For a request sent again (`retry`) never
   * an idle one: the server that closed its connection may have closed those too (a restart).
   */
  #reusable(method: string, retry: boolean): Connection | undefined {
    return (retry ? undefined : this.#idle.pop()) ?? this.#pipelinable(method);
  }

  /**
   * A connection for a request that found none {@link #reusable}: (a GET, pipelining on) one
   * being opened for another GET, else a new one — GETs sent again together share the one the
   * first of them opens.
   * @returns the connection, and whether it was opened for another request (`shared`: it may
   *   end before this request's response)
   * @throws the signal's reason when aborted, also once the connection is set up (nothing is
   *   written then); the connect or TLS error, marked `connectFailed` for a first attempt
   */
  async #connect(
    req: TransportRequest,
    retry: boolean,
  ): Promise<{ conn: Connection; shared: boolean }> {
    this.#connecting++;
    try {
      return await this.#connectCounted(req, retry);
    } finally {
      this.#connecting--;
    }
  }

  /** {@link #connect}'s work, while it is counted in {@link #connecting}. */
  async #connectCounted(
    req: TransportRequest,
    retry: boolean,
  ): Promise<{ conn: Connection; shared: boolean }> {
    const warming = retry ? undefined : this.#warming;
    if (warming) {
      // The connection {@link preconnect} is opening: this request's (any method). Its set-up
      // failing, the request opens its own.
      this.#warming = undefined;
      const conn = await abortable(warming, req.signal, (late) => {
        if (late) this.#release(late);
      }).catch(() => undefined);
      if (req.signal.aborted) {
        if (conn) this.#release(conn); // nothing written on it: kept for the next request
        throw req.signal.reason;
      }
      if (this.#closed) {
        conn?.close();
        throw new Error("Transport is closed");
      }
      if (conn && !conn.closing) return { conn, shared: false };
    }
    const joinable = this.#joinable(req.method);
    if (joinable) {
      // Behind the GET that is opening a connection: its continuation runs first (it awaits
      // the same promise, earlier) and queues its request before this one. Its open failing
      // or aborted: this one opens its own. Its own abort (its caller's deadline) ends the
      // wait; the connection stays the other GET's.
      joinable.joined++;
      const conn = await abortable(joinable.conn, req.signal, () => {}).catch(() => undefined);
      if (req.signal.aborted) {
        joinable.joined--;
        throw req.signal.reason;
      }
      if (this.#closed) throw new Error("Transport is closed");
      if (conn && !conn.closing) return { conn, shared: true };
    }
    const opening = req.method === "GET" && this.#depth > 1
      ? { conn: this.#open(req.signal), joined: 0 }
      : undefined;
    if (opening) this.#opening.add(opening);
    let conn: Connection;
    try {
      conn = await (opening?.conn ?? this.#open(req.signal));
    } catch (err) {
      // Nothing of the request was written: a caller may send a non-idempotent call again.
      if (!retry && err && typeof err === "object") Object.assign(err, { connectFailed: true });
      throw err;
    } finally {
      if (opening) this.#opening.delete(opening);
    }
    if (this.#closed) {
      conn.close();
      throw new Error("Transport is closed");
    }
    if (req.signal.aborted) {
      // Aborted once the connection was up, before its request was written (the last steps
      // of the set-up, the pin check, are not abortable): nothing is written. The connection
      // is the GETs' that joined it, else kept for the next request.
      if (!opening?.joined) this.#release(conn);
      throw req.signal.reason;
    }
    return { conn, shared: false };
  }

  /** A connection nobody uses: idle in the pool when there is room, else closed. */
  #release(conn: Connection): void {
    if (!conn.closing && !this.#closed && this.#idle.length < MAX_IDLE) {
      conn.getsOnly = true;
      this.#idle.push(conn);
    } else {
      conn.close();
    }
  }

  /**
   * A busy connection a GET may be pipelined on: only GETs outstanding, fewer than the depth;
   * the least loaded. Never for another method, never behind one.
   */
  #pipelinable(method: string): Connection | undefined {
    if (this.#depth === 1 || method !== "GET") return undefined;
    let best: Connection | undefined;
    for (const c of this.#busy) {
      if (c.closing || !c.getsOnly || c.outstanding >= this.#depth) continue;
      if (!best || c.outstanding < best.outstanding) best = c;
    }
    return best;
  }

  /**
   * A connection being opened for a GET that another GET may wait for and be pipelined behind
   * (GETs sent together before any connection exists), while fewer than the depth would be
   * outstanding on it.
   */
  #joinable(method: string): { conn: Promise<Connection>; joined: number } | undefined {
    if (this.#depth === 1 || method !== "GET") return undefined;
    for (const o of this.#opening) if (o.joined + 1 < this.#depth) return o;
    return undefined;
  }

  #open(signal: AbortSignal): Promise<Connection> {
    return openConnection(this.#conn, this.#base, signal, { nativeTls: this.#nativeTls });
  }

  /**
   * Writes `head` on `conn` and reads its response once those written before it are read. An
   * abort while reading closes the connection (the requests behind it then get no answer there
   * and are sent again by {@link send}); an abort while waiting answers the caller at once and
   * closes the connection when its turn comes (nobody waits for its response any more).
   */
  async #exchange(
    conn: Connection,
    req: TransportRequest,
    head: Uint8Array,
  ): Promise<TransportResponse> {
    const { turn, done } = conn.enqueue(req.method);
    this.#busy.add(conn);
    const written = conn.write(head).then(() => undefined, (err: unknown) => err ?? "write failed");
    let reading = false;
    const onAbort = () => {
      if (reading) conn.close();
      else conn.closing = true;
    };
    req.signal.addEventListener("abort", onAbort, { once: true });
    const work = (async () => {
      await turn;
      if (conn.closed) throw new ConnectionClosedError(true);
      // The write failed (EPIPE, ECONNRESET: the server closed or reset the connection after
      // the answers before this one): no byte of this response came, as a close before it.
      const failed = await written;
      if (failed !== undefined) throw new ConnectionClosedError(true, failed);
      // The main thread waits for the answer now: work queued for such a wait runs
      // (lib/util/idle.ts; the per-call plugin's process API, at most one task a request).
      idleNow();
      if (conn.closed) throw new ConnectionClosedError(true);
      req.signal.throwIfAborted();
      reading = true;
      conn.startResponse();
      try {
        return await readResponse(conn, req.method);
      } catch (err) {
        // A reset before any byte of the response: as a close (Go: a read error on a reused
        // connection before the response, `transportReadFromServerError`, is retried).
        if (conn.received === 0 && connectionBroken(err)) {
          throw new ConnectionClosedError(true, err);
        }
        throw err;
      }
    })();
    const settled = work.then(
      (res) => res.keepAlive,
      () => false,
    ).then((keep) => {
      req.signal.removeEventListener("abort", onAbort);
      if (!keep) conn.close();
      conn.outstanding--;
      done();
      if (conn.outstanding > 0) return;
      this.#busy.delete(conn);
      this.#release(conn);
    });
    try {
      // The connection is back in the pool (or closed) before the caller sees the answer.
      const res = await abortable(settled.then(() => work), req.signal, () => {});
      return { status: res.status, headers: res.headers, body: res.body };
    } catch (err) {
      if (req.signal.aborted) throw req.signal.reason;
      throw err;
    }
  }
}

/**
 * The request's bytes: request line, `host`, the headers, `content-length` and the body.
 * @throws Error for a header name or value with CR or LF
 */
