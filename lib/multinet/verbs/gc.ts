/**
 * GC and STATUS for the delegating plugin (CNI SPEC 1.1 "GC", "STATUS").
 *
 * GC: attachments (CNI_CONTAINERID + CNI_IFNAME, the cache's key) that Manifold has cached
 * but the runtime no longer lists in `cni.dev/valid-attachments` are torn down (their
 * delegates get DEL) and forgotten, their tombstones removed; then every delegate network
 * still in use, the default networks, and the networks of attachments just torn down or given
 * up get GC once each, grouped per resolved config (`verbs/gc_networks.ts`). STATUS: the readiness
 * file must exist and the default network's delegates must report ready.
 *
 * @module
 */

import { CniError, CniErrorCode, toCniError } from "../../cni/errors.ts";
import { parseNetworkConfig } from "../../cni/netconf.ts";
import { CacheCorruptError, type CacheRecord } from "../cache/cache.ts";
import type { ManifoldDeps } from "../deps.ts";
import { aggregateDetachError, detachAll, type DetachFailure } from "./detach.ts";
import { buildPodPlan, podPlanInput } from "../plan/pod_plan.ts";
import { groupGcNetworks, type ValidAttachment } from "./gc_networks.ts";
import type { PodRef } from "../plan/pod.ts";
import { exists, waitForReadiness } from "./readiness.ts";
import { giveUpExhausted } from "./teardown.ts";

export type { ValidAttachment } from "./gc_networks.ts";

/**
 * Reads the valid attachments from a GC config (`cni.dev/valid-attachments`, or the older
 * draft's `cni.dev/attachments`).
 * @param config the GC's stdin config.
 * @returns the list, `[]` when the key is absent.
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
 * @param deps the dependencies.
 * @param config the GC's stdin config (with `cni.dev/valid-attachments`).
 * @throws {CniError} the aggregate of failed stale-attachment DELs and delegate GCs (§7.2 style:
 *   everything is attempted first); 6 for a malformed valid-attachments list.
 */
export async function cmdGc(deps: ManifoldDeps, config: Record<string, unknown>): Promise<void> {
  const { conf, cache } = deps;
  await waitForReadiness(conf.readinessindicatorfile, conf.readinessTimeoutMs);
  const valid = new Set(validAttachmentsOf(config).map((a) => `${a.containerID}\0${a.ifname}`));
  const failures: DetachFailure[] = [];
  let total = 0;
  const live: CacheRecord[] = [];
  /** Networks of attachments torn down or given up here: their delegates GC what is left. */
  const released: Record<string, unknown>[] = [];

  for (const key of await cache.list()) {
    let record: CacheRecord | undefined;
    try {
      record = await cache.read(key.containerId, key.ifName);
    } catch (e) {
      if (!(e instanceof CacheCorruptError)) throw e;
      deps.logger.warn("GC: corrupt cache record left for DEL", { ...key, reason: e.reason });
      continue;
    }
    if (!record) continue;
    if (valid.has(`${record.containerId}\0${record.ifName}`)) {
      if (!record.deletedAt) live.push(record);
      continue;
    }
    // Stale: the runtime forgot this attachment. Its netns path is used while it still
    // exists (netns paths are unique per sandbox), so links go too.
    const netns = record.netns && await exists(record.netns) ? record.netns : "";
    const scoped = {
      ...deps,
      env: { ...deps.env, containerId: record.containerId, ifName: record.ifName },
    };
    const given = record.abandoned ?? [];
    if (given.length > 0) {
      // Given up by DEL: one more try (failures are logged), then the delegates' GC below.
      await detachAll(scoped, given, { netns, pod: undefined });
      released.push(...given.map((a) => a.conflist));
    }
    if (record.deletedAt) {
      await cache.remove(record.containerId, record.ifName);
      continue;
    }
    total += record.attachments.length;
    const failed = await detachAll(scoped, record.attachments, { netns, pod: undefined });
    const { retry, abandoned } = await giveUpExhausted(scoped, failed, { pod: podOf(record) });
    released.push(...record.attachments.map((a) => a.conflist));
    if (retry.length === 0) await cache.remove(record.containerId, record.ifName);
    else {
      await cache.write({
        ...record,
        attachments: retry.map((f) => f.attachment),
        abandoned: [...given, ...abandoned],
      });
    }
    failures.push(...retry);
  }

  // Delegate GC once per resolved network config, with the attachments valid on it.
  const networks = groupGcNetworks([...await defaultDelegates(deps), ...released], live);
  const gcErrors: string[] = [];
  for (const { conflist, valid } of networks) {
    const name = String(conflist.name ?? "");
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

/** The pod of a record, for events; undefined for a record without one (non-Kubernetes). */
function podOf(record: CacheRecord): PodRef | undefined {
  const { namespace, name, uid } = record.pod;
  return name ? { namespace, name, uid, infraContainerId: record.containerId } : undefined;
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
