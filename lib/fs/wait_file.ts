/**
 * Waiting for a file another process writes: `manifold daemon` started by the DaemonSet before
 * the installer beside it has written `00-manifold.conflist` (on a fresh node the installer
 * first waits for the cluster network's config and copies the plugin). Exiting instead would
 * cost a container restart with the kubelet's back-off (10 s, 20 s, 40 s …) each time.
 *
 * @module
 */

import { sleepUnlessAborted } from "../util/timer.ts";

/** Options of {@link waitForFile}. */
export interface WaitForFileOptions {
  /** Stops the wait (SIGTERM). */
  signal: AbortSignal;
  /** Polling period, ms; default 500. */
  intervalMs?: number;
  /** Called once when the file is missing at the first look (to log that it waits). */
  onWait?: () => void;
}

/**
 * Resolves once `path` exists (any kind of file; `stat` follows links), or when `signal`
 * aborts. Polls: the file appears by an atomic rename in a host directory, where polling is
 * what works across mounts.
 *
 * @param path the file to wait for
 * @param opts the stop signal, the period and the first-miss callback
 * @returns true when the file exists, false when stopped before it appeared
 * @throws Deno errors of `stat` other than `NotFound` (e.g. `PermissionDenied`)
 */
export async function waitForFile(path: string, opts: WaitForFileOptions): Promise<boolean> {
  let told = false;
  while (!opts.signal.aborted) {
    try {
      await Deno.stat(path);
      return true;
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    }
    if (!told) {
      told = true;
      opts.onWait?.();
    }
    await sleepUnlessAborted(opts.intervalMs ?? 500, opts.signal);
  }
  return false;
}
