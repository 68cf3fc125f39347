/**
 * Hot-plug of one running pod (issue 14 §1): under the container's lock, re-read its cache
 * record, plan its current selection with the same code as a sandbox ADD
 * (`buildPodPlan`: same validation, same capability MUSTs), diff (hotplug/diff.ts), DEL the
 * removed attachments (`detachAll`), ADD the new ones (`AddRun.attachAll`: intent record first,
 * so a crash mid-change is found again), verify against the kernel, cache, PATCH
 * network-status. A failed ADD rolls back every attachment this change added (`detachAll`),
 * leaving the pod as it was. Events are returned, not sent (the caller sends them once). An
 * attached element whose NAD was deleted is left out of the plan and its attachment kept as
 * made, so the pod's other changes still happen. A failed network-status PATCH is reported in
 * the outcome (`statusError`), not thrown: the change and its events stand.
 *
 * @module
 */

import { toCniError } from "../../cni/errors.ts";
import { type DecodedResult, decodeResult } from "../../cni/result.ts";
import type { Logger } from "../../log/mod.ts";
import type {
  AttachmentCache,
  CachedAttachment,
  CacheKey,
  CacheRecord,
} from "../../multinet/cache/cache.ts";
import { addedInterfaceEvent } from "../../multinet/status/add_events.ts";
import { AddRun } from "../../multinet/verbs/add_run.ts";
import type { ManifoldConf } from "../../multinet/config.ts";
import { lockContainer } from "../../multinet/cache/container_lock.ts";
import type { ManifoldDeps } from "../../multinet/deps.ts";
import { detachAll } from "../../multinet/verbs/detach.ts";
import { podSelections } from "../../multinet/plan/networks.ts";
import { withSelectionSchema } from "../../multinet/plan/selection_parse.ts";
import type { PodRef } from "../../multinet/plan/pod.ts";
import { buildPodPlan } from "../../multinet/plan/pod_plan.ts";
import { serializeNetworkStatus } from "../../multinet/status/network_status.ts";
import { PodGoneError } from "../../multinet/status/sinks.ts";
import {
  NETWORK_STATUS_ANNOTATION,
  NETWORKS_ANNOTATION,
  type NetworkSelectionElement,
} from "../../multinet/types.ts";
import { oneLine } from "../../util/text.ts";
import { attachmentOrigin, diffAttachments, pinSelection, selectionText } from "./diff.ts";

/** One Kubernetes Event for the pod. */
export interface HotPlugEvent {
  /**
   * `AddedInterface`, `RemovedInterface`, `FailedAddingInterface`, `FailedRemovingInterface`
   * (multus-dynamic-networks-controller's reasons, so alerts written for it keep working),
   * `HotPlugRefused` (Manifold's own: a change it will not make), `InterfaceAddRejected` (a
   * host-network pod, as the controller says).
   */
  reason: string;
  /** The event's message. */
  message: string;
  /** `Normal` or `Warning`. */
  type: "Normal" | "Warning";
  /**
   * For `HotPlugRefused`: what was refused, `"add"` (a new element) or `"change"` (keys of an
   * attached element, or a selection that cannot be planned at all); counted once per
   * annotation value in `manifold_hotplug_changes_total{result="refused"}`.
   */
  refused?: "add" | "change" | "remove";
}

/** One element added or removed by a pass, or not (metrics: `manifold_hotplug_changes_total`). */
export interface HotPlugChange {
  /** `"add"` or `"remove"`. */
  op: "add" | "remove";
  /** `"success"`, or `"error"` when its delegate (or a rolled-back sibling's) failed. */
  result: "success" | "error";
}

/** What one hot-plug pass did. */
export interface HotPlugOutcome {
  /**
   * `"gone"`: no running sandbox (no record, a tombstone, another UID, the netns gone);
   * `"unchanged"`: nothing to do (refusals aside); `"changed"`: something was added or removed;
   * `"failed"`: a change failed (and was rolled back).
   */
  kind: "gone" | "unchanged" | "changed" | "failed";
  /** The events to send for the pod. */
  events: HotPlugEvent[];
  /** Interfaces added, e.g. `["net2"]`. */
  added: string[];
  /** Interfaces removed. */
  removed: string[];
  /** Every element this pass tried to add or remove, with its result (refusals are events). */
  changes: HotPlugChange[];
  /**
   * The network-status PATCH failed (its error): the attachments and the cache are as the
   * outcome says and its events are still sent; the caller tries the PATCH again (a later pass
   * finds the cache's status differs from the pod's and sends it).
   */
  statusError?: string;
}

