/**
 * A small Kubernetes API client over `fetch`, with exactly the calls a CNI ADD/DEL
 * needs: read a Pod and NetworkAttachmentDefinitions, write the network-status
 * annotation through the `pods/status` subresource, and post Events.
 *
 * Every request has its own timeout (AbortSignal), transient failures (connection
 * errors, timeouts, 429, 5xx) are retried with exponential backoff (429/503 honour
 * `Retry-After` up to a cap), and the bearer token is re-read from its file on every
 * request so a rotated service-account token is used at once (Multus #852). Total time
 * is bounded by `(retries + 2) × timeoutMs + retries × maxBackoffMs` (the extra attempt
 * is the single re-try after a 401).
 *
 * This module does not import `yaml` (see kubeconfig.ts) or any Kubernetes SDK, to keep
 * process start-up short.
 *
 * @module
 */

import { CniError, CniErrorCode } from "../cni/errors.ts";
import { type Logger, nullLogger } from "../log/mod.ts";
import type { KubeConnection } from "./kubeconfig.ts";
import type { StreamResponse, StreamTransport } from "./stream.ts";
import { createTransport, type Transport, type TransportResponse } from "./transport.ts";
import {
  NAD_GROUP,
  NAD_RESOURCE,
  NAD_VERSION,
  type NetworkAttachmentDefinition,
  parseList,
  parseNetworkAttachmentDefinition,
  parsePod,
  type Pod,
} from "./types.ts";
import { startTimer } from "../util/timer.ts";
import { errorText } from "../util/text.ts";

/** Options of {@link KubeClient}. */
export interface KubeClientOptions {
  /** Where the API server is and how to authenticate (see `loadKubeconfig`). */
  connection: KubeConnection;
  /** Per-request timeout in ms, covering connect, send and reading the body; default 5000. */
  timeoutMs?: number;
  /** Retries after the first attempt on transient failures; default 3. */
  retries?: number;
  /** First backoff in ms, doubled per retry; default 100. */
  backoffMs?: number;
  /** Cap in ms on one backoff, including a server's `Retry-After`; default 5000. */
  maxBackoffMs?: number;
  /** Logger for per-request debug lines and retry warnings; tokens are never logged. */
  logger?: Logger;
  /** `User-Agent` header; default `"manifold"`. */
  userAgent?: string;
  /** Cancels every request and backoff of this client (e.g. the CNI command's deadline). */
  signal?: AbortSignal;
}

/** Fields of a {@link KubeApiError}. */
export interface KubeApiErrorInit {
  /** CNI code: 11 (try again later) or 7 (invalid config). */
  code: number;
  /** HTTP status; 0 when no answer was received (connection error, timeout, abort). */
  status: number;
  /** The API `Status.reason` (`"NotFound"`, `"Forbidden"`…), or `"Timeout"`, `"ConnectionFailed"`, `"Aborted"`. */
  reason: string;
  method: string;
  /** Request path without the server prefix, e.g. `/api/v1/namespaces/default/pods/p`. */
  path: string;
  /** The API `Status.message` or the transport error. */
  message: string;
  /** Requests sent for this call, retries included. */
  attempts: number;
}

/**
 * A failed Kubernetes API call. Codes (CNI SPEC "Error"): 11 (try again later) for
 * connection errors, timeouts, 429 and 5xx once retries are exhausted, and for 401
 * (the token may be rotating); 7 for 403, 404 and every other 4xx, and for TLS
 * verification failures. Use {@link isNotFound} for 404.
 */
export class KubeApiError extends CniError {
  /** HTTP status; 0 for connection errors, timeouts and aborts. */
  readonly status: number;
  /** API `Status.reason`, or `"Timeout"` / `"ConnectionFailed"` / `"Aborted"` / `"TlsVerification"`. */
  readonly reason: string;
  /** HTTP method of the failed call. */
  readonly method: string;
  /** Request path of the failed call. */
  readonly path: string;
  /** Requests sent, retries included. */
  readonly attempts: number;

