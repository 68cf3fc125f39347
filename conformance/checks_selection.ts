/**
 * Checks of NPWG v1.3 §4.1: both selection forms, and each JSON key passed down as
 * §4.1.2.1.x requires (runtimeConfig keys with the capability MUST, `interface` as
 * CNI_IFNAME, `cni-args` as `args.cni`, `default-route`, `ipam-claim-reference`).
 *
 * @module
 */

import {
  calls,
  type Check,
  expect,
  expectOk,
  networks,
  oneAdd,
  runtimeConfig,
  said,
  same,
  withPod,
} from "./check.ts";

/** A selection key whose value must arrive as `runtimeConfig[capability]` (§4.1.2.1.x). */
interface CapabilityKey {
  section: string;
  key: string;
  capability: string;
  value: unknown;
  /** What the delegate must receive (default: `value`). */
  expected?: (got: unknown) => boolean;
  /** Extra NAD config (e.g. static IPAM for `ips`). */
  nad?: Record<string, unknown>;
}

const KEYS: CapabilityKey[] = [
  {
    section: "NPWG §4.1.2.1.3.2",
    key: "ips",
    capability: "ips",
    value: ["10.78.0.7/24"],
    nad: { ipam: { type: "static" } },
  },
  { section: "NPWG §4.1.2.1.4.2", key: "mac", capability: "mac", value: "02:00:00:c0:ff:ee" },
  {
    section: "NPWG §4.1.2.1.7.2",
    key: "portMappings",
    capability: "portMappings",
    value: [{ hostPort: 18080, containerPort: 80, protocol: "TCP" }],
    // Protocol is case-insensitive; a plugin may normalise its spelling.
    expected: (got) =>
      Array.isArray(got) && got.length === 1 && got[0].hostPort === 18080 &&
      got[0].containerPort === 80 && String(got[0].protocol ?? "tcp").toLowerCase() === "tcp",
  },
  {
    section: "NPWG §4.1.2.1.8.2",
    key: "bandwidth",
    capability: "bandwidth",
    value: { ingressRate: 1000000, ingressBurst: 100000, egressRate: 2000000, egressBurst: 200000 },
  },
  {
    section: "NPWG §4.1.2.1.10.2",
    key: "infiniband-guid",
    capability: "infinibandGUID",
    value: "24:8a:07:03:00:8d:ae:2f",
  },
];

function capabilityChecks(k: CapabilityKey): Check[] {
  return [
    {
      section: k.section,
      name: `"${k.key}" → runtimeConfig.${k.capability} of the network's plugins`,
      level: "MUST",
      run: (s) =>
        withPod(s, {
          annotations: networks([{ name: "cap-net", [k.key]: k.value }]),
          nads: {
            "cap-net": s.net({
              name: "cap-net",
              capabilities: { [k.capability]: true },
              ...k.nad,
            }),
          },
        }, async (p) => {
          expectOk(await p.call("ADD"), "ADD");
          const got = runtimeConfig(oneAdd(await p.records(), "cap-net"))[k.capability];
          expect(
            k.expected ? k.expected(got) : same(got, k.value),
            `runtimeConfig.${k.capability} was ${JSON.stringify(got)}`,
          );
        }),
    },
    {
      section: k.section,
      name: `"${k.key}" without a plugin declaring "${k.capability}": the request fails`,
      level: "MUST",
      run: (s) =>
        withPod(s, {
          annotations: networks([{ name: "nocap-net", [k.key]: k.value }]),
          nads: { "nocap-net": s.net({ name: "nocap-net", ...k.nad }) },
        }, async (p) => {
          const add = await p.call("ADD");
          expect(add.code !== 0, `ADD succeeded although no plugin declares "${k.capability}"`);
          expect(
            calls(await p.records(), "ADD", "nocap-net").length === 0,
            `nocap-net's plugins ran: the failure did not come from the capability check`,
          );
        }),
    },
  ];
}

