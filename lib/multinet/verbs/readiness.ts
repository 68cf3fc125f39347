/**
 * The readiness indicator file (Multus `readinessindicatorfile`, NPWG v1.3 §6.1.2):
 * when configured, pod operations wait for the cluster default network to write it.
 *
 * @module
 */

import { CniError, CniErrorCode } from "../../cni/errors.ts";

/**
 * Waits until `path` exists, polling every 100 ms for at most `timeoutMs`.
 * @param path the readiness indicator file; undefined → returns at once.
 * @param timeoutMs bound in milliseconds (0 = check once).
 * @throws {CniError} code 11 (try again later) when the file did not appear in time.
 */
export async function waitForReadiness(path: string | undefined, timeoutMs: number): Promise<void> {
  if (!path) return;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await exists(path)) return;
    if (Date.now() >= deadline) {
      throw new CniError(
        CniErrorCode.TryAgainLater,
        "the cluster default network is not ready",
        `readiness indicator file ${path} did not appear within ${timeoutMs} ms`,
      );
    }
    await new Promise((r) => setTimeout(r, Math.min(100, Math.max(1, deadline - Date.now()))));
  }
}

/** True when `path` exists (any file type). */
export async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return false;
    throw e;
  }
}