/** Inputs of {@link hotPlugPod}. */
export interface HotPlugPodInput {
  /** The daemon's plugin configuration. */
  conf: ManifoldConf;
  /** The attachment cache (`conf.cniDir`). */
  cache: AttachmentCache;
  /** The sandbox's record key. */
  key: CacheKey;
  /** The pod as the informer holds it. */
  pod: { namespace: string; name: string; uid: string; annotations: Record<string, string> };
  /** Builds the dependencies of a change to this record (CNI environment from the record). */
  makeDeps(record: CacheRecord): Promise<ManifoldDeps>;
  /** The daemon's log. */
  logger: Logger;
}

/**
 * Brings one running pod's attachments in line with its selection annotation (module doc).
 * @param input configuration, cache, record key, pod, dependency factory, logger
 * @returns what was done and the events to send; never throws for a delegate or plan failure
 * @throws {CniError} 5 when the container's lock cannot be taken; cache I/O errors
 */
export async function hotPlugPod(input: HotPlugPodInput): Promise<HotPlugOutcome> {
  const { cache, key, pod } = input;
  const outcome: HotPlugOutcome = {
    kind: "gone",
    events: [],
    added: [],
    removed: [],
    changes: [],
  };
  const lock = await lockContainer(input.conf.cniDir, key.containerId);
  try {
    const record = await cache.read(key.containerId, key.ifName).catch(() => undefined);
    if (!record || record.deletedAt) {
      await lock.remove(); // a DEL finished: its lock file must not come back
      return outcome;
    }
    if (!record.networkStatus || (record.pod.uid && pod.uid && record.pod.uid !== pod.uid)) {
      return outcome;
    }
    if (!record.netns || !await Deno.stat(record.netns).then(() => true, () => false)) {
      return outcome; // the sandbox is being torn down
    }
    return await change(input, record, outcome);
  } finally {
    lock.release();
  }
}

