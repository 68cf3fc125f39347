/**
 * Tests of lib/multinet/status/network_status.ts (NPWG v1.3 §5). Pure: run with no permissions
 * (`deno test tests/multinet/status_test.ts`). Fixtures are hand-written CNI results of every
 * version, imported as JSON modules so no read permission is needed.
 */

import assert from "node:assert/strict";
import { CniError, CniErrorCode } from "../../../lib/cni/errors.ts";
import { parseResult } from "../../../lib/cni/result.ts";
import { resultFamily, SUPPORTED_VERSIONS } from "../../../lib/cni/version.ts";
import {
  buildNetworkStatus,
  parseNetworkStatus,
  serializeNetworkStatus,
  type StatusInput,
} from "../../../lib/multinet/status/network_status.ts";
import type { DeviceInfo, NetworkStatus } from "../../../lib/multinet/types.ts";
import { formatStats, fuzz, fuzzEnv } from "../../support/fuzz.ts";
import { statusTarget } from "../../fuzz/status.ts";
import r010 from "../../fixtures/status/result-0.1.0.json" with { type: "json" };
import r020 from "../../fixtures/status/result-0.2.0.json" with { type: "json" };
import r030 from "../../fixtures/status/result-0.3.0.json" with { type: "json" };
import r031 from "../../fixtures/status/result-0.3.1.json" with { type: "json" };
import r040 from "../../fixtures/status/result-0.4.0.json" with { type: "json" };
import r100 from "../../fixtures/status/result-1.0.0.json" with { type: "json" };
import r110 from "../../fixtures/status/result-1.1.0.json" with { type: "json" };

/** Scenario name → raw result, per CNI version. */
const FIXTURES: Record<string, Record<string, unknown>> = {
  "0.1.0": r010,
  "0.2.0": r020,
  "0.3.0": r030,
  "0.3.1": r031,
  "0.4.0": r040,
  "1.0.0": r100,
  "1.1.0": r110,
};

const KEY_ORDER = [
  "name",
  "interface",
  "ips",
  "mac",
  "mtu",
  "default",
  "dns",
  "device-info",
  "default-route",
  "gateway",
];

/** CNI_IFNAME passed in every build; differs from the results' "net1" on purpose. */
const IFNAME = "net5";
const NAME = "ns1/net-a";
const MAC = "0a:58:0a:01:02:03";
const DNS = {
  nameservers: ["10.1.2.53"],
  domain: "cluster.local",
  search: ["ns1.svc.cluster.local", "svc.cluster.local"],
};
const DEVICE_INFO: DeviceInfo = {
  type: "pci",
  version: "1.1.0",
  pci: { "pci-address": "0000:18:02.5", "pf-pci-address": "0000:18:00.0" },
};

/** What each scenario must give, for results of 0.3.0 and later; `mtu` is added for 1.1.0. */
function modernExpectations(version: string): Record<string, NetworkStatus> {
  const mtu = version === "1.1.0" ? { mtu: 1450 } : {};
  return {
    bridge: {
      name: NAME,
      interface: "net1",
      ips: ["10.1.2.3/24", "2001:db8::3/64"],
      mac: MAC,
      ...mtu,
      default: false,
      dns: DNS,
    },
    unindexed: {
      name: NAME,
      interface: "net1",
      ips: ["10.1.2.3/24", "2001:db8::3/64"],
      mac: MAC,
      ...mtu,
      default: false,
    },
    "no-interfaces": {
      name: NAME,
      interface: IFNAME,
      ips: ["10.1.2.3/24", "2001:db8::3/64"],
      default: false,
    },
    "zero-interfaces": { name: NAME, interface: IFNAME, default: false },
    calico: {
      name: NAME,
      interface: IFNAME,
      ips: ["192.168.10.7/32", "fd00:10::7/128"],
      default: false,
    },
    "host-ip-only": { name: NAME, interface: "net1", mac: MAC, default: false },
    "two-sandboxes": {
      name: NAME,
      interface: "net1",
      ips: ["10.1.2.3/24"],
      mac: MAC,
      ...mtu,
      default: false,
    },
  };
}

