/**
 * Checks of NPWG v1.3 §4.2 (same network twice), §5 (network-status, read back from the API
 * server) and §6 (the cluster-wide default network: always attached, first, one `default`
 * entry).
 *
 * @module
 */

import { calls, type Check, expect, expectOk, networks, oneAdd, withPod } from "./check.ts";
import { DEFAULT_NET, type PodRun } from "./harness.ts";

/**
 * Status keys NPWG v1.3 §5.3 defines at the top level of an entry; others must contain a
 * period. `default-route` is one of them: §5.3.7.4 numbers it under `dns`, but its text is
 * about the attachment, not DNS ("the default gateway … for the network attachment, if the
 * attachment had a 'default-route' key in the Network Attachment Selection Annotation"), and
 * every §5.4 example writes it at the top level of the entry, beside `mtu` and `default`, never
 * inside `dns`. A plugin that follows the examples does not write an unreserved key.
 */
const SPEC_KEYS = [
  "name",
  "interface",
  "ips",
  "mac",
  "mtu",
  "default",
  "dns",
  "default-route",
  "device-info",
];

async function statusOf(p: PodRun): Promise<Record<string, unknown>[]> {
  const st = await p.status();
  expect(Array.isArray(st), "no k8s.v1.cni.cncf.io/network-status list on the pod in the server");
  return st;
}

/** The NAD entries' names as the status may spell them (§5.3.1: should carry the namespace). */
function named(entry: Record<string, unknown>, ns: string, nad: string): boolean {
  return entry.name === `${ns}/${nad}` || entry.name === nad;
}

