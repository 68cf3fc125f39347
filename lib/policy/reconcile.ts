/**
 * The piece the node daemon drives: it keeps the watched MultiNetworkPolicies, pods and
 * namespaces (`upsert*`/`delete*` from watch events), and {@link PolicyReconciler.sync}
 * brings every local pod's network namespace to the engine's desired state — level-
 * triggered: the same result whatever events were missed, and after a restart the first
 * sync also clears tables left on pods no policy selects any more.
 *
 * Fail closed: when a pod's ruleset cannot be programmed, the reconciler tries the same
 * interfaces with no allows (default drop only) and reports the failure either way (a
 * refused batch changes nothing, so the previous table stays in force until then).
 *
 * @module
 */

import { PolicyApplier } from "./apply.ts";
import { computeDesiredPolicies } from "./engine.ts";
import type { ApplyMode } from "./apply.ts";
import type { PodRuleset, PolicyProblem } from "./ruleset.ts";
import {
  type MultiNetworkPolicy,
  type NamespaceInfo,
  parseMultiNetworkPolicy,
  parseNamespace,
  parsePod,
  type PodAttachment,
  type PodInfo,
} from "./types.ts";
import { errorText } from "../util/text.ts";

/** Options of {@link PolicyReconciler}. */
export interface ReconcilerOptions {
  /**
   * The pod's network namespace path on this node (from the cache), or `undefined` when the
   * pod has no sandbox here (yet): such a pod is skipped until a later sync.
   */
  netnsOf: (pod: PodInfo) => string | undefined;
  /**
   * The attachments of a pod that runs on this node, from the node's own records (the
   * attachment cache: what Manifold verified against the kernel at ADD), or `undefined` for a
   * pod of another node. A local pod's addresses — as a selected pod and as a peer — come from
   * here, never from its network-status annotation, which anyone allowed to patch the pod can
   * overwrite (issue 28 §2); only remote pods' come from the annotation. Default: every pod's
   * come from its annotation.
   */
  localAttachmentsOf?: (pod: PodInfo) => PodAttachment[] | undefined;
  /** This node's name: only its pods are programmed (default: every pod with a netns). */
  nodeName?: string;
  /** Default: a {@link PolicyApplier} over libnftables. */
  applier?: PolicyApplier;
}

/** What one {@link PolicyReconciler.sync} did. */
export interface SyncReport {
  /** Pods whose namespace was brought to a ruleset (`ns/name`, netns, what was done). */
  applied: { pod: string; netns: string; mode: ApplyMode | "closed" | "failed" }[];
  /** Pods whose table was removed (no policy selects them any more). */
  removed: { pod: string; netns: string }[];
  /**
   * Local pods a policy selects on a network they are attached to, whose netns is not known
   * (`netnsOf` gave nothing: no sandbox in the cache yet, or a damaged cache record); `ns/name`,
   * sorted. Nothing is programmed for them; the caller decides when that is a problem.
   */
  noSandbox: string[];
  /** Engine problems and apply failures, for Warning events on the pods named. */
  problems: PolicyProblem[];
  /** Wall time of the sync in ms (engine + every batch). */
  durationMs: number;
}

const key = (o: { namespace: string; name: string }) => `${o.namespace}/${o.name}`;

/** The same interfaces and directions with no allow rule: default drop only. */
function closed(rs: PodRuleset): PodRuleset {
  const out: PodRuleset = {
    interfaces: rs.interfaces.map((i) => ({
      ifName: i.ifName,
      network: i.network,
      ...(i.ingress ? { ingress: [] } : {}),
      ...(i.egress ? { egress: [] } : {}),
    })),
    sets: [],
  };
  if (rs.lockdown) out.lockdown = rs.lockdown;
  return out;
}

/** Keeps the watched objects and programs local pods; one sync at a time. */
export class PolicyReconciler {
  readonly #policies = new Map<string, MultiNetworkPolicy>();
  readonly #pods = new Map<string, PodInfo>();
  readonly #namespaces = new Map<string, NamespaceInfo>();
  /** Pods with a table, by `ns/name` → netns. */
  readonly #policed = new Map<string, string>();
  readonly #options: ReconcilerOptions;
  readonly #applier: PolicyApplier;
  #swept = false;
  #queue: Promise<unknown> = Promise.resolve();

  /**
   * A reconciler with no objects yet.
   *
   * @param options how to find a pod's netns, the node name, the applier
   */
  constructor(options: ReconcilerOptions) {
    this.#options = options;
    this.#applier = options.applier ?? new PolicyApplier();
  }

  /**
   * Adds or replaces a policy from its API object.
   * @param raw a MultiNetworkPolicy object
   * @throws {PolicyParseError} when it has no name/namespace (an invalid spec is kept)
   */
  upsertPolicy(raw: unknown): void {
    const p = parseMultiNetworkPolicy(raw);
    this.#policies.set(key(p), p);
  }

  /**
   * Drops a policy.
   * @param namespace its namespace
   * @param name its name
   */
  deletePolicy(namespace: string, name: string): void {
    this.#policies.delete(`${namespace}/${name}`);
  }

  /**
   * Adds or replaces a pod from its API object (labels, node, network-status).
   * @param raw a Pod object
   * @throws {PolicyParseError} when it has no name/namespace or labels are not strings
   */
  upsertPod(raw: unknown): void {
    const p = parsePod(raw);
    this.#pods.set(key(p), p);
  }

