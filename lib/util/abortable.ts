/**
 * Waiting for an operation that cannot itself be cancelled (a TCP connect, a TLS handshake)
 * while honouring an AbortSignal, without leaking what it yields after the abort.
 *
 * @module
 */

/**
 * Races `p` with `signal`; on abort rejects with the signal's reason and hands a late result
 * to `discard` (e.g. to close a connection that arrived too late). A `discard` that throws —
 * closing a connection the caller already closed throws `BadResource` — is ignored: it ran
 * outside any caller, so its error would be an unhandled rejection, which ends a Deno process
 * (`manifold daemon` died so when a TLS handshake finished just after its request timed out,
 * during a burst of 200 sandboxes).
 * @param p the operation
 * @param signal aborts the wait
 * @param discard receives `p`'s value when it arrives after the abort
 * @returns `p`'s value
 * @throws the signal's reason when aborted first; `p`'s error otherwise
 * @example await abortable(Promise.resolve(1), new AbortController().signal, () => {}) // 1
 */
export function abortable<T>(
  p: Promise<T>,
  signal: AbortSignal,
  discard: (late: T) => void,
): Promise<T> {
  const late = (v: T) => {
    try {
      discard(v);
    } catch { /* already released */ }
  };
  if (signal.aborted) {
    p.then(late, () => {});
    return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => {
      p.then(late, () => {});
      reject(signal.reason);
    };
    signal.addEventListener("abort", onAbort, { once: true });
    p.then((v) => {
      signal.removeEventListener("abort", onAbort);
      if (signal.aborted) return;
      resolve(v);
    }, (e) => {
      signal.removeEventListener("abort", onAbort);
      reject(e);
    });
  });
}
