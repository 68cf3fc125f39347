/**
 * Crash-consistency test hook: when the environment variable {@link CRASHPOINT_ENV} names a
 * point (`<point>` or `<point>#<n>` for its n-th occurrence, counting from 1), the process
 * SIGKILLs itself when it reaches that point — exactly as if the runtime (or the OOM killer)
 * had killed it there. Tests use it to prove that a DEL after a crash at every step of ADD and
 * DEL leaks nothing and finds a readable cache. Without the variable it costs one lookup per
 * process. Never set it on a node.
 *
 * Points (in the order an ADD/DEL passes them):
 * - `add:before-intent` — every attachment is planned, the intent record not yet written;
 * - `add:before-delegate` — the intent record is on disk, a delegate ADD not started;
 * - `add:after-delegate` — a delegate ADD returned, its result not yet cached;
 * - `add:before-final-cache` — all attached and verified, final record not yet written;
 * - `add:before-patch` — the final record's write started (not yet on disk), network-status
 *   not yet published (the two run at once);
 * - `add:after-patch` — final record written and network-status published, the result not yet
 *   written to stdout;
 * - `del:before-delegate` — before each delegate DEL (also during an ADD's rollback);
 * - `del:after-delegate` — after each delegate DEL returned;
 * - `del:before-tombstone` — every delegate DEL done, the tombstone not yet written;
 * - `cache:after-temp-write` — a cache temp file is written and fsynced, not yet renamed.
 *
 * @module
 */

/** The environment variable naming the crash point (tests only). */
export const CRASHPOINT_ENV = "MANIFOLD_TEST_CRASHPOINT";

/** Every crash point, for tests that pick one at random. */
export const CRASHPOINTS = [
  "add:before-intent",
  "add:before-delegate",
  "add:after-delegate",
  "add:before-final-cache",
  "add:before-patch",
  "add:after-patch",
  "del:before-delegate",
  "del:after-delegate",
  "del:before-tombstone",
  "cache:after-temp-write",
] as const;

/** One of {@link CRASHPOINTS}. */
export type Crashpoint = typeof CRASHPOINTS[number];

let target: { point: string; nth: number } | undefined | null = null;
const seen = new Map<string, number>();

/**
 * Kills the process with SIGKILL when `point` is the configured crash point (and this is its
 * configured occurrence); otherwise returns at once.
 */
export function crashpoint(point: Crashpoint): void {
  if (target === null) {
    let spec: string | undefined;
    try {
      spec = Deno.env.get(CRASHPOINT_ENV);
    } catch { /* no env permission: no hook */ }
    const m = spec ? /^([a-z:-]+)(?:#(\d+))?$/.exec(spec) : null;
    target = m ? { point: m[1], nth: Number(m[2] ?? 1) } : undefined;
  }
  if (!target || target.point !== point) return;
  const n = (seen.get(point) ?? 0) + 1;
  seen.set(point, n);
  if (n === target.nth) Deno.kill(Deno.pid, "SIGKILL");
}