/** What each scenario must give, for 0.1.0/0.2.0 results (ip4/ip6, interface = CNI_IFNAME). */
const LEGACY_EXPECTATIONS: Record<string, NetworkStatus> = {
  bridge: {
    name: NAME,
    interface: IFNAME,
    ips: ["10.1.2.3/24", "2001:db8::3/64"],
    default: false,
    dns: DNS,
  },
  "ip4-only": { name: NAME, interface: IFNAME, ips: ["10.1.2.3/24"], default: false },
  empty: { name: NAME, interface: IFNAME, default: false },
};

function expectationsFor(version: string): Record<string, NetworkStatus> {
  return resultFamily(version) === "legacy" ? LEGACY_EXPECTATIONS : modernExpectations(version);
}

/** Decodes the raw result once (as ADD does) and builds the entry. */
function build(result: unknown, extra: Partial<StatusInput> = {}): NetworkStatus {
  return buildNetworkStatus({
    statusName: NAME,
    ifName: IFNAME,
    isDefault: false,
    result: result === undefined || result === null ? undefined : parseResult(result),
    ...extra,
  });
}

/** Asserts that the keys of `entry` follow Multus's order. */
function assertKeyOrder(entry: NetworkStatus): void {
  const keys = Object.keys(entry);
  const ranks = keys.map((k) => KEY_ORDER.indexOf(k));
  assert.ok(!ranks.includes(-1), `unexpected key in ${keys}`);
  assert.deepEqual(ranks, [...ranks].sort((a, b) => a - b), `keys out of order: ${keys}`);
}

function assertCniError(fn: () => unknown, code: number): CniError {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof CniError, `expected CniError, got ${err}`);
    assert.equal(err.code, code);
    assert.ok(err.msg.length > 0 && !err.msg.endsWith("."), "sentence case without period");
    return err;
  }
  assert.fail("expected a CniError");
}

Deno.test("fixtures cover every supported cniVersion", () => {
  assert.deepEqual(Object.keys(FIXTURES), [...SUPPORTED_VERSIONS]);
  for (const [version, scenarios] of Object.entries(FIXTURES)) {
    assert.deepEqual(Object.keys(scenarios).sort(), Object.keys(expectationsFor(version)).sort());
  }
});

for (const version of SUPPORTED_VERSIONS) {
  Deno.test(`buildNetworkStatus: every scenario of a ${version} result`, async (t) => {
    const expectations = expectationsFor(version);
    for (const [scenario, result] of Object.entries(FIXTURES[version])) {
      await t.step(scenario, () => {
        const before = structuredClone(result);
        const status = build(result);
        assert.deepEqual(status, expectations[scenario]);
        assertKeyOrder(status);
        assert.deepEqual(result, before, "result must not be modified");
      });
    }
  });

  Deno.test(`buildNetworkStatus: ${version} default network with default-route and device-info`, () => {
    const status = build(FIXTURES[version].bridge, {
      statusName: "cbr0",
      isDefault: true,
      deviceInfo: DEVICE_INFO,
      defaultRoute: ["10.1.2.1"],
    });
    assert.equal(status.name, "cbr0");
    assert.equal(status.default, true);
    assert.deepEqual(status["device-info"], DEVICE_INFO);
    assert.deepEqual(status["default-route"], ["10.1.2.1"]);
    assert.deepEqual(status.gateway, ["10.1.2.1"]);
    assert.deepEqual(status.ips, ["10.1.2.3/24", "2001:db8::3/64"]);
    assertKeyOrder(status);
  });
}

Deno.test("buildNetworkStatus: no result gives the minimal map (§5.1.1)", () => {
  for (const result of [undefined, null]) {
    assert.deepEqual(build(result), { name: NAME, interface: IFNAME, default: false });
  }
  const withExtras = build(undefined, {
    isDefault: true,
    deviceInfo: DEVICE_INFO,
    defaultRoute: ["192.0.2.1"],
  });
  assert.deepEqual(Object.keys(withExtras), [
    "name",
    "interface",
    "default",
    "device-info",
    "default-route",
    "gateway",
  ]);
  assert.deepEqual(
    buildNetworkStatus({ statusName: "cbr0", ifName: "", isDefault: true }),
    { name: "cbr0", default: true },
  );
});

