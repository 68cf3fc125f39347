/**
 * Peer resolution for the engine: the pods a `podSelector`/`namespaceSelector` peer names
 * and their addresses on one network (network-status entries whose `name` is the NAD's
 * `ns/name`), indexed once per computation and memoised per peer and network.
 *
 * @module
 */

import { canonicalIp, type IpFamily, parseIp } from "./cidr.ts";
import type { PolicyProblem } from "./ruleset.ts";
import { matchesSelector } from "./selector.ts";
import type { NamespaceInfo, PodAttachment, PodInfo, PolicyPeer } from "./types.ts";

/** `ns/name` of a namespaced object. */
export const key = (o: { namespace: string; name: string }): string => `${o.namespace}/${o.name}`;

/** One parsed address. */
interface Addr {
  family: IpFamily;
  text: string;
  value: bigint;
}

/** A pod attached to one network. */
interface Member {
  pod: PodInfo;
  attachment: PodAttachment;
}

/**
 * Parsed addresses per attachment, kept across computations: the daemon keeps each pod's
 * PodInfo until the pod changes, so a sync parses only the addresses of pods that changed
 * since the last one (with 20,000 pods, parsing every address each sync was a third of it).
 */
const PARSED = new WeakMap<PodAttachment, Addr[]>();

function addrsOf(a: PodAttachment): Addr[] {
  let addrs = PARSED.get(a);
  if (!addrs) {
    addrs = a.ips.flatMap((text) => {
      const p = parseIp(text);
      return p ? [{ family: p.family, text: canonicalIp(text)!, value: p.addr }] : [];
    });
    PARSED.set(a, addrs);
  }
  return addrs;
}

/** Per-computation context: indexes and the problem sink. */
export class Resolver {
  /** The problem sink shared with the engine. */
  readonly problems: PolicyProblem[];
  readonly #nsLabels: Map<string, Record<string, string>>;
  /** Pods per network, then per namespace; unreadable pods under network `null`. */
  readonly #byNetwork = new Map<string | null, Map<string, Member[]>>();
  /** Resolutions by what they depend on: the selectors, the namespace they default to, the network. */
  readonly #memo = new Map<string, Record<IpFamily, string[]>>();
  #warnedPeers = new Set<string>();

  /**
   * Indexes the pods per network and namespace (addresses are parsed when a peer names them).
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
      let byNs = this.#byNetwork.get(net);
      if (!byNs) this.#byNetwork.set(net, byNs = new Map());
      const list = byNs.get(m.pod.namespace);
      if (list) list.push(m);
      else byNs.set(m.pod.namespace, [m]);
    };
    const none: PodAttachment = { network: "", ifName: "", ips: [], isDefault: false };
    for (const pod of world.pods) {
      if (pod.finished) continue;
      if (!pod.attachments) {
        add(null, { pod, attachment: none });
        continue;
      }
      for (const attachment of pod.attachments) add(attachment.network, { pod, attachment });
    }
  }

  /**
   * Addresses on `network` of the pods a selector peer names, split by family, sorted;
   * memoised per selectors, namespace and network (every local pod a policy selects shares
   * them, and so do policies with the same peer).
   */
  peerAddresses(peer: PolicyPeer, policyNs: string, network: string): Record<IpFamily, string[]> {
    const id = JSON.stringify([
      peer.podSelector ?? null,
      peer.namespaceSelector ?? null,
      peer.namespaceSelector ? "" : policyNs,
      network,
    ]);
    let found = this.#memo.get(id);
    if (!found) this.#memo.set(id, found = this.#resolve(peer, policyNs, network));
    return found;
  }

  /** The members of `byNs` in the namespaces the peer can name. */
  *#candidates(peer: PolicyPeer, policyNs: string, byNs: Map<string, Member[]> | undefined) {
    if (!byNs) return;
    if (!peer.namespaceSelector) {
      yield* byNs.get(policyNs) ?? [];
      return;
    }
    for (const [ns, members] of byNs) {
      const labels = this.#nsLabels.get(ns);
      if (labels && matchesSelector(peer.namespaceSelector, labels)) yield* members;
    }
  }

  #names(peer: PolicyPeer, pod: PodInfo): boolean {
    return !peer.podSelector || matchesSelector(peer.podSelector, pod.labels);
  }

  #resolve(peer: PolicyPeer, policyNs: string, network: string): Record<IpFamily, string[]> {
    for (const { pod } of this.#candidates(peer, policyNs, this.#byNetwork.get(null))) {
      if (this.#names(peer, pod)) this.#warnPeer(pod);
    }
    const out: Record<IpFamily, Map<string, bigint>> = { ipv4: new Map(), ipv6: new Map() };
    for (const m of this.#candidates(peer, policyNs, this.#byNetwork.get(network))) {
      if (!this.#names(peer, m.pod)) continue;
      for (const a of addrsOf(m.attachment)) out[a.family].set(a.text, a.value);
    }
    return { ipv4: sortIps(out.ipv4), ipv6: sortIps(out.ipv6) };
  }

  #warnPeer(pod: PodInfo): void {
    const id = key(pod);
    if (this.#warnedPeers.has(id)) return;
    this.#warnedPeers.add(id);
    this.problems.push({
      reason: "UnreadableNetworkStatus",
      pod: id,
      message: `Network-status of ${id} is unreadable: it is not allowed as a peer`,
    });
  }
}

function sortIps(ips: Map<string, bigint>): string[] {
  return [...ips].sort((a, b) => (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0)).map(([s]) => s);
}
