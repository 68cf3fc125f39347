/**
 * Pruning old tombstones on the normal path. DEL leaves a tombstone per attachment (≈ 1 KiB)
 * so a repeated DEL is a no-op; CNI 1.1 GC removes them, but runtimes that never call GC
 * (containerd 1.6) would let them pile up forever. So DEL, at most once per
 * {@link PRUNE_INTERVAL_MS} per node (a marker file's mtime says when it last ran), removes
 * tombstones deleted more than {@link TOMBSTONE_MAX_AGE_MS} ago — at most
 * {@link PRUNE_MAX_REMOVALS} files and {@link PRUNE_BUDGET_MS} of work per call; the next
 * due DEL continues. Live records are never touched, however old.
 *
 * @module
 */

import { syncDir } from "../../fs/atomic.ts";
import type { AttachmentCache } from "./cache.ts";

/** Age (since `deletedAt`) after which a tombstone is pruned, ms (24 h). */
export const TOMBSTONE_MAX_AGE_MS = 24 * 3600_000;
/** Least time between two prunes on a node, ms (10 min). */
export const PRUNE_INTERVAL_MS = 10 * 60_000;
/** Most tombstones one prune removes. */
export const PRUNE_MAX_REMOVALS = 100;
/** Most time one prune spends scanning, ms. */
export const PRUNE_BUDGET_MS = 50;
/** The marker file in the cache directory whose mtime is the last prune (hidden: not a record). */
export const PRUNE_MARKER = ".tombstones-pruned";

/** What one prune did. */
export interface PruneReport {
  /** Tombstones removed. */
  removed: number;
  /** Record files looked at. */
  scanned: number;
  /** False when the count or time bound stopped the scan early. */
  complete: boolean;
}

/** Options of {@link pruneTombstones}; every bound defaults to the constants above. */
export interface PruneOptions {
  /** The current time (tests). */
  now?: Date;
  /** See {@link TOMBSTONE_MAX_AGE_MS}. */
  maxAgeMs?: number;
  /** See {@link PRUNE_MAX_REMOVALS}. */
  maxRemovals?: number;
  /** See {@link PRUNE_BUDGET_MS}. */
  budgetMs?: number;
}

/**
 * Prunes when due: when the marker file is missing or older than `intervalMs`, it is touched
 * (mtime = now) and {@link pruneTombstones} runs.
 * @param cache the attachment cache.
 * @param options the prune's options plus `intervalMs` (default {@link PRUNE_INTERVAL_MS}).
 * @returns the report, or undefined when not due (or the cache directory does not exist).
 * @throws {Deno.errors.PermissionDenied} and other I/O errors of the marker or the records.
 */
export async function pruneTombstonesIfDue(
  cache: AttachmentCache,
  options: PruneOptions & { intervalMs?: number } = {},
): Promise<PruneReport | undefined> {
  const now = options.now ?? new Date();
  const marker = `${cache.dir}/${PRUNE_MARKER}`;
  try {
    const mtime = (await Deno.stat(marker)).mtime;
    if (mtime && now.getTime() - mtime.getTime() < (options.intervalMs ?? PRUNE_INTERVAL_MS)) {
      return undefined;
    }
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
  try {
    await Deno.writeTextFile(marker, `${now.toISOString()}\n`, { mode: 0o600 });
    await Deno.utime(marker, now, now);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return undefined; // no cache directory yet
    throw e;
  }
  return await pruneTombstones(cache, { ...options, now });
}

/**
 * Removes tombstones (records with `deletedAt`) deleted more than `maxAgeMs` ago, within the
 * count and time bounds. A file's mtime is checked first (a tombstone is written when it is
 * deleted, so a younger file is skipped unread); damaged records and live records are left.
 * @param cache the attachment cache.
 * @param options bounds and the current time.
 * @returns what was done.
 * @throws {CniError} code 5 when the directory cannot be read; other I/O errors of removal.
 */
export async function pruneTombstones(
  cache: AttachmentCache,
  options: PruneOptions = {},
): Promise<PruneReport> {
  const now = (options.now ?? new Date()).getTime();
  const maxAge = options.maxAgeMs ?? TOMBSTONE_MAX_AGE_MS;
  const maxRemovals = options.maxRemovals ?? PRUNE_MAX_REMOVALS;
  const deadline = performance.now() + (options.budgetMs ?? PRUNE_BUDGET_MS);
  const report: PruneReport = { removed: 0, scanned: 0, complete: true };
  for (const file of await cache.files()) {
    if (report.removed >= maxRemovals || performance.now() > deadline) {
      report.complete = false;
      break;
    }
    report.scanned++;
    try {
      const mtime = (await Deno.stat(file.path)).mtime;
      if (mtime && now - mtime.getTime() < maxAge) continue;
      const record = JSON.parse(await Deno.readTextFile(file.path)) as { deletedAt?: unknown };
      if (typeof record?.deletedAt !== "string") continue;
      const deletedAt = Date.parse(record.deletedAt);
      if (!(now - deletedAt >= maxAge)) continue;
      await Deno.remove(file.path);
      report.removed++;
    } catch (e) {
      if (e instanceof SyntaxError || e instanceof Deno.errors.NotFound) continue;
      throw e;
    }
  }
  if (report.removed > 0) await syncDir(cache.dir);
  return report;
}
