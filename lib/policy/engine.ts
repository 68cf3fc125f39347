/**
 * The pure MultiNetworkPolicy engine: from every policy, pod and namespace it computes, for
 * each local pod a policy selects, the {@link PodRuleset} to program in its network
 * namespace. Peers are resolved to their addresses on the same network (network-status
 * entries whose `name` is the policy's NAD `ns/name`); `ipBlock` minus `except` becomes
 * covering CIDRs; rules are the cartesian product of peers and ports (the Kuryr
 * network-policy spec's translation).
 *
 * Fail closed: a selected pod whose rules cannot be computed keeps default drop on its
 * interfaces of that network and a {@link PolicyProblem} is reported for a Warning event:
 * - an invalid spec: the pods its own `podSelector` selects (every pod of its namespace only
 *   when that selector itself is unreadable), in the directions of its `policyTypes`, with
 *   no allows from that policy;
 * - an unparsable `policy-for`: the pods it selects, on every secondary network (the networks
 *   it meant are unknown), with no allows from that policy anywhere;
 * - an unreadable network-status: every interface but `lo`/`eth0` dropped.
 * Output is deterministic (sorted).
 *
 * @module
 */

import { type IpFamily, splitExcept } from "./cidr.ts";
import { key, Resolver } from "./peers.ts";
import { type PortMatch, resolvePorts } from "./ports.ts";
import type {
  AddressSet,
  AllowRule,
  InterfacePolicy,
  PodRuleset,
  PolicyProblem,
} from "./ruleset.ts";
import { matchesSelector } from "./selector.ts";
import type { LabelSelector, PolicyPeer, PolicyPort } from "./spec.ts";
import {
  type MultiNetworkPolicy,
  type NamespaceInfo,
  parsePolicyFor,
  type PodAttachment,
  type PodInfo,
} from "./types.ts";
import { errorText } from "../util/text.ts";

/** Interfaces a lockdown leaves alone: loopback and the default network's interface. */
export const LOCKDOWN_KEEP: readonly string[] = ["eth0", "lo"];

/** Everything the engine reads (what the daemon watches). */
export interface PolicyWorld {
  /** Every MultiNetworkPolicy. */
  policies: readonly MultiNetworkPolicy[];
  /** All pods (peers are cluster-wide); local ones are chosen with `nodeName`. */
  pods: readonly PodInfo[];
  /** Every Namespace (for `namespaceSelector`). */
  namespaces: readonly NamespaceInfo[];
}

/** Options of {@link computeDesiredPolicies}. */
export interface ComputeOptions {
  /** Only pods with this `spec.nodeName` get rulesets; default: every pod. */
  nodeName?: string;
}

/** A pod's desired ruleset. */
export interface PodDesired {
  /** The pod (its uid and name lead the daemon to its netns). */
  pod: PodInfo;
  /** What to program in its netns. */
  ruleset: PodRuleset;
}

/** Result of {@link computeDesiredPolicies}. */
export interface DesiredPolicies {
  /** Keyed by `ns/name`, sorted; a local pod absent here must have no rules. */
  pods: Map<string, PodDesired>;
  /** Problems, sorted by pod then policy then reason. */
  problems: PolicyProblem[];
}

type Direction = "ingress" | "egress";

interface Compiled {
  policy: MultiNetworkPolicy;
  id: string;
  /** Networks it is for; `"secondary"` = unknown (invalid annotation): every non-default one. */
  networks: string[] | "secondary";
  types: Set<Direction>;
  /** The pods of its namespace it selects; `null` = all (its selector is unreadable). */
  selector: LabelSelector | null;
  /** Whether its rules allow anything: a valid spec and a valid `policy-for`. */
  allows: boolean;
}

function compile(policy: MultiNetworkPolicy, problems: PolicyProblem[]): Compiled | null {
  const id = key(policy);
  if (policy.policyFor === undefined) return null; // not for any secondary network
  const parsed = parsePolicyFor(policy.policyFor, policy.namespace);
  if (!parsed) {
    problems.push({
      reason: "InvalidPolicyFor",
      policy: id,
      message: invalidPolicyForMessage(policy.policyFor),
    });
  }
  const types = new Set<Direction>();
  const spec = policy.spec;
  let selector: LabelSelector | null;
  if (!spec) {
    const iso = policy.isolation ?? { podSelector: null, policyTypes: ["Ingress", "Egress"] };
    selector = iso.podSelector;
    for (const t of iso.policyTypes) types.add(t === "Ingress" ? "ingress" : "egress");
  } else {
    selector = spec.podSelector;
    if (spec.policyTypes?.length) {
      for (const t of spec.policyTypes) types.add(t === "Ingress" ? "ingress" : "egress");
    } else {
      types.add("ingress");
      if (spec.egress?.length) types.add("egress");
    }
  }
  return {
    policy,
    id,
    networks: parsed ?? "secondary",
    types,
    selector,
    allows: spec !== null && parsed !== null,
  };
}

