/**
 * {@link PodRuleset} → libnftables JSON (`libnftables-json(5)`): one table
 * `inet manifold_mnp` in the pod's network namespace with base chains `input`/`output`
 * (`ct state established,related accept`, then a jump per policed interface by
 * `iifname`/`oifname`), one chain per interface and direction (ICMPv6 neighbour discovery and
 * multicast listener discovery, the allow rules, then `counter drop`), and one named set per
 * peer group.
 *
 * A full batch replaces the table atomically (`add`/`delete`/`add` table then everything,
 * one transaction); when only set elements changed, {@link renderSetUpdate} flushes and
 * refills just those sets, so a peer change never rewrites the rules.
 *
 * @module
 */

import { parseCidr } from "./cidr.ts";
import type { PortMatch } from "./ports.ts";
import type { AddressSet, AllowRule, PodRuleset } from "./ruleset.ts";

/** Family of the table. */
export const TABLE_FAMILY = "inet";
/** Name of Manifold's table in a pod's network namespace. */
export const TABLE_NAME = "manifold_mnp";

/** One libnftables JSON command (`{"add": {...}}`, `{"flush": {...}}`, …). */
export type NftCommand = Record<string, unknown>;

const T = { family: TABLE_FAMILY, table: TABLE_NAME };
const ACCEPT = { accept: null };
/**
 * ICMPv6 types an isolated interface always passes: MLD (RFC 2710 query 130, report 131,
 * done 132; RFC 3810 MLDv2 report 143) — with MLD snooping on the segment (SR-IOV, macvlan on
 * a physical switch) a pod that cannot answer queries loses its multicast, neighbour
 * solicitations included, after the snooping timeout — and neighbour discovery (RFC 4861,
 * 133–136).
 */
const ICMPV6_CONTROL_TYPES = [
  "mld-listener-query",
  "mld-listener-report",
  "mld-listener-done",
  "mld2-listener-report",
  "nd-router-solicit",
  "nd-router-advert",
  "nd-neighbor-solicit",
  "nd-neighbor-advert",
];

function match(left: unknown, right: unknown, op = "=="): Record<string, unknown> {
  return { match: { op, left, right } };
}
const meta = (key: string) => ({ meta: { key } });
const payload = (protocol: string, field: string) => ({ payload: { protocol, field } });

function element(s: AddressSet, e: string): unknown {
  if (!s.interval) return e;
  const p = parseCidr(e)!;
  const full = p.family === "ipv4" ? 32 : 128;
  return p.len === full ? e.slice(0, e.indexOf("/")) : {
    prefix: { addr: e.slice(0, e.indexOf("/")), len: p.len },
  };
}

function elements(s: AddressSet): unknown[] {
  return s.elements.map((e) => element(s, e));
}

function portExprs(port: PortMatch | null): unknown[] {
  if (!port) return [];
  if (port.from === undefined) return [match(meta("l4proto"), port.protocol)];
  const right = port.from === port.to ? port.from : { range: [port.from, port.to] };
  return [match(payload(port.protocol, "dport"), right)];
}

function ruleExprs(r: AllowRule, sets: Map<string, AddressSet>, dir: "saddr" | "daddr"): unknown[] {
  const out: unknown[] = [];
  if (r.set) {
    const s = sets.get(r.set)!;
    out.push(match(payload(s.family === "ipv4" ? "ip" : "ip6", dir), `@${r.set}`));
  }
  out.push(...portExprs(r.port), ACCEPT);
  return out;
}

function rule(chain: string, expr: unknown[], comment?: string): NftCommand {
  return { add: { rule: { ...T, chain, expr, ...(comment ? { comment } : {}) } } };
}

/**
 * The chain name of one interface and direction.
 *
 * @param dir `"ingress"` or `"egress"`
 * @param ifName the pod interface
 * @returns e.g. `"in_net1"`, `"out_net1"`
 * @example chainName("ingress", "net1") // "in_net1"
 */
export function chainName(dir: "ingress" | "egress", ifName: string): string {
  return `${dir === "ingress" ? "in" : "out"}_${ifName}`;
}

/**
 * Renders the full, atomic replacement of the pod's table.
 *
 * @param rs the desired ruleset
 * @returns a libnftables JSON document `{"nftables": [...]}`; deterministic for equal input
 * @example renderRuleset({ interfaces: [], sets: [] }).nftables.length // 3 (the table only)
 */
