/**
 * Peer resolution for the engine: the pods a `podSelector`/`namespaceSelector` peer names
 * and their addresses on one network (network-status entries whose `name` is the NAD's
 * `ns/name`), indexed once per computation (per namespace: a peer reads only the namespaces it
 * can name) and memoised per peer and network; parsed addresses are kept per attachment
 * across computations.
 *
 * @module
 */

import { canonicalIp, type IpFamily, parseIp } from "./cidr.ts";
import type { PolicyProblem } from "./ruleset.ts";
import { matchesSelector } from "../k8s/label_selector.ts";
import type { PolicyPeer, PolicySpec } from "./spec.ts";
import type { NamespaceInfo, PodAttachment, PodInfo } from "./types.ts";

/** `ns/name` of a namespaced object. */
export const key = (o: { namespace: string; name: string }): string => `${o.namespace}/${o.name}`;

/** One parsed address. */
interface Addr {
  family: IpFamily;
  text: string;
  value: bigint;
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
      if (!p) return [];
      const canonical = canonicalIp(text)!;
      return [{ family: p.family, text: canonical === text ? text : canonical, value: p.addr }];
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
  /** Pods (not finished) per namespace: with a readable network-status, and without. */
  readonly #byNamespace = new Map<string, PodInfo[]>();
  readonly #unreadable = new Map<string, PodInfo[]>();
  /** Resolutions by what they depend on: selectors, the namespace they default to, network. */
  readonly #memo = new Map<string, Record<IpFamily, string[]>>();

  /**
   * Indexes the pods per namespace (addresses are parsed when a peer names them).
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
    for (const pod of world.pods) {
      if (pod.finished) continue;
      const index = pod.attachments ? this.#byNamespace : this.#unreadable;
      const list = index.get(pod.namespace);
      if (list) list.push(pod);
      else index.set(pod.namespace, [pod]);
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

  /** The pods of `index` a peer names: in the namespaces it can name, matching its selector. */
  *#named(peer: PolicyPeer, policyNs: string, index: Map<string, PodInfo[]>) {
    const lists = !peer.namespaceSelector
      ? [index.get(policyNs) ?? []]
      : [...index].filter(([ns]) => {
        const labels = this.#nsLabels.get(ns);
        return labels !== undefined && matchesSelector(peer.namespaceSelector!, labels);
      }).map(([, pods]) => pods);
    for (const pods of lists) {
      for (const pod of pods) {
        if (!peer.podSelector || matchesSelector(peer.podSelector, pod.labels)) yield pod;
      }
    }
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
    for (const pod of this.#named(peer, policyNs, this.#byNamespace)) {
      for (const attachment of pod.attachments!) {
        if (attachment.network !== network) continue;
        for (const a of addrsOf(attachment)) out[a.family].set(a.text, a.value);
      }
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
    for (const pod of [...this.#unreadable.values()].flat()) {
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
