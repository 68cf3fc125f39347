/**
 * Small async helpers for tests and scripts: does a path exist, and wait until a condition
 * holds (polling, with a deadline).
 *
 * @module
 */

/** True when `path` exists (any file type). */
export async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch {
    return false;
  }
}

/**
 * Polls `cond` every `everyMs` until it holds.
 * @throws Error "timed out waiting for <what>" after `ms` milliseconds.
 */
export async function until(
  cond: () => boolean | Promise<boolean>,
  what: string,
  ms = 5000,
  everyMs = 10,
): Promise<void> {
  const end = Date.now() + ms;
  while (!await cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
