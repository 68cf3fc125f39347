/**
 * The CNI handlers of the `manifold` plugin: each parses Manifold's configuration,
 * sets up logging and dependencies, and runs its command.
 *
 * @module
 */

import type { SkelContext, SkelHandlers } from "../cni/skel.ts";
import { createLogger } from "../log/mod.ts";
import { cmdAdd } from "./cmd_add.ts";
import { cmdCheck } from "./cmd_check.ts";
import { cmdDel } from "./cmd_del.ts";
import { cmdGc, cmdStatus } from "./cmd_gc.ts";
import { parseManifoldConf } from "./config.ts";
import type { ManifoldDeps } from "./deps.ts";
import { buildDeps } from "./wiring.ts";

/** Builds dependencies for a call; swapped in tests. */
export type DepsFactory = (ctx: SkelContext) => Promise<ManifoldDeps>;

/**
 * The real dependency factory: config from stdin, environment from the process.
 * @throws {CniError} 7 for an invalid configuration or kubeconfig.
 */
export function realDeps(processEnv: Record<string, string>): DepsFactory {
  return async (ctx) => {
    const conf = parseManifoldConf(ctx.config);
    const logger = createLogger({
      level: conf.logLevel,
      file: conf.logFile,
      toStderr: conf.logToStderr,
    }).with({ plugin: "manifold" });
    return await buildDeps(conf, ctx.env, logger, { processEnv });
  };
}

/**
 * The skel handlers of Manifold (ADD, DEL, CHECK, GC, STATUS; VERSION is the dispatcher's).
 * @example
 * ```ts
 * const code = await dispatch(manifoldHandlers(realDeps(Deno.env.toObject())), denoSkelIO());
 * ```
 */
export function manifoldHandlers(makeDeps: DepsFactory): SkelHandlers {
  return {
    add: async (ctx) => await cmdAdd(await makeDeps(ctx)),
    del: async (ctx) => await cmdDel(await makeDeps(ctx)),
    check: async (ctx) => await cmdCheck(await makeDeps(ctx)),
    gc: async (ctx) => await cmdGc(await makeDeps(ctx), ctx.config),
    status: async (ctx) => await cmdStatus(await makeDeps(ctx)),
  };
}
