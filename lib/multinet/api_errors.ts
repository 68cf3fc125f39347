/**
 * The one mapping of Kubernetes failures (lib/k8s `KubeError`) to CNI error codes (CNI SPEC
 * "Error"). lib/k8s knows nothing of CNI; every place of lib/multinet and lib/cli that lets an
 * API failure reach a CNI result goes through {@link cniErrorFromKube}.
 *
 * @module
 */

import { CniError, CniErrorCode } from "../cni/errors.ts";
import { KubeError } from "../k8s/errors.ts";

/**
 * The CNI code of a {@link KubeError}:
 * - a failed call (`"request"`): 11 (try again later) when `transient` — connection errors,
 *   timeouts, aborts, 401 (the token may be rotating), 429 and 5xx once the client's retries
 *   are spent; 7 (invalid config) otherwise — 403, 404 and every other 4xx, TLS verification
 *   failures;
 * - a malformed answer (`"decoding"`): 6;
 * - an unusable kubeconfig, TLS material or object name (`"config"`): 7;
 * - a credential that cannot be obtained (`"credentials"`: token file, exec plugin): 5.
 *
 * @param e the Kubernetes failure
 * @returns the CNI code
 * @example kubeErrorCode(new KubeError("request", "x", { status: 503, transient: true })) // 11
 */
export function kubeErrorCode(e: KubeError): number {
  switch (e.kind) {
    case "request":
      return e.transient ? CniErrorCode.TryAgainLater : CniErrorCode.InvalidNetworkConfig;
    case "decoding":
      return CniErrorCode.DecodingFailure;
    case "config":
      return CniErrorCode.InvalidNetworkConfig;
    case "credentials":
      return CniErrorCode.IoFailure;
  }
}

/**
 * Any thrown value as a {@link CniError}: a {@link KubeError} gets its code from
 * {@link kubeErrorCode} (same `msg` and `details`); anything else is returned unchanged, so
 * it can wrap every call into lib/k8s: `catch (e) { throw cniErrorFromKube(e); }`.
 *
 * @param e any thrown value
 * @returns a CniError for a KubeError, else `e` itself
 * @example
 * ```ts
 * cniErrorFromKube(new KubeError("decoding", "Invalid Pod object")).code; // 6
 * ```
 */
export function cniErrorFromKube(e: unknown): unknown {
  if (!(e instanceof KubeError)) return e;
  const err = new CniError(kubeErrorCode(e), e.msg, e.details);
  err.stack = e.stack;
  // The HTTP facts (status) stay readable: the async publisher gives up on permanent 4xx.
  err.cause = e;
  return err;
}

/**
 * Runs `fn` and rethrows its Kubernetes failure as a {@link CniError} ({@link cniErrorFromKube}).
 *
 * @param fn a call into lib/k8s
 * @returns what `fn` resolves to
 * @throws {CniError} for a KubeError (code per {@link kubeErrorCode}); anything else as thrown
 */
export async function withCniErrors<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    throw cniErrorFromKube(e);
  }
}
