/**
 * Checks of NPWG v1.3 §7 (failure handling, isolation, runtimeConfig) and the CNI basics a
 * runtime relies on (ADD → CHECK → DEL → DEL, DEL without netns, result versions, STATUS,
 * VERSION; GC is checks_gc.ts).
 *
 * @module
 */

import {
  calls,
  type Check,
  expect,
  expectOk,
  networks,
  RUNTIME_ONLY,
  runtimeConfig,
  said,
  Skip,
  supported,
  withPod,
} from "./check.ts";
import { DEFAULT_NET } from "./harness.ts";

const FAIL_ADD = { conformance: { fail: ["ADD"] } };
const FAIL_DEL = { conformance: { fail: ["DEL"] } };

function versionCheck(v: string): Check {
  return {
    section: "CNI §Version",
    name: `cniVersion ${v}: ADD result in ${v}${v === "0.3.1" ? "" : ", CHECK"}, DEL`,
    level: "MUST",
    async run(s) {
      if (!(await supported(s)).includes(v)) throw new Skip(`VERSION does not list ${v}`);
      await withPod(s, {
        cniVersion: v,
        annotations: networks("v-net"),
        nads: { "v-net": s.net({ name: "v-net" }) },
      }, async (p) => {
        const add = await p.call("ADD");
        expectOk(add, "ADD");
        expect(add.json?.cniVersion === v, `result cniVersion ${add.json?.cniVersion}, want ${v}`);
        if (v !== "0.3.1") expectOk(await p.call("CHECK"), "CHECK");
        expectOk(await p.call("DEL"), "DEL");
      });
    },
  };
}

