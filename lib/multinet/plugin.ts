/**
 * The CNI handlers of the `manifold` plugin: each parses Manifold's configuration,
 * sets up logging and dependencies, and runs its command.
 *
 * Everything is imported on demand: the process handles one command, so it loads that
 * command's module and the dependencies it builds — never the other commands, and nothing
 * at all for VERSION (which the dispatcher answers alone).
 *
 * @module
 */

import type { SkelContext, SkelHandlers } from "../cni/skel.ts";
import type { ManifoldDeps } from "./deps.ts";
import { mark } from "../log/trace.ts";

/** Builds dependencies for a call; swapped in tests. */
export type DepsFactory = (ctx: SkelContext) => Promise<ManifoldDeps>;

/**
 * The real dependency factory: config from stdin, environment from the process.
 * @throws {CniError} 7 for an invalid configuration or kubeconfig.
 */
export function realDeps(processEnv: Record<string, string>): DepsFactory {
  return async (ctx) => {
    if (ctx.env.command === "ADD" && usesApi(ctx.config, processEnv) && !processEnv.NOWARM) {
      // The first TLS handshake's one-time cost, on a worker thread while we start up.
      (await import("../k8s/tls_warm.ts")).warmTls();
    }
    const [{ parseManifoldConf }, { createLogger }, { buildDeps }] = await Promise.all([
      import("./config.ts"),
      import("../log/mod.ts"),
      import("./wiring.ts"),
    ]);
    const conf = parseManifoldConf(ctx.config);
    mark("configParsed");
    const logger = createLogger({
      level: conf.logLevel,
      file: conf.logFile,
      toStderr: conf.logToStderr,
    }).with({ plugin: "manifold" });
    const deps = await buildDeps(conf, ctx.env, logger, { processEnv });
    mark("depsBuilt");
    return deps;
  };
}

/**
 * True when an ADD with this (raw, not yet validated) config will talk to the Kubernetes API:
 * no standalone `nadDir`, and a kubeconfig or the in-cluster service environment.
 */
function usesApi(config: Record<string, unknown>, env: Record<string, string>): boolean {
  if (typeof config.nadDir === "string" && config.nadDir !== "") return false;
  return (typeof config.kubeconfig === "string" && config.kubeconfig !== "") ||
    !!env.KUBERNETES_SERVICE_HOST;
}

/**
 * The skel handlers of Manifold (ADD, DEL, CHECK, GC, STATUS; VERSION is the dispatcher's).
 * Each loads its command module while the dependencies are built.
 * @example
 * ```ts
 * const code = await dispatch(manifoldHandlers(realDeps(Deno.env.toObject())), denoSkelIO());
 * ```
 */
export function manifoldHandlers(makeDeps: DepsFactory): SkelHandlers {
  return {
    add: async (ctx) => {
      const [{ cmdAdd }, deps] = await Promise.all([import("./cmd_add.ts"), makeDeps(ctx)]);
      return await cmdAdd(deps);
    },
    del: async (ctx) => {
      const [{ cmdDel }, deps] = await Promise.all([import("./cmd_del.ts"), makeDeps(ctx)]);
      await cmdDel(deps);
    },
    check: async (ctx) => {
      const [{ cmdCheck }, deps] = await Promise.all([import("./cmd_check.ts"), makeDeps(ctx)]);
      await cmdCheck(deps);
    },
    gc: async (ctx) => {
      const [{ cmdGc }, deps] = await Promise.all([import("./cmd_gc.ts"), makeDeps(ctx)]);
      await cmdGc(deps, ctx.config);
    },
    status: async (ctx) => {
      const [{ cmdStatus }, deps] = await Promise.all([import("./cmd_gc.ts"), makeDeps(ctx)]);
      await cmdStatus(deps);
    },
  };
}
