/**
 * How one API call is sent: with the current credential (`credentials.ts`: a token file
 * re-read on every request, or an exec credential plugin), a timeout per request
 * (AbortSignal), and retries with exponential backoff for transient failures (connection
 * errors, timeouts, 429, 5xx). A 429 or 5xx answer's `Retry-After` is honoured as client-go
 * does (`checkWait`: 429 and every 5xx). With `deadlineMs` one call — attempts and waits — is
 * bounded by it, and answers with `Retry-After` are retried up to 10 times (client-go's
 * `maxRetries`) whatever `retries` says: each attempt's timeout is cut to what is left, and a `Retry-After` longer
 * than what is left fails the call at once (transient, with the server's wish in the message)
 * instead of waiting past the bound. Without it, a `Retry-After` is capped at `maxBackoffMs`
 * and the total is bounded by `(retries + 2) × timeoutMs + retries × maxBackoffMs` (the extra
 * attempt is the single re-try after a 401).
 *
 * What is sent (paths, bodies) is `client.ts`'s concern; what a failure is, `errors.ts`'s; the
 * options, `request_options.ts`; when a failure is retried and after how long, `retry_policy.ts`.
 *
 * @module
 */

import { lazyImport } from "../util/lazy.ts";
import { type Logger, nullLogger } from "../log/mod.ts";
import type { KubeConnection } from "./connection.ts";
import {
  type CallInfo,
  httpStatusError,
  isTlsVerifyFailure,
  KubeError,
  noAnswerError,
} from "./errors.ts";
import { RequestCredentials } from "./credentials.ts";
import type { ExecCredential } from "./exec_credential.ts";
import type { KubeClientOptions, RequestBody } from "./request_options.ts";
import { boundRanOut, retryDelay } from "./retry_policy.ts";
import type { StreamResponse, StreamTransport } from "./stream.ts";
import {
  IDEMPOTENT_METHODS,
  mayResend,
  neverSent,
  ResponseTooLargeError,
} from "./http_semantics.ts";
import { createTransport, type Http1Options } from "./transport.ts";
import type { Transport, TransportResponse } from "./transport_types.ts";
import { startTimer } from "../util/timer.ts";
import { errorText } from "../util/text.ts";

export type { KubeClientOptions, RequestBody } from "./request_options.ts";

/**
 * Sends API requests with authentication, timeouts and retries over one kept-alive transport
 * (and, for watches, one streaming transport loaded on the first watch only).
 */
export class KubeRequester {
  #conn: KubeConnection;
  #transport: Transport | undefined;
  #streams: StreamTransport | undefined;
  /** The client certificate the transports were made with (an exec plugin may change it). */
  #transportCert: string | undefined;
  #credentials: RequestCredentials;
  #timeoutMs: number;
  #retries: number;
  #backoffMs: number;
  #maxBackoffMs: number;
  #deadlineMs: number | undefined;
  #logger: Logger;
  #userAgent: string;
  #signal: AbortSignal | undefined;
  #onRequest: ((method: string, status: number) => void) | undefined;
  /** The HTTP/1.1 transport's options (pipelining, OpenSSL), as the caller asked. */
  #http1: Http1Options;
  #closer = new AbortController();
  #requestCount = 0;