export function renderRuleset(rs: PodRuleset): { nftables: NftCommand[] } {
  const table = { family: TABLE_FAMILY, name: TABLE_NAME };
  const cmds: NftCommand[] = [
    { add: { table } }, // so the delete below cannot fail on a first apply
    { delete: { table } },
    { add: { table } },
  ];
  const sets = new Map(rs.sets.map((s) => [s.name, s]));
  for (const s of rs.sets) {
    const set: Record<string, unknown> = {
      ...T,
      name: s.name,
      type: s.family === "ipv4" ? "ipv4_addr" : "ipv6_addr",
    };
    if (s.interval) set.flags = ["interval"];
    if (s.elements.length) set.elem = elements(s);
    cmds.push({ add: { set } });
  }
  const hooks = [
    { dir: "ingress" as const, base: "input", ifKey: "iifname", addr: "saddr" as const },
    { dir: "egress" as const, base: "output", ifKey: "oifname", addr: "daddr" as const },
  ];
  for (const h of hooks) {
    const policed = rs.interfaces.filter((i) => i[h.dir]);
    if (!policed.length && !rs.lockdown) continue;
    cmds.push({
      add: {
        chain: { ...T, name: h.base, type: "filter", hook: h.base, prio: 0, policy: "accept" },
      },
    });
    for (const i of policed) {
      cmds.push({ add: { chain: { ...T, name: chainName(h.dir, i.ifName) } } });
    }
    cmds.push(
      rule(h.base, [match({ ct: { key: "state" } }, ["established", "related"], "in"), ACCEPT]),
    );
    if (rs.lockdown) {
      cmds.push(rule(h.base, [
        match(meta(h.ifKey), { set: rs.lockdown.keep }, "!="),
        { counter: null },
        { drop: null },
      ], "fail closed: network-status unreadable"));
    }
    for (const i of policed) {
      const chain = chainName(h.dir, i.ifName);
      cmds.push(rule(h.base, [match(meta(h.ifKey), i.ifName), { jump: { target: chain } }]));
      cmds.push(rule(chain, [
        match(meta("l4proto"), "ipv6-icmp"),
        match(payload("icmpv6", "type"), { set: ICMPV6_CONTROL_TYPES }),
        ACCEPT,
      ], "neighbour and multicast listener discovery"));
      for (const r of i[h.dir]!) cmds.push(rule(chain, ruleExprs(r, sets, h.addr), r.comment));
      cmds.push(rule(chain, [{ counter: null }, { drop: null }], `default deny ${i.network}`));
    }
  }
  return { nftables: cmds };
}

/** The ruleset without set elements: two rulesets with the same key differ only in elements. */
function structureKey(rs: PodRuleset): string {
  return JSON.stringify({ ...rs, sets: rs.sets.map((s) => ({ ...s, elements: [] })) });
}

/**
 * Renders the set-only update from `prev` to `next` when their rules are the same: for each
 * set whose elements changed, `flush set` + `add element` (one transaction).
 *
 * @param prev the ruleset in force
 * @param next the desired ruleset
 * @returns the batch (`nftables: []` when nothing changed), or `null` when the structure
 *   differs and the table must be replaced with {@link renderRuleset}
 * @example renderSetUpdate({ interfaces: [], sets: [] }, { interfaces: [], sets: [] }) // { nftables: [] }
 */
export function renderSetUpdate(
  prev: PodRuleset,
  next: PodRuleset,
): { nftables: NftCommand[] } | null {
  if (structureKey(prev) !== structureKey(next)) return null;
  const cmds: NftCommand[] = [];
  next.sets.forEach((s, i) => {
    if (JSON.stringify(s.elements) === JSON.stringify(prev.sets[i].elements)) return;
    cmds.push({ flush: { set: { ...T, name: s.name } } });
    if (s.elements.length) {
      cmds.push({ add: { element: { ...T, name: s.name, elem: elements(s) } } });
    }
  });
  return { nftables: cmds };
}

/**
 * The batch removing the pod's table; succeeds when there is none (`add` then `delete`).
 *
 * @returns the libnftables JSON document
 * @example renderRemove().nftables.length // 2
 */
export function renderRemove(): { nftables: NftCommand[] } {
  const table = { family: TABLE_FAMILY, name: TABLE_NAME };
  return { nftables: [{ add: { table } }, { delete: { table } }] };
}

/**
 * The command listing the pod's table (with JSON output: sets, chains, rules, counters).
 *
 * @returns the libnftables JSON document
 * @example renderList().nftables[0] // { list: { table: { family: "inet", name: "manifold_mnp" } } }
 */
export function renderList(): { nftables: NftCommand[] } {
  return { nftables: [{ list: { table: { family: TABLE_FAMILY, name: TABLE_NAME } } }] };
}
