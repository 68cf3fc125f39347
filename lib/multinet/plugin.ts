/**
 * The CNI handlers of the `manifold` plugin: each parses Manifold's configuration,
 * sets up logging and dependencies, and runs its command.
 *
 * Everything is imported on demand: the process handles one command, so it loads that
 * command's module and the dependencies it builds — never the other commands, and for
 * VERSION (which the dispatcher answers alone) only the import-free recursion guard.
 *
 * @module
 */

import { lazyImport } from "../util/lazy.ts";
import type { SkelContext, SkelHandlers } from "../cni/skel.ts";
import type { ManifoldDeps, StatusQueue } from "./deps.ts";
import type { WiringOptions } from "./wiring.ts";
import type { Logger, LoggerOptions } from "../log/mod.ts";
import { withContainerLock } from "./cache/container_lock.ts";
import { mark } from "../log/trace.ts";
import { assertNotDelegated, delegationDepth, processMarkerEnv } from "../cni/recursion.ts";
import { oneShotValidation } from "../cni/decode.ts";

/** Options of {@link realDeps}. */
export interface RealDepsOptions {
  /**
   * The API-backed sources shared across calls (`manifold daemon`: one warm client, NADs from
   * its watch); default: connect per call from the config's kubeconfig or in-cluster.
   */
  api?: WiringOptions["api"];
  /** See `WiringOptions.onDelegate`. */
  onDelegate?: WiringOptions["onDelegate"];
  /**
   * The logger of a call, given its config's destination (`manifold daemon`: one shared per
   * destination, lib/daemon/log_pool.ts); default: a new one per call.
   */
  logger?: (opts: LoggerOptions) => Logger;
  /**
   * `manifold daemon` with `"statusPublish": "async"` in its own configuration: ADD queues
   * network-status here when the call has an API (`ManifoldDeps.statusQueue`).
   */
  statusQueue?: StatusQueue;
  /**
   * The calls are served by a long-lived process (`manifold daemon`, with or without a kube
   * client): zod keeps its JIT, and delegates are started with Deno.Command (`WiringOptions`).
   */
  daemon?: boolean;
}

/** Builds dependencies for a call; swapped in tests. */
export type DepsFactory = (ctx: SkelContext) => Promise<ManifoldDeps>;

/**
 * The real dependency factory: config from stdin, environment from the process. Without
 * `opts.api` and `opts.daemon` (a plugin process serving one call) it also turns zod's JIT off
 * for the process ({@link oneShotValidation}) and starts delegates with posix_spawn; the daemon,
 * which passes `daemon` (and `api` when it has a kube client), keeps both as they are.
 * @throws {CniError} 7 for an invalid configuration or kubeconfig.
 */
export function realDeps(
  processEnv: Record<string, string>,
  opts: RealDepsOptions = {},
): DepsFactory {
  if (!opts.api && !opts.daemon) oneShotValidation();
  return async (ctx) => {
    const [{ parseManifoldConf }, { createLogger }, { buildDeps }] = await Promise.all([
      lazyImport<typeof import("./config.ts")>("./config.ts", import.meta.url),
      lazyImport<typeof import("../log/mod.ts")>("../log/mod.ts", import.meta.url),
      lazyImport<typeof import("./wiring.ts")>("./wiring.ts", import.meta.url),
    ]);
    const conf = parseManifoldConf(ctx.config);
    mark("configParsed");
    const dest: LoggerOptions = {
      level: conf.logLevel,
      file: conf.logFile,
      logOptions: conf.logOptions,
      toStderr: conf.logToStderr,
    };
    const logger = (opts.logger ?? createLogger)(dest).with({ plugin: "manifold" });
    const deps = await buildDeps(conf, ctx.env, logger, {
      processEnv,
      api: opts.api,
      onDelegate: opts.onDelegate,
      daemon: opts.daemon,
    });
    mark("depsBuilt");
    if (opts.statusQueue && deps.status.kind === "api") deps.statusQueue = opts.statusQueue;
    return deps;
  };
}

/** Options of {@link manifoldHandlers}. */
export interface HandlerOptions {
  /**
   * The process environment, read only for the recursion marker `MANIFOLD_DELEGATION_DEPTH`
   * (lib/cni/recursion.ts). Default: that one variable from `Deno.env` when permitted.
   */
  processEnv?: Record<string, string | undefined>;
}

/**
 * The skel handlers of Manifold (ADD, DEL, CHECK, GC, STATUS; VERSION is the dispatcher's).
 * Each loads its command module while the dependencies are built.
 *
 * ADD, DEL and CHECK run holding the container's lock (cache/container_lock.ts), shared by the
 * daemon and in-process paths; a successful DEL removes the lock file.
 *
 * Recursion guard, first thing in every handler: a Manifold started by Manifold (the
 * `MANIFOLD_DELEGATION_DEPTH` marker is set, so a delegate's plugin was Manifold itself)
 * does no work. ADD, CHECK and STATUS fail with code 7 "recursive delegation refused";
 * DEL and GC succeed doing nothing — such a process never attached anything, and a failing
 * DEL would keep the outer Manifold's attachment cached and retried forever.
 * @throws {CniError} code 7 from ADD/CHECK/STATUS when started as a delegate of Manifold.
 * @example
 * ```ts
 * const code = await dispatch(manifoldHandlers(realDeps(Deno.env.toObject())), denoSkelIO());
 * ```
 */
export function manifoldHandlers(makeDeps: DepsFactory, opts: HandlerOptions = {}): SkelHandlers {
  const env = () => opts.processEnv ?? processMarkerEnv();
  const refuse = () => assertNotDelegated(env());
  const nested = () => delegationDepth(env()) > 0;
  return {
    add: async (ctx) => {
      refuse();
      const [{ cmdAdd }, deps] = await Promise.all([
        lazyImport<typeof import("./verbs/add.ts")>("./verbs/add.ts", import.meta.url),
        makeDeps(ctx),
      ]);
      return await withContainerLock(deps.conf.cniDir, ctx.env.containerId, () => cmdAdd(deps));
    },
    del: async (ctx) => {
      if (nested()) return;
      const [{ cmdDel }, deps] = await Promise.all([
        lazyImport<typeof import("./verbs/del.ts")>("./verbs/del.ts", import.meta.url),
        makeDeps(ctx),
      ]);
      await withContainerLock(deps.conf.cniDir, ctx.env.containerId, async (lock) => {
        await cmdDel(deps);
        await lock.remove(); // nothing is left of the container: neither is its lock file
      });
    },
    check: async (ctx) => {
      refuse();
      const [{ cmdCheck }, deps] = await Promise.all([
        lazyImport<typeof import("./verbs/check.ts")>("./verbs/check.ts", import.meta.url),
        makeDeps(ctx),
      ]);
      await withContainerLock(deps.conf.cniDir, ctx.env.containerId, () => cmdCheck(deps));
    },
    gc: async (ctx) => {
      if (nested()) return;
      const [{ cmdGc }, deps] = await Promise.all([
        lazyImport<typeof import("./verbs/gc.ts")>("./verbs/gc.ts", import.meta.url),
        makeDeps(ctx),
      ]);
      await cmdGc(deps, ctx.config);
    },
    status: async (ctx) => {
      refuse();
      const [{ cmdStatus }, deps] = await Promise.all([
        lazyImport<typeof import("./verbs/gc.ts")>("./verbs/gc.ts", import.meta.url),
        makeDeps(ctx),
      ]);
      await cmdStatus(deps);
    },
  };
}
