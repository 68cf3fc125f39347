/**
 * What the API client's transports and its retry loop agree on about HTTP itself: the body
 * cap and its error, which methods are idempotent, and when a non-idempotent request may be
 * sent again (client-go: only when nothing was sent, or when the server said to).
 *
 * @module
 */

import type { TransportResponse } from "./transport_types.ts";
import { errorText } from "../util/text.ts";

/**
 * Largest response body accepted (bytes); larger answers fail the request with
 * {@link ResponseTooLargeError} (memory safety: a list page is held whole).
 */
export const MAX_RESPONSE_BYTES = 32 * 1024 * 1024;

/**
 * An answer whose body exceeds {@link MAX_RESPONSE_BYTES}: final for that request (sending it
 * again gets the same body); a lister asks for smaller pages instead.
 */
export class ResponseTooLargeError extends Error {
  /**
   * The error for an answer over `limit`.
   * @param limit the cap that was exceeded, bytes
   */
  constructor(readonly limit: number) {
    super(`response body over ${limit} bytes`);
    this.name = "ResponseTooLargeError";
  }
}
/**
 * Methods a retry cannot make happen twice (RFC 9110 §9.2.2): request.ts retries only these
 * freely, and http1/ replays only these on a new connection when a kept-alive one closed
 * before answering (as Go's `net/http`).
 */
export const IDEMPOTENT_METHODS: ReadonlySet<string> = new Set([
  "GET",
  "HEAD",
  "PUT",
  "DELETE",
  "OPTIONS",
]);

/**
 * Whether a non-idempotent call may be sent again after this attempt (client-go: write
 * requests are retried only when nothing was sent, or when the server said to): the
 * connection was never opened, 429, or a 5xx with `Retry-After`.
 *
 * @param res the attempt's answer; undefined when none came
 * @param failure why none came (`neverSent`: see {@link neverSent})
 * @returns true when sending it again cannot make it happen twice
 */
export function mayResend(
  res: TransportResponse | undefined,
  failure: { neverSent?: boolean } | undefined,
): boolean {
  if (!res) return failure?.neverSent === true;
  if (res.status === 429) return true;
  return res.status >= 500 && res.headers.get("retry-after") !== null;
}

/**
 * Whether a transport error happened before any byte of the request was written: the TCP
 * connection or the TLS handshake failed (`http1/` marks them; `fetch` and `node:https`
 * say so in their text).
 *
 * @param err the transport's error
 * @returns true when the server provably saw nothing of the request
 */
export function neverSent(err: unknown): boolean {
  if ((err as { connectFailed?: boolean })?.connectFailed === true) return true;
  return /error trying to connect|ECONNREFUSED|Connection refused|ENOTFOUND|EHOSTUNREACH|ENETUNREACH|os error 111|os error 113|os error 101/
    .test(errorText(err));
}
