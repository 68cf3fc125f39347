/**
 * The plugin in the host's CNI bin dir: the compiled binary copied atomically
 * (lib/install/binary.ts), or the source variant's bundle + launcher
 * (lib/install/source_install.ts), and the old bundles pruned once nothing names or runs them
 * (lib/install/bundle_prune.ts), with the log lines an operator reads.
 *
 * @module
 */

import type { Logger } from "../log/mod.ts";
import { errorText } from "../util/text.ts";
import { installBinary } from "./binary.ts";
import { BUNDLES_DIR, type BundleSource } from "./bundle.ts";
import { pruneBundles } from "./bundle_prune.ts";
import { installSourceVariant } from "./source_install.ts";

/** Where the plugin goes. */
export interface PluginPlacerOptions {
  /** Host path of the CNI bin dir, no trailing `/`. */
  cniBinDirHost: string;
  /** The plugin's file name in it (`manifold`). */
  binaryName: string;
  /** How long an old bundle must stay unnamed and unused before it is removed, ms. */
  pruneGraceMs: number;
  /** Maps a host path to the installer's view (`--host-root`). */
  host(p: string): string;
  logger: Logger;
}

/** Installs the plugin once, then prunes old bundles on every poll. */
export class PluginPlacer {
  #o: PluginPlacerOptions;
  /** When each old bundle was first seen unused; undefined until a plugin was installed. */
  #pruneSeen?: Map<string, number>;
  /** A prune failure was logged (once until one succeeds). */
  #pruneWarned = false;

  /** @param options see {@link PluginPlacerOptions} */
  constructor(options: PluginPlacerOptions) {
    this.#o = options;
  }

  /**
   * Copies `binary` (installer view) to the CNI bin dir atomically; bundles a source variant
   * left become prunable (a node moved to the compiled variant).
   * @throws Deno errors when the binary cannot be read or the bin dir written
   */
  async installBinary(binary: string): Promise<void> {
    const { cniBinDirHost, binaryName, host, logger } = this.#o;
    const dest = host(`${cniBinDirHost}/${binaryName}`);
    const outcome = await installBinary(binary, dest);
    logger.info(
      outcome === "installed" ? "installed the plugin binary" : "plugin binary up to date",
      { path: dest },
    );
    this.#pruneSeen = new Map();
  }

  /**
   * Puts the source variant's bundle and then its launcher in place (lib/install/source_install.ts).
   * @throws {Error} when the bundle's source or the bin dir is refused (owner, mode, links)
   */
  async installBundle(bundle: BundleSource): Promise<void> {
    const { cniBinDirHost, binaryName, host, logger } = this.#o;
    const began = performance.now();
    const r = await installSourceVariant(bundle, {
      cniBinDir: host(cniBinDirHost),
      cniBinDirHost,
      binaryName,
    });
    logger.info(
      r.bundle === "installed" ? "installed the plugin bundle" : "plugin bundle present",
      {
        bundle: r.bundleHost,
        launcher: r.launcher,
        files: r.files,
        bytes: r.bytes,
        ms: Math.round(performance.now() - began),
      },
    );
    this.#pruneSeen = new Map();
  }

  /**
   * Removes old bundles nothing names or runs any more (after the grace); a failure is a
   * warning, logged once until a prune succeeds. Never throws; nothing before an install.
   */
  async prune(): Promise<void> {
    if (!this.#pruneSeen) return;
    const { cniBinDirHost, host, logger } = this.#o;
    try {
      const r = await pruneBundles({
        bundlesDir: host(`${cniBinDirHost}/${BUNDLES_DIR}`),
        bundlesDirHost: `${cniBinDirHost}/${BUNDLES_DIR}`,
        cniBinDir: host(cniBinDirHost),
        graceMs: this.#o.pruneGraceMs,
        firstSeen: this.#pruneSeen,
      });
      if (r.removed.length) logger.info("removed old plugin bundles", { removed: r.removed });
      this.#pruneWarned = false;
    } catch (err) {
      if (!this.#pruneWarned) {
        logger.warn("cannot prune old plugin bundles", { error: errorText(err) });
        this.#pruneWarned = true;
      }
    }
  }
}
