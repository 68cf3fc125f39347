/**
 * When a failed API call is retried, and after how long (request.ts): transient failures
 * (no answer, 429, 5xx) back off exponentially, capped; a 429 or 5xx answer's `Retry-After`
 * is honoured as client-go does (`checkWait`: 429 and every 5xx). With a bound on the call,
 * answers with `Retry-After` are retried up to {@link RETRY_AFTER_RETRIES} times whatever the
 * call's retries say, and a wait longer than what is left of the bound fails the call at once
 * (transient, with the server's wish in the message). Without a bound, a `Retry-After` is
 * capped at the maximum backoff.
 *
 * @module
 */

import {
  type CallInfo,
  httpStatusError,
  KubeError,
  noAnswerError,
  retryAfterMs,
} from "./errors.ts";
import type { TransportResponse } from "./transport_types.ts";

/** Retries of answers carrying `Retry-After` within a call's bound (client-go's `maxRetries`). */
export const RETRY_AFTER_RETRIES = 10;

/** Where one call stands after a failed attempt ({@link retryDelay}). */
export interface RetryState {
  /** The answer, or undefined when none came (then `failure` says why). */
  res: TransportResponse | undefined;
  /** Why no answer came: a timeout or a connection failure, and its message. */
  failure: { reason: "Timeout" | "ConnectionFailed"; message: string } | undefined;
  /** Retries already spent on this call. */
  retriesUsed: number;
  /** Retries allowed for this call (the call's or the client's `retries`). */
  maxRetries: number;
  /** The call's bound in ms (`deadlineMs`), or undefined for none. */
  bound: number | undefined;
  /** When the bound runs out, on the `performance.now()` clock in ms; `Infinity` for none. */
  deadline: number;
  /** First backoff in ms, doubled per retry. */
  backoffMs: number;
  /** Cap in ms on one backoff; without a bound also on a server's `Retry-After`. */
  maxBackoffMs: number;
}

/**
 * The error for a call whose bound ran out (a timeout, transient).
 *
 * @param call the call (method, path, attempts)
 * @param bound the call's bound in ms
 * @returns a `"request"` {@link KubeError} with reason `"Timeout"`
 */
export function boundRanOut(call: CallInfo, bound: number | undefined): KubeError {
  return noAnswerError(call, "Timeout", `the call's bound of ${bound} ms ran out`);
}

/**
 * Whether a failed attempt is retried, and after how many ms: exponential backoff for a
 * transient failure (no answer, 429, 5xx) within the retries, a server's `Retry-After`
 * instead when it sent one (capped at `maxBackoffMs` without a bound).
 *
 * @param call the call (method, path, attempts), for the error
 * @param state the attempt's outcome and the call's retry policy
 * @returns the delay in ms before the next attempt; undefined when the failure is not retried
 *   (not transient, or retries spent) — the caller then throws the attempt's own error
 * @throws {KubeError} `"request"` (transient) when waiting would pass the call's bound: the
 *   attempt's error with `"no time left to retry"` or the server's `Retry-After` and what was
 *   left of the bound in its details
 */
export function retryDelay(call: CallInfo, state: RetryState): number | undefined {
  const { res, failure, retriesUsed, maxRetries, bound, deadline } = state;
  const transient = !res || res.status === 429 || res.status >= 500;
  // client-go's checkWait: 429 and every 5xx may carry Retry-After; with a bound on the
  // call, such answers are retried up to client-go's 10 times (the bound stops them).
  const hinted = transient && res ? retryAfterMs(res.headers.get("retry-after")) : undefined;
  const limit = hinted !== undefined && bound !== undefined
    ? Math.max(maxRetries, RETRY_AFTER_RETRIES)
    : maxRetries;
  if (transient && retriesUsed < limit) {
    const backoff = Math.min(state.backoffMs * 2 ** retriesUsed, state.maxBackoffMs);
    const delay = hinted === undefined
      ? backoff
      : bound === undefined
      ? Math.min(hinted, state.maxBackoffMs)
      : hinted;
    const left = deadline - performance.now();
    if (delay >= left) {
      // Waiting would pass the call's bound: fail now, saying what the server asked.
      if (!res) {
        throw noAnswerError(
          call,
          failure!.reason,
          `${failure!.message}; ${boundRanOut(call, bound).details}`,
        );
      }
      const e = httpStatusError(call, res);
      throw new KubeError("request", e.msg, {
        ...e,
        retryAfterMs: hinted,
        details: `${e.details ? `${e.details}; ` : ""}${
          hinted === undefined
            ? "no time left to retry"
            : `the server asked to retry after ${hinted} ms`
        } within the call's bound of ${bound} ms (${Math.max(0, Math.round(left))} ms left)`,
      });
    }
    return delay;
  }
  return undefined;
}