async function change(
  input: HotPlugPodInput,
  record: CacheRecord,
  outcome: HotPlugOutcome,
): Promise<HotPlugOutcome> {
  const { pod } = input;
  outcome.kind = "unchanged";
  const deps = await input.makeDeps(record);
  const log = input.logger.with({
    cmd: "hotplug",
    containerId: record.containerId,
    pod: `${pod.namespace}/${pod.name}`,
  });
  // The pod's UID for the PATCH's precondition and the delegates' K8S_POD_UID: the sandbox's
  // (K8S_POD_UID at its ADD; hotPlugPod checked it is the informer's), else the informer's.
  const podRef = podRefOf(record, pod.uid);
  // The status PATCH's precondition: the UID the API has (a recreated pod is never written).
  const statusPod = { ...podRef, uid: pod.uid || podRef.uid };
  const refuse = (message: string, op: "add" | "change" | "remove" = "change") =>
    outcome.events.push({ reason: "HotPlugRefused", message, type: "Warning", refused: op });
  let annotations = pod.annotations;
  let pinned: NetworkSelectionElement[];
  try {
    const elements = await withSelectionSchema(() => podSelections(podRef, annotations));
    pinned = elements.length > 0 ? pinSelection(elements, record.attachments) : [];
  } catch (e) {
    refuse(`${NETWORKS_ANNOTATION} is invalid, networks left as they are: ${msg(e)}`);
    return outcome;
  }
  // A NAD source error is thrown (the pass is retried), not an invalid annotation.
  const lost = await lostNads(pinned, record.attachments, deps);
  const kept = lost.kept;
  if (pinned.length > 0) {
    const rest = pinned.filter((e) => !lost.elements.includes(e));
    annotations = { ...annotations, [NETWORKS_ANNOTATION]: selectionText(rest) };
    if (rest.length === 0) delete annotations[NETWORKS_ANNOTATION];
  }
  if (kept.length > 0) {
    log.info("kept attachments whose NetworkAttachmentDefinition is gone", {
      kept: kept.map((a) => `${a.statusName}@${a.ifName}`),
    });
  }
  let plan;
  try {
    plan = await buildPodPlan({
      conf: input.conf,
      pod: podRef,
      containerId: record.containerId,
      ifName: record.ifName,
      runtimeArgs: runtimeArgsOf(record),
      annotations,
      nads: deps.nads,
      podNetworks: deps.podNetworks,
    });
  } catch (e) {
    refuse(`networks left as they are: ${msg(e)}`);
    return outcome;
  }
  if (plan.ignoredSelection) {
    refuse(
      `${NETWORKS_ANNOTATION} is invalid, networks left as they are: ${msg(plan.ignoredSelection)}`,
    );
    return outcome;
  }
  const diff = diffAttachments(record.attachments, plan.attachments, kept);
  for (const r of diff.refused) refuse(`${ctx(podRef)} ${r.message}`, r.op);
  if (diff.add.length === 0 && diff.remove.length === 0) {
    // Level-triggered status too: a PATCH that failed after the change is sent again.
    const published = serializeNetworkStatus(record.networkStatus ?? []);
    if (pod.annotations[NETWORK_STATUS_ANNOTATION] !== published) {
      log.info("network-status differs from the cache; publishing it again", {});
      await publish(
        outcome,
        () => deps.status.publish(statusPod, record.containerId, record.networkStatus ?? []),
      );
    }
    return outcome;
  }
  log.info("hot-plug", {
    add: diff.add.map((p) => `${p.delegate.statusName}@${p.ifName}`),
    remove: diff.remove.map((a) => `${a.statusName}@${a.ifName}`),
  });

  // Removals first: a renamed interface frees its name for the addition.
  const failed = diff.remove.length === 0
    ? []
    : await detachAll(deps, diff.remove, { netns: record.netns, pod: podRef });
  const survivors = record.attachments.flatMap((a) => {
    if (!diff.remove.includes(a)) return [a];
    const f = failed.find((f) => f.attachment.ifName === a.ifName);
    if (f) {
      outcome.events.push({
        reason: "FailedRemovingInterface",
        message: `${f.error.message} (interface ${a.ifName})`,
        type: "Warning",
      });
      outcome.changes.push({ op: "remove", result: "error" });
      return [f.attachment];
    }
    outcome.removed.push(a.ifName);
    outcome.changes.push({ op: "remove", result: "success" });
    outcome.events.push({
      reason: "RemovedInterface",
      message: `Remove ${a.ifName} from ${a.statusName}`,
      type: "Normal",
    });
    return [];
  });

  const run = new AddRun(deps, podRef, log, {
    record: { ...record, attachments: survivors },
    results: survivors.map(decodedOrUndefined),
  });
  const base = survivors.length;
  try {
    await run.attachAll(diff.add);
  } catch (e) {
    const err = toCniError(e);
    log.error("hot-plug ADD failed, rolling back", { error: err.message });
    const made = run.record.attachments.slice(base);
    // The failing attachment is the last one attempted (its ADD never completed).
    const failing = made.at(-1)?.state === "added" ? undefined : made.at(-1)?.ifName;
    const where = failing === undefined ? "" : ` (interface ${failing})`;
    const left = made.length === 0
      ? []
      : await detachAll(deps, made, { netns: record.netns, pod: podRef });
    run.record.attachments.splice(base, made.length, ...left.map((f) => f.attachment));
    run.results.splice(base, run.results.length - base, ...left.map(() => undefined));
    outcome.kind = "failed";
    outcome.events.push({
      reason: "FailedAddingInterface",
      message: outcome.removed.length
        ? `${err.message}${where}; the additions were rolled back, the removals (${
          outcome.removed.join(", ")
        }) were done`
        : `${err.message}${where}; the pod's networks were left as they were`,
      type: "Warning",
    });
  }
  outcome.added = run.record.attachments.slice(base).filter((a) => a.state === "added")
    .map((a) => a.ifName);
  for (const p of diff.add) {
    const ok = outcome.kind !== "failed" || outcome.added.includes(p.ifName);
    outcome.changes.push({ op: "add", result: ok ? "success" : "error" });
  }
  if (outcome.added.length === 0 && outcome.removed.length === 0) {
    await deps.cache.write(run.record); // intents rolled back; the status is unchanged
    return outcome;
  }
  const statuses = await run.verify(undefined);
  await run.cacheFinal(statuses);
  // A failed PATCH does not undo the change nor hide it: its events are sent, the PATCH is
  // tried again (multus-dynamic-networks-controller also posts them as each delegate returns).
  await publish(outcome, () => deps.status.publish(statusPod, record.containerId, statuses));
  for (const s of statuses) {
    if (s.interface && outcome.added.includes(s.interface)) {
      outcome.events.push(addedInterfaceEvent(s));
    }
  }
  if (outcome.kind !== "failed") outcome.kind = "changed";
  return outcome;
}

