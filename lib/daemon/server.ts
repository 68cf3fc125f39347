/**
 * The daemon's unix socket server: one request per connection in the framing of
 * lib/daemon/protocol.ts (read and answered by request_framing.ts), each connection served concurrently (requests for one container are
 * serialized by the container lock the handlers take, not here).
 *
 * Security: the socket path is claimed (socket_owner.ts: a lock held for the daemon's life, a
 * directory only root can write, only our own socket removed) and the socket is 0600, owned
 * by the daemon's user (root): the kernel checks write permission on the socket file at
 * `connect(2)`, so only root reaches it; and each connection's peer credentials (SO_PEERCRED,
 * unix_listener.ts) must be uid 0 (or the daemon's own uid), else it is answered with an error
 * naming the peer's uid and pid, and the refusal is logged.
 *
 * Bounds: a request header over {@link MAX_HEADER_BYTES} or a stdin over
 * {@link MAX_STDIN_FRAME_BYTES} (code 7, refused from its length prefix, before its bytes are
 * read; buffers grow as bytes arrive), a malformed header (code 6), a truncated request or
 * one not complete within the idle timeout (code 5) get a CNI error answer (when the peer still
 * listens) and their connection is closed. At most `maxConnections` are served at once: past
 * it a client gets code 11 ("try again") at once. A failing `accept(2)` (out of descriptors)
 * backs off 5 ms doubling to 1 s, as Go's `net/http.Server` does, with one log line per
 * episode; while out of descriptors, a reserve descriptor is given up to accept and answer
 * one waiting client with code 11, so clients do not wait for their own deadline.
 *
 * @module
 */

import { CniError, CniErrorCode } from "../cni/errors.ts";
import type { Logger } from "../log/mod.ts";
import {
  cniErrorJson,
  type DaemonAnswer,
  MAX_HEADER_BYTES,
  MAX_STDIN_FRAME_BYTES,
} from "./protocol.ts";
import { PROBE, readRequest, writeAnswer } from "./request_framing.ts";
import type { CniRequest } from "./service.ts";
import { claimSocketPath, type SocketClaim } from "./socket_owner.ts";
import {
  outOfDescriptors,
  type PeerCredentials,
  releaseDescriptor,
  reserveDescriptor,
  type UnixConnection,
  UnixListener,
} from "./unix_listener.ts";

/** Default time a client has to send its complete request, ms. */
export const DEFAULT_IDLE_TIMEOUT_MS = 5_000;
/** Default bound on connections served at once (`--max-connections`). */
export const DEFAULT_MAX_CONNECTIONS = 256;
/** First and longest wait after a failed `accept(2)`, ms (Go net/http `Server.Serve`). */
export const ACCEPT_BACKOFF_MS = { first: 5, max: 1_000 } as const;
/**
 * How long a refused client's request is read (and dropped) after its answer, ms: 0, what
 * has arrived (a forwarder sends its whole request at once, before it is accepted).
 */
const REFUSE_DRAIN_MS = 0;
/** Descriptors held in reserve for answering clients while out of descriptors. */
const RESERVE_FDS = 2;

/** Options of {@link DaemonServer.listen}. */
export interface DaemonServerOptions {
  /**
   * The socket path, absolute; claimed (socket_owner.ts): its directory is created 0700 when
   * absent, a dead daemon's socket replaced.
   */
  socketPath: string;
  /** Answers one decoded request; must not reject. */
  serve(req: CniRequest): Promise<DaemonAnswer>;
  /** Time to receive a complete request, ms; default {@link DEFAULT_IDLE_TIMEOUT_MS}. */
  idleTimeoutMs?: number;
  /** Largest header, bytes; default {@link MAX_HEADER_BYTES}. */
  maxHeaderBytes?: number;
  /** Largest stdin, bytes; default {@link MAX_STDIN_FRAME_BYTES}. */
  maxStdinBytes?: number;
  /** Connections served at once; default {@link DEFAULT_MAX_CONNECTIONS}. */
  maxConnections?: number;
  /** The daemon's bound on one request, ms: written in the lock file for the forwarder. */
  requestTimeoutMs?: number;
  /** Told of every failed `accept(2)` (metrics). */
  onAcceptError?: () => void;
  /** Connection-level problems (bad requests, write failures). */
  logger?: Logger;
  /** Called as each connection's handling ends, with the number still in flight. */
  onSettled?: (inFlight: number) => void;
}

