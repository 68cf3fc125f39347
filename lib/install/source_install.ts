/**
 * Installing the source variant on a node: the bundle (deno + source tree + npm cache,
 * lib/install/bundle.ts) into `<cni-bin-dir>/.manifold/<hash>/`, then `<cni-bin-dir>/manifold`
 * atomically replaced by a launcher naming that bundle by its host path
 * (lib/install/launcher.ts). Order matters for a runtime that execs `manifold` at any moment:
 * the new bundle is complete (renamed into place, fsynced) before any launcher names it, and
 * the old one stays until nothing names or runs it (lib/install/bundle_prune.ts).
 *
 * @module
 */

import { readTextIfExists, writeFileAtomic } from "../fs/atomic.ts";
import { BUNDLES_DIR, type BundleSource, installBundle } from "./bundle.ts";
import { isPlainExecutable } from "./binary.ts";
import { assertOwnedDir } from "./owned_dir.ts";
import { bundleDirHost, renderLauncher } from "./launcher.ts";

/** V8's code cache in a DENO_DIR: the SQLite file Deno writes and its journal files. */
const CODE_CACHE_FILES = ["v8_code_cache_v2", "v8_code_cache_v2-wal", "v8_code_cache_v2-shm"];

/**
 * Whether the launcher may load V8's code cache from the bundle's `deno-dir` unchecked: the
 * directory is the bundle owner's and writable by it alone, and each cache file already there
 * (a bundle found present has them from earlier calls) is a plain file of that owner's (or
 * root's, which writes it on a runtime's call) that group and others cannot write — what
 * scripts/manifold checks on every call when it is not vouched for.
 *
 * @param bundleDir the bundle's directory (the installer's view)
 * @returns true when it holds; false on any doubt (a missing deno-dir, a link, an error)
 */
async function codeCacheTrusted(bundleDir: string): Promise<boolean> {
  try {
    const uid = (await Deno.lstat(bundleDir)).uid!;
    await assertOwnedDir(`${bundleDir}/deno-dir`, uid);
    for (const name of CODE_CACHE_FILES) {
      let info: Deno.FileInfo;
      try {
        info = await Deno.lstat(`${bundleDir}/deno-dir/${name}`);
      } catch (e) {
        if (e instanceof Deno.errors.NotFound) continue;
        throw e;
      }
      if (!info.isFile || (info.uid !== uid && info.uid !== 0)) return false;
      if (((info.mode ?? 0o777) & 0o022) !== 0) return false;
    }
    return true;
  } catch {
    return false;
  }
}

/** Where {@link installSourceVariant} puts things. */
export interface SourceInstallTarget {
  /** The CNI bin dir, installer view (e.g. `/host/opt/cni/bin`). */
  cniBinDir: string;
  /** The same directory as the host sees it (e.g. `/opt/cni/bin`): what the launcher names. */
  cniBinDirHost: string;
  /** The launcher's file name (the plugin `type`), e.g. `manifold`. */
  binaryName: string;
  /**
   * Runs between the bundle being in place and the launcher being checked (tests stand in a
   * concurrent pruner here).
   */
  beforeLauncher?: () => Promise<void>;
}

/** Attempts at a bundle that vanishes before the launcher names it (see below). */
const ATTEMPTS = 3;

/** What {@link installSourceVariant} did. */
export interface SourceInstallResult {
  /** The bundle's host path. */
  bundleHost: string;
  /** Whether the bundle was copied now (`installed`) or already there (`present`). */
  bundle: "installed" | "present";
  /** Whether the launcher was replaced (`installed`) or already named this bundle (`unchanged`). */
  launcher: "installed" | "unchanged";
  /** Files in the bundle. */
  files: number;
  /** Bytes in the bundle. */
  bytes: number;
}

/**
 * Installs the bundle of `src` and points the launcher at it (see the module documentation).
 *
 * @param src the source tree and the runtime (installer view)
 * @param target the CNI bin dir (both views) and the launcher's name
 * @returns the bundle's host path and what was written
 * @throws Error from {@link installBundle} (missing entries, an untrusted directory) or
 *   {@link bundleDirHost} (a host path the launcher cannot name), or when the bundle vanished
 *   three times before the launcher named it; Deno errors of the writes
 */
export async function installSourceVariant(
  src: BundleSource,
  target: SourceInstallTarget,
): Promise<SourceInstallResult> {
  const binDir = target.cniBinDir.replace(/\/+$/, "");
  // Checked before anything is copied: a path the launcher cannot name fails early.
  bundleDirHost(target.cniBinDirHost, "0".repeat(32));
  const launcherPath = `${binDir}/${target.binaryName}`;
  let launcher: SourceInstallResult["launcher"] = "unchanged";
  for (let attempt = 1;; attempt++) {
    const b = await installBundle(src, `${binDir}/${BUNDLES_DIR}`);
    const bundleHost = bundleDirHost(target.cniBinDirHost, b.name);
    // The code cache's directory, checked here once rather than by the launcher every call.
    const codeCacheVouched = await codeCacheTrusted(b.dir);
    const text = renderLauncher(bundleHost, { codeCacheVouched });
    await target.beforeLauncher?.();
    const current = await readTextIfExists(launcherPath).catch(() => undefined);
    // The same text with other mode bits (not executable: every CNI call fails) or as a link
    // is replaced too.
    if (current !== text || !(await isPlainExecutable(launcherPath))) {
      await writeFileAtomic(launcherPath, text, { mode: 0o755 });
      launcher = "installed";
    }
    // A bundle found "present" was unnamed until now: another installer's pruner (an old pod
    // still stopping, after a rollback to this image) may have renamed it away meanwhile, and
    // a launcher naming a missing bundle fails every CNI call. Now that the launcher names it
    // no pruner takes it any more: it is copied again if it is gone.
    if (await bundleComplete(b.dir)) {
      return { bundleHost, bundle: b.outcome, launcher, files: b.files, bytes: b.bytes };
    }
    if (attempt >= ATTEMPTS) {
      throw new Error(
        `the bundle ${bundleHost} vanished ${ATTEMPTS} times before the launcher named it: ` +
          `is something else removing directories in ${binDir}/${BUNDLES_DIR}?`,
      );
    }
  }
}

/** Whether the bundle directory is (still) there with its launcher script. */
async function bundleComplete(dir: string): Promise<boolean> {
  try {
    return (await Deno.lstat(`${dir}/scripts/manifold`)).isFile;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return false;
    throw e;
  }
}
