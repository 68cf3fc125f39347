/**
 * `scripts/bench.ts --installed`: the benchmarks measure Manifold as `manifold install` puts it on
 * a node (the source variant), not the development tree: this tree copied with its pack
 * (scripts/pack.ts) and the npm cache, installed by the installer's own code
 * (lib/install/source_install.ts) into a scratch CNI bin dir — the bundle
 * `<bin>/.manifold/<hash>/` with its own `deno` and `deno-dir`, and the launcher `<bin>/manifold`
 * the installer renders (its deno-dir checked, so `MANIFOLD_CODE_CACHE=vouched`). The first
 * iterations fill the bundle's V8 code cache, as a node's first pods do.
 *
 * @module
 */

import { buildPackedTree } from "./pack.ts";
import { installSourceVariant } from "../lib/install/source_install.ts";

/** A scratch installation and its launcher. */
export interface BenchInstall {
  /** `<bin>/manifold`: what a runtime executes. */
  launcher: string;
  /** Removes the scratch directory. */
  cleanup(): Promise<void>;
}

/**
 * Installs this tree (with its pack) into a scratch CNI bin dir, as `manifold install` does.
 *
 * @param npmCache the npm cache to copy into the bundle (default: this process's DENO_DIR's
 *   `npm`, else `~/.cache/deno/npm`)
 * @returns the launcher and a cleanup
 * @throws Error when the pack cannot be built or the npm cache is missing
 */
export async function installForBench(npmCache?: string): Promise<BenchInstall> {
  const scratch = await Deno.makeTempDir({ prefix: "manifold-bench-install-" });
  try {
    const tree = `${scratch}/tree`;
    await buildPackedTree(tree);
    const npm = npmCache ??
      `${Deno.env.get("DENO_DIR") ?? `${Deno.env.get("HOME") ?? "/root"}/.cache/deno`}/npm`;
    await Deno.mkdir(`${tree}/deno-dir`);
    const cp = await new Deno.Command("cp", { args: ["-r", "--", npm, `${tree}/deno-dir/npm`] })
      .output();
    if (!cp.success) throw new Error(`copying the npm cache ${npm} failed`);
    const bin = `${scratch}/bin`;
    await Deno.mkdir(bin);
    // Modes as an image holds them (scripts/image.sh): nothing writable by group or others.
    await new Deno.Command("chmod", { args: ["-R", "go-w", scratch] }).output();
    await installSourceVariant({ root: tree, deno: Deno.execPath() }, {
      cniBinDir: bin,
      cniBinDirHost: bin,
      binaryName: "manifold",
    });
    await Deno.remove(tree, { recursive: true });
    return {
      launcher: `${bin}/manifold`,
      cleanup: () => Deno.remove(scratch, { recursive: true }),
    };
  } catch (e) {
    await Deno.remove(scratch, { recursive: true }).catch(() => {});
    throw e;
  }
}