  /**
   * Adds or replaces a pod already parsed (`parsePod`, e.g. kept compact by the daemon's
   * cluster-wide pod watch); the object is kept as given and must not be changed afterwards.
   * @param pod the pod
   */
  upsertPodInfo(pod: PodInfo): void {
    this.#pods.set(key(pod), pod);
  }

  /**
   * Drops a pod.
   * @param namespace its namespace
   * @param name its name
   */
  deletePod(namespace: string, name: string): void {
    this.#pods.delete(`${namespace}/${name}`);
  }

  /**
   * Adds or replaces a namespace from its API object.
   * @param raw a Namespace object
   * @throws {PolicyParseError} when it has no name
   */
  upsertNamespace(raw: unknown): void {
    const n = parseNamespace(raw);
    this.#namespaces.set(n.name, n);
  }

  /**
   * Drops a namespace.
   * @param name its name
   */
  deleteNamespace(name: string): void {
    this.#namespaces.delete(name);
  }

  /**
   * Computes the desired state and programs every local pod with a netns; removes tables
   * from pods no policy selects any more (on the first sync: from every local pod not
   * selected, to clear what an earlier process left). Calls are serialised.
   *
   * @param options `full: true` re-sends every ruleset in full (e.g. a periodic resync that
   *   repairs tables changed behind Manifold's back)
   * @returns what was done and the problems to report
   */
  sync(options: { full?: boolean } = {}): Promise<SyncReport> {
    const run = this.#queue.then(() => this.#sync(options.full ?? false));
    this.#queue = run.catch(() => {});
    return run;
  }

  async #sync(full: boolean): Promise<SyncReport> {
    const t0 = performance.now();
    const desired = computeDesiredPolicies({
      policies: [...this.#policies.values()],
      pods: [...this.#pods.values()].map((p) => this.#withLocalAddresses(p)),
      namespaces: [...this.#namespaces.values()],
    }, this.#options.nodeName === undefined ? {} : { nodeName: this.#options.nodeName });
    const report: SyncReport = {
      applied: [],
      removed: [],
      noSandbox: [],
      problems: [...desired.problems],
      durationMs: 0,
    };
    for (const [id, { pod, ruleset }] of desired.pods) {
      const netns = this.#options.netnsOf(pod);
      if (!netns) {
        report.noSandbox.push(id);
        continue;
      }
      const previous = this.#policed.get(id);
      if (previous && previous !== netns) this.#applier.forget(previous); // new sandbox
      if (full) this.#applier.forget(netns);
      this.#policed.set(id, netns);
      report.applied.push({ pod: id, netns, mode: await this.#apply(id, netns, ruleset, report) });
    }
    const stale = this.#swept ? [...this.#policed] : this.#localUnselected(desired.pods);
    this.#swept = true;
    for (const [id, netns] of stale) {
      const want = desired.pods.get(id);
      if (want && this.#options.netnsOf(want.pod) === netns) continue; // applied above
      if (this.#policed.get(id) === netns) this.#policed.delete(id);
      const pod = this.#pods.get(id);
      if (!pod || this.#options.netnsOf(pod) !== netns) {
        this.#applier.forget(netns); // the pod or its sandbox is gone, the netns with it
        continue;
      }
      try {
        await this.#applier.remove(netns);
        report.removed.push({ pod: id, netns });
      } catch (e) {
        report.problems.push({
          reason: "RemoveFailed",
          pod: id,
          message: `Cannot remove the MultiNetworkPolicy rules: ${errorText(e)}`,
        });
      }
    }
    report.durationMs = performance.now() - t0;
    return report;
  }

  /**
   * The pod with its local attachments in place of the annotation's (an unreadable annotation
   * stays unreadable: the pod fails closed as before).
   */
  #withLocalAddresses(pod: PodInfo): PodInfo {
    if (!pod.attachments) return pod;
    const local = this.#options.localAttachmentsOf?.(pod);
    return local === undefined ? pod : { ...pod, attachments: local };
  }

  #localUnselected(selected: Map<string, unknown>): [string, string][] {
    const out: [string, string][] = [...this.#policed];
    for (const [id, pod] of this.#pods) {
      if (selected.has(id) || this.#policed.has(id) || pod.finished) continue;
      if (this.#options.nodeName !== undefined && pod.nodeName !== this.#options.nodeName) continue;
      const netns = this.#options.netnsOf(pod);
      if (netns) out.push([id, netns]);
    }
    return out;
  }

  async #apply(
    id: string,
    netns: string,
    ruleset: PodRuleset,
    report: SyncReport,
  ): Promise<ApplyMode | "closed" | "failed"> {
    try {
      return await this.#applier.apply(netns, ruleset);
    } catch (e) {
      const why = errorText(e);
      try {
        await this.#applier.apply(netns, closed(ruleset));
        report.problems.push({
          reason: "ApplyFailed",
          pod: id,
          message:
            `Cannot program the MultiNetworkPolicy rules (${why}): the policed interfaces are closed`,
        });
        return "closed";
      } catch (e2) {
        report.problems.push({
          reason: "ApplyFailed",
          pod: id,
          message:
            `Cannot program the MultiNetworkPolicy rules (${why}) nor close the interfaces (${
              errorText(e2)
            })`,
        });
        return "failed";
      }
    }
  }
}