  /** @param init the failure; `msg` is built from method, path, status and reason. */
  constructor(init: KubeApiErrorInit) {
    const what = init.status
      ? `${init.status} ${init.reason}`.trimEnd()
      : init.reason === "Timeout"
      ? "timeout"
      : init.reason === "Aborted"
      ? "aborted"
      : init.reason === "TlsVerification"
      ? "TLS verification error"
      : "connection error";
    const tries = init.attempts > 1 ? ` after ${init.attempts} attempts` : "";
    super(
      init.code,
      `Kubernetes API ${init.method} ${init.path} failed with ${what}${tries}`,
      init.message,
    );
    this.name = "KubeApiError";
    this.status = init.status;
    this.reason = init.reason;
    this.method = init.method;
    this.path = init.path;
    this.attempts = init.attempts;
  }
}

/**
 * Whether `err` is a {@link KubeApiError} for HTTP 404 (object or resource not found).
 * @example isNotFound(new Error("x")) // false
 */
export function isNotFound(err: unknown): boolean {
  return err instanceof KubeApiError && err.status === 404;
}

/** The object an Event is about (`core/v1 ObjectReference`). */
export interface EventObjectReference {
  kind: string;
  name: string;
  namespace: string;
  uid?: string;
  /** Default `"v1"`. */
  apiVersion?: string;
}

/** What {@link KubeClient.createEvent} posts (`core/v1 Event`). */
export interface EventInit {
  involvedObject: EventObjectReference;
  /** CamelCase machine reason, e.g. `"AddedInterface"`. */
  reason: string;
  /** Human message; truncated to 1024 characters. */
  message: string;
  type: "Normal" | "Warning";
  /** `source.component`; default `"manifold"`. */
  component?: string;
}

interface RequestInit {
  body?: string;
  contentType?: string;
  retries?: number;
}

const NAME_FORBIDDEN = /[/%]/;
const TLS_VERIFY_FAILURE =
  /invalid peer certificate|BadCertificate|UnknownCA|CertificateExpired|CertificateUnknown|CertificateRequired|UnsupportedCertVersion/;
const MAX_EVENT_MESSAGE = 1024;

/**
 * Checks one REST path segment (a namespace or object name) and percent-encodes it.
 * Names cannot be `.`/`..` or contain `/` or `%` (apimachinery `path.IsValidPathSegmentName`).
 */
function segment(what: string, value: string): string {
  if (!value || value === "." || value === ".." || NAME_FORBIDDEN.test(value)) {
    throw new CniError(
      CniErrorCode.InvalidNetworkConfig,
      `Invalid ${what} name ${JSON.stringify(value)}`,
    );
  }
  return encodeURIComponent(value);
}

function nadPath(namespace?: string): string {
  const base = `/apis/${NAD_GROUP}/${NAD_VERSION}`;
  return namespace === undefined
    ? `${base}/${NAD_RESOURCE}`
    : `${base}/namespaces/${segment("namespace", namespace)}/${NAD_RESOURCE}`;
}

function podPath(namespace: string, name: string): string {
  return `/api/v1/namespaces/${segment("namespace", namespace)}/pods/${segment("pod", name)}`;
}

/** Parses a `Retry-After` header (delta-seconds or HTTP-date) into ms; undefined if absent/bad. */
function retryAfterMs(res: TransportResponse): number | undefined {
  const v = res.headers.get("retry-after");
  if (v === null) return undefined;
  if (/^\s*\d+\s*$/.test(v)) return Number(v) * 1000;
  const t = Date.parse(v);
  return Number.isNaN(t) ? undefined : Math.max(0, t - Date.now());
}

/** The `Status` reason and message of an error answer, tolerating non-JSON bodies. */
function statusOf(res: TransportResponse): { reason: string; message: string } {
  try {
    const s = JSON.parse(res.body) as { reason?: unknown; message?: unknown };
    if (s && typeof s === "object") {
      return {
        reason: typeof s.reason === "string" ? s.reason : "",
        message: typeof s.message === "string" ? s.message : "",
      };
    }
  } catch {
    // not JSON: a proxy or load balancer answered
  }
  return { reason: "", message: res.body.slice(0, 256).trim() };
}