Deno.test("buildNetworkStatus: full key order as Multus writes it", () => {
  const status = build(r110.bridge, { deviceInfo: DEVICE_INFO, defaultRoute: ["10.1.2.1"] });
  assert.deepEqual(Object.keys(status), KEY_ORDER);
});

Deno.test("buildNetworkStatus: dns keeps only non-empty fields", () => {
  const base = { cniVersion: "1.0.0", interfaces: [], ips: [] };
  assert.equal(build({ ...base, dns: {} }).dns, undefined);
  assert.equal(
    build({ ...base, dns: { nameservers: [], search: [], options: [], domain: "" } }).dns,
    undefined,
  );
  assert.deepEqual(build({ ...base, dns: { domain: "example.com", search: [] } }).dns, {
    domain: "example.com",
  });
  assert.deepEqual(
    build({ ...base, dns: { nameservers: ["2001:db8:4860::8888"], options: ["ndots:5"] } }).dns,
    { nameservers: ["2001:db8:4860::8888"], options: ["ndots:5"] },
  );
  assert.equal(build({ ...base, dns: null }).dns, undefined);
});

Deno.test("buildNetworkStatus: default-route and gateway", async (t) => {
  await t.step("absent selection key gives neither key", () => {
    const status = build(r100.bridge);
    assert.ok(!("default-route" in status) && !("gateway" in status));
  });
  await t.step("several gateways, both keys, copies of the input", () => {
    const gateways = ["192.0.2.1", "2001:db8::1", "2001:db8::2"];
    const status = build(r100.bridge, { defaultRoute: gateways });
    assert.deepEqual(status["default-route"], gateways);
    assert.deepEqual(status.gateway, gateways);
    gateways.push("198.51.100.1");
    assert.equal(status["default-route"]?.length, 3);
    assert.notEqual(status["default-route"], status.gateway);
  });
  await t.step("an empty list is kept (the selection asked for no default route)", () => {
    const status = build(r100.bridge, { defaultRoute: [] });
    assert.deepEqual(status["default-route"], []);
    assert.deepEqual(status.gateway, []);
  });
});

Deno.test("buildNetworkStatus: device-info is copied, not shared", () => {
  const info = structuredClone(DEVICE_INFO);
  const status = build(r100.bridge, { deviceInfo: info });
  (info.pci as Record<string, string>)["pci-address"] = "0000:99:00.0";
  assert.deepEqual(status["device-info"], DEVICE_INFO);
});

Deno.test("buildNetworkStatus: IP index rules (§5.3.3.1)", async (t) => {
  const sandboxed = [{ name: "veth0" }, { name: "net1", sandbox: "/proc/1/ns/net" }];
  await t.step("indexed addresses win over unindexed ones", () => {
    const status = build({
      cniVersion: "1.0.0",
      interfaces: sandboxed,
      ips: [{ address: "10.0.0.9/24" }, { address: "10.0.0.1/24", interface: 1 }],
    });
    assert.deepEqual(status.ips, ["10.0.0.1/24"]);
  });
  await t.step("out-of-range index counts as unindexed", () => {
    const status = build({
      cniVersion: "1.0.0",
      interfaces: sandboxed,
      ips: [{ address: "10.0.0.7/24", interface: 7 }, { address: "10.0.0.8/24", interface: 0 }],
    });
    assert.deepEqual(status.ips, ["10.0.0.7/24"]);
  });
  await t.step("no sandbox: negative index is rule 2, indexed ones are ignored", () => {
    const status = build({
      cniVersion: "0.4.0",
      interfaces: [{ name: "cali0" }],
      ips: [
        { version: "4", address: "10.0.0.8/24", interface: 0 },
        { version: "4", address: "10.0.0.9/24", interface: -1 },
      ],
    });
    assert.deepEqual(status.ips, ["10.0.0.9/24"]);
    assert.equal(status.interface, IFNAME);
  });
  await t.step("empty sandbox string is not a sandbox", () => {
    const status = build({
      cniVersion: "1.0.0",
      interfaces: [{ name: "x0", mac: "02:00:00:00:00:01", sandbox: "" }],
      ips: [{ address: "10.0.0.8/24", interface: 0 }],
    });
    assert.deepEqual(status, {
      name: NAME,
      interface: IFNAME,
      ips: ["10.0.0.8/24"],
      default: false,
    });
  });
  await t.step("null fields from Go encoders are tolerated", () => {
    const status = build({
      cniVersion: "1.0.0",
      interfaces: [{ name: "net1", mac: null, sandbox: "/x", mtu: 0 }],
      ips: null,
      dns: null,
    });
    assert.deepEqual(status, { name: NAME, interface: "net1", default: false });
  });
});

