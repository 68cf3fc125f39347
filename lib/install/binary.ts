/**
 * Putting the plugin binary into the host's CNI bin directory: copied atomically (temp
 * file in the same directory + fsync + rename), never written in place, so a node that is
 * running `manifold` for a pod at that moment neither fails with "text file busy" (Multus
 * #1221) nor executes a half-copied file.
 *
 * @module
 */

import { copyFileAtomic, sameContent, tempPrefix } from "../fs/atomic.ts";
import { dropPageCache } from "./page_cache.ts";

/** Age after which a temporary copy of the binary is another installer's debris, ms. */
export const STALE_TEMP_MS = 10 * 60_000;

/** What {@link installBinary} did. */
export type BinaryInstallOutcome = "installed" | "unchanged";

/**
 * Copies `source` to `dest` (mode 0755) unless `dest` already is a regular file (not a
 * symbolic link) with mode 0755 holding the same bytes. A copy with the right bytes but
 * other permission bits (e.g. `chmod -x`, which makes every CNI call fail with "permission
 * denied"), or a link to a file with those bytes, is replaced, as Multus's unconditional copy
 * on every start would.
 *
 * @param source the binary to install (installer view, e.g. `/usr/local/bin/manifold`)
 * @param dest the target (installer view, e.g. `/host/opt/cni/bin/manifold`); its
 *   directory is created (0755) when missing
 * Temporary copies of `dest` (`.<name>.tmp-*`, lib/fs/atomic.ts) older than
 * {@link STALE_TEMP_MS} are removed first: an installer killed mid-copy (OOM, SIGKILL after
 * the grace period) leaves one the size of the binary, and a crash-looping one many.
 *
 * @returns `"installed"` when copied, `"unchanged"` when `dest` was already identical
 * @throws Deno errors (`NotFound` for a missing source, `PermissionDenied`)
 */
export async function installBinary(source: string, dest: string): Promise<BinaryInstallOutcome> {
  const dir = dest.slice(0, dest.lastIndexOf("/")) || "/";
  await removeStaleTemps(dir, dest.slice(dest.lastIndexOf("/") + 1));
  if (await isPlainExecutable(dest) && await sameContent(source, dest)) return "unchanged";
  await Deno.mkdir(dir, { recursive: true, mode: 0o755 });
  await copyFileAtomic(source, dest, { mode: 0o755 });
  // Its written pages would inflate every plugin call's resident set (page_cache.ts).
  dropPageCache(dest);
  return "installed";
}

/**
 * Whether `path` is what the installer leaves in the CNI bin dir: a regular file (not a
 * symbolic link) with mode exactly 0755.
 *
 * @param path the file (installer view)
 * @returns false when it is missing, a link, another kind of file or has other mode bits
 * @throws Deno errors other than `NotFound`
 */
export async function isPlainExecutable(path: string): Promise<boolean> {
  try {
    const st = await Deno.lstat(path);
    return st.isFile && ((st.mode ?? 0) & 0o7777) === 0o755;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return false;
    throw err;
  }
}

/** Removes `.<name>.tmp-*` files in `dir` older than {@link STALE_TEMP_MS}; best effort. */
async function removeStaleTemps(dir: string, name: string): Promise<void> {
  const prefix = tempPrefix(name);
  try {
    for await (const e of Deno.readDir(dir)) {
      if (!e.isFile || !e.name.startsWith(prefix)) continue;
      const p = `${dir}/${e.name}`;
      const mtime = (await Deno.lstat(p).catch(() => undefined))?.mtime?.getTime();
      if (mtime !== undefined && Date.now() - mtime >= STALE_TEMP_MS) {
        await Deno.remove(p).catch(() => {});
      }
    }
  } catch { /* no directory yet, or unreadable: nothing to clean */ }
}