const invalidPolicyForMessage = (value: string) =>
  `Invalid policy-for annotation ${
    JSON.stringify(value)
  } (a comma list of NAD names or namespace/name): the policy allows nothing and isolates ` +
  `every secondary network of the pods it selects`;

function selects(c: Compiled, pod: PodInfo): boolean {
  if (pod.namespace !== c.policy.namespace) return false;
  return c.selector === null || matchesSelector(c.selector, pod.labels);
}

function covers(c: Compiled, a: PodAttachment): boolean {
  return c.networks === "secondary" ? !a.isDefault : c.networks.includes(a.network);
}

/** Builds one interface's rules of one direction; sets are appended to `sets`. */
function buildDirection(
  ctx: { resolver: Resolver; pod: PodInfo; attachment: PodAttachment; sets: AddressSet[] },
  dir: Direction,
  policies: Compiled[],
): AllowRule[] {
  const { resolver, pod, attachment, sets } = ctx;
  const rules: AllowRule[] = [];
  const prefix = `${dir === "ingress" ? "in" : "out"}_${attachment.ifName}_`;
  let group = 0; // one number per peer group; its v4 and v6 sets share it
  const newSet = (family: IpFamily, interval: boolean, elements: string[]): string => {
    const name = `${prefix}${group}_${family === "ipv4" ? "v4" : "v6"}`;
    sets.push({ name, family, interval, elements });
    return name;
  };
  for (const c of policies) {
    const spec = c.policy.spec;
    if (!spec || !c.allows) continue; // invalid: isolated, no allows (reported per pod)
    const list = (dir === "ingress" ? spec.ingress : spec.egress) ?? [];
    const mark = { rules: rules.length, sets: sets.length, group };
    try {
      list.forEach((rule, i) => {
        const peers = (dir === "ingress"
          ? (rule as { from?: PolicyPeer[] | null }).from
          : (rule as { to?: PolicyPeer[] | null }).to) ?? [];
        const ports = resolveRulePorts(resolver, { pod, policy: c.id, dir }, rule.ports);
        const base = `${c.id} ${dir}[${i}]`;
        if (!peers.length) {
          for (const port of ports) {
            rules.push({ comment: clip(base), port });
          }
          return;
        }
        peers.forEach((peer, j) => {
          const comment = clip(`${base} ${dir === "ingress" ? "from" : "to"}[${j}]`);
          for (const set of peerSets(resolver, { peer, c, attachment, newSet })) {
            for (const port of ports) {
              rules.push({ comment, set, port });
            }
          }
          group++;
        });
      });
    } catch (e) {
      // Fail closed: none of this policy's allows on this interface, the drop stays.
      rules.length = mark.rules;
      sets.length = mark.sets;
      group = mark.group;
      resolver.problems.push({
        reason: "TranslationFailed",
        pod: key(pod),
        policy: c.id,
        message: `Cannot translate the ${dir} rules of ${c.id} for ${attachment.ifName} (${
          errorText(e)
        }): its allows are left out, the interface stays closed`,
      });
    }
  }
  return rules;
}

function peerSets(
  resolver: Resolver,
  a: {
    peer: PolicyPeer;
    c: Compiled;
    attachment: PodAttachment;
    newSet: (f: IpFamily, interval: boolean, e: string[]) => string;
  },
): string[] {
  const { peer, c, attachment, newSet } = a;
  if (peer.ipBlock) {
    const family: IpFamily = peer.ipBlock.cidr.includes(":") ? "ipv6" : "ipv4";
    const except = (peer.ipBlock.except ?? []).filter((e) =>
      e.includes(":") === (family === "ipv6")
    );
    return [newSet(family, true, splitExcept(peer.ipBlock.cidr, except))];
  }
  const addrs = resolver.peerAddresses(peer, c.policy.namespace, attachment.network);
  return [newSet("ipv4", false, addrs.ipv4), newSet("ipv6", false, addrs.ipv6)];
}

function resolveRulePorts(
  resolver: Resolver,
  at: { pod: PodInfo; policy: string; dir: Direction },
  ports: PolicyPort[] | null | undefined,
): (PortMatch | null)[] {
  // Named ports name the selected pod's container ports (ingress); for egress they name the
  // peers' ports, which is not supported yet: they match nothing (closed) and are reported.
  const r = resolvePorts(ports, at.dir === "ingress" ? at.pod.ports : []);
  if (r.unresolved.length) {
    resolver.problems.push({
      reason: "UnresolvedNamedPort",
      pod: key(at.pod),
      policy: at.policy,
      message: `Named ports ${r.unresolved.join(", ")} of ${at.dir} rules match nothing${
        at.dir === "egress" ? " (egress named ports are not supported yet)" : ""
      }`,
    });
  }
  return r.matches;
}

