/**
 * The policy agent's handler of the cluster's pods (list+watch, lib/k8s/watch.ts): a list
 * replaces the agent's compact {@link PodTable} and the reconciler's pods; a change that cannot
 * change this node's rules (not on this node, named by no policy's peer before or after:
 * {@link PolicyPeers}) is taken in without a sync; an undecodable pod is logged and treated as
 * absent (fail closed: it is no peer).
 *
 * @module
 */

import type { ListWatchHandler, WatchChange } from "../../k8s/mod.ts";
import type { Logger } from "../../log/mod.ts";
import type { PolicyReconciler } from "../../policy/reconcile.ts";
import type { DaemonObserver } from "../observer.ts";
import type { PolicyPeers } from "./peers.ts";
import { PodTable, type PolicyPod } from "./pods.ts";

/** What {@link policyPodHandler} reads and calls back into (the agent's state). */
export interface PolicyPodHandlerDeps {
  /** The reconciler whose pods follow the list and the changes. */
  reconciler: PolicyReconciler;
  /** Which pods a change of may alter this node's rules. */
  peers: PolicyPeers;
  /** This node's name (`spec.nodeName`); undefined: every pod counts as remote. */
  nodeName: string | undefined;
  /** Receives "policy input ignored" for undecodable pods. */
  logger: Logger;
  /** `policyPodChange` ("sync" or "ignored") per watched change. */
  observer: DaemonObserver;
  /** Called after each watched change (memory reclaim). */
  afterPodChange?: () => void;
  /** The agent's current table. */
  pods(): PodTable;
  /** A list was taken in: the new table (the agent keeps it and schedules a sync). */
  replaced(next: PodTable): void;
  /** Schedules a sync (a change that matters). */
  schedule(): void;
}

/**
 * The pod list+watch handler of the policy agent (module doc).
 *
 * @param d the agent's state and callbacks
 * @returns the handler for `listWatch`
 */
export function policyPodHandler(d: PolicyPodHandlerDeps): ListWatchHandler<PolicyPod> {
  const r = d.reconciler;
  const ignored = (p: PolicyPod) =>
    d.logger.warn("policy input ignored", {
      kind: "pod",
      object: `${p.namespace}/${p.name}`,
      error: p.error,
    });
  const counted = (matters: boolean) => {
    d.observer.policyPodChange?.(matters ? "sync" : "ignored");
    d.afterPodChange?.();
    if (matters) d.schedule();
  };
  return {
    replace: (items) => {
      const next = new PodTable();
      for (const p of items) {
        if (p.pod) next.set(p.pod);
        else ignored(p);
      }
      for (const old of d.pods().values()) {
        if (!next.get(old.namespace, old.name)) r.deletePod(old.namespace, old.name);
      }
      for (const pod of next.values()) r.upsertPodInfo(pod);
      d.replaced(next);
      return Promise.resolve();
    },
    apply: (change: WatchChange<PolicyPod>) => {
      const p = change.object;
      const pods = d.pods();
      const before = pods.get(p.namespace, p.name);
      if (change.type === "DELETED" || !p.pod) {
        if (change.type !== "DELETED") ignored(p); // undecodable: treated as absent
        if (!before) return Promise.resolve();
        pods.delete(p.namespace, p.name);
        r.deletePod(p.namespace, p.name);
        counted(d.peers.matters(d.nodeName, before));
      } else {
        pods.set(p.pod);
        r.upsertPodInfo(p.pod);
        counted(d.peers.matters(d.nodeName, before, p.pod));
      }
      return Promise.resolve();
    },
    progress: () => Promise.resolve(),
  };
}
