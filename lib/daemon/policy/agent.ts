/**
 * MultiNetworkPolicy in `manifold daemon` (config `"multiNetworkPolicy": true`): list+watch of
 * MultiNetworkPolicies, pods and namespaces of the whole cluster (lib/k8s/watch.ts: paged
 * lists, watch from the kept resourceVersion, relist on `410 Gone`) feeding a
 * {@link PolicyReconciler}; pods' network namespaces come from the attachment cache
 * (lib/daemon/sandbox_index.ts, shared with hot-plug), and so do local pods' addresses (the
attachment cache's verified network-status; the annotation, which anyone who may patch a pod
can overwrite, only for remote pods). The cluster's pods arrive and are kept as compact records
 * (lib/daemon/policy/pods.ts, decoded page by page); a pod change that cannot change this
 * node's rules (another node's pod no policy's peer names, lib/daemon/policy/peers.ts) is taken
 * in without a sync (`manifold_policy_pod_changes_total{effect="ignored"}`).
 *
 * Level-triggered: every change (watch event, a sandbox ADD finished by this daemon) only
 * schedules a `sync` a few ms later (changes arriving meanwhile are folded in), and a periodic
 * full resync re-sends every ruleset (repairing tables changed behind Manifold's back). No sync
 * runs before all three collections are listed, so a restart never opens a pod on a partial
 * view. Pods whose policy cannot be applied get a `Warning` event `MultiNetworkPolicyFailed`
 * (once per distinct problem; a problem without a pod, e.g. an unparsable `policy-for`, is
 * logged once); the reconciler fails closed. A local pod a policy selects whose sandbox stays
 * missing from the attachment cache for the grace period (`noSandboxGraceMs`) is reported too
 * (`NoSandbox`, and `manifold_policy_apply_failures_total{reason="no_sandbox"}`).
 *
 * @module
 */

import { type KubeClient, listWatch } from "../../k8s/mod.ts";
import type { Logger } from "../../log/mod.ts";
import type { EventSink } from "../../multinet/deps.ts";
import { PolicyReconciler, type SyncReport } from "../../policy/reconcile.ts";

import { PolicyApplier } from "../../policy/apply.ts";

import { type PodAttachment, type PodInfo, statusAttachments } from "../../policy/types.ts";

import { errorText } from "../../util/text.ts";

import type { DaemonObserver, PolicyFailures } from "../observer.ts";
import { SandboxIndex } from "../sandbox_index.ts";

import { AttachmentCache } from "../../multinet/cache/cache.ts";

import { NoSandboxTracker } from "./no_sandbox.ts";

import { type PolicyKind as Kind, policyObjectHandler } from "./object_handler.ts";

import { PolicyPeers } from "./peers.ts";

import { PodTable, policyPodsListWatch } from "./pods.ts";

import { policyPodHandler } from "./pod_handler.ts";

import { PolicyProblemReporter } from "./report.ts";

import { type KubeObject, MNP_LIST_WATCH, NAMESPACE_LIST_WATCH } from "./watch.ts";

export { kickingObserver } from "./kick.ts";
export { POLICY_FAILED_REASON } from "./report.ts";
/** Default wait between a change and its sync, ms. */
export const DEFAULT_POLICY_DEBOUNCE_MS = 2;
/** Default period of the full resync, ms. */
export const DEFAULT_POLICY_RESYNC_MS = 60_000;
/**
 * Default time a selected local pod may have no sandbox in the cache before it is reported,
 * ms: a new pod's network-status can be seen just before its ADD's cache record is.
 */
export const DEFAULT_POLICY_NO_SANDBOX_GRACE_MS = 10_000;

