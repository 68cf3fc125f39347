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
 *   added as soon as the controller sees one of its objects (not when it first sees a user:
 *   a pod created just after its network, before the controller saw the pod, must not let a
 *   delete slip through), never to an object being deleted (the API refuses new finalizers
 *   then), and removed once deletion was requested and nothing references the object, which
 *   lets the delete finish. A PodNetwork that is not (or no longer) this provider's — its
 *   `provider` changed, e.g. under an older CRD without the spec-level rule — gets no
 *   conditions, and the finalizer it still carries is released like ours (once deletion was
 *   requested and nothing references it), so its deletion never hangs;
 * - the "default" PodNetwork (KEP-3698 "Default PodNetwork"): created when missing
 *   (`{enabled: true, provider}`, unless `createDefault` is false) and, when deleted, its
 *   finalizer released at once so that the next pass recreates it (the cluster default
 *   network its users are on does not go away);
 * - an attachment whose PodNetwork is missing is this installation's only while it carries
 *   the finalizer (it was attached to one of our networks): another provider's attachment
 *   is never written (two controllers never fight).
 *
 * @module
 */

import type { KubeClient } from "../k8s/client.ts";
import { isConflict, isNotFound } from "../k8s/errors.ts";
import {
  type Condition,
  INUSE_FINALIZER,
  MULTINETWORK_GROUP,
  MULTINETWORK_VERSION,
  type MultiNetworkMeta,
  podNetworkAttachmentPath,
  podNetworkPath,
} from "../k8s/multinetwork.ts";
import { DEFAULT_PODNETWORK } from "../multinet/plan/pod_networks.ts";
import type { Logger } from "../log/mod.ts";
import { errorText } from "../util/text.ts";
import {
  type Desired,
  desiredAttachment,
  desiredPodNetwork,
  type LifecyclePolicy,
  podNetworkInUse,
  type Snapshot,
} from "./conditions.ts";

/** What one pass wrote (for logs and tests). */
export interface PassReport {
  /** Objects created (the "default" PodNetwork). */
  creates?: number;
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
 * The finalizer list to write, or undefined when nothing changes (module doc): added to one
 * of ours not being deleted; removed, from ours or not (`ours` false), when deletion was
 * requested and nothing uses it.
 * @param meta the object's metadata.
 * @param inUse a live pod or attachment references it.
 * @param ours it belongs to this installation's provider (default true).
 * @returns the new list, or undefined.
 * @example
 * ```ts
 * finalizerUpdate({ name: "n" }, false); // ["multinetwork.manifold.dev/in-use"]
 * ```
 */
export function finalizerUpdate(
  meta: MultiNetworkMeta,
  inUse: boolean,
  ours = true,
): string[] | undefined {
  const list = meta.finalizers ?? [];
  const has = list.includes(INUSE_FINALIZER);
  if (ours && !has && !meta.deletionTimestamp) return [...list, INUSE_FINALIZER];
  if (has && !inUse && meta.deletionTimestamp) {
    return list.filter((f) => f !== INUSE_FINALIZER);
  }
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
    desired: Desired | { inUse: boolean; conditions?: undefined },
  ) => {
    const id = meta.namespace ? `${meta.namespace}/${meta.name}` : meta.name;
    const conds = desired.conditions &&
      conditionUpdate(conditions, desired.conditions, meta.generation, now);
    const finalizers = finalizerUpdate(meta, desired.inUse, desired.conditions !== undefined);
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
        const added = finalizers.includes(INUSE_FINALIZER);
        logger.info(added ? "finalizer added" : "unused: finalizer removed", { kind, name: id });
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
  if (policy.createDefault !== false && !snap.podNetworks.has(DEFAULT_PODNETWORK)) {
    try {
      await kube.send("POST", podNetworkPath(), {
        apiVersion: `${MULTINETWORK_GROUP}/${MULTINETWORK_VERSION}`,
        kind: "PodNetwork",
        metadata: { name: DEFAULT_PODNETWORK },
        spec: { enabled: true, provider: policy.provider },
      });
      report.creates = (report.creates ?? 0) + 1;
      logger.info('"default" PodNetwork created', { provider: policy.provider });
    } catch (e) {
      if (!isConflict(e)) {
        report.failures++;
        logger.warn('creating the "default" PodNetwork failed, retried on the next pass', {
          error: errorText(e),
        });
      }
    }
  }
  for (const pn of snap.podNetworks.values()) {
    const path = podNetworkPath(pn.metadata.name);
    if (pn.spec.provider !== policy.provider) {
      // Not ours: only the finalizer we may have left on it (its provider changed).
      if (pn.metadata.finalizers?.includes(INUSE_FINALIZER)) {
        const inUse = podNetworkInUse(snap, pn.metadata.name);
        await apply("PodNetwork", path, pn.metadata, pn.status.conditions, { inUse });
      }
      continue;
    }
    ours.add(pn.metadata.name);
    const desired = await desiredPodNetwork(snap, policy, pn);
    // "default" is recreated, not kept: its users are on the cluster default network.
    if (pn.metadata.name === DEFAULT_PODNETWORK && pn.metadata.deletionTimestamp) {
      desired.inUse = false;
    }
    await apply("PodNetwork", path, pn.metadata, pn.status.conditions, desired);
  }
  for (const pna of snap.attachments.values()) {
    const pn = snap.podNetworks.get(pna.spec.podNetworkName);
    const path = podNetworkAttachmentPath(pna.metadata.namespace, pna.metadata.name);
    const marked = pna.metadata.finalizers?.includes(INUSE_FINALIZER) ?? false;
    const mine = pn ? ours.has(pn.metadata.name) : marked;
    if (!mine) {
      // Another provider's (or unknown): only a finalizer of ours is released (when deleting).
      if (marked) {
        const { inUse } = await desiredAttachment(snap, policy, pna);
        await apply("PodNetworkAttachment", path, pna.metadata, pna.status.conditions, {
          inUse,
        });
      }
      continue;
    }
    const desired = await desiredAttachment(snap, policy, pna);
    await apply("PodNetworkAttachment", path, pna.metadata, pna.status.conditions, desired);
  }
  return report;
}

const MERGE = "application/merge-patch+json";