/**
 * The Kubernetes API client. One instance per CNI invocation; connections are kept
 * alive between its requests and closed by {@link KubeClient.close}.
 *
 * @example
 * ```ts
 * using kube = new KubeClient({ connection: await loadKubeconfig("/etc/cni/net.d/manifold.d/manifold.kubeconfig") });
 * const pod = await kube.getPod("default", "api-sample");
 * ```
 */
export class KubeClient {
  #conn: KubeConnection;
  #transport: Transport;
  #timeoutMs: number;
  #retries: number;
  #backoffMs: number;
  #maxBackoffMs: number;
  #logger: Logger;
  #userAgent: string;
  #signal: AbortSignal | undefined;
  #closer = new AbortController();
  #requestCount = 0;
  #lastFileToken: string | undefined;

  /** @param opts connection and retry policy; nothing is opened until the first request. */
  constructor(opts: KubeClientOptions) {
    this.#conn = opts.connection;
    this.#transport = createTransport(opts.connection);
    this.#timeoutMs = opts.timeoutMs ?? 5000;
    this.#retries = Math.max(0, opts.retries ?? 3);
    this.#backoffMs = opts.backoffMs ?? 100;
    this.#maxBackoffMs = opts.maxBackoffMs ?? 5000;
    this.#logger = opts.logger ?? nullLogger;
    this.#userAgent = opts.userAgent ?? "manifold";
    this.#signal = opts.signal;
  }

  /** HTTP requests actually sent so far, retries included. */
  get requestCount(): number {
    return this.#requestCount;
  }

  /**
   * `GET /api/v1/namespaces/{namespace}/pods/{name}`.
   * @returns the Pod (validated metadata + raw object).
   * @throws {KubeApiError} (404 → {@link isNotFound}); {@link CniError} 6 on a malformed
   *   answer, 7 on an invalid name.
   */
  async getPod(namespace: string, name: string): Promise<Pod> {
    return parsePod(await this.#request("GET", podPath(namespace, name)));
  }

  /**
   * `GET /apis/k8s.cni.cncf.io/v1/namespaces/{namespace}/network-attachment-definitions/{name}`
   * (NPWG v1.3 §3).
   * @throws {KubeApiError} (404 → {@link isNotFound}); {@link CniError} 6 on a malformed
   *   answer, 7 on an invalid name.
   */
  async getNetworkAttachmentDefinition(
    namespace: string,
    name: string,
  ): Promise<NetworkAttachmentDefinition> {
    const path = `${nadPath(namespace)}/${segment("NetworkAttachmentDefinition", name)}`;
    return parseNetworkAttachmentDefinition(await this.#request("GET", path));
  }

  /**
   * Lists NetworkAttachmentDefinitions of one namespace, or of all namespaces when
   * `namespace` is omitted (`GET /apis/k8s.cni.cncf.io/v1/network-attachment-definitions`).
   * @throws {KubeApiError}; {@link CniError} 6 on a malformed answer.
   */
  async listNetworkAttachmentDefinitions(
    namespace?: string,
  ): Promise<NetworkAttachmentDefinition[]> {
    return parseList(
      await this.#request("GET", nadPath(namespace)),
      parseNetworkAttachmentDefinition,
    );
  }

  /**
   * Sets (string) or deletes (`null`) Pod annotations through the status subresource:
   * `PATCH /api/v1/namespaces/{ns}/pods/{name}/status`, `application/merge-patch+json`
   * (RFC 7386) `{"metadata":{"annotations":{…}}}`. Needs only `patch pods/status`
   * (how Multus writes `k8s.v1.cni.cncf.io/network-status`, NPWG v1.3 §5). No
   * resourceVersion is sent, so it cannot conflict; it is retried on transient errors.
   * @returns the updated Pod.
   * @throws {KubeApiError}; {@link CniError} 6 on a malformed answer.
   */
  async patchPodStatusAnnotations(
    namespace: string,
    name: string,
    annotations: Record<string, string | null>,
  ): Promise<Pod> {
    const raw = await this.#request("PATCH", `${podPath(namespace, name)}/status`, {
      body: JSON.stringify({ metadata: { annotations } }),
      contentType: "application/merge-patch+json",
    });
    return parsePod(raw);
  }

