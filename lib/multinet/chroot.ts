/**
 * The `chrootDir` setting (Multus thick's answer to "delegates must run exactly as on the
 * host"): whether it applies to this process ({@link delegateRoot}) and the kernel access
 * that looks at the sandbox through it ({@link kernelInRoot}). Delegates are executed through
 * chroot(8) by lib/cni/exec.ts and looked up inside the root by lib/cni/invoke.ts
 * `findPlugin`; Manifold's own cache and locks stay in this process's view.
 *
 * @module
 */

import { pathInRoot } from "../cni/root.ts";
import type { Logger } from "../log/mod.ts";
import { errorText } from "../util/text.ts";
import type { KernelAccess } from "./status/kernel.ts";
import type { ManifoldConf } from "./config.ts";

/**
 * The root delegates run in: `chrootDir` when it is set and names a directory, else
 * undefined (no chroot). A `chrootDir` that does not exist is ignored with a debug line: the
 * plugin config is shared by `manifold daemon` (where `/hostroot` is the host's root) and the
 * plugin the runtime runs on the host itself (the in-process path), whose own root already
 * is the host's. `"/"` is no chroot either.
 *
 * @param chrootDir the config's `chrootDir`, e.g. `"/hostroot"`.
 * @param logger for the debug line.
 * @returns the directory, or undefined.
 */
export async function delegateRoot(
  chrootDir: string | undefined,
  logger: Logger,
): Promise<string | undefined> {
  if (!chrootDir || chrootDir.replace(/\/+$/, "") === "") return undefined;
  try {
    if ((await Deno.stat(chrootDir)).isDirectory) return chrootDir;
  } catch {
    // Missing: the host itself (see above).
  }
  logger.debug("chrootDir is not a directory here: delegates run in this process's root", {
    chrootDir,
  });
  return undefined;
}

/**
 * Throws unless `chrootDir` (when set) is a directory: `manifold daemon` checks it at start,
 * so that a DaemonSet without the host-root mount fails visibly instead of running delegates
 * in the container's own file system.
 *
 * @param chrootDir the config's `chrootDir`.
 * @throws {Error} `chrootDir /hostroot is not a directory: …`.
 */
export async function assertChrootDir(chrootDir: string | undefined): Promise<void> {
  if (!chrootDir) return;
  let why = "not a directory";
  try {
    if ((await Deno.stat(chrootDir)).isDirectory) return;
  } catch (e) {
    why = e instanceof Deno.errors.NotFound ? "no such directory" : errorText(e);
  }
  throw new Error(
    `chrootDir ${chrootDir}: ${why} (mount the host's / there, or remove chrootDir)`,
  );
}

/**
 * Kernel access that opens each CNI_NETNS where a delegate chrooted into `root` opened it
 * ({@link pathInRoot}: `/var/run/netns/cni-1` → `/hostroot/run/netns/cni-1` when the host's
 * `/var/run` links to `/run`). Namespace files are bind mounts: they are reachable under the
 * root when the host's `/` is mounted recursively with `HostToContainer` propagation (later
 * namespaces appear too); `/proc/<pid>/ns/net` under the root is the host's procfs.
 *
 * @param kernel the real kernel access (lib/multinet/status/kernel.ts).
 * @param root the chroot directory.
 * @returns the same access with netns paths mapped.
 */
export function kernelInRoot(kernel: KernelAccess, root: string): KernelAccess {
  return {
    ...(kernel.prefetch ? { prefetch: () => kernel.prefetch!() } : {}),
    inspect: async (netnsPath) => kernel.inspect(await pathInRoot(root, netnsPath)),
    setDefaultRoute: async (netnsPath, request) =>
      kernel.setDefaultRoute(await pathInRoot(root, netnsPath), request),
  };
}

/**
 * The configuration with its host paths that Manifold itself checks mapped into `root`
 * ({@link pathInRoot}): `readinessindicatorfile`. The installer writes it as the host sees it
 * (the plugin the runtime runs on the host checks it there); `manifold daemon` in its container
 * sees the host below `chrootDir` only, and would otherwise wait for a file that never appears
 * there and fail every ADD (Multus thick has the daemon's own view in its config instead).
 *
 * @param conf the parsed configuration
 * @param root the chroot directory ({@link delegateRoot})
 * @returns `conf` itself when there is nothing to map, else a copy with the mapped path
 * @throws {Error} when more than 40 symbolic links are followed (a loop)
 */
export async function confInRoot(conf: ManifoldConf, root: string): Promise<ManifoldConf> {
  if (!conf.readinessindicatorfile) return conf;
  return { ...conf, readinessindicatorfile: await pathInRoot(root, conf.readinessindicatorfile) };
}