/** Options of {@link PolicyAgent.start}. */
export interface PolicyAgentOptions {
  /** The API client (needs list/watch of the three collections). */
  kube: KubeClient;
  /** The attachment cache directory (`cniDir`). */
  cniDir: string;
  /**
   * The node's pod → sandbox index (lib/daemon/sandbox_index.ts), shared with hot-plug;
   * default: one of its own over `cniDir`.
   */
  sandboxes?: SandboxIndex;
  /** This node (`spec.nodeName` of the pods to program); default: every pod with a sandbox here. */
  nodeName?: string;
  /** Where Warning events go. */
  events: EventSink;
  /** Receives sync durations and apply failures. */
  observer: DaemonObserver;
  /** The daemon's log. */
  logger: Logger;
  /** Wait between a change and its sync, ms (default {@link DEFAULT_POLICY_DEBOUNCE_MS}). */
  debounceMs?: number;
  /** Period of the full resync, ms (default {@link DEFAULT_POLICY_RESYNC_MS}). */
  resyncMs?: number;
  /** Default: a libnftables applier. */
  applier?: PolicyApplier;
  /**
   * Called once the first sync after a complete list of the cluster's pods has run (e.g. the
   * daemon's memory reclaim: the list's pages and the sync's work are garbage now).
   */
  afterPodList?: () => void;
  /**
   * Called after each page of the cluster's pod list (its answer is garbage then: e.g. a major
   * collection, so a list of 20,000 pods does not pile up 40 pages of garbage).
   */
  afterPodPage?: () => void;
  /** Called after each pod change of the watch (e.g. counted as work for the idle reclaim). */
  afterPodChange?: () => void;
  /**
   * How long a selected local pod may have no sandbox in the cache before a Warning and the
   * `no_sandbox` failure, ms (default {@link DEFAULT_POLICY_NO_SANDBOX_GRACE_MS}); only with
   * `nodeName` (without it every pod counts as local).
   */
  noSandboxGraceMs?: number;
}

/** The running policy enforcement of a daemon. */
export class PolicyAgent {
  readonly #opts: PolicyAgentOptions;
  readonly #reconciler: PolicyReconciler;
  readonly #index: SandboxIndex;
  readonly #stop = new AbortController();
  readonly #listed = new Set<Kind>();
  /** Every pod of the cluster as the reconciler holds it. */
  #pods = new PodTable();
  readonly #peers = new PolicyPeers();
  #watches: Promise<void>[] = [];
  #timer: ReturnType<typeof setTimeout> | undefined;
  #resync: ReturnType<typeof setInterval> | undefined;
  #running: Promise<void> | undefined;
  #again: "no" | "yes" | "full" = "no";
  readonly #reporter: PolicyProblemReporter;
  readonly #missing: NoSandboxTracker;
  #graceTimer: ReturnType<typeof setTimeout> | undefined;
  #syncs = 0;
  /** A pod list was taken in: call `afterPodList` after the next sync. */
  #afterList = false;
  #applier: PolicyApplier;