/** A listening daemon socket. */
export class DaemonServer {
  #listener: UnixListener;
  #claim: SocketClaim;
  #opts: DaemonServerOptions;
  #inFlight = new Set<Promise<void>>();
  /** Connections being answered code 11 (over the limit, or shed while out of descriptors). */
  #refusing = new Set<Promise<void>>();
  #accepting: Promise<void>;
  #closed = false;
  /** A descriptor kept to be given up when `accept(2)` runs out of them (module doc). */
  #reserve: number[] = [];
  #wake: (() => void) | undefined;

  private constructor(
    listener: UnixListener,
    claim: SocketClaim,
    opts: DaemonServerOptions,
  ) {
    this.#listener = listener;
    this.#claim = claim;
    this.#opts = opts;
    this.#fillReserve();
    this.#accepting = this.#acceptLoop();
  }

  /**
   * Claims the socket path (socket_owner.ts), creates the socket (0600) and starts accepting.
   * @param opts socket path, request server, limits
   * @returns the running server
   * @throws Error when the path cannot be claimed (relative, unsafe directory, another
   *   daemon's lock, naming its PID); Deno errors when the socket cannot be created
   */
  static async listen(opts: DaemonServerOptions): Promise<DaemonServer> {
    const claim = await claimSocketPath(opts.socketPath, {
      requestTimeoutMs: opts.requestTimeoutMs,
    });
    let listener: UnixListener | undefined;
    try {
      listener = UnixListener.listen(opts.socketPath);
      await Deno.chmod(opts.socketPath, 0o600);
      claim.bound();
    } catch (e) {
      try {
        listener?.close();
      } catch { /* closed */ }
      claim.release();
      throw e;
    }
    return new DaemonServer(listener, claim, opts);
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
      this.#wake?.();
      this.#claim.release(); // removes the socket only if it is still ours, then the lock
    }
    await this.#accepting;
    this.#releaseReserve();
    while (this.#inFlight.size > 0 || this.#refusing.size > 0) {
      await Promise.all([...this.#inFlight, ...this.#refusing]);
    }
  }

  async #acceptLoop(): Promise<void> {
    const max = this.#opts.maxConnections ?? DEFAULT_MAX_CONNECTIONS;
    const log = this.#opts.logger;
    let backoff = 0; // ms; 0: not backing off
    let failures = 0; // in this episode; 0: no episode
    for (;;) {
      let conn: UnixConnection;
      try {
        conn = await this.#listener.accept();
      } catch (e) {
        if (this.#closed) return;
        this.#acceptFailed(e, failures++ === 0);
        if (this.#reserve.length > 0 && outOfDescriptors(e) && await this.#shed()) continue;
        backoff = backoff === 0
          ? ACCEPT_BACKOFF_MS.first
          : Math.min(backoff * 2, ACCEPT_BACKOFF_MS.max);
        await this.#sleep(backoff);
        if (this.#closed) return;
        continue;
      }
      if (failures > 0) {
        log?.info("accept recovered", { failures });
        backoff = 0;
        failures = 0;
      }
      this.#fillReserve();
      if (this.#inFlight.size >= max) {
        log?.warn("connection refused: at --max-connections", { maxConnections: max });
        void this.#refuse(conn, `the manifold daemon is serving ${max} requests; try again`);
        continue;
      }
      const p = this.#handle(conn).finally(() => {
        this.#inFlight.delete(p);
        this.#opts.onSettled?.(this.#inFlight.size);
      });
      this.#inFlight.add(p);
    }
  }

  /** Counts and logs a failed accept: every one at debug, the first of an episode as a warning. */
  #acceptFailed(e: unknown, first: boolean): void {
    this.#opts.onAcceptError?.();
    this.#opts.logger?.debug("accept failed", { error: String(e) });
    if (first) {
      this.#opts.logger?.warn(
        "accept failed; backing off (5 ms doubling to 1 s) until it succeeds",
        { error: String(e) },
      );
    }
  }

  /**
   * Out of descriptors: gives up the reserve to accept the waiting client and tell it "try
   * again" (code 11) now, rather than leave it to its own deadline; then takes the reserve again.
   * @returns true when a client was answered (progress: no back-off needed)
   */
  async #shed(): Promise<boolean> {
    this.#releaseReserve();
    let conn: UnixConnection | undefined;
    try {
      conn = this.#listener.tryAccept();
    } catch (e) {
      this.#acceptFailed(e, false); // the descriptor went elsewhere: back off
      return false;
    }
    if (!conn) {
      this.#fillReserve();
      return false;
    }
    await this.#refuse(conn, "the manifold daemon is out of file descriptors; try again", true);
    return true;
  }

  /**
   * Takes the reserve descriptors ({@link RESERVE_FDS}: another thread of the process, e.g.
   * Deno's own caches, may take one freed descriptor first) as far as there are any.
   */
  #fillReserve(): void {
    while (this.#reserve.length < RESERVE_FDS) {
      const fd = reserveDescriptor();
      if (fd === undefined) return;
      this.#reserve.push(fd);
    }
  }

  #releaseReserve(): void {
    for (const fd of this.#reserve) releaseDescriptor(fd);
    this.#reserve = [];
  }

  /** Waits `ms` or until {@link DaemonServer.close}. */
  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.#wake = undefined;
        resolve();
      }, ms);
      this.#wake = () => {
        clearTimeout(t);
        resolve();
      };
    });
  }

  /**
   * Answers code 11 without reading the request, and closes; with `reserve`, then takes the
   * reserve descriptor again (the one this connection used).
   */
  #refuse(conn: UnixConnection, msg: string, reserve = false): Promise<void> {
    conn.deadline = performance.now() + (this.#opts.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS);
    const p = (async () => {
      try {
        await writeAnswer(conn, { code: 1, stdout: cniErrorJson("1.0.0", 11, msg) });
        await conn.drain(REFUSE_DRAIN_MS); // unread bytes at close would reset the answer
      } catch { /* the client went away */ }
      conn.close();
      if (reserve && !this.#closed) this.#fillReserve();
    })().finally(() => this.#refusing.delete(p));
    this.#refusing.add(p);
    return p;
  }

  async #handle(conn: UnixConnection): Promise<void> {
    let answer: DaemonAnswer;
    try {
      const req = await readRequest(conn, {
        maxHeader: this.#opts.maxHeaderBytes ?? MAX_HEADER_BYTES,
        maxStdin: this.#opts.maxStdinBytes ?? MAX_STDIN_FRAME_BYTES,
        idleMs: this.#opts.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS,
      });
      // After reading (bounded): a client that is answered before it finished sending sees
      // its connection reset instead of the answer.
      this.#checkPeer(conn);
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
      conn.deadline = performance.now() + (this.#opts.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS);
      await writeAnswer(conn, answer);
      await conn.drain(0); // a refused request's unread bytes would reset the answer
    } catch (e) {
      this.#opts.logger?.warn("failed to send the answer", { error: String(e) });
    } finally {
      try {
        conn.close();
      } catch { /* already closed */ }
    }
  }

  /**
   * Serves only root and the daemon's own user (SO_PEERCRED); a refusal is logged with the
   * peer's pid and uid.
   * @throws {CniError} 999 naming the peer's uid and pid
   */
  #checkPeer(conn: UnixConnection): void {
    let peer: PeerCredentials;
    try {
      peer = conn.peer();
    } catch (e) {
      throw new CniError(999, "cannot read the client's credentials (SO_PEERCRED)", String(e));
    }
    if (peer.uid === 0 || peer.uid === this.#claim.uid) return;
    this.#opts.logger?.warn("request refused: the client is not root", {
      pid: peer.pid,
      uid: peer.uid,
      gid: peer.gid,
    });
    throw new CniError(
      999,
      `the manifold daemon serves requests from root only; this client is uid ${peer.uid} ` +
        `(pid ${peer.pid})`,
      "the daemon runs delegates as root: only root may ask it to (SO_PEERCRED check)",
    );
  }
}
