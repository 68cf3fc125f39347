/**
 * Peer resolution for the engine: the pods a `podSelector`/`namespaceSelector` peer names
 * and their addresses on one network (network-status entries whose `name` is the NAD's
 * `ns/name`), indexed once per computation and memoised per peer and network.
 *
 * @module
 */

import { canonicalIp, type IpFamily, parseIp } from "./cidr.ts";
import type { PolicyProblem } from "./ruleset.ts";
import { matchesSelector } from "../k8s/label_selector.ts";
import type { PolicyPeer, PolicySpec } from "./spec.ts";
import type { NamespaceInfo, PodInfo } from "./types.ts";

/** `ns/name` of a namespaced object. */
export const key = (o: { namespace: string; name: string }): string => `${o.namespace}/${o.name}`;

/** A pod's parsed addresses on one network. */
interface Member {
  pod: PodInfo;
  addrs: { family: IpFamily; text: string; value: bigint }[];
}

/** Per-computation context: indexes and the problem sink. */
export class Resolver {
  /** The problem sink shared with the engine. */
  readonly problems: PolicyProblem[];
  readonly #nsLabels: Map<string, Record<string, string>>;
  /** Pods with their parsed addresses, per network; unreadable pods under `null`. */
  readonly #byNetwork = new Map<string | null, Member[]>();
  readonly #memo = new WeakMap<PolicyPeer, Map<string, Record<IpFamily, string[]>>>();

  /**
   * Indexes the pods' addresses per network.
   *
   * @param world the pods (finished ones are skipped) and namespaces
   * @param problems where unreadable peers are reported
   */
  constructor(
    world: { pods: readonly PodInfo[]; namespaces: readonly NamespaceInfo[] },
    problems: PolicyProblem[],
  ) {
    this.#nsLabels = new Map(world.namespaces.map((n) => [n.name, n.labels]));
    this.problems = problems;
    const add = (net: string | null, m: Member) => {
      const list = this.#byNetwork.get(net);
      if (list) list.push(m);
      else this.#byNetwork.set(net, [m]);
    };
    for (const pod of world.pods) {
      if (pod.finished) continue;
      if (!pod.attachments) {
        add(null, { pod, addrs: [] });
        continue;
      }
      for (const a of pod.attachments) {
        const addrs = a.ips.flatMap((text) => {
          const p = parseIp(text);
          return p ? [{ family: p.family, text: canonicalIp(text)!, value: p.addr }] : [];
        });
        add(a.network, { pod, addrs });
      }
    }
  }

  /**
   * Addresses on `network` of the pods a selector peer names, split by family, sorted;
   * memoised per peer object and network (every local pod a policy selects shares them).
   */
  peerAddresses(peer: PolicyPeer, policyNs: string, network: string): Record<IpFamily, string[]> {
    let byNet = this.#memo.get(peer);
    if (!byNet) this.#memo.set(peer, byNet = new Map());
    let found = byNet.get(network);
    if (!found) byNet.set(network, found = this.#resolve(peer, policyNs, network));
    return found;
  }

  #names(peer: PolicyPeer, policyNs: string, pod: PodInfo): boolean {
    if (peer.namespaceSelector) {
      const labels = this.#nsLabels.get(pod.namespace);
      if (!labels || !matchesSelector(peer.namespaceSelector, labels)) return false;
    } else if (pod.namespace !== policyNs) return false;
    return !peer.podSelector || matchesSelector(peer.podSelector, pod.labels);
  }

  #resolve(peer: PolicyPeer, policyNs: string, network: string): Record<IpFamily, string[]> {
    const out: Record<IpFamily, Map<string, bigint>> = { ipv4: new Map(), ipv6: new Map() };
    for (const m of this.#byNetwork.get(network) ?? []) {
      if (!this.#names(peer, policyNs, m.pod)) continue;
      for (const a of m.addrs) out[a.family].set(a.text, a.value);
    }
    return { ipv4: sortIps(out.ipv4), ipv6: sortIps(out.ipv6) };
  }

  /**
   * Reports each pod with an unreadable network-status that a selector peer of `policies`
   * names (it cannot be allowed: its addresses are unknown), once per pod — only for pods
   * `isLocal` accepts, so a pod's own node posts it and the other nodes stay quiet.
   *
   * @param policies the valid specs with their namespaces
   * @param isLocal whether a pod runs on this node
   */
  reportUnreadablePeers(
    policies: readonly { namespace: string; spec: PolicySpec }[],
    isLocal: (pod: PodInfo) => boolean,
  ): void {
    for (const { pod } of this.#byNetwork.get(null) ?? []) {
      if (!isLocal(pod)) continue;
      const named = policies.some(({ namespace, spec }) =>
        [...(spec.ingress ?? []).map((r) => r.from), ...(spec.egress ?? []).map((r) => r.to)]
          .some((peers) => (peers ?? []).some((p) => !p.ipBlock && this.#names(p, namespace, pod)))
      );
      if (!named) continue;
      const id = key(pod);
      this.problems.push({
        reason: "UnreadableNetworkStatus",
        pod: id,
        message: `Network-status of ${id} is unreadable: it is not allowed as a peer`,
      });
    }
  }
}

function sortIps(ips: Map<string, bigint>): string[] {
  return [...ips].sort((a, b) => (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0)).map(([s]) => s);
}