const clip = (s: string) => (s.length <= 120 ? s : `${s.slice(0, 117)}...`);

function podRuleset(
  resolver: Resolver,
  pod: PodInfo,
  applicable: Compiled[],
): PodRuleset | null {
  const id = key(pod);
  const invalid = new Set<Compiled>();
  const reportInvalid = () => {
    for (const c of invalid) {
      resolver.problems.push({
        reason: "InvalidPolicy",
        pod: id,
        policy: c.id,
        message: `Policy ${c.id} is invalid (${
          c.policy.specError?.split("\n").slice(0, 2).join(" ") ?? "bad spec"
        }): it allows nothing, the interfaces it covers stay closed`,
      });
    }
  };
  if (!pod.attachments) {
    resolver.problems.push({
      reason: "UnreadableNetworkStatus",
      pod: id,
      message: `Network-status is unreadable (${pod.statusError}): every interface but ${
        LOCKDOWN_KEEP.join(", ")
      } is closed`,
    });
    for (const c of applicable) if (!c.policy.spec) invalid.add(c);
    reportInvalid();
    return { interfaces: [], sets: [], lockdown: { keep: [...LOCKDOWN_KEEP] } };
  }
  const sets: AddressSet[] = [];
  const interfaces: InterfacePolicy[] = [];
  const attachments = [...pod.attachments].sort((a, b) => a.ifName.localeCompare(b.ifName));
  for (const attachment of attachments) {
    if (attachment.isDefault || interfaces.some((i) => i.ifName === attachment.ifName)) continue;
    const ps = applicable.filter((c) => covers(c, attachment));
    if (!ps.length) continue;
    for (const c of ps) if (!c.policy.spec) invalid.add(c);
    const entry: InterfacePolicy = { ifName: attachment.ifName, network: attachment.network };
    const ctx = { resolver, pod, attachment, sets };
    for (const dir of ["ingress", "egress"] as const) {
      const withType = ps.filter((c) => c.types.has(dir));
      if (withType.length) entry[dir] = buildDirection(ctx, dir, withType);
    }
    interfaces.push(entry);
  }
  if (!interfaces.length) return null;
  reportInvalid();
  return { interfaces, sets: sets.sort((a, b) => (a.name < b.name ? -1 : 1)) };
}

/**
 * Computes the desired ruleset of every local pod selected by at least one policy for a
 * network it is attached to.
 *
 * @param world all policies, pods and namespaces (parsed with `parse*` of types.ts)
 * @param options `nodeName` restricts the output to that node's pods
 * @returns per-pod rulesets (a local pod absent from the map must have no rules) and the
 *   problems to report as Warning events
 * @example
 * ```ts
 * const out = computeDesiredPolicies({ policies: [], pods: [], namespaces: [] });
 * out.pods.size // 0
 * ```
 */
export function computeDesiredPolicies(
  world: PolicyWorld,
  options: ComputeOptions = {},
): DesiredPolicies {
  const problems: PolicyProblem[] = [];
  const compiled = [...world.policies].sort((a, b) => key(a).localeCompare(key(b)))
    .map((p) => compile(p, problems)).filter((c): c is Compiled => c !== null);
  const resolver = new Resolver(world, problems);
  const pods = new Map<string, PodDesired>();
  const isLocal = (p: PodInfo) => options.nodeName === undefined || p.nodeName === options.nodeName;
  const local = world.pods.filter((p) => !p.finished && isLocal(p))
    .sort((a, b) => key(a).localeCompare(key(b)));
  for (const pod of local) {
    const applicable = compiled.filter((c) => selects(c, pod));
    if (!applicable.length) continue;
    for (const c of applicable) {
      if (c.networks !== "secondary") continue;
      problems.push({
        reason: "InvalidPolicyFor",
        pod: key(pod),
        policy: c.id,
        message: invalidPolicyForMessage(c.policy.policyFor!),
      });
    }
    const ruleset = podRuleset(resolver, pod, applicable);
    if (ruleset) pods.set(key(pod), { pod, ruleset });
  }
  resolver.reportUnreadablePeers(
    compiled.flatMap((c) =>
      c.allows ? [{ namespace: c.policy.namespace, spec: c.policy.spec! }] : []
    ),
    isLocal,
  );
  const order = (p: PolicyProblem) => `${p.pod ?? ""}|${p.policy ?? ""}|${p.reason}|${p.message}`;
  return { pods, problems: problems.sort((a, b) => order(a).localeCompare(order(b))) };
}
