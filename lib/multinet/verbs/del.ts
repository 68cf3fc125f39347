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

import { lazyImport } from "../../util/lazy.ts";
import { parseCniArgs } from "../../cni/env.ts";
import { CniError, CniErrorCode, toCniError } from "../../cni/errors.ts";
import {
  CACHE_SCHEMA_VERSION,
  CacheCorruptError,
  type CachedAttachment,
  type CacheRecord,
} from "../cache/cache.ts";
import type { ManifoldDeps } from "../deps.ts";
import { aggregateDetachError, detachAll } from "./detach.ts";
import { giveUpExhausted } from "./teardown.ts";
import { pruneTombstonesIfDue } from "../cache/tombstones.ts";
import { planPodOf, podRefFromArgs } from "../plan/pod.ts";
import { mark, timeline } from "../../log/trace.ts";
import { crashpoint } from "../crashpoint.ts";

/**
 * Runs DEL for one runtime attachment (CNI_CONTAINERID + CNI_IFNAME): the delegate DELs of
 * its cached attachments, then a tombstone; then, at most once per interval, old tombstones
 * are pruned (`cache/tombstones.ts`).
 * @param deps the dependencies.
 * @throws {CniError} the first failing delegate's code (message counts the failures, details
 *   list each) when any delegate DEL failed — the failed attachments stay cached so a repeated
 *   DEL retries them, except attachments whose ADD never completed once they reach the bound
 *   of `verbs/teardown.ts` (given up with a `TeardownAbandoned` event); code 11/7 when the cache is
 *   corrupt and the attachments cannot be rebuilt.
 */
export async function cmdDel(deps: ManifoldDeps): Promise<void> {
  const { env, cache } = deps;
  const runtimeArgs = env.argPairs ?? parseCniArgs(env.args);
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
    // Loaded only without a usable cache: a DEL served from the cache never loads planning.
    const { rebuildAttachments } = await lazyImport<typeof import("./rebuild.ts")>(
      "./rebuild.ts",
      import.meta.url,
    );
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
          await cache.write({
            ...base,
            attachments: failed.map((f) => f.attachment),
          });
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