/** NPWG §4.1 checks. */
export const SELECTION_CHECKS: Check[] = [
  {
    section: "NPWG §4.1.1",
    name: "comma form: name and namespace/name",
    level: "MUST",
    run: (s) =>
      withPod(s, {
        annotations: (p) => networks(`net-a, ${p.otherNs("x")}/net-x`),
        nads: { "net-a": s.net({ name: "net-a" }) },
        otherNads: { x: { "net-x": s.net({ name: "net-x" }) } },
      }, async (p) => {
        expectOk(await p.call("ADD"), "ADD");
        const recs = await p.records();
        oneAdd(recs, "net-a");
        oneAdd(recs, "net-x");
      }),
  },
  {
    section: "NPWG §4.1.2",
    name: "JSON form: list of selection elements",
    level: "MUST",
    run: (s) =>
      withPod(s, {
        annotations: networks([{ name: "net-a" }, { name: "net-b" }]),
        nads: { "net-a": s.net({ name: "net-a" }), "net-b": s.net({ name: "net-b" }) },
      }, async (p) => {
        expectOk(await p.call("ADD"), "ADD");
        const recs = await p.records();
        oneAdd(recs, "net-a");
        oneAdd(recs, "net-b");
      }),
  },
  {
    section: "NPWG §4.1.2.1.2",
    name: '"namespace" selects the NAD in that namespace',
    level: "MUST",
    run: (s) =>
      withPod(s, {
        annotations: (p) => networks([{ name: "same-net", namespace: p.otherNs("x") }]),
        nads: { "same-net": s.net({ name: "same-net", "org.conformance.marker": "own" }) },
        otherNads: {
          x: { "same-net": s.net({ name: "same-net", "org.conformance.marker": "x" }) },
        },
      }, async (p) => {
        expectOk(await p.call("ADD"), "ADD");
        const add = oneAdd(await p.records(), "same-net");
        expect(
          add.config["org.conformance.marker"] === "x",
          "the NAD of the pod's own namespace was used",
        );
      }),
  },
  ...KEYS.flatMap(capabilityChecks),
  {
    section: "NPWG §4.1.2.1.5.1",
    name: '"interface" → CNI_IFNAME of the network\'s plugins',
    level: "MUST",
    run: (s) =>
      withPod(s, {
        annotations: networks([{ name: "if-net", interface: "data7" }]),
        nads: { "if-net": s.net({ name: "if-net" }) },
      }, async (p) => {
        expectOk(await p.call("ADD"), "ADD");
        const add = oneAdd(await p.records(), "if-net");
        expect(add.env.CNI_IFNAME === "data7", `CNI_IFNAME was ${add.env.CNI_IFNAME}`);
        expect((await p.links()).includes("data7"), "no data7 in the pod");
      }),
  },
  {
    section: "NPWG §4.1.2.1.5",
    name: '"interface" already used by a previous attachment: the request fails',
    level: "MUST",
    run: (s) =>
      withPod(s, {
        annotations: networks([
          { name: "if-a", interface: "dup0" },
          { name: "if-b", interface: "dup0" },
        ]),
        nads: { "if-a": s.net({ name: "if-a" }), "if-b": s.net({ name: "if-b" }) },
      }, async (p) => {
        const add = await p.call("ADD");
        expect(add.code !== 0, "ADD succeeded with two attachments named dup0");
      }),
  },
  {
    section: "NPWG §4.1.2.1.6.2",
    name: '"cni-args" → args.cni, over the NAD\'s own args',
    level: "MUST",
    run: (s) =>
      withPod(s, {
        annotations: networks([{ name: "args-net", "cni-args": { a: "pod", c: "pod" } }]),
        nads: { "args-net": s.net({ name: "args-net", args: { cni: { a: "nad", b: "nad" } } }) },
      }, async (p) => {
        expectOk(await p.call("ADD"), "ADD");
        const add = oneAdd(await p.records(), "args-net");
        const cni = (add.config.args as { cni?: unknown } | undefined)?.cni;
        expect(
          same(cni, { a: "pod", b: "nad", c: "pod" }),
          `args.cni was ${JSON.stringify(cni)}, want {a:pod,b:nad,c:pod}`,
        );
      }),
  },
  {
    section: "NPWG §4.1.2.1.9",
    name: '"default-route": the default route goes via that gateway on that attachment',
    level: "MUST",
    reading: 'no MUST keyword; the key "is used to explicitly select which attachment will ' +
      "receive the default route\" is read as: the pod's default route goes via the given " +
      "gateway on that attachment",
    run: (s) => {
      const net = s.net({ name: "gw-net" });
      const gw = (net.ipam as { ranges: { gateway: string }[][] }).ranges[0][0].gateway;
      return withPod(s, {
        annotations: networks([{ name: "gw-net", interface: "gw0", "default-route": [gw] }]),
        nads: { "gw-net": net },
      }, async (p) => {
        expectOk(await p.call("ADD"), "ADD");
        const defaults = (await p.routes()).filter((r) => r.dst === "default");
        expect(
          defaults.some((r) => r.gateway === gw && r.dev === "gw0"),
          `default routes: ${JSON.stringify(defaults.map((r) => `${r.gateway} dev ${r.dev}`))}`,
        );
      });
    },
  },
  {
    section: "NPWG §4.1.2.1.9",
    name: '"default-route" elsewhere: the default network\'s default route is cleared',
    level: "SHOULD",
    reading: 'no keyword; "it should be noted that the default route and gateway will be ' +
      'cleared from the cluster-wide default network attachment" is read as a SHOULD',
    run: (s) => {
      const net = s.net({ name: "gw-net" });
      const gw = (net.ipam as { ranges: { gateway: string }[][] }).ranges[0][0].gateway;
      return withPod(s, {
        annotations: networks([{ name: "gw-net", interface: "gw0", "default-route": [gw] }]),
        nads: { "gw-net": net },
      }, async (p) => {
        expectOk(await p.call("ADD"), "ADD");
        const defaults = (await p.routes()).filter((r) => r.dst === "default");
        expect(
          defaults.every((r) => r.dev === "gw0"),
          `default routes left: ${
            JSON.stringify(defaults.map((r) => `${r.gateway} dev ${r.dev}`))
          }`,
        );
      });
    },
  },
  {
    // INFO: §4.1.2.1.11 defines no transport from the annotation to the plugins (no
    // runtimeConfig capability, no args key) and says delegates that do not implement it
    // ignore it; an IPAM plugin may read the pod's annotation itself. The suite reports where
    // the name went, if anywhere; an ADD that fails over it is still a FAIL.
    section: "NPWG §4.1.2.1.11",
    name: '"ipam-claim-reference" reaches the network\'s plugins (args or runtimeConfig)',
    level: "INFO",
    run: (s) =>
      withPod(s, {
        annotations: networks([{ name: "claim-net", "ipam-claim-reference": "vm123.tenant" }]),
        nads: { "claim-net": s.net({ name: "claim-net" }) },
      }, async (p) => {
        const add = await p.call("ADD");
        if (add.code !== 0) throw new Error(`ADD failed (${said(add)})`);
        const rec = oneAdd(await p.records(), "claim-net");
        expect(
          rec.raw.includes("vm123.tenant"),
          "the claim name is not in the plugins' config (the spec defines no transport for it)",
        );
      }),
  },
  {
    section: "NPWG §4.1.2.1.11",
    name: '"ipam-claim-reference" with "ips" in one element: an error',
    level: "SHOULD",
    run: (s) =>
      withPod(s, {
        annotations: networks([{
          name: "claim-net",
          ips: ["10.78.0.9/24"],
          "ipam-claim-reference": "vm123.tenant",
        }]),
        nads: {
          "claim-net": s.net({
            name: "claim-net",
            capabilities: { ips: true },
            ipam: { type: "static" },
          }),
        },
      }, async (p) => {
        const add = await p.call("ADD");
        expect(add.code !== 0, "ADD succeeded");
        expect(calls(await p.records(), "ADD", "claim-net").length === 0, `claim-net ran`);
      }),
  },
];
