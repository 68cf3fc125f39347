/**
 * The dependencies of a hot-plug change (lib/daemon/hotplug/hotplug.ts): a CNI environment as the
 * sandbox's ADD had it, built from the sandbox's cache record.
 *
 * @module
 */

import { formatCniArgs, parseCniEnv } from "../../cni/env.ts";
import type { Logger } from "../../log/mod.ts";
import type { CacheRecord } from "../../multinet/cache/cache.ts";
import type { ManifoldConf } from "../../multinet/config.ts";
import { type ApiDeps, buildDeps } from "../../multinet/wiring.ts";
import { runtimeArgsOf } from "./apply.ts";

/** Options of {@link hotPlugDeps}. */
export interface HotPlugDepsOptions {
  /**
   * The daemon's environment (delegates inherit it; `CNI_PATH` is searched after `binDir`, and
   * is `binDir` when unset).
   */
  env: Record<string, string>;
  /** The API-backed sources the daemon shares. */
  api: () => Promise<ApiDeps>;
  /** Hot-plug's log. */
  logger: Logger;
}

/**
 * The dependencies of a change: a CNI environment as the sandbox's ADD had it.
 *
 * @param record the sandbox's cache record (container id, netns, ifName, runtime args)
 * @param conf the daemon's configuration for this pass
 * @param opts see {@link HotPlugDepsOptions}
 * @returns the dependencies of `buildDeps`
 * @throws {CniError} as `parseCniEnv` and `buildDeps` do
 */
export async function hotPlugDeps(
  record: CacheRecord,
  conf: ManifoldConf,
  opts: HotPlugDepsOptions,
): ReturnType<typeof buildDeps> {
  const { env, api } = opts;
  const cniEnv = parseCniEnv({
    CNI_COMMAND: "ADD",
    CNI_CONTAINERID: record.containerId,
    CNI_NETNS: record.netns,
    CNI_IFNAME: record.ifName,
    CNI_ARGS: formatCniArgs(runtimeArgsOf(record)),
    // The runtime's CNI_PATH came with the sandbox's request, not kept; the daemon's own is
    // often unset (deploy/): delegates are then found in binDir, searched first anyway.
    CNI_PATH: env.CNI_PATH || conf.binDir,
  });
  return await buildDeps(conf, cniEnv, opts.logger, { processEnv: env, api });
}
