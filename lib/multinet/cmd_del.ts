/**
 * DEL for the delegating plugin (NPWG v1.3 §7.2; CNI SPEC "DEL"): best-effort teardown of
 * every attachment of one runtime attachment (CNI_CONTAINERID + CNI_IFNAME), newest first;
 * idempotent; works with the netns gone, the API down and the pod deleted, from the cache
 * alone. Without a usable cache the attachments are
 * rebuilt from the pod annotation and NADs; only when that is impossible for a corrupt
 * cache does DEL fail — never a silent skip.
 *
 * @module
 */

import { parseCniArgs } from "../cni/env.ts";
import { CniError, CniErrorCode, toCniError } from "../cni/errors.ts";
import {
  CACHE_SCHEMA_VERSION,
  CacheCorruptError,
  type CachedAttachment,
  type CacheRecord,
} from "./cache.ts";
import type { ManifoldDeps } from "./deps.ts";
import { aggregateDetachError, detachAll } from "./detach.ts";
import { giveUpExhausted } from "./teardown.ts";
import { pruneTombstonesIfDue } from "./tombstones.ts";
import {
  memoNadSource,
  resolveDefaultNetwork,
  resolveExtraDefaults,
  resolveSelection,
} from "./networks.ts";
import { declaresCapability, planAttachments } from "./plan.ts";
import { planPodOf, type PodRef, podRefFromArgs, runtimePodAnnotations } from "./pod.ts";
import { parseNetworkSelection } from "./selection.ts";
import {
  type AttachmentPlan,
  type Delegate,
  NETWORKS_ANNOTATION,
  type NetworkSelectionElement,
} from "./types.ts";
import { DEVICE_INFO_CAPABILITY } from "../devices/constants.ts";
import { mark, timeline } from "../log/trace.ts";
import { crashpoint } from "./crashpoint.ts";

/**
 * Runs DEL for one runtime attachment (CNI_CONTAINERID + CNI_IFNAME): the delegate DELs of
 * its cached attachments, then a tombstone; then, at most once per interval, old tombstones
 * are pruned (`tombstones.ts`).
 * @param deps the dependencies.
 * @throws {CniError} the first failing delegate's code (message counts the failures, details
 *   list each) when any delegate DEL failed — the failed attachments stay cached so a repeated
 *   DEL retries them, except attachments whose ADD never completed once they reach the bound
 *   of `teardown.ts` (given up with a `TeardownAbandoned` event); code 11/7 when the cache is
 *   corrupt and the attachments cannot be rebuilt.
 */
export async function cmdDel(deps: ManifoldDeps): Promise<void> {
  const { env, cache } = deps;
  const runtimeArgs = parseCniArgs(env.args);
  const pod = podRefFromArgs(runtimeArgs, env.containerId);
  const log = deps.logger.with({ cmd: "DEL", containerId: env.containerId, ifName: env.ifName });

  let record: CacheRecord | undefined;
  let corrupt: CacheCorruptError | undefined;
  try {
    record = await cache.read(env.containerId, env.ifName);
    mark("cacheRead");
  } catch (e) {
    if (!(e instanceof CacheCorruptError)) throw e;
    corrupt = e;
    log.warn("cache is corrupt, rebuilding attachments from the pod", {
      path: e.path,
      reason: e.reason,
    });
  }
  if (record?.deletedAt) {
    log.debug("already deleted");
    return;
  }

  let attachments: CachedAttachment[];
  let base: CacheRecord;
  if (record) {
    attachments = record.attachments;
    base = record;
  } else {
    const rebuilt = await rebuildAttachments(deps, pod, runtimeArgs);
    attachments = rebuilt.attachments;
    const { namespace, name, uid } = planPodOf(pod, env.containerId);
    base = {
      schemaVersion: CACHE_SCHEMA_VERSION,
      containerId: env.containerId,
      netns: env.netns,
      ifName: env.ifName,
      pod: { namespace, name, uid },
      cniVersion: deps.conf.cniVersion,
      createdAt: new Date().toISOString(),
      attachments,
    };
    if (rebuilt.missing.length > 0) {
      const why = rebuilt.missing.join("; ");
      if (corrupt || rebuilt.transient) {
        // Tear down what we could, then tell the runtime: a silent skip would leak. No
        // tombstone: the runtime's retry rebuilds again (with the API back, it converges).
        const failed = await detachAll(deps, attachments, { netns: env.netns, pod });
        if (failed.length > 0) {
          await cache.write({ ...base, attachments: failed.map((f) => f.attachment) });
        }
        throw new CniError(
          rebuilt.transient ? CniErrorCode.TryAgainLater : CniErrorCode.InvalidNetworkConfig,
          corrupt
            ? `cache ${corrupt.path} is ${corrupt.reason} and the attachments cannot all be rebuilt`
            : `no cache for container ${env.containerId} and the attachments cannot all be rebuilt`,
          why,
        );
      }
      log.warn("no cache; tearing down the attachments that could be rebuilt", { missing: why });
    }
  }

  const failed = await detachAll(deps, attachments, { netns: env.netns, pod });
  mark("detached");
  const { retry, abandoned } = await giveUpExhausted(deps, failed, { pod });
  const kept = [...(base.abandoned ?? []), ...abandoned];
  if (kept.length > 0) base = { ...base, abandoned: kept };
  if (retry.length > 0) {
    await cache.write({ ...base, attachments: retry.map((f) => f.attachment) });
    throw aggregateDetachError(retry, attachments.length);
  }
  crashpoint("del:before-tombstone");
  await cache.writeTombstone(base);
  await deps.status.remove?.(env.containerId);
  mark("tombstoned");
  log.info("detached", { attachments: attachments.length, abandoned: abandoned.length });
  try {
    const pruned = await pruneTombstonesIfDue(cache);
    if (pruned) log.debug("pruned old tombstones", { ...pruned });
  } catch (e) {
    log.warn("cannot prune old tombstones", { error: toCniError(e).message });
  }
  log.info("timeline", timeline());
}

