/**
 * What a failed Kubernetes call is: one error type, {@link KubeError}, for everything lib/k8s
 * throws (an API call that failed, an answer that does not decode, an unusable kubeconfig, a
 * credential that cannot be obtained), and the decoding of a failed HTTP answer into it.
 *
 * lib/k8s knows nothing of CNI: the CNI code of a `KubeError` is chosen in one place,
 * `lib/multinet/api_errors.ts`.
 *
 * @module
 */

/**
 * What kind of failure a {@link KubeError} is:
 * - `"request"`: an API call failed (an HTTP error status, or no answer: connection error,
 *   timeout, abort, TLS verification); see `status`, `reason`, `transient`;
 * - `"decoding"`: the server's answer (or a watch line, or an object) is malformed;
 * - `"config"`: the connection cannot be set up: an unreadable or invalid kubeconfig, an
 *   unsupported authentication method, unusable TLS material, an invalid object name;
 * - `"credentials"`: a credential could not be obtained (the token file cannot be read, the
 *   exec credential plugin failed).
 */
export type KubeErrorKind = "request" | "decoding" | "config" | "credentials";

/** Fields of a {@link KubeError} beyond its kind and message. */
export interface KubeErrorInit {
  /** Longer context (the API `Status.message`, a zod error, the transport error); default `""`. */
  details?: string;
  /** HTTP status; 0 when no answer was received or the failure is not an HTTP one. */
  status?: number;
  /**
   * The API `Status.reason` (`"NotFound"`, `"Forbidden"`, `"Expired"`…), or for a call that got
   * no answer `"Timeout"`, `"ConnectionFailed"`, `"Aborted"`, `"TlsVerification"`; `""` when none.
   */
  reason?: string;
  /** HTTP method of the failed call, e.g. `"GET"`. */
  method?: string;
  /** Request path without the server, e.g. `/api/v1/namespaces/default/pods/p`. */
  path?: string;
  /** Requests sent for this call, retries included; 0 when none was sent. */
  attempts?: number;
  /** Whether trying again later may succeed; see {@link isTransientStatus}. Default false. */
  transient?: boolean;
  /**
   * The server's `Retry-After` in ms, when the call failed because waiting for it would pass
   * the call's bound (a caller without that bound, e.g. the async status publisher, waits it).
   */
  retryAfterMs?: number;
}

/**
 * An error of lib/k8s. `msg` is the short sentence (`"Kubernetes API GET /api/v1/… failed with
 * 404 NotFound"`), `details` the longer context; `message` is both joined by `": "`. Secrets
 * (tokens, keys) are never part of either.
 *
 * @example
 * ```ts
 * const e = new KubeError("request", "Kubernetes API GET /x failed with 404 NotFound", { status: 404 });
 * e.transient; // false
 * ```
 */
export class KubeError extends Error {
  /** What failed (see {@link KubeErrorKind}). */
  readonly kind: KubeErrorKind;
  /** The short message, sentence case, no period. */
  readonly msg: string;
  /** Longer context; `""` when none. */
  readonly details: string;
  /** HTTP status; 0 for failures without an HTTP answer. */
  readonly status: number;
  /** API `Status.reason`, or `"Timeout"` / `"ConnectionFailed"` / `"Aborted"` / `"TlsVerification"`. */
  readonly reason: string;
  /** HTTP method of the failed call; `""` when not a call. */
  readonly method: string;
  /** Request path of the failed call; `""` when not a call. */
  readonly path: string;
  /** Requests sent, retries included. */
  readonly attempts: number;
  /** Whether trying again later may succeed (connection errors, timeouts, 401, 429, 5xx). */
  readonly transient: boolean;
  /** See {@link KubeErrorInit.retryAfterMs}; undefined when the server asked for no wait. */
  readonly retryAfterMs?: number;

