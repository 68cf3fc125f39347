/**
 * One level-triggered pass of the KEP-3698 controller: for every PodNetwork of Manifold's
 * provider and every PodNetworkAttachment of such a network, compare what it carries with
 * what it should (conditions.ts) and write only the difference:
 *
 * - conditions: `PATCH …/status` (`application/merge-patch+json`,
 *   `{"status":{"conditions":[…]}}`; the list is replaced whole, other condition types kept),
 *   `lastTransitionTime` kept while a condition's status does not change, `observedGeneration`
 *   = `metadata.generation`;
 * - the InUse finalizer: `PATCH` of the object with `metadata.finalizers` and
 *   `metadata.resourceVersion` (optimistic concurrency: a 409 waits for the next pass). It is
 *   added only to an object not being deleted (the API refuses new finalizers then) and
 *   removed as soon as nothing references the object, which lets a pending delete finish.
 *
 * @module
 */

import type { KubeClient } from "../k8s/client.ts";
import { isNotFound } from "../k8s/errors.ts";
import {
  type Condition,
  INUSE_FINALIZER,
  type MultiNetworkMeta,
  podNetworkAttachmentPath,
  podNetworkPath,
} from "../k8s/multinetwork.ts";
import type { Logger } from "../log/mod.ts";
import { errorText } from "../util/text.ts";
import {
  type Desired,
  desiredAttachment,
  desiredPodNetwork,
  type LifecyclePolicy,
  type Snapshot,
} from "./conditions.ts";

/** What one pass wrote (for logs and tests). */
export interface PassReport {
  /** Condition patches sent (`…/status`). */
  statusWrites: number;
  /** Finalizer patches sent. */
  finalizerWrites: number;
  /** Writes that failed (logged; the next pass retries). */
  failures: number;
}

/**
 * The conditions to write, or undefined when `current` already says the same
 * (type, status, reason, message, observedGeneration).
 * @param current the object's conditions.
 * @param desired ParamsReady and Ready as computed.
 * @param generation `metadata.generation`.
 * @param now RFC 3339 time for conditions whose status changes.
 * @returns the full new list (other condition types kept, in place).
 */
export function conditionUpdate(
  current: Condition[],
  desired: Desired["conditions"],
  generation: number | undefined,
  now: string,
): Condition[] | undefined {
  let changed = false;
  const out = current.map((c) => ({ ...c }));
  for (const d of desired) {
    const i = out.findIndex((c) => c.type === d.type);
    const old = i >= 0 ? out[i] : undefined;
    const next: Condition = {
      ...d,
      lastTransitionTime: old && old.status === d.status && old.lastTransitionTime
        ? old.lastTransitionTime
        : now,
    };
    if (generation !== undefined) next.observedGeneration = generation;
    const same = old && old.status === next.status && old.reason === next.reason &&
      old.message === next.message && old.observedGeneration === next.observedGeneration;
    if (same) continue;
    changed = true;
    if (i >= 0) out[i] = next;
    else out.push(next);
  }
  return changed ? out : undefined;
}

/**
 * The finalizer list to write, or undefined when nothing changes.
 * @example
 * ```ts
 * finalizerUpdate({ name: "n" }, true); // ["multinetwork.manifold.dev/in-use"]
 * ```
 */
export function finalizerUpdate(meta: MultiNetworkMeta, inUse: boolean): string[] | undefined {
  const list = meta.finalizers ?? [];
  const has = list.includes(INUSE_FINALIZER);
  if (inUse && !has && !meta.deletionTimestamp) return [...list, INUSE_FINALIZER];
  if (!inUse && has) return list.filter((f) => f !== INUSE_FINALIZER);
  return undefined;
}

/**
 * Runs one pass over the snapshot (see the module doc). Never throws: a failed write is
 * logged and counted, and retried by the next pass.
 * @param kube the API client (patch on the objects and their status).
 * @param snap what the controller has listed.
 * @param policy provider and isolation.
 * @param logger for each write.
 * @returns the counts of writes.
 */
export async function reconcileAll(
  kube: Pick<KubeClient, "send">,
  snap: Snapshot,
  policy: LifecyclePolicy,
  logger: Logger,
): Promise<PassReport> {
  const report: PassReport = { statusWrites: 0, finalizerWrites: 0, failures: 0 };
  const now = new Date().toISOString().replace(/\.\d+Z$/, "Z");
  const ours = new Set<string>();
  const apply = async (
    kind: string,
    path: string,
    meta: MultiNetworkMeta,
    conditions: Condition[],
    desired: Desired,
  ) => {
    const id = meta.namespace ? `${meta.namespace}/${meta.name}` : meta.name;
    const conds = conditionUpdate(conditions, desired.conditions, meta.generation, now);
    const finalizers = finalizerUpdate(meta, desired.inUse);
    try {
      if (conds) {
        await kube.send("PATCH", `${path}/status`, { status: { conditions: conds } }, MERGE);
        report.statusWrites++;
        logger.info("conditions updated", {
          kind,
          name: id,
          conditions: conds.map((c) => `${c.type}=${c.status}/${c.reason}`).join(","),
        });
      }
      if (finalizers) {
        await kube.send("PATCH", path, {
          metadata: { finalizers, resourceVersion: meta.resourceVersion },
        }, MERGE);
        report.finalizerWrites++;
        logger.info(desired.inUse ? "in use: finalizer added" : "unused: finalizer removed", {
          kind,
          name: id,
        });
      }
    } catch (e) {
      if (isNotFound(e)) return; // deleted meanwhile
      report.failures++;
      logger.warn("write failed, retried on the next pass", {
        kind,
        name: id,
        error: errorText(e),
      });
    }
  };
  for (const pn of snap.podNetworks.values()) {
    if (pn.spec.provider !== policy.provider) continue;
    ours.add(pn.metadata.name);
    const desired = await desiredPodNetwork(snap, policy, pn);
    await apply(
      "PodNetwork",
      podNetworkPath(pn.metadata.name),
      pn.metadata,
      pn.status.conditions,
      desired,
    );
  }
  for (const pna of snap.attachments.values()) {
    const pn = snap.podNetworks.get(pna.spec.podNetworkName);
    if (pn && !ours.has(pn.metadata.name)) continue; // another provider's network
    const desired = await desiredAttachment(snap, policy, pna);
    const path = podNetworkAttachmentPath(pna.metadata.namespace, pna.metadata.name);
    await apply("PodNetworkAttachment", path, pna.metadata, pna.status.conditions, desired);
  }
  return report;
}

const MERGE = "application/merge-patch+json";
