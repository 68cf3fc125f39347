/**
 * The options of one Kubernetes API client (`KubeClient`, `KubeRequester` in request.ts) and of
 * one call: where the server is, timeouts, retries and backoff, the bound on a call, logging
 * and cancellation.
 *
 * @module
 */

import type { Logger } from "../log/mod.ts";
import type { KubeConnection } from "./connection.ts";

/** Options of `KubeClient` (and of the `KubeRequester` under it). */
export interface KubeClientOptions {
  /** Where the API server is and how to authenticate (see `loadKubeconfig`). */
  connection: KubeConnection;
  /** Per-request timeout in ms, covering connect, send and reading the body; default 5000. */
  timeoutMs?: number;
  /** Retries after the first attempt on transient failures; default 3. */
  retries?: number;
  /** First backoff in ms, doubled per retry; default 100. */
  backoffMs?: number;
  /**
   * Cap in ms on one backoff; without `deadlineMs` also on a server's `Retry-After`; default
   * 5000.
   */
  maxBackoffMs?: number;
  /**
   * Bound on one call (not a watch stream), ms: every attempt, backoff and `Retry-After` wait
   * included; default none. The error past it is a timeout (transient).
   */
  deadlineMs?: number;
  /** Logger for per-request debug lines and retry warnings; tokens are never logged. */
  logger?: Logger;
  /** `User-Agent` header; default `"manifold"`. */
  userAgent?: string;
  /**
   * Pipeline concurrent GETs on one HTTP/1.1 connection (up to 4 outstanding, RFC 9112 §9.3.2)
   * instead of opening another: saves a TCP + TLS set-up per extra connection (2 round trips
   * to a distant server; on loopback about even, the server serving them one after the other). For a client making a few requests
   * (the per-call plugin); default false, since a GET queued behind a slow one (a LIST) waits
   * for it. Only the HTTP/1.1 socket transport does it (not through a proxy).
   */
  pipelineGets?: boolean;
  /**
   * TLS through OpenSSL (`http1/native_tls.ts`) where the HTTP/1.1 socket transport pins a CA:
   * a fresh process's first handshake then waits no ≈ 25 ms for Deno's crypto initialisation.
   * For the per-call plugin; falls back to Deno's TLS when `libssl.so.3` cannot be opened.
   * Default false.
   */
  nativeTls?: boolean;
  /** Cancels every request and backoff of this client (e.g. the CNI command's deadline). */
  signal?: AbortSignal;
  /**
   * Called once per HTTP request sent (every attempt, retries included) with its method
   * (`"WATCH"` for a watch stream) and the answer's status, 0 when none came (timeout,
   * connection failure, abort). For metrics (`manifold daemon`); must not throw. Absent: no
   * cost.
   */
  onRequest?: (method: string, status: number) => void;
  /**
   * Called when a lister halved its page size after a page over the body cap, with the
   * collection path and the new `limit`. For metrics; must not throw.
   */
  onListPageShrunk?: (path: string, limit: number) => void;
}

/** A request body and policy of `KubeRequester.request`. */
export interface RequestBody {
  /** UTF-8 body. */
  body?: string;
  /** Its `content-type`. */
  contentType?: string;
  /** Retries for this call instead of the client's. */
  retries?: number;
  /**
   * The call may be sent twice without harm (default: GET, HEAD, PUT, DELETE, OPTIONS yes;
   * POST and PATCH no). A POST/PATCH with a precondition (`metadata.uid`,
   * `metadata.resourceVersion`) may set it: a duplicate fails the precondition. A call that
   * is not idempotent is retried only when it provably never reached the server (the
   * connection could not be opened), on 429, or on a 5xx with `Retry-After` (client-go).
   */
  idempotent?: boolean;
}