  /**
   * Creates the error.
   * @param kind what failed
   * @param msg the short message, sentence case, no period
   * @param init details and, for a failed call, its HTTP facts
   */
  constructor(kind: KubeErrorKind, msg: string, init: KubeErrorInit = {}) {
    const details = init.details ?? "";
    super(details ? `${msg}: ${details}` : msg);
    this.name = "KubeError";
    this.kind = kind;
    this.msg = msg;
    this.details = details;
    this.status = init.status ?? 0;
    this.reason = init.reason ?? "";
    this.method = init.method ?? "";
    this.path = init.path ?? "";
    this.attempts = init.attempts ?? 0;
    this.transient = init.transient ?? false;
    if (init.retryAfterMs !== undefined) this.retryAfterMs = init.retryAfterMs;
  }

  /**
   * A copy whose `msg` ends with `suffix` (e.g. `" at items[3]"`), all else kept.
   * @param suffix appended to `msg` as is
   * @returns the new error
   */
  withSuffix(suffix: string): KubeError {
    const e = new KubeError(this.kind, `${this.msg}${suffix}`, this);
    e.stack = this.stack;
    return e;
  }
}

/**
 * Whether `err` is a failed call answered with HTTP 404 (the object or resource does not exist).
 * @param err any thrown value
 * @returns true for a {@link KubeError} of kind `"request"` with status 404
 * @example isNotFound(new Error("x")) // false
 */
export function isNotFound(err: unknown): boolean {
  return err instanceof KubeError && err.kind === "request" && err.status === 404;
}

/**
 * Whether `err` is a failed call answered with HTTP 409 (already exists, or a stale
 * `resourceVersion`).
 * @param err any thrown value
 * @returns true for a {@link KubeError} of kind `"request"` with status 409
 * @example isConflict(new Error("x")) // false
 */
export function isConflict(err: unknown): boolean {
  return err instanceof KubeError && err.kind === "request" && err.status === 409;
}

/**
 * Whether `err` says a write's `metadata.uid` did not match the stored object: the object of
 * that name was deleted and recreated. A merge patch carrying `metadata.uid` is answered
 * (kube-apiserver v1.32, checked in tests/realapi/status_publish_test.ts) with 422 Invalid
 * `<Kind> "<name>" is invalid: metadata.uid: Invalid value: "<uid>": field is immutable` and
 * nothing is written; a delete whose UID precondition (`DeleteOptions.preconditions`) fails
 * gets 409 Conflict `Precondition failed: UID in precondition: …`. Both count.
 * @param err any thrown value
 * @returns true for either answer
 * @example isUidMismatch(new KubeError("request", "x", { status: 422, details: 'Pod "p" is invalid: metadata.uid: Invalid value: "u": field is immutable' })) // true
 */
export function isUidMismatch(err: unknown): boolean {
  if (!(err instanceof KubeError) || err.kind !== "request") return false;
  if (err.status === 409) return /UID in precondition/.test(err.details);
  return err.status === 422 && /metadata\.uid: Invalid value/.test(err.details);
}

/**
 * Whether an HTTP status is worth trying again later: 401 (the token may be rotating), 429 and
 * every 5xx. Every other status is final.
 * @param status an HTTP status
 * @returns true for 401, 429 and ≥ 500
 * @example isTransientStatus(503) // true
 */
export function isTransientStatus(status: number): boolean {
  return status === 401 || status === 429 || status >= 500;
}

/** What a failed call is about: method, path (with query) and requests sent. */
export interface CallInfo {
  /** HTTP method, e.g. `"GET"`. */
  method: string;
  /** Request path without the server, with its query. */
  path: string;
  /** Requests sent, retries included. */
  attempts: number;
}

/**
 * The error of a call that got no HTTP answer.
 * @param call the call
 * @param reason `"Timeout"`, `"ConnectionFailed"`, `"Aborted"` or `"TlsVerification"`
 *   (the only final one)
 * @param message what happened, e.g. the transport error
 * @returns a `"request"` {@link KubeError} with status 0
 */