/** NPWG §4.2, §5, §6 checks. */
export const STATUS_CHECKS: Check[] = [
  {
    section: "NPWG §4.2",
    name:
      "same network twice: two attachments, distinct ifnames, two status entries, same DEL tuples",
    level: "MUST",
    run: (s) =>
      withPod(
        s,
        {
          annotations: networks("twice-net,twice-net"),
          nads: { "twice-net": s.net({ name: "twice-net" }) },
        },
        async (p) => {
          expectOk(await p.call("ADD"), "ADD");
          const adds = calls(await p.records(), "ADD", "twice-net");
          expect(adds.length === 2, `expected 2 ADDs of twice-net, saw ${adds.length}`);
          const ifs = adds.map((r) => r.env.CNI_IFNAME);
          expect(ifs[0] !== ifs[1], `both attachments used CNI_IFNAME ${ifs[0]}`);
          const st = (await statusOf(p)).filter((e) => named(e, p.ns, "twice-net"));
          expect(st.length === 2, `expected 2 status entries for twice-net, saw ${st.length}`);
          expectOk(await p.call("DEL"), "DEL");
          const dels = calls(await p.records(), "DEL", "twice-net").map((r) => r.env.CNI_IFNAME);
          expect(
            [...dels].sort().join() === [...ifs].sort().join(),
            `DEL used ifnames ${dels}, ADD used ${ifs}`,
          );
        },
      ),
  },
  {
    section: "NPWG §5.3",
    name: "network-status: one entry per attachment, required keys name and default",
    level: "MUST",
    run: (s) =>
      withPod(s, {
        annotations: networks([{ name: "st-a" }, { name: "st-b", interface: "stb0" }]),
        nads: { "st-a": s.net({ name: "st-a" }), "st-b": s.net({ name: "st-b" }) },
      }, async (p) => {
        expectOk(await p.call("ADD"), "ADD");
        const st = await statusOf(p);
        expect(st.length === 3, `expected 3 entries (default + 2), saw ${st.length}`);
        for (const e of st) {
          expect(
            typeof e.name === "string" && e.name,
            `entry without a name: ${JSON.stringify(e)}`,
          );
          expect(typeof e.default === "boolean", `entry ${e.name} has no boolean "default"`);
          expect(
            !("mac" in e) || "interface" in e,
            `entry ${e.name} has "mac" without "interface"`,
          );
        }
        expect(st.some((e) => named(e, p.ns, "st-a")), "no entry for st-a");
        expect(st.some((e) => named(e, p.ns, "st-b") && e.interface === "stb0"), "no stb0 entry");
      }),
  },
  {
    section: "NPWG §5.3",
    name: "network-status: no unreserved keys (non-spec keys use reverse domain notation)",
    level: "MUST",
    run: (s) =>
      withPod(
        s,
        { annotations: networks("st-a"), nads: { "st-a": s.net({ name: "st-a" }) } },
        async (p) => {
          expectOk(await p.call("ADD"), "ADD");
          const bad = (await statusOf(p)).flatMap((e) =>
            Object.keys(e).filter((k) => !SPEC_KEYS.includes(k) && !k.includes("."))
          );
          expect(bad.length === 0, `keys outside §5.3 without a period: ${[...new Set(bad)]}`);
        },
      ),
  },
  {
    section: "NPWG §5.3.1",
    name: 'network-status "name" carries the NAD\'s namespace ("ns/name")',
    level: "SHOULD",
    run: (s) =>
      withPod(
        s,
        { annotations: networks("st-a"), nads: { "st-a": s.net({ name: "st-a" }) } },
        async (p) => {
          expectOk(await p.call("ADD"), "ADD");
          const names = (await statusOf(p)).map((e) => e.name);
          expect(names.includes(`${p.ns}/st-a`), `names: ${JSON.stringify(names)}`);
        },
      ),
  },
  {
    section: "NPWG §5.1.1",
    name: "status interface and mac from the result's first sandbox interface",
    level: "MUST",
    run: (s) =>
      withPod(s, {
        annotations: networks([{ name: "src-net", interface: "src0" }]),
        nads: { "src-net": s.net({ name: "src-net", conformance: { hostInterfaceFirst: true } }) },
      }, async (p) => {
        expectOk(await p.call("ADD"), "ADD");
        const e = (await statusOf(p)).find((e) => named(e, p.ns, "src-net"));
        expect(e, "no status entry for src-net");
        expect(e.interface === "src0", `interface ${JSON.stringify(e.interface)}, want src0`);
        const mac = await p.mac("src0");
        expect(e.mac === mac, `mac ${JSON.stringify(e.mac)}, want src0's ${mac}`);
      }),
  },
  {
    section: "NPWG §5.3.3.1",
    name: "status ips from the first sandbox interface's addresses only",
    level: "SHOULD",
    run: (s) =>
      withPod(s, {
        annotations: networks([{ name: "src-net", interface: "src0" }]),
        nads: { "src-net": s.net({ name: "src-net", conformance: { hostInterfaceFirst: true } }) },
      }, async (p) => {
        expectOk(await p.call("ADD"), "ADD");
        const e = (await statusOf(p)).find((e) => named(e, p.ns, "src-net"));
        expect(e, "no status entry for src-net");
        const ips = ((e.ips ?? []) as string[]).map((a) => a.split("/")[0]);
        expect(ips.length > 0 && !ips.includes("192.0.2.250"), `ips ${JSON.stringify(e.ips)}`);
      }),
  },
  {
    section: "NPWG §6",
    name: "a pod without a selection is attached to the default network",
    level: "MUST",
    run: (s) =>
      withPod(s, {}, async (p) => {
        expectOk(await p.call("ADD"), "ADD");
        oneAdd(await p.records(), DEFAULT_NET);
        expect((await p.links()).includes("eth0"), "no eth0 in the pod");
      }),
  },
  {
    section: "NPWG §6.2",
    name: "the default network is attached before any selected network",
    level: "MUST",
    run: (s) =>
      withPod(s, {
        annotations: networks("ord-a,ord-b"),
        nads: { "ord-a": s.net({ name: "ord-a" }), "ord-b": s.net({ name: "ord-b" }) },
      }, async (p) => {
        expectOk(await p.call("ADD"), "ADD");
        const order = calls(await p.records(), "ADD").map((r) => r.config.name);
        expect(order[0] === DEFAULT_NET, `ADD order: ${JSON.stringify(order)}`);
      }),
  },
  {
    section: "NPWG §5.2",
    name: 'exactly one status entry has "default": true, and it is the default network\'s',
    level: "MUST",
    run: (s) =>
      withPod(
        s,
        { annotations: networks("st-a"), nads: { "st-a": s.net({ name: "st-a" }) } },
        async (p) => {
          expectOk(await p.call("ADD"), "ADD");
          const st = await statusOf(p);
          const defaults = st.filter((e) => e.default === true);
          expect(defaults.length === 1, `${defaults.length} entries with default: true`);
          expect(
            String(defaults[0].name).endsWith(DEFAULT_NET) && defaults[0].interface === "eth0",
            `default entry ${JSON.stringify(defaults[0])}`,
          );
          // Only `true` is asserted here: a missing "default" key is §5.3.6's finding (the
          // required-key check), not a second default.
          expect(
            st.filter((e) => named(e, p.ns, "st-a")).every((e) => e.default !== true),
            'st-a\'s entry says "default": true',
          );
        },
      ),
  },
];
