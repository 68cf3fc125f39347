/**
 * GC and STATUS for the delegating plugin (CNI SPEC 1.1 "GC", "STATUS").
 *
 * GC: containers Manifold has cached but the runtime no longer lists in
 * `cni.dev/valid-attachments` are torn down (their delegates get DEL) and forgotten; then
 * every delegate network still in use, and the default network, gets GC with its own valid
 * attachments. STATUS: the readiness file must exist and the default network's delegates
 * must report ready.
 *
 * @module
 */

import { CniError, CniErrorCode, toCniError } from "../cni/errors.ts";
import { parseNetworkConfig } from "../cni/types.ts";
import { CacheCorruptError, type CacheRecord } from "./cache.ts";
import type { ManifoldDeps } from "./deps.ts";
import { aggregateDetachError, detachAll, type DetachFailure } from "./detach.ts";
import { buildPodPlan, podPlanInput } from "./pod_plan.ts";
import { exists, waitForReadiness } from "./readiness.ts";

/** A runtime attachment as GC names it (CNI SPEC 1.1 `cni.dev/valid-attachments`). */
export interface ValidAttachment {
  containerID: string;
  ifname: string;
}

/**
 * Reads the valid attachments from a GC config (`cni.dev/valid-attachments`, or the older
 * draft's `cni.dev/attachments`).
 * @throws {CniError} 6 when the key is present but not a list of {containerID, ifname}.
 */
export function validAttachmentsOf(config: Record<string, unknown>): ValidAttachment[] {
  const raw = config["cni.dev/valid-attachments"] ?? config["cni.dev/attachments"] ?? [];
  if (!Array.isArray(raw)) {
    throw new CniError(CniErrorCode.DecodingFailure, "cni.dev/valid-attachments is not a list");
  }
  return raw.map((v, i) => {
    const o = v as Record<string, unknown>;
    if (!o || typeof o.containerID !== "string" || typeof o.ifname !== "string") {
      throw new CniError(
        CniErrorCode.DecodingFailure,
        `cni.dev/valid-attachments[${i}] is not {containerID, ifname}`,
      );
    }
    return { containerID: o.containerID, ifname: o.ifname };
  });
}

/**
 * Runs GC.
 * @throws {CniError} the aggregate of failed stale-attachment DELs and delegate GCs (§7.2 style:
 *   everything is attempted first).
 */
export async function cmdGc(deps: ManifoldDeps, config: Record<string, unknown>): Promise<void> {
  const { conf, cache } = deps;
  await waitForReadiness(conf.readinessindicatorfile, conf.readinessTimeoutMs);
  const valid = new Set(validAttachmentsOf(config).map((a) => a.containerID));
  const failures: DetachFailure[] = [];
  let total = 0;
  const live: CacheRecord[] = [];

  for (const containerId of await cache.list()) {
    let record: CacheRecord | undefined;
    try {
      record = await cache.read(containerId);
    } catch (e) {
      if (!(e instanceof CacheCorruptError)) throw e;
      deps.logger.warn("GC: corrupt cache record left for DEL", { containerId, reason: e.reason });
      continue;
    }
    if (!record) continue;
    if (valid.has(containerId)) {
      if (!record.deletedAt) live.push(record);
      continue;
    }
    if (record.deletedAt) {
      await cache.remove(containerId);
      continue;
    }
    // Stale: the runtime forgot this sandbox without a successful DEL. Its netns path is
    // used while it still exists (netns paths are unique per sandbox), so links go too.
    total += record.attachments.length;
    const netns = record.netns && await exists(record.netns) ? record.netns : "";
    const failed = await detachAll(
      { ...deps, env: { ...deps.env, containerId } },
      record.attachments,
      { netns, pod: undefined },
    );
    if (failed.length === 0) await cache.remove(containerId);
    else await cache.write({ ...record, attachments: failed.map((f) => f.attachment) });
    failures.push(...failed);
  }

  // Delegate GC per network, with the attachments Manifold knows to be valid on it.
  const byNetwork = new Map<
    string,
    { conflist: Record<string, unknown>; valid: ValidAttachment[] }
  >();
  const addNet = (conflist: Record<string, unknown>) => {
    const name = String(conflist.name ?? "");
    if (!byNetwork.has(name)) byNetwork.set(name, { conflist, valid: [] });
    return byNetwork.get(name)!;
  };
  const defaults = await defaultDelegates(deps);
  for (const d of defaults) addNet(d);
  for (const r of live) {
    for (const a of r.attachments) {
      addNet(a.conflist).valid.push({ containerID: r.containerId, ifname: a.ifName });
    }
  }
  const gcErrors: string[] = [];
  for (const [name, { conflist, valid }] of byNetwork) {
    try {
      await deps.runtime.gcNetworkList(
        parseNetworkConfig(conflist, { source: `gc:${name}` }),
        valid,
      );
    } catch (e) {
      gcErrors.push(`${name}: ${toCniError(e).message}`);
    }
  }
  if (failures.length > 0) throw aggregateDetachError(failures, total);
  if (gcErrors.length > 0) {
    throw new CniError(
      CniErrorCode.Internal,
      `GC failed for ${gcErrors.length} networks`,
      gcErrors.join("\n"),
    );
  }
}

/**
 * Runs STATUS.
 * @throws {CniError} 50 when the readiness indicator file is missing; a delegate's 50/51.
 */
export async function cmdStatus(deps: ManifoldDeps): Promise<void> {
  const file = deps.conf.readinessindicatorfile;
  if (file && !(await exists(file))) {
    throw new CniError(
      CniErrorCode.PluginNotAvailable,
      "the cluster default network is not ready",
      `readiness indicator file ${file} does not exist`,
    );
  }
  for (const conflist of await defaultDelegates(deps)) {
    await deps.runtime.statusNetworkList(parseNetworkConfig(conflist, { source: "status" }));
  }
}

/**
 * Conflists of the networks every sandbox gets (the cluster default network and the extra
 * default networks), from the planning module (no pod: no annotations). Extra networks that
 * cannot be resolved are logged and left out.
 * @throws {CniError} when the cluster default network cannot be resolved.
 */
async function defaultDelegates(deps: ManifoldDeps): Promise<Record<string, unknown>[]> {
  const plan = await buildPodPlan({
    ...podPlanInput(deps, { pod: undefined, runtimeArgs: [], annotations: {} }),
    mode: "rebuild",
  });
  for (const error of plan.missing) {
    deps.logger.warn("defaultNetworks could not be resolved", { error });
  }
  return plan.attachments.map((a) => a.delegate.conflist);
}