Deno.test("buildNetworkStatus: a malformed result is CniError 6 at its one decoding", () => {
  const bad: unknown[] = [
    "not a result",
    42,
    true,
    [],
    { interfaces: "eth0" },
    { interfaces: [{ mac: "02:00:00:00:00:01" }] },
    { ips: [{ address: "10.1.2.3" }] },
    { ips: [{ address: "10.1.2.300/24" }] },
    { ips: [{ address: "10.1.2.3/24", interface: "1" }] },
    { ip4: { ip: 17 } },
    { dns: { nameservers: "10.0.0.1" } },
  ];
  for (const bare of bad) {
    const result = typeof bare === "object" && bare !== null && !Array.isArray(bare)
      ? { cniVersion: "ip4" in bare ? "0.2.0" : "1.0.0", ...bare }
      : bare;
    const err = assertCniError(() => build(result), CniErrorCode.DecodingFailure);
    assert.ok(err.msg.length > 0);
  }
});

const ENTRIES: NetworkStatus[] = [
  { name: "ns1/net-a", interface: "net1", ips: ["10.1.2.3/24"], mac: MAC, default: false },
  {
    name: "cbr0",
    interface: "eth0",
    ips: ["10.244.1.73/24"],
    mac: "0a:58:0a:f4:01:49",
    default: true,
    "default-route": ["10.244.1.1"],
    gateway: ["10.244.1.1"],
  },
  { name: "ns2/net-b", interface: "net2", default: false, "device-info": DEVICE_INFO },
];

Deno.test("serializeNetworkStatus: default entry first, others in order", () => {
  const parsed = JSON.parse(serializeNetworkStatus(ENTRIES)) as NetworkStatus[];
  assert.deepEqual(parsed.map((e) => e.name), ["cbr0", "ns1/net-a", "ns2/net-b"]);
  // Already first: unchanged order; no default: unchanged order.
  const noDefault = ENTRIES.filter((e) => !e.default);
  assert.deepEqual(
    (JSON.parse(serializeNetworkStatus(noDefault)) as NetworkStatus[]).map((e) => e.name),
    ["ns1/net-a", "ns2/net-b"],
  );
  assert.equal(serializeNetworkStatus([]), "[]");
});

Deno.test("serializeNetworkStatus: Multus layout, canonical key order, extensions last", () => {
  const scrambled = {
    "org.example.vlan": 42,
    gateway: ["10.0.0.1"],
    default: true,
    ips: ["10.0.0.2/24"],
    name: "cbr0",
    mac: undefined,
  } as unknown as NetworkStatus;
  const text = serializeNetworkStatus([scrambled]);
  assert.equal(
    text,
    '[{\n    "name": "cbr0",\n    "ips": [\n        "10.0.0.2/24"\n    ],\n    "default": true,\n' +
      '    "gateway": [\n        "10.0.0.1"\n    ],\n    "org.example.vlan": 42\n}]',
  );
  const two = serializeNetworkStatus([{ name: "a", default: true }, { name: "b", default: false }]);
  assert.equal(
    two,
    '[{\n    "name": "a",\n    "default": true\n},{\n    "name": "b",\n' +
      '    "default": false\n}]',
  );
});

