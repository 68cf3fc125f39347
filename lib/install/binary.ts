/**
 * Putting the plugin binary into the host's CNI bin directory: copied atomically (temp
 * file in the same directory + fsync + rename), never written in place, so a node that is
 * running `manifold` for a pod at that moment neither fails with "text file busy" (Multus
 * #1221) nor executes a half-copied file.
 *
 * @module
 */

import { copyFileAtomic, sameContent } from "../fs/atomic.ts";

/** What {@link installBinary} did. */
export type BinaryInstallOutcome = "installed" | "unchanged";

/**
 * Copies `source` to `dest` (mode 0755) unless `dest` already holds the same bytes.
 *
 * @param source the binary to install (installer view, e.g. `/usr/local/bin/manifold`)
 * @param dest the target (installer view, e.g. `/host/opt/cni/bin/manifold`); its
 *   directory is created (0755) when missing
 * @returns `"installed"` when copied, `"unchanged"` when `dest` was already identical
 * @throws Deno errors (`NotFound` for a missing source, `PermissionDenied`)
 */
export async function installBinary(source: string, dest: string): Promise<BinaryInstallOutcome> {
  if (await sameContent(source, dest)) return "unchanged";
  const dir = dest.slice(0, dest.lastIndexOf("/")) || "/";
  await Deno.mkdir(dir, { recursive: true, mode: 0o755 });
  await copyFileAtomic(source, dest, { mode: 0o755 });
  return "installed";
}