  /**
   * Posts a `core/v1` Event: `POST /api/v1/namespaces/{namespace}/events` with
   * `metadata.generateName` `"<involvedObject.name>."` (the server appends 5 random
   * characters), `source.component`, `count: 1` and first/last timestamps of now.
   * @throws {KubeApiError} (callers usually log and ignore it).
   */
  async createEvent(namespace: string, ev: EventInit): Promise<void> {
    const now = new Date().toISOString().replace(/\.\d+Z$/, "Z");
    const ref: Record<string, string> = {
      apiVersion: ev.involvedObject.apiVersion ?? "v1",
      kind: ev.involvedObject.kind,
      name: ev.involvedObject.name,
      namespace: ev.involvedObject.namespace,
    };
    if (ev.involvedObject.uid) ref.uid = ev.involvedObject.uid;
    const body = {
      apiVersion: "v1",
      kind: "Event",
      metadata: { generateName: `${ev.involvedObject.name}.`, namespace },
      involvedObject: ref,
      reason: ev.reason,
      message: ev.message.length > MAX_EVENT_MESSAGE
        ? `${ev.message.slice(0, MAX_EVENT_MESSAGE - 3)}...`
        : ev.message,
      type: ev.type,
      source: { component: ev.component ?? "manifold" },
      firstTimestamp: now,
      lastTimestamp: now,
      count: 1,
    };
    await this.#request("POST", `/api/v1/namespaces/${segment("namespace", namespace)}/events`, {
      body: JSON.stringify(body),
      contentType: "application/json",
    });
  }

  /** Cancels in-flight requests and closes pooled connections; idempotent. */
  close(): void {
    if (this.#closer.signal.aborted) return;
    this.#closer.abort(new Error("Kube client closed"));
    this.#transport.close();
  }

  /** Same as {@link KubeClient.close}, for `using`. */
  [Symbol.dispose](): void {
    this.close();
  }

  async #token(): Promise<string | undefined> {
    const file = this.#conn.tokenFile;
    if (!file) return this.#conn.token;
    let reason = "the file is empty";
    try {
      const t = (await Deno.readTextFile(file)).trim();
      if (t) {
        this.#lastFileToken = t;
        return t;
      }
    } catch (err) {
      reason = (err as Error).message;
    }
    // Like client-go's cached file token source: keep the last good value, else the static token.
    const fallback = this.#lastFileToken ?? this.#conn.token;
    if (fallback) {
      this.#logger.warn("cannot read token file, using the previous token", {
        tokenFile: file,
        reason,
      });
      return fallback;
    }
    throw new CniError(CniErrorCode.IoFailure, `Cannot read token file ${file}`, reason);
  }

  #aborted(): boolean {
    return this.#closer.signal.aborted || (this.#signal?.aborted ?? false);
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const signals = [this.#closer.signal, this.#signal].filter((s): s is AbortSignal => !!s);
      const done = () => {
        timer.cancel();
        for (const s of signals) s.removeEventListener("abort", done);
        resolve();
      };
      const timer = startTimer(ms, done);
      for (const s of signals) s.addEventListener("abort", done, { once: true });
    });
  }

  async #request(method: string, path: string, init: RequestInit = {}): Promise<unknown> {
    const maxRetries = init.retries ?? this.#retries;
    let retriesUsed = 0;
    let authRetried = false;
    let attempts = 0;
    const fail = (e: Omit<KubeApiErrorInit, "method" | "path" | "attempts">) =>
      new KubeApiError({ ...e, method, path, attempts });
    for (;;) {
      if (this.#aborted()) {
        throw fail({
          code: 11,
          status: 0,
          reason: "Aborted",
          message: "the request was cancelled",
        });
      }
      const headers: Record<string, string> = {
        "accept": "application/json",
        "user-agent": this.#userAgent,
      };
      if (init.contentType) headers["content-type"] = init.contentType;
      const token = await this.#token();
      if (token) headers["authorization"] = `Bearer ${token}`;

      const timeout = new AbortController();
      const timer = startTimer(
        this.#timeoutMs,
        () => timeout.abort(new DOMException("Request timed out", "TimeoutError")),
      );
      const signals = [timeout.signal, this.#closer.signal];
      if (this.#signal) signals.push(this.#signal);
      const started = performance.now();
      let res: TransportResponse | undefined;
      let failure: { reason: string; message: string } | undefined;
      attempts++;
      this.#requestCount++;
      try {
        res = await this.#transport.send({
          method,
          url: `${this.#conn.server}${path}`,
          headers,
          body: init.body,
          signal: AbortSignal.any(signals),
        });
      } catch (err) {
        if (err instanceof CniError) throw err;
        if (this.#aborted()) {
          throw fail({ code: 11, status: 0, reason: "Aborted", message: errorText(err) });
        }
        const text = errorText(err);
        if (timeout.signal.aborted) {
          failure = { reason: "Timeout", message: `no answer within ${this.#timeoutMs} ms` };
        } else if (TLS_VERIFY_FAILURE.test(text)) {
          throw fail({ code: 7, status: 0, reason: "TlsVerification", message: text });
        } else {
          failure = { reason: "ConnectionFailed", message: text };
        }
      } finally {
        timer.cancel();
      }
      const ms = Math.round(performance.now() - started);
      this.#logger.debug("kube api request", {
        method,
        path,
        status: res?.status ?? 0,
        attempt: attempts,
        ms,
        ...(failure ? { error: failure.message } : {}),
      });

      if (res && res.status >= 200 && res.status < 300) {
        if (res.body.trim() === "") return {};
        try {
          return JSON.parse(res.body);
        } catch (err) {
          throw new CniError(
            CniErrorCode.DecodingFailure,
            `Kubernetes API ${method} ${path} returned invalid JSON`,
            (err as Error).message,
          );
        }
      }
      if (res?.status === 401 && this.#conn.tokenFile && !authRetried) {
        // The token may have been rotated between our read and the server's check.
        authRetried = true;
        this.#logger.info("kube api answered 401, re-reading the token file and retrying once", {
          method,
          path,
        });
        continue;
      }
      const transient = !res || res.status === 429 || res.status >= 500;
      if (transient && retriesUsed < maxRetries) {
        const hinted = res && (res.status === 429 || res.status === 503)
          ? retryAfterMs(res)
          : undefined;
        const delay = Math.min(hinted ?? this.#backoffMs * 2 ** retriesUsed, this.#maxBackoffMs);
        retriesUsed++;
        this.#logger.warn("kube api request failed, retrying", {
          method,
          path,
          status: res?.status ?? 0,
          error: failure?.message ?? statusOf(res!).message,
          delayMs: delay,
          retry: retriesUsed,
        });
        await this.#sleep(delay);
        continue;
      }
      if (!res) {
        throw fail({ code: 11, status: 0, reason: failure!.reason, message: failure!.message });
      }
      const st = statusOf(res);
      const code = transient || res.status === 401
        ? CniErrorCode.TryAgainLater
        : CniErrorCode.InvalidNetworkConfig;
      throw fail({ code, status: res.status, reason: st.reason, message: st.message });
    }
  }

  // List and watch, for `manifold mirror` (lib/k8s/watch.ts). The streaming transport is
  // loaded on the first watch only: the plugin's ADD never pays for it.

  #streams: StreamTransport | undefined;

  /**
   * `GET {path}?{params}` with this client's retries, timeout and authentication,
   * e.g. one page of a collection:
   * `list("/apis/k8s.cni.cncf.io/v1/network-attachment-definitions", { limit: 500 })`.
   *
   * @param path request path without the server prefix; may already hold a query
   * @param params query parameters; `undefined` values are left out
   * @returns the decoded JSON body, unvalidated (validate it with zod where it is used)
   * @throws {KubeApiError} as every call (11 after retries for 429/5xx/connection errors,
   *   7 for other 4xx, e.g. 403 without `list` permission); {@link CniError} 6 when the
   *   body is not JSON.
   */
  async list(path: string, params: QueryParams = {}): Promise<unknown> {
    return await this.#request("GET", withQuery(path, params));
  }

  /**
   * Opens a watch, `GET {path}?watch=1&{params}` (e.g. `resourceVersion`,
   * `allowWatchBookmarks`, `timeoutSeconds`), and yields each line of the chunked answer
   * decoded (`metav1.WatchEvent`: `{"type":"ADDED|MODIFIED|DELETED|BOOKMARK|ERROR","object":{…}}`),
   * unvalidated, until the server ends the response. One attempt, no retries (the caller's
   * list/watch loop decides about backoff and resuming); `timeoutMs` bounds only the wait for
   * the status line, not the stream. Breaking out of the loop releases the connection;
   * {@link KubeClient.close} ends every open watch.
   *
   * @param path a collection path, e.g. `/apis/k8s.cni.cncf.io/v1/network-attachment-definitions`
   * @param params query parameters; `watch=1` is added
   * @param signal stops the watch: the iterator then throws a {@link KubeApiError} with
   *   reason `"Aborted"`
   * @param onOpen called once the server has answered 2xx, before the first line arrives
   *   (a quiet watch may send nothing for minutes)
   * @returns an async iterator of the decoded lines
   * @throws {KubeApiError} when the answer is not 2xx (`status` and the Status `reason`, e.g.
   *   410 `"Expired"`/`"Gone"`; code 11 for 401/429/5xx, 7 for other 4xx), when connecting
   *   fails or times out (status 0, code 11), when the stream breaks (status 0,
   *   `"ConnectionFailed"`, code 11), or is aborted (`"Aborted"`, code 11);
   *   {@link CniError} 6 when a line is not JSON or exceeds 16 MiB.
   */
  async *watch(
    path: string,
    params: QueryParams = {},
    signal?: AbortSignal,
    onOpen?: () => void,
  ): AsyncGenerator<unknown, void, undefined> {
    const method = "GET";
    const full = withQuery(path, { watch: 1, ...params });
    const fail = (e: Omit<KubeApiErrorInit, "method" | "path" | "attempts">) =>
      new KubeApiError({ ...e, method, path: full, attempts: 1 });
    const aborted = () => this.#aborted() || (signal?.aborted ?? false);
    const abortedError = (err?: unknown) =>
      fail({
        code: CniErrorCode.TryAgainLater,
        status: 0,
        reason: "Aborted",
        message: err === undefined ? "the watch was cancelled" : errorText(err),
      });
    if (aborted()) throw abortedError();
    if (!this.#streams) {
      const { createStreamTransport } = await import("./stream.ts");
      const streams = createStreamTransport(this.#conn);
      this.#streams = streams;
      this.#closer.signal.addEventListener("abort", () => streams.close(), { once: true });
    }
    const headers: Record<string, string> = {
      "accept": "application/json",
      "user-agent": this.#userAgent,
    };
    const token = await this.#token();
    if (token) headers["authorization"] = `Bearer ${token}`;
    const signals = [this.#closer.signal];
    if (this.#signal) signals.push(this.#signal);
    if (signal) signals.push(signal);
    const connect = new AbortController();
    const timer = setTimeout(
      () => connect.abort(new DOMException("Request timed out", "TimeoutError")),
      this.#timeoutMs,
    );
    const started = performance.now();
    this.#requestCount++;
    let res: StreamResponse;
    try {
      res = await this.#streams.open({
        method,
        url: `${this.#conn.server}${full}`,
        headers,
        signal: AbortSignal.any([...signals, connect.signal]),
      });
    } catch (err) {
      if (err instanceof CniError) throw err;
      if (aborted()) throw abortedError(err);
      const text = errorText(err);
      if (connect.signal.aborted) {
        throw fail({
          code: CniErrorCode.TryAgainLater,
          status: 0,
          reason: "Timeout",
          message: `no answer within ${this.#timeoutMs} ms`,
        });
      }
      if (TLS_VERIFY_FAILURE.test(text)) {
        throw fail({ code: 7, status: 0, reason: "TlsVerification", message: text });
      }
      throw fail({
        code: CniErrorCode.TryAgainLater,
        status: 0,
        reason: "ConnectionFailed",
        message: text,
      });
    } finally {
      clearTimeout(timer);
    }
    this.#logger.debug("kube api request", {
      method,
      path: full,
      status: res.status,
      attempt: 1,
      ms: Math.round(performance.now() - started),
    });
    // Stopping must end the read of a quiet stream. The signal handed to fetch is not
    // enough in Deno 2.9.6: after a garbage collection its abort may no longer reach the
    // body (measured against a real kube-apiserver: `manifold mirror` took 282 s to stop on
    // SIGTERM; with gc() between opening and aborting, 3 of 40 watches did not end).
    // Cancelling the body ends the iteration; `aborted()` then throws below.
    const cancelOnAbort = () => res.cancel();
    for (const s of signals) s.addEventListener("abort", cancelOnAbort, { once: true });
    try {
      if (aborted()) throw abortedError();
      if (res.status < 200 || res.status >= 300) {
        let body = "";
        try {
          body = await res.text();
        } catch { /* the reason stays empty */ }
        const st = statusOf({ status: res.status, headers: res.headers, body });
        const code = res.status === 401 || res.status === 429 || res.status >= 500
          ? CniErrorCode.TryAgainLater
          : CniErrorCode.InvalidNetworkConfig;
        throw fail({ code, status: res.status, reason: st.reason, message: st.message });
      }
      onOpen?.();
      const dec = new TextDecoder();
      let buf = "";
      const decodeLine = (line: string): unknown => {
        try {
          return JSON.parse(line);
        } catch (err) {
          throw new CniError(
            CniErrorCode.DecodingFailure,
            `Kubernetes API watch ${full} sent a line that is not JSON`,
            `${(err as Error).message}: ${line.slice(0, 200)}`,
          );
        }
      };
      try {
        for await (const chunk of res.body) {
          buf += dec.decode(chunk, { stream: true });
          let nl: number;
          while ((nl = buf.indexOf("\n")) >= 0) {
            const line = buf.slice(0, nl).trim();
            buf = buf.slice(nl + 1);
            if (line !== "") yield decodeLine(line);
          }
          if (buf.length > MAX_WATCH_LINE) {
            throw new CniError(
              CniErrorCode.DecodingFailure,
              `Kubernetes API watch ${full} sent a line longer than ${MAX_WATCH_LINE} bytes`,
            );
          }
        }
      } catch (err) {
        if (err instanceof CniError) throw err;
        if (aborted()) throw abortedError(err);
        throw fail({
          code: CniErrorCode.TryAgainLater,
          status: 0,
          reason: "ConnectionFailed",
          message: `the watch stream broke: ${errorText(err)}`,
        });
      }
      if (aborted()) throw abortedError();
      const tail = (buf + dec.decode()).trim();
      if (tail !== "") yield decodeLine(tail);
    } finally {
      for (const s of signals) s.removeEventListener("abort", cancelOnAbort);
      res.cancel();
    }
  }
}

/** Query parameters of {@link KubeClient.list} and {@link KubeClient.watch}; `undefined` values are left out. */
export type QueryParams = Record<string, string | number | boolean | undefined>;

/** Longest watch line accepted, in characters (a single object beyond this is refused). */
const MAX_WATCH_LINE = 16 * 1024 * 1024;

/**
 * Appends `params` to `path` as a query string (`?` or `&`), in insertion order.
 * @example withQuery("/a", { watch: 1, resourceVersion: "5", x: undefined }) // "/a?watch=1&resourceVersion=5"
 */
function withQuery(path: string, params: QueryParams): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) q.set(k, String(v));
  const text = q.toString();
  if (text === "") return path;
  return `${path}${path.includes("?") ? "&" : "?"}${text}`;
}