export function noAnswerError(
  call: CallInfo,
  reason: "Timeout" | "ConnectionFailed" | "Aborted" | "TlsVerification" | "ResponseTooLarge",
  message: string,
): KubeError {
  const what = reason === "Timeout"
    ? "timeout"
    : reason === "Aborted"
    ? "aborted"
    : reason === "TlsVerification"
    ? "TLS verification error"
    : reason === "ResponseTooLarge"
    ? "an answer over the body cap"
    : "connection error";
  return requestError(call, what, {
    status: 0,
    reason,
    details: message,
    transient: reason !== "TlsVerification" && reason !== "ResponseTooLarge",
  });
}

/**
 * The error of a call answered with a non-2xx status: `reason` and `details` from the API
 * `Status` body (a body that is not JSON, e.g. from a proxy, gives its first 256 characters).
 * @param call the call
 * @param res the answer's status and body
 * @returns a `"request"` {@link KubeError}, transient per {@link isTransientStatus}
 */
export function httpStatusError(call: CallInfo, res: { status: number; body: string }): KubeError {
  const st = apiStatusOf(res.body);
  return requestError(call, `${res.status} ${st.reason}`.trimEnd(), {
    status: res.status,
    reason: st.reason,
    details: st.message,
    transient: isTransientStatus(res.status),
  });
}

function requestError(call: CallInfo, what: string, init: KubeErrorInit): KubeError {
  const tries = call.attempts > 1 ? ` after ${call.attempts} attempts` : "";
  return new KubeError(
    "request",
    `Kubernetes API ${call.method} ${call.path} failed with ${what}${tries}`,
    { ...init, method: call.method, path: call.path, attempts: call.attempts },
  );
}

/**
 * The `Status` reason and message of an error answer's body, tolerating non-JSON bodies.
 * @param body the answer's body
 * @returns `reason` (`""` when absent) and `message` (the body's start when not JSON)
 * @example apiStatusOf('{"reason":"NotFound","message":"pods \\"p\\" not found"}').reason // "NotFound"
 */
export function apiStatusOf(body: string): { reason: string; message: string } {
  try {
    const s = JSON.parse(body) as { reason?: unknown; message?: unknown };
    if (s && typeof s === "object") {
      return {
        reason: typeof s.reason === "string" ? s.reason : "",
        message: typeof s.message === "string" ? s.message : "",
      };
    }
  } catch {
    // not JSON: a proxy or load balancer answered
  }
  return { reason: "", message: body.slice(0, 256).trim() };
}

const TLS_VERIFY_FAILURE =
  /invalid peer certificate|BadCertificate|UnknownCA|CertificateExpired|CertificateUnknown|CertificateRequired|UnsupportedCertVersion|unable to verify the first certificate|unable to get (local )?issuer certificate|self[- ]signed certificate|certificate has expired|Hostname\/IP does not match/;

/**
 * Whether a call failed because the answer's body was over the transport's cap
 * (`"ResponseTooLarge"`, final for that request: a lister asks for smaller pages).
 * @param err any error
 * @returns true for that {@link KubeError}
 */
export function isResponseTooLarge(err: unknown): boolean {
  return err instanceof KubeError && err.kind === "request" && err.reason === "ResponseTooLarge";
}

/**
 * Whether a transport error's text says the server's certificate failed verification (rustls'
 * wording), a final failure unlike other connection errors.
 * @param text the transport error's message
 * @returns true for certificate verification failures
 * @example isTlsVerifyFailure("invalid peer certificate: UnknownIssuer") // true
 */
export function isTlsVerifyFailure(text: string): boolean {
  return TLS_VERIFY_FAILURE.test(text);
}

/**
 * A `Retry-After` header (delta-seconds or HTTP-date, RFC 9110 §10.2.3) in ms.
 * @param value the header's value, or null when absent
 * @returns the delay in ms (≥ 0), or undefined when absent or unparsable
 * @example retryAfterMs("2") // 2000
 */
export function retryAfterMs(value: string | null): number | undefined {
  if (value === null) return undefined;
  if (/^\s*\d+\s*$/.test(value)) return Number(value) * 1000;
  const t = Date.parse(value);
  return Number.isNaN(t) ? undefined : Math.max(0, t - Date.now());
}
