/**
 * Which pod changes can change this node's MultiNetworkPolicy rules. A pod of another node
 * enters a local pod's rules only as a peer: through a `podSelector`/`namespaceSelector` peer
 * of some policy (lib/policy/peers.ts). A change of a pod that is not on this node and that no
 * such peer names — before nor after the change — leaves every local ruleset as it was, so
 * the policy agent does not sync for it (with 20,000 pods in the cluster, most pod changes
 * are of that kind, and a sync reads every pod).
 *
 * The answer is exact for the engine's peer rule (same selector semantics) and conservative
 * otherwise: a peer of a policy that selects no pod of this node still counts.
 *
 * @module
 */

import {
  type LabelSelector,
  matchesSelector,
  parseMultiNetworkPolicy,
  parseNamespace,
  type PodInfo,
} from "../../policy/mod.ts";

/** A selector peer of one policy. */
interface SelectorPeer {
  /** The policy's namespace (the peer's pods' namespace without `namespaceSelector`). */
  namespace: string;
  podSelector?: LabelSelector | null;
  namespaceSelector?: LabelSelector | null;
}

/** The selector peers of every policy and the labels of every namespace. */
export class PolicyPeers {
  readonly #byPolicy = new Map<string, SelectorPeer[]>();
  readonly #nsLabels = new Map<string, Record<string, string>>();

  /**
   * Records a policy's selector peers (none when it has no `policy-for` or an invalid spec:
   * the engine gives such a policy no allows).
   * @param raw a MultiNetworkPolicy object
   * @throws {PolicyParseError} when it has no name/namespace
   */
  upsertPolicy(raw: unknown): void {
    const p = parseMultiNetworkPolicy(raw);
    const peers: SelectorPeer[] = [];
    if (p.policyFor !== undefined && p.spec) {
      const rules = [
        ...(p.spec.ingress ?? []).map((r) => r.from),
        ...(p.spec.egress ?? []).map((r) => r.to),
      ];
      for (const list of rules) {
        for (const peer of list ?? []) {
          if (peer.ipBlock || (!peer.podSelector && !peer.namespaceSelector)) continue;
          peers.push({
            namespace: p.namespace,
            podSelector: peer.podSelector,
            namespaceSelector: peer.namespaceSelector,
          });
        }
      }
    }
    this.#byPolicy.set(`${p.namespace}/${p.name}`, peers);
  }

  /** Forgets a policy. */
  deletePolicy(namespace: string, name: string): void {
    this.#byPolicy.delete(`${namespace}/${name}`);
  }

  /**
   * Records a namespace's labels.
   * @param raw a Namespace object
   * @throws {PolicyParseError} when it has no name
   */
  upsertNamespace(raw: unknown): void {
    const n = parseNamespace(raw);
    this.#nsLabels.set(n.name, n.labels);
  }

  /** Forgets a namespace. */
  deleteNamespace(name: string): void {
    this.#nsLabels.delete(name);
  }

  /**
   * Whether some policy's selector peer names `pod` (lib/policy/peers.ts semantics: a
   * `namespaceSelector` matches the pod's namespace labels, else the pod is in the policy's
   * namespace; a `podSelector`, when given, matches its labels).
   */
  names(pod: PodInfo): boolean {
    for (const peers of this.#byPolicy.values()) {
      for (const peer of peers) {
        if (peer.namespaceSelector) {
          const labels = this.#nsLabels.get(pod.namespace);
          if (!labels || !matchesSelector(peer.namespaceSelector, labels)) continue;
        } else if (pod.namespace !== peer.namespace) continue;
        if (!peer.podSelector || matchesSelector(peer.podSelector, pod.labels)) return true;
      }
    }
    return false;
  }

  /**
   * Whether a pod's change (`before` → `after`; undefined = absent) can change the rules of
   * `nodeName`'s pods: one of the two is on that node, or named by a peer.
   * @param nodeName this node; undefined (every pod may be local) → always true
   */
  matters(nodeName: string | undefined, before?: PodInfo, after?: PodInfo): boolean {
    if (nodeName === undefined) return true;
    for (const p of [before, after]) {
      if (p && (p.nodeName === nodeName || this.names(p))) return true;
    }
    return false;
  }
}
