/**
 * Checks of NPWG v1.3 §3.4 (which plugins a NAD runs, name injection) and §7.1 (configlist
 * invocation: `name`/`cniVersion` injected into every plugin, `prevResult` chained).
 *
 * @module
 */

import { calls, type Check, expect, expectOk, networks, oneAdd, said, withPod } from "./check.ts";
import type { Suite } from "./harness.ts";

/** A NAD selecting `marker`: the recorder's config carries it so a check sees which ran. */
function marked(suite: Suite, marker: string, extra: Record<string, unknown> = {}) {
  return suite.net({ "org.conformance.marker": marker, ...extra });
}

/** A NAD with a two-plugin configlist (macvlan, then tuning), each marked `p1`/`p2`. */
function chain(suite: Suite): Record<string, unknown> {
  const { cniVersion: _, ...first } = marked(suite, "p1");
  return {
    cniVersion: "1.0.0",
    name: "chain-net",
    plugins: [first, {
      type: "conformance-recorder",
      delegate: "tuning",
      "org.conformance.marker": "p2",
    }],
  };
}

const marker = (r: { config: Record<string, unknown> }) => r.config["org.conformance.marker"];

/** NPWG §3.4 checks. */
export const NAD_CHECKS: Check[] = [
  {
    section: "NPWG §3.4.1",
    name: "spec.config wins over an on-disk config of the same name",
    level: "MUST",
    run: (s) =>
      withPod(s, {
        annotations: networks("net-a"),
        nads: { "net-a": marked(s, "spec", { name: "net-a" }) },
        onDisk: {
          "50-net-a.conflist": {
            cniVersion: "1.0.0",
            name: "net-a",
            plugins: [marked(s, "disk")],
          },
        },
      }, async (p) => {
        expectOk(await p.call("ADD"), "ADD");
        const add = oneAdd(await p.records(), "net-a");
        expect(
          add.config["org.conformance.marker"] === "spec",
          `the delegate got the ${add.config["org.conformance.marker"]} config, not spec.config`,
        );
      }),
  },
  {
    section: "NPWG §3.4.1",
    name: "no spec.config: on-disk .conflist by name",
    level: "MUST",
    run: (s) =>
      withPod(s, {
        annotations: networks("net-b"),
        nads: { "net-b": null },
        onDisk: {
          "50-net-b.conflist": { cniVersion: "1.0.0", name: "net-b", plugins: [marked(s, "list")] },
          "40-other.conflist": { cniVersion: "1.0.0", name: "other", plugins: [marked(s, "x")] },
        },
      }, async (p) => {
        expectOk(await p.call("ADD"), "ADD");
        const add = oneAdd(await p.records(), "net-b");
        expect(
          add.config["org.conformance.marker"] === "list",
          "the on-disk conflist was not used",
        );
      }),
  },
  {
    section: "NPWG §3.4.1",
    name: "no spec.config: .conflist before .conf of the same name",
    level: "MUST",
    run: (s) =>
      withPod(s, {
        annotations: networks("net-c"),
        nads: { "net-c": null },
        onDisk: {
          "10-net-c.conf": marked(s, "conf", { name: "net-c" }),
          "90-net-c.conflist": { cniVersion: "1.0.0", name: "net-c", plugins: [marked(s, "list")] },
        },
      }, async (p) => {
        expectOk(await p.call("ADD"), "ADD");
        const add = oneAdd(await p.records(), "net-c");
        expect(
          add.config["org.conformance.marker"] === "list",
          `the ${add.config["org.conformance.marker"]} file was used, not the .conflist`,
        );
      }),
  },
  {
    section: "NPWG §3.4.1",
    name: "no spec.config, no conflist: on-disk .conf by name",
    level: "MUST",
    run: (s) =>
      withPod(s, {
        annotations: networks("net-d"),
        nads: { "net-d": null },
        onDisk: { "50-net-d.conf": marked(s, "conf", { name: "net-d" }) },
      }, async (p) => {
        expectOk(await p.call("ADD"), "ADD");
        const add = oneAdd(await p.records(), "net-d");
        expect(add.config["org.conformance.marker"] === "conf", "the on-disk .conf was not used");
      }),
  },
  {
    section: "NPWG §3.4.1",
    name: "no spec.config and nothing on disk: the request fails",
    level: "MUST",
    run: (s) =>
      withPod(s, { annotations: networks("net-e"), nads: { "net-e": null } }, async (p) => {
        const add = await p.call("ADD");
        expect(add.code !== 0, "ADD succeeded for a NAD with no config anywhere");
        expect(
          calls(await p.records(), "ADD", "net-e").length === 0,
          "a delegate ran for net-e",
        );
      }),
  },
  {
    section: "NPWG §3.4.2",
    name: "spec.config without name: the NAD's name is injected",
    level: "MUST",
    run: (s) =>
      withPod(s, {
        annotations: networks("unnamed-net"),
        nads: { "unnamed-net": s.net() },
      }, async (p) => {
        expectOk(await p.call("ADD"), "ADD");
        const recs = calls(await p.records(), "ADD").filter((r) => r.env.CNI_IFNAME !== "eth0");
        expect(recs.length === 1, `expected one secondary ADD, saw ${recs.length}`);
        expect(
          recs[0].config.name === "unnamed-net",
          `the delegate got name ${JSON.stringify(recs[0].config.name)}, not "unnamed-net"`,
        );
      }),
  },
  {
    section: "NPWG §7.1",
    name: "configlist: name and cniVersion injected into each plugin, prevResult chained",
    level: "MUST",
    run: (s) =>
      withPod(s, {
        annotations: networks("chain-net"),
        nads: {
          "chain-net": {
            cniVersion: "1.0.0",
            name: "chain-net",
            plugins: [
              (({ cniVersion: _, ...rest }) => rest)(s.net()),
              { type: "conformance-recorder", delegate: "tuning" },
            ],
          },
        },
      }, async (p) => {
        expectOk(await p.call("ADD"), "ADD");
        const adds = calls(await p.records(), "ADD", "chain-net");
        expect(adds.length === 2, `expected 2 plugin ADDs for chain-net, saw ${adds.length}`);
        for (const [i, r] of adds.entries()) {
          expect(r.config.cniVersion === "1.0.0", `plugin ${i} got no cniVersion "1.0.0"`);
        }
        expect(adds[0].config.prevResult === undefined, "the first plugin got a prevResult");
        const prev = adds[1].config.prevResult as { interfaces?: unknown[] } | undefined;
        expect(prev?.interfaces?.length, `the second plugin's prevResult: ${JSON.stringify(prev)}`);
        const del = await p.call("DEL");
        expectOk(del, "DEL");
        const dels = calls(await p.records(), "DEL", "chain-net");
        expect(dels.length === 2, `expected 2 plugin DELs, saw ${dels.length} (${said(del)})`);
      }),
  },
  {
    section: "CNI §DEL",
    name: "configlist DEL runs the plugins in reverse order",
    level: "MUST",
    run: (s) =>
      withPod(
        s,
        { annotations: networks("chain-net"), nads: { "chain-net": chain(s) } },
        async (p) => {
          expectOk(await p.call("ADD"), "ADD");
          expectOk(await p.call("DEL"), "DEL");
          const order = calls(await p.records(), "DEL", "chain-net").map(marker);
          expect(order.join() === "p2,p1", `DEL order ${JSON.stringify(order)}, want p2 then p1`);
        },
      ),
  },
  {
    // CNI SPEC §4 (Plugin Delegation): a plugin executed with CHECK "must also execute any
    // delegated plugins" — a MUST; §CHECK's "should call CHECK on any delegated plugins" is
    // not what decides the level. The prevResult is §3's "Checking an attachment" (the final
    // ADD result) and "Deriving request configuration" (prevResult: must insert).
    section: "CNI §4",
    name: "CHECK gives every plugin of the network the ADD result as prevResult",
    level: "MUST",
    run: (s) =>
      withPod(
        s,
        { annotations: networks("chain-net"), nads: { "chain-net": chain(s) } },
        async (p) => {
          expectOk(await p.call("ADD"), "ADD");
          expectOk(await p.call("CHECK"), "CHECK");
          const checks = calls(await p.records(), "CHECK", "chain-net");
          expect(checks.length === 2, `expected 2 plugin CHECKs, saw ${checks.length}`);
          for (const r of checks) {
            const prev = r.config.prevResult as { interfaces?: unknown[] } | undefined;
            expect(
              prev?.interfaces?.length,
              `${marker(r)}'s CHECK prevResult: ${JSON.stringify(prev)}`,
            );
          }
        },
      ),
  },
  {
    section: "CNI §Overview",
    name: "DEL detaches the networks in reverse order of ADD",
    level: "SHOULD",
    run: (s) =>
      withPod(s, {
        annotations: networks("ord-a,ord-b"),
        nads: { "ord-a": s.net({ name: "ord-a" }), "ord-b": s.net({ name: "ord-b" }) },
      }, async (p) => {
        expectOk(await p.call("ADD"), "ADD");
        expectOk(await p.call("DEL"), "DEL");
        const recs = await p.records();
        const adds = calls(recs, "ADD").map((r) => r.config.name);
        const dels = calls(recs, "DEL").map((r) => r.config.name);
        expect(
          dels.join() === [...adds].reverse().join(),
          `ADD ${JSON.stringify(adds)}, DEL ${JSON.stringify(dels)}`,
        );
      }),
  },
];