/** NPWG §7 and CNI checks. */
export const RUNTIME_CHECKS: Check[] = [
  {
    section: "NPWG §7.2",
    name: "a failed attachment fails ADD; later attachments are not attempted",
    level: "MUST",
    run: (s) =>
      withPod(s, {
        annotations: networks("rb-a,rb-b,rb-c"),
        nads: {
          "rb-a": s.net({ name: "rb-a" }),
          "rb-b": s.net({ name: "rb-b", ...FAIL_ADD }),
          "rb-c": s.net({ name: "rb-c" }),
        },
      }, async (p) => {
        const add = await p.call("ADD");
        expect(add.code !== 0, "ADD succeeded although rb-b failed");
        expect(calls(await p.records(), "ADD", "rb-c").length === 0, "rb-c was attempted");
      }),
  },
  {
    section: "NPWG §7.2",
    name: "a failed ADD undoes the attachments it made (DEL of each, pod left empty)",
    level: "SHOULD",
    run: (s) =>
      withPod(s, {
        annotations: networks("rb-a,rb-b"),
        nads: { "rb-a": s.net({ name: "rb-a" }), "rb-b": s.net({ name: "rb-b", ...FAIL_ADD }) },
      }, async (p) => {
        expect((await p.call("ADD")).code !== 0, "ADD succeeded although rb-b failed");
        const recs = await p.records();
        for (const n of [DEFAULT_NET, "rb-a"]) {
          expect(calls(recs, "DEL", n).length > 0, `no DEL of ${n} after the failed ADD`);
        }
        const left = await p.links();
        expect(left.length === 0, `left in the pod: ${left}`);
      }),
  },
  {
    section: "NPWG §7.2",
    name: "DEL: one failed detachment does not stop the others; DEL reports the failure",
    level: "MUST",
    run: (s) =>
      withPod(s, {
        annotations: networks("be-a,be-b,be-c"),
        nads: {
          "be-a": s.net({ name: "be-a", ...FAIL_DEL }),
          "be-b": s.net({ name: "be-b" }),
          "be-c": s.net({ name: "be-c" }),
        },
      }, async (p) => {
        expectOk(await p.call("ADD"), "ADD");
        const del = await p.call("DEL");
        const recs = await p.records();
        for (const n of [DEFAULT_NET, "be-b", "be-c"]) {
          expect(calls(recs, "DEL", n).length > 0, `no DEL of ${n} (be-a's DEL failed)`);
        }
        expect(del.code !== 0, "DEL reported success although be-a's DEL failed");
      }),
  },
  {
    section: "NPWG §7.4",
    name: "a NAD the pod may not select fails the request (namespaceIsolation)",
    level: "MUST",
    async run(s) {
      if (!s.claims("isolation")) {
        throw new Skip("the plugin does not claim namespace isolation (--claims isolation)");
      }
      await withPod(s, {
        annotations: (p) => networks(`${p.otherNs("x")}/iso-net`),
        otherNads: { x: { "iso-net": s.net({ name: "iso-net" }) } },
        conf: { namespaceIsolation: true },
      }, async (p) => {
        // Control: the same selection works without isolation, so a failure below is its.
        const open = await p.call("ADD", { config: { ...p.conf, namespaceIsolation: false } });
        expect(open.code === 0, `control: ADD without namespaceIsolation failed (${said(open)})`);
        expectOk(await p.call("DEL", { config: { ...p.conf, namespaceIsolation: false } }), "DEL");
        const mark = Date.now();
        const add = await p.call("ADD");
        expect(add.code !== 0, "ADD succeeded with a NAD of another namespace");
        const after = (await p.records()).filter((r) => r.t >= mark);
        expect(calls(after, "ADD", "iso-net").length === 0, "iso-net's delegate ran");
      });
    },
  },
  {
    section: "NPWG §7.5",
    name: "the runtime's runtimeConfig goes to the default network only",
    level: "MUST",
    run: (s) =>
      withPod(s, {
        annotations: networks("rc-net"),
        nads: {
          "rc-net": s.net({
            name: "rc-net",
            capabilities: { portMappings: true, bandwidth: true },
          }),
        },
        conf: {
          runtimeConfig: {
            portMappings: [{ hostPort: 18081, containerPort: 81, protocol: "tcp" }],
            bandwidth: { ingressRate: 1000000, ingressBurst: 100000 },
          },
        },
      }, async (p) => {
        expectOk(await p.call("ADD"), "ADD");
        const recs = await p.records();
        const def = calls(recs, "ADD", DEFAULT_NET)[0];
        expect(def, "no ADD of the default network");
        expect(runtimeConfig(def).portMappings, "the default network did not get portMappings");
        const sec = runtimeConfig(calls(recs, "ADD", "rc-net")[0] ?? { config: {} } as never);
        expect(
          sec.portMappings === undefined && sec.bandwidth === undefined,
          `rc-net got the runtime's runtimeConfig: ${JSON.stringify(sec)}`,
        );
      }),
  },
  {
    section: "CNI §Lifecycle",
    name: "ADD → CHECK → DEL → DEL (second DEL idempotent), pod left empty",
    level: "MUST",
    run: (s) =>
      withPod(
        s,
        { annotations: networks("lc-net"), nads: { "lc-net": s.net({ name: "lc-net" }) } },
        async (p) => {
          expectOk(await p.call("ADD"), "ADD");
          expectOk(await p.call("CHECK"), "CHECK");
          expectOk(await p.call("DEL"), "DEL");
          const left = await p.links();
          expect(left.length === 0, `left in the pod after DEL: ${left}`);
          expectOk(await p.call("DEL"), "second DEL");
        },
      ),
  },
  {
    section: "CNI §DEL",
    name: "DEL with an empty CNI_NETNS succeeds",
    level: "MUST",
    run: (s) =>
      withPod(
        s,
        { annotations: networks("lc-net"), nads: { "lc-net": s.net({ name: "lc-net" }) } },
        async (p) => {
          expectOk(await p.call("ADD"), "ADD");
          const del = await p.call("DEL", { netns: "" });
          expect(del.code === 0, `DEL without netns: ${said(del)}`);
        },
      ),
  },
  ...["0.3.1", "0.4.0", "1.0.0", "1.1.0"].map(versionCheck),
  {
    section: "CNI §STATUS",
    name: "STATUS (1.1.0) succeeds when the default network is ready",
    level: "MUST",
    async run(s) {
      if (!(await supported(s)).includes("1.1.0")) throw new Skip("VERSION does not list 1.1.0");
      await withPod(s, { cniVersion: "1.1.0" }, async (p) => {
        const r = await p.call("STATUS", { omit: RUNTIME_ONLY });
        expect(r.code === 0, `STATUS: ${said(r)}`);
      });
    },
  },
  {
    section: "CNI §VERSION",
    name: "VERSION answers cniVersion and supportedVersions (with 1.0.0)",
    level: "MUST",
    async run(s) {
      const p = await s.pod();
      try {
        const r = await p.call("VERSION", { config: { cniVersion: "1.0.0" } });
        expectOk(r, "VERSION");
        const v = r.json?.supportedVersions;
        expect(typeof r.json?.cniVersion === "string", "no cniVersion");
        expect(Array.isArray(v) && v.includes("1.0.0"), `supportedVersions ${JSON.stringify(v)}`);
      } finally {
        await p.cleanup();
      }
    },
  },
];