/** What could be rebuilt without a cache, and what could not (with why). */
interface Rebuilt {
  attachments: CachedAttachment[];
  missing: string[];
  /** True when something is missing because the API was unreachable (worth retrying). */
  transient: boolean;
}

/**
 * Rebuilds the attachments of a sandbox from the pod annotation (runtime-passed or API) and the
 * NADs, as ADD planned them. Per-network failures are collected, not thrown.
 */
async function rebuildAttachments(
  deps: ManifoldDeps,
  pod: PodRef | undefined,
  runtimeArgs: [string, string][],
): Promise<Rebuilt> {
  const { conf, env } = deps;
  const missing: string[] = [];
  let transient = false;
  const note = (what: string, e: unknown) => {
    const err = toCniError(e);
    if (err.code === CniErrorCode.TryAgainLater) transient = true;
    missing.push(`${what}: ${err.message}`);
  };

  let annotations = runtimePodAnnotations(conf.capabilities, conf.runtimeConfig);
  if (!annotations && pod && deps.pods) {
    try {
      const info = await deps.pods.get(pod.namespace, pod.name);
      if (info) annotations = info.annotations;
      else missing.push(`pod ${pod.namespace}/${pod.name}: not found`);
    } catch (e) {
      note(`pod ${pod.namespace}/${pod.name}`, e);
    }
  }
  annotations ??= {};

  const nads = deps.nads ? memoNadSource(deps.nads) : undefined;
  const defaultNetwork = await resolveDefaultNetwork(conf, nads, pod, annotations);
  let extraDefaults: Delegate[] = [];
  try {
    extraDefaults = await resolveExtraDefaults(conf, nads, pod);
  } catch (e) {
    note("defaultNetworks", e);
  }

  const selections: { delegate: Delegate; selection: NetworkSelectionElement }[] = [];
  const text = annotations[NETWORKS_ANNOTATION];
  if (pod && text && text.trim() !== "") {
    let elements: NetworkSelectionElement[] = [];
    try {
      elements = parseNetworkSelection(text, pod.namespace);
    } catch (e) {
      note(NETWORKS_ANNOTATION, e);
    }
    for (const selection of elements) {
      try {
        selections.push(await resolveSelection(conf, nads, pod, selection));
      } catch (e) {
        note(`${selection.namespace}/${selection.name}`, e);
      }
    }
  }

  const planInput = {
    pod: planPodOf(pod, env.containerId),
    runtimeIfName: env.ifName,
    runtimeArgs,
    runtimeCapabilityArgs: conf.runtimeConfig,
    defaultNetwork,
  };
  let plans;
  try {
    plans = planAttachments({ ...planInput, defaultNetworks: extraDefaults, selections });
  } catch (e) {
    // Planning rejects what ADD would have rejected (e.g. a missing capability): nothing of
    // those was attached, so the default network alone is torn down.
    note("plan", e);
    plans = planAttachments({ ...planInput, defaultNetworks: [], selections: [] });
  }
  // The CNI device-info file ADD would have created (Device Information Spec v1.1 §4.2.1).
  const withDeviceInfo = (p: AttachmentPlan) =>
    p.delegate.resourceName !== undefined ||
    declaresCapability(p.delegate.conflist, DEVICE_INFO_CAPABILITY);
  const devices = plans.some(withDeviceInfo) ? await import("../devices/mod.ts") : undefined;
  return {
    attachments: plans.map((p) => {
      const a: CachedAttachment = {
        statusName: p.delegate.statusName,
        isDefault: p.delegate.isDefault,
        ifName: p.ifName,
        conflist: p.delegate.conflist,
        capabilityArgs: p.capabilityArgs,
        cniArgs: p.cniArgs,
        state: "added" as const,
      };
      if (devices && withDeviceInfo(p)) {
        a.deviceInfoFile = devices.cniDeviceInfoPath(conf.deviceInfoDir, {
          network: p.delegate.statusName,
          containerId: env.containerId,
          ifName: p.ifName,
        });
        a.capabilityArgs = { ...a.capabilityArgs, [DEVICE_INFO_CAPABILITY]: a.deviceInfoFile };
      }
      return a;
    }),
    missing,
    transient,
  };
}
