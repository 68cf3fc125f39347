/**
 * No recursive delegation: Manifold must never end up running itself as a delegate (a NAD
 * whose `type` is Manifold, a symlink or wrapper script to it, a renamed copy), or every
 * ADD would spawn Manifold, which spawns Manifold, … until the node runs out of processes.
 *
 * Two guards:
 * - static, before anything runs: a delegate whose plugin `type` is Manifold's own is
 *   refused where NADs and delegates are resolved (`lib/multinet/plan/resolve.ts`), and a
 *   plugin binary whose real path is the running executable is refused by the runtime
 *   (`lib/cni/runtime.ts`, via {@link selfExecutable});
 * - dynamic, for everything else: every delegate process Manifold starts carries
 *   {@link DELEGATION_DEPTH_ENV} in its environment ({@link delegateEnv}, set by
 *   `ProcessPluginExec`), and a Manifold plugin process that finds it set refuses before
 *   doing any work ({@link assertNotDelegated}, called by `lib/multinet/plugin.ts`).
 *
 * @module
 */

import { CniError, CniErrorCode } from "./errors.ts";

/**
 * The environment variable Manifold sets in every delegate's environment: the delegation
 * depth of the child, a decimal integer ≥ 1 (`"1"` for a delegate of a Manifold started by
 * the container runtime). Manifold's own marker, not part of the CNI spec.
 */
export const DELEGATION_DEPTH_ENV = "MANIFOLD_DELEGATION_DEPTH";

/**
 * The delegation depth recorded in an environment: 0 when {@link DELEGATION_DEPTH_ENV} is
 * unset or empty; its value when it is a positive integer; 1 for any other non-empty value
 * (a marker that is set at all means "started by Manifold").
 *
 * @param env a process environment.
 * @returns the depth, an integer ≥ 0.
 * @example
 * ```ts
 * delegationDepth({}); // 0
 * delegationDepth({ MANIFOLD_DELEGATION_DEPTH: "2" }); // 2
 * delegationDepth({ MANIFOLD_DELEGATION_DEPTH: "yes" }); // 1
 * ```
 */
export function delegationDepth(env: Record<string, string | undefined>): number {
  const raw = env[DELEGATION_DEPTH_ENV]?.trim() ?? "";
  if (raw === "") return 0;
  const n = Number(raw);
  return Number.isSafeInteger(n) && n > 0 ? n : 1;
}

/**
 * A delegate's environment: `env` plus {@link DELEGATION_DEPTH_ENV} set to its depth + 1.
 * `env` is not modified.
 *
 * @param env the environment the delegate would get.
 * @returns a copy with the marker.
 * @example
 * ```ts
 * delegateEnv({ PATH: "/bin" }); // { PATH: "/bin", MANIFOLD_DELEGATION_DEPTH: "1" }
 * ```
 */
export function delegateEnv(env: Record<string, string>): Record<string, string> {
  return { ...env, [DELEGATION_DEPTH_ENV]: String(delegationDepth(env) + 1) };
}

/**
 * Refuses to act as a plugin when Manifold was started by Manifold (the dynamic guard).
 *
 * @param env the process environment (only {@link DELEGATION_DEPTH_ENV} is read).
 * @throws {CniError} code 7 `"recursive delegation refused: …"` naming the marker and its
 *   value, when the depth is ≥ 1.
 * @example
 * ```ts
 * assertNotDelegated({}); // ok
 * assertNotDelegated({ MANIFOLD_DELEGATION_DEPTH: "1" }); // throws CniError 7
 * ```
 */
export function assertNotDelegated(env: Record<string, string | undefined>): void {
  const depth = delegationDepth(env);
  if (depth === 0) return;
  throw new CniError(
    CniErrorCode.InvalidNetworkConfig,
    "recursive delegation refused: Manifold was started as a delegate of Manifold",
    `${DELEGATION_DEPTH_ENV}=${env[DELEGATION_DEPTH_ENV]}: a delegate's plugin ` +
      "(a NAD type, a symlink, a wrapper script or a copy of the binary) is Manifold itself",
  );
}

/**
 * The marker part of the real process environment: `{ MANIFOLD_DELEGATION_DEPTH }` when
 * the variable is set and readable, else `{}`. Never prompts and never throws: without
 * env permission for the variable, it reads nothing.
 *
 * @returns an environment holding at most {@link DELEGATION_DEPTH_ENV}.
 * @example
 * ```ts
 * assertNotDelegated(processMarkerEnv());
 * ```
 */
export function processMarkerEnv(): Record<string, string> {
  try {
    const perm = Deno.permissions.querySync({ name: "env", variable: DELEGATION_DEPTH_ENV });
    if (perm.state !== "granted") return {};
    const value = Deno.env.get(DELEGATION_DEPTH_ENV);
    return value === undefined ? {} : { [DELEGATION_DEPTH_ENV]: value };
  } catch {
    return {};
  }
}

/**
 * The real path of the running Manifold executable, for the static "is this plugin
 * Manifold itself?" check: `Deno.execPath()` resolved with `realpath`, when it is the
 * compiled plugin; undefined when Manifold runs from source (the executable is then the
 * `deno` or `denort` runtime, not Manifold) or when it cannot be resolved (no read
 * permission). Then only the dynamic guard applies.
 *
 * @returns an absolute path, or undefined.
 * @example
 * ```ts
 * await selfExecutable(); // "/opt/cni/bin/manifold" (compiled), undefined (deno run)
 * ```
 */
export async function selfExecutable(): Promise<string | undefined> {
  let exe: string;
  try {
    exe = Deno.execPath();
  } catch {
    return undefined;
  }
  const base = exe.slice(exe.lastIndexOf("/") + 1);
  if (/^(deno|denort)(\.exe)?$/.test(base)) return undefined;
  return await realPathOrUndefined(exe);
}

/**
 * `realpath(3)` of `path`, or undefined when it cannot be resolved (missing, no permission).
 * @param path a file path.
 * @returns the canonical absolute path, or undefined.
 */
export async function realPathOrUndefined(path: string): Promise<string | undefined> {
  try {
    return await Deno.realPath(path);
  } catch {
    return undefined;
  }
}
