/**
 * What `manifold install` puts into the CNI bin dir, decided by the operator's flags and the
 * image's own layout, never by anything a request or the cluster supplies:
 *
 * - `--binary PATH`: that file, copied (lib/install/binary.ts);
 * - a compiled Manifold (`Deno.build.standalone`, the image built with `DENORT_BIN` or the
 *   Containerfile): the running executable itself, copied;
 * - Manifold run by deno from a source tree (the image's source variant: `/usr/local/bin/deno`
 *   running `/opt/manifold/main.ts`): the bundle of that tree — the one this very module was
 *   loaded from — and of the running deno (lib/install/source_install.ts). The tree must be
 *   image-built (it holds its npm cache in `deno-dir/npm`); a development checkout has none
 *   and is refused with a hint.
 *
 * @module
 */

import type { BundleSource } from "./bundle.ts";

/** What the installer installs. */
export type PluginSource =
  | { kind: "binary"; path: string }
  | { kind: "bundle"; bundle: BundleSource };

/** What the process knows about itself (injected by tests). */
export interface RunningProcess {
  /** `Deno.build.standalone`: a compiled executable. */
  standalone: boolean;
  /** `Deno.execPath()`: the executable (the compiled binary, or deno). */
  execPath: string;
  /** The root of the source tree this code was loaded from (source runs only). */
  sourceRoot: string;
}

/** The running process as {@link RunningProcess}. */
export function runningProcess(): RunningProcess {
  return {
    standalone: Deno.build.standalone,
    execPath: Deno.execPath(),
    sourceRoot: new URL("../../", import.meta.url).pathname.replace(/\/+$/, ""),
  };
}

/**
 * The plugin source from the flags and the process (see the module documentation).
 *
 * @param flags `binary` (`--binary`) and `skip` (`--skip-binary-copy`)
 * @param proc the running process
 * @returns what to install, or undefined with `skip`
 * @throws Error (a usage error) for `--binary` with `--skip-binary-copy`, and for a source run
 *   whose tree has no `deno-dir/npm` (a development checkout: pass `--binary` or
 *   `--skip-binary-copy`)
 */
export function pluginSource(
  flags: { binary?: string; skip?: boolean },
  proc: RunningProcess,
): PluginSource | undefined {
  if (flags.skip) {
    if (flags.binary !== undefined) {
      throw new Error("--binary and --skip-binary-copy cannot be used together");
    }
    return undefined;
  }
  if (flags.binary !== undefined) return { kind: "binary", path: flags.binary };
  if (proc.standalone) return { kind: "binary", path: proc.execPath };
  const npm = `${proc.sourceRoot}/deno-dir/npm`;
  let bundled = false;
  try {
    bundled = Deno.statSync(npm).isDirectory;
  } catch { /* a checkout */ }
  if (!bundled) {
    throw new Error(
      `running from source without a bundled npm cache (${npm}, as in the image scripts/image.sh ` +
        "builds): pass --binary PATH (e.g. dist/manifold) or --skip-binary-copy",
    );
  }
  return { kind: "bundle", bundle: { root: proc.sourceRoot, deno: proc.execPath } };
}