  /**
   * Creates a requester; nothing is opened until the first request.
   * @param opts connection and retry policy
   */
  constructor(opts: KubeClientOptions) {
    this.#conn = opts.connection;
    this.#timeoutMs = opts.timeoutMs ?? 5000;
    this.#retries = Math.max(0, opts.retries ?? 3);
    this.#backoffMs = opts.backoffMs ?? 100;
    this.#maxBackoffMs = opts.maxBackoffMs ?? 5000;
    this.#deadlineMs = opts.deadlineMs;
    this.#logger = opts.logger ?? nullLogger;
    this.#userAgent = opts.userAgent ?? "manifold";
    this.#signal = opts.signal;
    this.#onRequest = opts.onRequest;
    this.#http1 = { pipelineGets: opts.pipelineGets, nativeTls: opts.nativeTls };
    this.#credentials = new RequestCredentials(this.#conn, {
      logger: this.#logger,
      signal: this.#signal,
    });
  }

  /** HTTP requests actually sent so far, retries included. */
  get requestCount(): number {
    return this.#requestCount;
  }

  /**
   * Whether this requester was closed or its signal (or `extra`) aborted.
   * @param extra another signal to check
   * @returns true when aborted
   */
  aborted(extra?: AbortSignal): boolean {
    return this.#closer.signal.aborted || (this.#signal?.aborted ?? false) ||
      (extra?.aborted ?? false);
  }

  /**
   * Sends `method path` with retries, and decodes the JSON answer.
   * @param method HTTP method
   * @param path path without the server (and with its query)
   * @param init body, content type, retries
   * @returns the decoded JSON body (`{}` for an empty one), unvalidated
   * @throws {KubeError} `"request"` for an error status or no answer once retries are spent
   *   (`transient` for connection errors, timeouts, aborts, 401, 429, 5xx); `"decoding"` when a
   *   2xx body is not JSON; `"credentials"`/`"config"` when credentials or TLS material fail
   */
  async request(method: string, path: string, init: RequestBody = {}): Promise<unknown> {
    const maxRetries = init.retries ?? this.#retries;
    let retriesUsed = 0;
    let authRetried = false;
    const call: CallInfo = { method, path, attempts: 0 };
    const bound = this.#deadlineMs;
    const deadline = bound === undefined ? Infinity : performance.now() + bound;
    const outOfTime = () => boundRanOut(call, bound);
    for (;;) {
      if (this.aborted()) throw noAnswerError(call, "Aborted", "the request was cancelled");
      const { headers, transport, cred } = await this.#prepare();
      if (init.contentType) headers["content-type"] = init.contentType;
      const left = deadline - performance.now();
      if (left <= 0) throw outOfTime();
      const attemptMs = Math.min(this.#timeoutMs, Math.ceil(left));
      const timeout = new AbortController();
      const timer = startTimer(
        attemptMs,
        () => timeout.abort(new DOMException("Request timed out", "TimeoutError")),
      );
      const started = performance.now();
      let res: TransportResponse | undefined;
      let failure:
        | { reason: "Timeout" | "ConnectionFailed"; message: string; neverSent?: boolean }
        | undefined;
      call.attempts++;
      this.#requestCount++;
      try {
        res = await transport.send({
          method,
          url: `${this.#conn.server}${path}`,
          headers,
          body: init.body,
          signal: AbortSignal.any([timeout.signal, ...this.#signals()]),
        });
      } catch (err) {
        if (err instanceof KubeError) throw err;
        if (this.aborted()) throw noAnswerError(call, "Aborted", errorText(err));
        const text = errorText(err);
        if (timeout.signal.aborted) {
          failure = {
            reason: "Timeout",
            message: attemptMs < this.#timeoutMs
              ? `no answer within ${attemptMs} ms, what was left of the call's bound of ${bound} ms`
              : `no answer within ${this.#timeoutMs} ms`,
          };
        } else if (isTlsVerifyFailure(text)) {
          throw noAnswerError(call, "TlsVerification", text);
        } else if (err instanceof ResponseTooLargeError) {
          throw noAnswerError(call, "ResponseTooLarge", text);
        } else {
          failure = { reason: "ConnectionFailed", message: text, neverSent: neverSent(err) };
        }
      } finally {
        timer.cancel();
        this.#onRequest?.(method, res?.status ?? 0);
      }
      this.#logger.debug("kube api request", {
        method,
        path,
        status: res?.status ?? 0,
        attempt: call.attempts,
        ms: Math.round(performance.now() - started),
        ...(failure ? { error: failure.message } : {}),
      });

      if (res && res.status >= 200 && res.status < 300) {
        if (res.body.trim() === "") return {};
        try {
          return JSON.parse(res.body);
        } catch (err) {
          throw new KubeError(
            "decoding",
            `Kubernetes API ${method} ${path} returned invalid JSON`,
            {
              details: (err as Error).message,
            },
          );
        }
      }
      if (res?.status === 401 && !authRetried && (this.#conn.tokenFile || this.#conn.exec)) {
        // The token may have been rotated (or the exec credential revoked) since we read it.
        authRetried = true;
        this.#credentials.invalidate(cred);
        this.#logger.info("kube api answered 401, renewing the credential and retrying once", {
          method,
          path,
        });
        continue;
      }
      if (!(init.idempotent ?? IDEMPOTENT_METHODS.has(method)) && !mayResend(res, failure)) {
        // A POST/PATCH without precondition that may have reached the server: never twice.
        if (!res) throw noAnswerError(call, failure!.reason, failure!.message);
        throw httpStatusError(call, res);
      }
      const delay = retryDelay(call, {
        res,
        failure,
        retriesUsed,
        maxRetries,
        bound,
        deadline,
        backoffMs: this.#backoffMs,
        maxBackoffMs: this.#maxBackoffMs,
      });
      if (delay !== undefined) {
        retriesUsed++;
        this.#logger.warn("kube api request failed, retrying", {
          method,
          path,
          status: res?.status ?? 0,
          error: failure?.message ?? httpStatusError(call, res!).details,
          delayMs: delay,
          retry: retriesUsed,
        });
        await this.#sleep(delay);
        continue;
      }
      if (!res) throw noAnswerError(call, failure!.reason, failure!.message);
      throw httpStatusError(call, res);
    }
  }

  /**
   * Opens a streaming `GET path` (one attempt, no retries); `timeoutMs` bounds only the wait
   * for the status line. A non-2xx answer is read (64 KiB at most) and thrown.
   * @param path path without the server, with its query
   * @param signal also stops the stream later
   * @returns the answer, its body still arriving; the caller must `cancel()` it
   * @throws {KubeError} `"request"`: the error status, or no answer (`"Timeout"`,
   *   `"ConnectionFailed"`, `"Aborted"`, `"TlsVerification"`)
   */
  async openStream(path: string, signal?: AbortSignal): Promise<StreamResponse> {
    const call: CallInfo = { method: "GET", path, attempts: 1 };
    if (this.aborted(signal)) throw noAnswerError(call, "Aborted", "the watch was cancelled");
    const { headers, conn, cred } = await this.#prepare();
    if (!this.#streams) {
      const { createStreamTransport } = await lazyImport<typeof import("./stream.ts")>(
        "./stream.ts",
        import.meta.url,
      );
      this.#streams = createStreamTransport(conn);
    }
    const connect = new AbortController();
    const timer = startTimer(
      this.#timeoutMs,
      () => connect.abort(new DOMException("Request timed out", "TimeoutError")),
    );
    const started = performance.now();
    this.#requestCount++;
    // Held by the answer's `cancel` below: a signal made by `AbortSignal.any` is referenced only
    // weakly by its sources and must live as long as the stream it aborts.
    const all = AbortSignal.any([...this.#signals(), ...(signal ? [signal] : []), connect.signal]);
    let res: StreamResponse | undefined;
    try {
      res = await this.#streams.open({
        method: "GET",
        url: `${this.#conn.server}${path}`,
        headers,
        signal: all,
      });
    } catch (err) {
      if (err instanceof KubeError) throw err;
      if (this.aborted(signal)) throw noAnswerError(call, "Aborted", errorText(err));
      const text = errorText(err);
      if (connect.signal.aborted) {
        throw noAnswerError(call, "Timeout", `no answer within ${this.#timeoutMs} ms`);
      }
      if (isTlsVerifyFailure(text)) throw noAnswerError(call, "TlsVerification", text);
      throw noAnswerError(call, "ConnectionFailed", text);
    } finally {
      timer.cancel();
      this.#onRequest?.("WATCH", res?.status ?? 0);
    }
    this.#logger.debug("kube api request", {
      method: "GET",
      path,
      status: res.status,
      attempt: 1,
      ms: Math.round(performance.now() - started),
    });
    if (res.status >= 200 && res.status < 300) {
      const cancel = res.cancel;
      // Stopping must end the read of a quiet stream. The signal handed to fetch is not enough
      // in Deno 2.9.6: once the `Response` object is garbage-collected (the transport keeps
      // only its body stream), aborting that signal no longer errors the body, and the read
      // waits until the server ends the watch (`manifold mirror` took 282 s to stop on SIGTERM
      // against a real kube-apiserver; tests/k8s/watch_abort_test.ts). Cancelling the body
      // ends the iteration.
      all.addEventListener("abort", () => cancel(), { once: true });
      return {
        ...res,
        cancel: () => {
          void all;
          cancel();
        },
      };
    }
    if (res.status === 401 && cred && this.#credentials.invalidate(cred)) {
      // A watch (or any stream) refused: the exec credential was revoked or rotated. The next
      // open runs the plugin again (client-go refreshes on every 401 of any request).
      this.#logger.info("kube api answered 401 to a watch, renewing the exec credential", {
        path,
      });
    }
    let body = "";
    try {
      body = await res.text();
    } catch { /* the reason stays empty */ }
    res.cancel();
    throw httpStatusError(call, { status: res.status, body });
  }

  /**
   * Sets up a connection for the next request ({@link Transport.preconnect}) while the caller
   * has other work, bounded by the request timeout; a failure is left to that request.
   * @returns resolves when the connection is open or could not be; never rejects
   */
  async preconnect(): Promise<void> {
    try {
      // A transport made by an earlier request needs no credential now (no token file read).
      const transport = this.#transport ?? (await this.#prepare()).transport;
      const signal = AbortSignal.any([...this.#signals(), AbortSignal.timeout(this.#timeoutMs)]);
      await transport.preconnect?.(signal);
    } catch { /* the next request sets up its own connection */ }
  }

  /** Cancels in-flight requests and closes pooled connections; idempotent. */
  close(): void {
    if (this.#closer.signal.aborted) return;
    this.#closer.abort(new Error("Kube client closed"));
    this.#transport?.close();
    this.#streams?.close();
  }

  #signals(): AbortSignal[] {
    return this.#signal ? [this.#closer.signal, this.#signal] : [this.#closer.signal];
  }

  /** Headers with the current credential, and the transport for its client certificate. */
  async #prepare(): Promise<
    {
      headers: Record<string, string>;
      conn: KubeConnection;
      transport: Transport;
      cred?: ExecCredential;
    }
  > {
    const headers: Record<string, string> = {
      "accept": "application/json",
      "user-agent": this.#userAgent,
    };
    const { token, conn, cred } = await this.#credentials.current();
    if (token) headers["authorization"] = `Bearer ${token}`;
    if (this.#transport && this.#transportCert !== conn.clientCertPem) {
      // A new client certificate from the exec plugin: new connections.
      this.#transport.close();
      this.#streams?.close();
      this.#transport = this.#streams = undefined;
    }
    this.#transportCert = conn.clientCertPem;
    this.#transport ??= createTransport(conn, undefined, this.#http1);
    return { headers, conn, transport: this.#transport, cred };
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const signals = this.#signals();
      const done = () => {
        timer.cancel();
        for (const s of signals) s.removeEventListener("abort", done);
        resolve();
      };
      const timer = startTimer(ms, done);
      for (const s of signals) s.addEventListener("abort", done, { once: true });
    });
  }
}