/**
 * The pinned elements whose network is attached (by the selection, state `"added"`) and whose
 * NAD no longer exists, with those attachments: the element is left out of the plan (which
 * would fail on the missing NAD, holding back every other change of the pod) and its
 * attachment is kept as it is, as it was made; it is DELeted from its cached config once its
 * element goes. A NAD source error is not "gone" (thrown: the pass is retried).
 */
async function lostNads(
  pinned: NetworkSelectionElement[],
  cached: CachedAttachment[],
  deps: ManifoldDeps,
): Promise<{ elements: NetworkSelectionElement[]; kept: CachedAttachment[] }> {
  const out = { elements: [] as NetworkSelectionElement[], kept: [] as CachedAttachment[] };
  if (!deps.nads) return out;
  for (const e of pinned) {
    const a = cached.find((c, i) => {
      const origin = attachmentOrigin(c, i);
      return i > 0 && (origin === "selection" || origin === "unknown") && c.state === "added" &&
        c.statusName === `${e.namespace}/${e.name}` && c.ifName === e.interface;
    });
    if (!a || out.kept.includes(a)) continue;
    if (await deps.nads.get(e.namespace, e.name) !== undefined) continue;
    out.elements.push(e);
    out.kept.push(a);
  }
  return out;
}

/**
 * Runs the network-status PATCH; its failure goes to `outcome.statusError` (retried), not
 * thrown. A pod deleted or replaced meanwhile ({@link PodGoneError}: the UID precondition
 * failed) is final: nothing to write, nothing to retry.
 */
async function publish(outcome: HotPlugOutcome, patch: () => Promise<void>): Promise<void> {
  try {
    await patch();
  } catch (e) {
    if (e instanceof PodGoneError) return;
    outcome.statusError = msg(e);
  }
}

/**
 * The pod of a record, its infra container from the default attachment's CNI_ARGS, its UID
 * the record's or, when the runtime sent none, `uid` (the informer's).
 */
function podRefOf(record: CacheRecord, uid: string): PodRef {
  const args = record.attachments[0]?.cniArgs ?? [];
  return {
    ...record.pod,
    uid: record.pod.uid || uid,
    infraContainerId: args.find(([k]) => k === "K8S_POD_INFRA_CONTAINER_ID")?.[1] ||
      record.containerId,
  };
}

/**
 * The runtime's CNI_ARGS as the sandbox ADD had them: the default attachment's pairs (the
 * planner's pod pairs merged with the runtime's), without the default network's own
 * `MAC`/`IP` (they came from its selection).
 */
export function runtimeArgsOf(record: CacheRecord): [string, string][] {
  const args = record.attachments[0]?.cniArgs ?? [];
  return args.filter(([k]) => k !== "MAC" && k !== "IP");
}

function decodedOrUndefined(a: { result?: unknown }): DecodedResult | undefined {
  if (a.result === undefined) return undefined;
  try {
    return decodeResult(a.result);
  } catch {
    return undefined;
  }
}

function ctx(pod: PodRef): string {
  return `[${pod.namespace}/${pod.name}]`;
}

function msg(e: unknown): string {
  return oneLine(toCniError(e).message);
}