Deno.test("parseNetworkStatus: round trip of built entries", () => {
  const built = SUPPORTED_VERSIONS.map((v, i) =>
    buildNetworkStatus({
      statusName: i === 3 ? "cbr0" : `ns1/net-${i}`,
      ifName: `net${i}`,
      isDefault: i === 3,
      result: parseResult(FIXTURES[v].bridge),
      deviceInfo: i === 5 ? DEVICE_INFO : undefined,
      defaultRoute: i === 3 ? ["10.1.2.1"] : undefined,
    })
  );
  const text = serializeNetworkStatus(built);
  const parsed = parseNetworkStatus(text);
  assert.deepEqual(parsed, [built[3], ...built.filter((_, i) => i !== 3)]);
  parsed.forEach(assertKeyOrder);
  assert.equal(serializeNetworkStatus(parsed), text);
});

Deno.test("parseNetworkStatus: reads Multus's own output (bare IPs, no default key)", () => {
  const multus = `[{
    "name": "cbr0",
    "interface": "eth0",
    "ips": [
        "10.244.1.73"
    ],
    "mac": "0a:58:0a:f4:01:49",
    "default": true,
    "dns": {},
    "gateway": [
        "10.244.1.1"
    ]
},{
    "name": "default/sriov-net",
    "interface": "net1",
    "ips": [
        "10.0.2.5"
    ],
    "mac": "86:1d:96:ff:55:0d",
    "mtu": 1500,
    "dns": {},
    "device-info": {
        "type": "pci",
        "version": "1.1.0",
        "pci": {
            "pci-address": "0000:18:02.5",
            "pf-pci-address": "0000:18:00.0"
        }
    },
    "org.example.extra": {"kept": true}
}]`;
  const parsed = parseNetworkStatus(multus);
  assert.equal(parsed.length, 2);
  assert.equal(parsed[0].default, true);
  assert.deepEqual(parsed[0].gateway, ["10.244.1.1"]);
  assert.equal(parsed[1].default, false);
  assert.equal(parsed[1].mtu, 1500);
  assert.equal(parsed[1]["device-info"]?.type, "pci");
  assert.deepEqual((parsed[1] as unknown as Record<string, unknown>)["org.example.extra"], {
    kept: true,
  });
  assert.equal(Object.keys(parsed[1]).at(-1), "org.example.extra");
  // Multus #656: a default conf without "name" gives an empty name; still readable.
  assert.deepEqual(parseNetworkStatus('[{"name":"","default":true}]'), [{
    name: "",
    default: true,
  }]);
});

Deno.test("parseNetworkStatus: bad input is CniError 6", () => {
  const bad = [
    "",
    "not json",
    "{}",
    '{"name":"x","default":true}',
    "[1]",
    "[null]",
    "[{}]",
    '[{"default":false}]',
    '[{"name":7,"default":false}]',
    '[{"name":"x","default":"yes"}]',
    '[{"name":"x","default":false,"ips":["not-an-ip"]}]',
    '[{"name":"x","default":false,"ips":["10.1.2.300/24"]}]',
    '[{"name":"x","default":false,"ips":"10.1.2.3"}]',
    '[{"name":"x","default":false,"mtu":-1}]',
    '[{"name":"x","default":false,"mtu":1500.5}]',
    '[{"name":"x","default":false,"device-info":{"version":"1.1.0"}}]',
    '[{"name":"x","default":false,"dns":{"nameservers":"10.0.0.1"}}]',
    '[{"name":"x","default":false,"gateway":[1]}]',
  ];
  for (const text of bad) assertCniError(() => parseNetworkStatus(text), 6);
});

Deno.test("parseNetworkStatus: every truncation is CniError 6", () => {
  const text = serializeNetworkStatus(ENTRIES);
  for (let n = 0; n < text.length; n++) {
    assertCniError(() => parseNetworkStatus(text.slice(0, n)), 6);
  }
});

// Random and mutated annotations and delegate results go through the "status" target of
// tests/fuzz/status.ts (seeded, shared harness; tests/fuzz/fuzz_test.ts runs it from 0x5eed).
Deno.test("fuzz: 2,000 random and mutated network-status values and results give entries or CniError 6", () => {
  const stats = fuzz(statusTarget, { seed: fuzzEnv().seed ?? 0x57a7, runs: 2000 });
  assert.ok(stats.accepted > 0 && stats.rejected > 0, formatStats(stats));
});