  private constructor(opts: PolicyAgentOptions) {
    this.#opts = opts;
    this.#index = opts.sandboxes ?? new SandboxIndex(new AttachmentCache(opts.cniDir));
    this.#applier = opts.applier ?? new PolicyApplier();
    this.#missing = new NoSandboxTracker({
      graceMs: opts.noSandboxGraceMs ?? DEFAULT_POLICY_NO_SANDBOX_GRACE_MS,
      cniDir: opts.cniDir,
    });
    this.#reporter = new PolicyProblemReporter({
      events: opts.events,
      logger: opts.logger,
      uidOf: (namespace, name) => this.#pods.get(namespace, name)?.uid ?? "",
    });
    this.#reconciler = new PolicyReconciler({
      netnsOf: (pod) => this.#index.sandboxOf(pod)?.netns || undefined,
      localAttachmentsOf: (pod) => this.#localAttachments(pod),
      nodeName: opts.nodeName,
      applier: this.#applier,
    });
  }

  /**
   * A local pod's attachments from the node's own records (issue 28 §2: its network-status
   * annotation may be overwritten by anyone allowed to patch the pod): a pod with a sandbox in
   * the attachment cache has the addresses Manifold verified at ADD; a pod of this node
   * without one, or whose record has no network-status yet (ADD not finished), keeps its
   * annotation's networks — it is still selected and policed — but no address (nothing it
   * claims is believed).
   * `undefined` for a pod of another node: its annotation is all there is.
   */
  #localAttachments(pod: PodInfo): PodAttachment[] | undefined {
    const sandbox = this.#index.sandboxOf(pod);
    if (sandbox?.networkStatus) return statusAttachments(sandbox.networkStatus);
    const nodeName = this.#opts.nodeName;
    if (!sandbox && (nodeName === undefined || pod.nodeName !== nodeName)) return undefined;
    return (pod.attachments ?? []).map((a) => ({ ...a, ips: [] }));
  }

  /**
   * Starts the three list+watch loops and the periodic resync; returns at once (the first
   * sync runs once every collection is listed).
   *
   * @param opts see {@link PolicyAgentOptions}
   * @returns the running agent
   */
  static start(opts: PolicyAgentOptions): PolicyAgent {
    const agent = new PolicyAgent(opts);
    agent.#begin();
    return agent;
  }

  #begin(): void {
    const { kube, logger } = this.#opts;
    const r = this.#reconciler;
    const peers = this.#peers;
    const loops: [Kind, typeof MNP_LIST_WATCH, (o: KubeObject) => void, (o: KubeObject) => void][] =
      [
        [
          "policy",
          MNP_LIST_WATCH,
          (o) => {
            r.upsertPolicy(o);
            peers.upsertPolicy(o);
          },
          (o) => {
            r.deletePolicy(o.metadata.namespace!, o.metadata.name);
            peers.deletePolicy(o.metadata.namespace!, o.metadata.name);
          },
        ],
        [
          "namespace",
          NAMESPACE_LIST_WATCH,
          (o) => {
            r.upsertNamespace(o);
            peers.upsertNamespace(o);
          },
          (o) => {
            r.deleteNamespace(o.metadata.name);
            peers.deleteNamespace(o.metadata.name);
          },
        ],
      ];
    const signal = this.#stop.signal;
    const ended = (kind: Kind) => (e: unknown) =>
      logger.error("policy watch ended", { kind, error: errorText(e) });
    for (const [kind, resource, upsert, remove] of loops) {
      const handler = policyObjectHandler(kind, upsert, remove, {
        logger,
        listed: () => this.#listed.add(kind),
        changed: () => this.#schedule("yes"),
      });
      this.#watches.push(listWatch(kube, handler, { resource, signal, logger }).catch(ended(kind)));
    }
    const pods = policyPodsListWatch({ nodeName: this.#opts.nodeName });
    this.#watches.push(
      listWatch(
        kube,
        policyPodHandler({
          reconciler: this.#reconciler,
          peers: this.#peers,
          nodeName: this.#opts.nodeName,
          logger: this.#opts.logger,
          observer: this.#opts.observer,
          afterPodChange: this.#opts.afterPodChange,
          pods: () => this.#pods,
          replaced: (next) => {
            this.#pods = next;
            this.#listed.add("pod");
            this.#afterList = true;
            this.#schedule("yes");
          },
          schedule: () => this.#schedule("yes"),
        }),
        {
          resource: pods,
          signal,
          logger,
          onPage: this.#opts.afterPodPage,
        },
      ).catch(ended("pod")),
    );
    this.#resync = setInterval(
      () => this.#schedule("full"),
      this.#opts.resyncMs ?? DEFAULT_POLICY_RESYNC_MS,
    );
  }

  /** True once MultiNetworkPolicies, pods and namespaces have all been listed. */
  get synced(): boolean {
    return this.#listed.size === 3;
  }

  /** Why the agent is not ready, one sentence each (for `/readyz`). */
  notReady(): string[] {
    const missing = (["policy", "pod", "namespace"] as Kind[]).filter((k) => !this.#listed.has(k));
    return missing.length
      ? [`the MultiNetworkPolicy watches have not listed ${missing.join(", ")} yet`]
      : [];
  }

  /** Syncs completed so far. */
  get syncs(): number {
    return this.#syncs;
  }

  /**
   * Schedules a sync soon (e.g. a sandbox ADD finished: its pod may be selected by a policy
   * and its netns is now in the cache).
   */
  kick(): void {
    this.#schedule("yes");
  }

  /**
   * Waits until no sync is scheduled or running (tests, shutdown).
   * @returns when idle
   */
  async idle(): Promise<void> {
    while (this.#timer !== undefined || this.#running) {
      await (this.#running ?? new Promise((r) => setTimeout(r, 1)));
    }
  }

  #schedule(how: "yes" | "full"): void {
    if (this.#stop.signal.aborted || !this.synced) return;
    if (this.#again !== "full") this.#again = how;
    if (this.#running || this.#timer !== undefined) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#running = this.#loop();
    }, this.#opts.debounceMs ?? DEFAULT_POLICY_DEBOUNCE_MS);
  }

  /**
   * Syncs until no change arrived during the last sync. `#running` is cleared in the same
   * synchronous step as the final check, so a change scheduled at any later point starts a
   * new timer (none is lost between the check and the clearing).
   */
  async #loop(): Promise<void> {
    await Promise.resolve(); // `#running` is assigned before the first check
    try {
      while (this.#again !== "no" && !this.#stop.signal.aborted) {
        const full = this.#again === "full";
        this.#again = "no";
        await this.#syncOnce(full);
      }
    } finally {
      this.#running = undefined;
    }
  }

  async #syncOnce(full: boolean): Promise<void> {
    const { logger, observer } = this.#opts;
    const t0 = performance.now();
    let report: SyncReport;
    try {
      await this.#index.refresh();
      report = await this.#reconciler.sync({ full });
    } catch (e) {
      logger.error("MultiNetworkPolicy sync failed", { error: errorText(e) });
      observer.policySync?.((performance.now() - t0) / 1000, { sync_failed: 1 });
      return;
    }
    this.#syncs++;
    const failures: PolicyFailures = {
      apply_failed: report.applied.filter((a) => a.mode === "closed" || a.mode === "failed")
        .length,
      remove_failed: report.problems.filter((p) => p.reason === "RemoveFailed").length,
      no_sandbox: this.#noSandbox(report),
    };
    observer.policySync?.((performance.now() - t0) / 1000, failures);
    const changed = report.applied.filter((a) => a.mode !== "unchanged");
    if (changed.length || report.removed.length) {
      logger.debug("MultiNetworkPolicy sync", {
        applied: changed.map((a) => `${a.pod}:${a.mode}`),
        removed: report.removed.map((r) => r.pod),
        ms: Math.round(report.durationMs * 10) / 10,
        full,
      });
    }
    this.#reporter.report(report);
    if (this.#afterList) {
      this.#afterList = false;
      this.#opts.afterPodList?.();
    }
  }

  /**
   * Reports the selected local pods without a sandbox past the grace period (problems added
   * to `report`) and schedules a sync for the next pod reaching it.
   *
   * @returns how many pods reached the grace period in this sync
   */
  #noSandbox(report: SyncReport): number {
    if (this.#opts.nodeName === undefined) return 0; // every pod is "local": no way to tell
    const now = Date.now();
    const v = this.#missing.observe(report.noSandbox, now);
    report.problems.push(...v.problems);
    clearTimeout(this.#graceTimer);
    this.#graceTimer = undefined;
    if (v.wakeAt !== undefined && !this.#stop.signal.aborted) {
      this.#graceTimer = setTimeout(() => this.#schedule("yes"), Math.max(0, v.wakeAt - now) + 1);
    }
    return v.counted;
  }

  /**
   * Stops the watches and the resync, waits for a running sync, then closes the applier (its
   * libnftables contexts are freed; the rules stay in force); idempotent.
   */
  async stop(): Promise<void> {
    this.#stop.abort();
    clearInterval(this.#resync);
    clearTimeout(this.#graceTimer);
    clearTimeout(this.#timer);
    this.#timer = undefined;
    await Promise.all(this.#watches);
    await this.#running;
    await this.#applier.close();
  }
}
