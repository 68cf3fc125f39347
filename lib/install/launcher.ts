/**
 * The source variant's `<cni-bin-dir>/manifold`: a small `/bin/sh` launcher that runs the
 * bundle (lib/install/bundle.ts) it names by absolute host path. The container runtime execs
 * it for every CNI call; an upgrade replaces it atomically (lib/fs/atomic.ts: temp file +
 * rename), so a call runs the old bundle or the new one, never a mix. The launcher names its
 * bundle on a marker line (`# manifold-bundle: <dir>`), which is how the installer knows which
 * bundles are still in use ({@link launcherBundle}).
 *
 * The environment of the call cannot redirect it: `MANIFOLD_DENO` and `DENO_DIR` are set,
 * not defaulted, and every path is absolute.
 *
 * @module
 */

import { z } from "zod";
import { BUNDLE_DENO, BUNDLE_NAME, BUNDLES_DIR } from "./bundle.ts";

/** The marker line's prefix. */
const MARKER = "# manifold-bundle: ";

/** Characters a host path in the launcher may hold: no quoting or expansion needed. */
const SAFE_PATH = /^\/[A-Za-z0-9._+\-/]*$/;

/** A bundle directory as a launcher names it: `<cni-bin-dir>/.manifold/<hash>`. */
const BundleDirSchema = z.string().regex(SAFE_PATH).refine((p) => {
  const parts = p.split("/");
  return parts.length >= 3 && BUNDLE_NAME.test(parts.at(-1)!) && parts.at(-2) === BUNDLES_DIR;
}, "not <dir>/.manifold/<32 hex digits>");

/**
 * The bundle directory's host path: `<cniBinDirHost>/.manifold/<name>`.
 *
 * @param cniBinDirHost the CNI bin dir as the host sees it (`/opt/cni/bin`), not the
 *   installer's view of it
 * @param name the bundle's hash ({@link BUNDLE_NAME})
 * @returns e.g. `/opt/cni/bin/.manifold/3f0c…`
 * @throws Error when the path holds characters other than letters, digits, `._+-/` (the
 *   launcher names it unquoted) or `name` is not a bundle name
 */
export function bundleDirHost(cniBinDirHost: string, name: string): string {
  const dir = `${cniBinDirHost.replace(/\/+$/, "")}/${BUNDLES_DIR}/${name}`;
  const parsed = BundleDirSchema.safeParse(dir);
  if (!parsed.success) {
    throw new Error(
      `cannot name the bundle ${JSON.stringify(dir)} in a launcher: ${
        parsed.error.issues[0]?.message
      }`,
    );
  }
  return dir;
}

/**
 * The launcher's text for the bundle at `bundleDir` (a host path from {@link bundleDirHost}).
 *
 * @param bundleDir the bundle's absolute host path
 * @param opts `codeCacheVouched`: the installer has checked the bundle's `deno-dir` (a directory
 *   of its user's, writable by it alone, and any code cache file in it a plain file nobody else
 *   can write; lib/install/source_install.ts): the launcher then also sets
 *   `MANIFOLD_CODE_CACHE=vouched`, so scripts/manifold loads V8's code cache from it without its
 *   own check (one stat(1) less, ≈ 1.1 ms a call). Default false: the launcher sets
 *   `MANIFOLD_CODE_CACHE=1` (the caller's value is not kept) and scripts/manifold checks.
 * @returns a `/bin/sh` script: sets `MANIFOLD_DENO` and `DENO_DIR` into the bundle, keeps
 *   the kubectl-plugin name (`MANIFOLD_ARGV0`) and runs the bundle's `scripts/manifold` in the
 *   same shell (sourced, with `MANIFOLD_ROOT` naming the bundle: one exec less a call)
 * @throws Error when `bundleDir` is not a bundle path ({@link bundleDirHost})
 * @example
 * ```ts
 * renderLauncher("/opt/cni/bin/.manifold/" + "0".repeat(32)).startsWith("#!/bin/sh\n"); // true
 * ```
 */
export function renderLauncher(
  bundleDir: string,
  opts: { codeCacheVouched?: boolean } = {},
): string {
  const parsed = BundleDirSchema.safeParse(bundleDir);
  if (!parsed.success) throw new Error(`not a bundle directory: ${JSON.stringify(bundleDir)}`);
  return [
    "#!/bin/sh",
    "# Manifold (source variant), written by `manifold install`: runs deno and Manifold's source",
    "# tree from the bundle below, which the installer never changes once named. Replaced",
    "# atomically on upgrade.",
    `${MARKER}${bundleDir}`,
    `MANIFOLD_DENO=${bundleDir}/${BUNDLE_DENO}`,
    `DENO_DIR=${bundleDir}/deno-dir`,
    ...(opts.codeCacheVouched
      ? [
        "# deno-dir checked by the installer: root's (its user's), writable by it alone.",
        "MANIFOLD_CODE_CACHE=vouched",
        "export MANIFOLD_DENO DENO_DIR MANIFOLD_CODE_CACHE",
      ]
      : [
        "# deno-dir not checked: scripts/manifold checks it on every call.",
        "MANIFOLD_CODE_CACHE=1",
        "export MANIFOLD_DENO DENO_DIR MANIFOLD_CODE_CACHE",
      ]),
    "case ${0##*/} in kubectl-*) MANIFOLD_ARGV0=${0##*/}; export MANIFOLD_ARGV0 ;; esac",
    // Sourced, not exec'd: one exec of sh less a call (≈ 0.6 ms); it ends in `exec deno`.
    `MANIFOLD_ROOT=${bundleDir}`,
    `. ${bundleDir}/scripts/manifold`,
    "",
  ].join("\n");
}

/**
 * The bundle a launcher names (its marker line), or undefined when `text` is not a launcher
 * (a compiled binary, another file) or names no valid bundle path.
 *
 * @param text the file's content (untrusted: checked, never executed)
 * @returns the bundle's host path
 */
export function launcherBundle(text: string): string | undefined {
  if (!text.startsWith("#!/bin/sh\n")) return undefined;
  const line = text.split("\n").find((l) => l.startsWith(MARKER));
  if (line === undefined) return undefined;
  const parsed = BundleDirSchema.safeParse(line.slice(MARKER.length).trim());
  return parsed.success ? parsed.data : undefined;
}
