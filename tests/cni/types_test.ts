/**
 * Tests of lib/cni/types.ts: network configuration parsing (libcni
 * `NetworkConfFromBytes`, `ConfListFromConf`, CNI 1.1 `cniVersions`). Pure.
 */

import assert from "node:assert/strict";
import { CniError } from "../../lib/cni/errors.ts";
import { assertPluginType, parseNetworkConfig, validateNetworkName } from "../../lib/cni/types.ts";
import { SUPPORTED_VERSIONS } from "../../lib/cni/version.ts";

function cniCode(fn: () => unknown): number {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof CniError, `expected CniError, got ${err}`);
    return err.code;
  }
  assert.fail("expected an error");
}

Deno.test("parseNetworkConfig: conflist keeps every plugin key", () => {
  const text = JSON.stringify({
    cniVersion: "1.0.0",
    name: "net-a",
    plugins: [
      { type: "bridge", bridge: "br0", ipam: { type: "host-local", subnet: "10.1.0.0/16" } },
      { type: "portmap", capabilities: { portMappings: true }, "x-custom": [1, 2] },
    ],
    vendorKey: true,
  });
  const list = parseNetworkConfig(text);
  assert.equal(list.name, "net-a");
  assert.equal(list.cniVersion, "1.0.0");
  assert.equal(list.plugins.length, 2);
  assert.deepEqual(list.plugins[0].ipam, { type: "host-local", subnet: "10.1.0.0/16" });
  assert.deepEqual(list.plugins[1]["x-custom"], [1, 2]);
  assert.equal(list.raw.vendorKey, true);
  assert.equal(list.disableCheck, false);
  assert.equal(list.disableGC, false);
});

Deno.test("parseNetworkConfig: a single conf is wrapped into a one-plugin list", () => {
  const conf = { cniVersion: "0.3.1", name: "macvlan-conf", type: "macvlan", master: "eth0" };
  const list = parseNetworkConfig(conf);
  assert.equal(list.cniVersion, "0.3.1");
  assert.equal(list.name, "macvlan-conf");
  assert.deepEqual(list.plugins, [conf]);
  assert.deepEqual(list.raw, { name: "macvlan-conf", cniVersion: "0.3.1", plugins: [conf] });
  // The caller's object is never aliased.
  list.plugins[0].master = "changed";
  assert.equal(conf.master, "eth0");
});

for (const v of SUPPORTED_VERSIONS) {
  Deno.test(`parseNetworkConfig: cniVersion ${v} is accepted`, () => {
    assert.equal(parseNetworkConfig({ cniVersion: v, name: "n", type: "bridge" }).cniVersion, v);
  });
}

Deno.test("parseNetworkConfig: missing cniVersion means 0.1.0", () => {
  assert.equal(parseNetworkConfig({ name: "n", type: "bridge" }).cniVersion, "0.1.0");
});

Deno.test("parseNetworkConfig: cniVersions picks the highest supported version", () => {
  const list = parseNetworkConfig({
    cniVersion: "0.4.0",
    cniVersions: ["1.0.0", "0.3.1", "2.5.0", "1.1.0"],
    name: "n",
    plugins: [{ type: "bridge" }],
  });
  assert.equal(list.cniVersion, "1.1.0");
  const only = parseNetworkConfig({
    cniVersions: ["0.3.1", "9.0.0"],
    name: "n",
    plugins: [{ type: "bridge" }],
  });
  assert.equal(only.cniVersion, "0.3.1");
});

Deno.test("parseNetworkConfig: cniVersions without any supported entry → code 1", () => {
  assert.equal(
    cniCode(() =>
      parseNetworkConfig({ cniVersions: ["3.0.0"], name: "n", plugins: [{ type: "x" }] })
    ),
    1,
  );
  assert.equal(
    cniCode(() =>
      parseNetworkConfig({ cniVersions: ["one"], name: "n", plugins: [{ type: "x" }] })
    ),
    7,
  );
  assert.equal(
    cniCode(() => parseNetworkConfig({ cniVersion: "2.0.0", name: "n", type: "x" })),
    1,
  );
});

Deno.test("parseNetworkConfig: disableCheck / disableGC accept booleans and strings", () => {
  const list = parseNetworkConfig({
    cniVersion: "1.1.0",
    name: "n",
    disableCheck: "TRUE",
    disableGC: true,
    plugins: [{ type: "bridge" }],
  });
  assert.equal(list.disableCheck, true);
  assert.equal(list.disableGC, true);
  assert.equal(
    cniCode(() =>
      parseNetworkConfig({ name: "n", disableGC: "yes", plugins: [{ type: "bridge" }] })
    ),
    7,
  );
});

Deno.test("parseNetworkConfig: bad JSON → code 6, with source in details", () => {
  try {
    parseNetworkConfig("{not json", { source: "/etc/cni/net.d/x.conflist" });
    assert.fail("expected an error");
  } catch (err) {
    assert.ok(err instanceof CniError);
    assert.equal(err.code, 6);
    assert.match(err.details, /\/etc\/cni\/net\.d\/x\.conflist/);
  }
  assert.equal(cniCode(() => parseNetworkConfig("[1,2]")), 6);
  assert.equal(cniCode(() => parseNetworkConfig("null")), 6);
});

Deno.test("parseNetworkConfig: missing name/type or empty plugins → code 7", () => {
  const cases: unknown[] = [
    { cniVersion: "1.0.0", type: "bridge" },
    { cniVersion: "1.0.0", name: "", type: "bridge" },
    { cniVersion: "1.0.0", name: 5, type: "bridge" },
    { cniVersion: "1.0.0", name: "n" },
    { cniVersion: "1.0.0", name: "n", plugins: [] },
    { cniVersion: "1.0.0", name: "n", plugins: "bridge" },
    { cniVersion: "1.0.0", name: "n", plugins: [{ bridge: "br0" }] },
    { cniVersion: "1.0.0", name: "n", plugins: [{ type: 3 }] },
    { cniVersion: "1.0.0", name: "n", plugins: ["bridge"] },
    { cniVersion: "1.0.0", name: "bad name!", type: "bridge" },
  ];
  for (const c of cases) {
    assert.equal(cniCode(() => parseNetworkConfig(JSON.stringify(c))), 7, JSON.stringify(c));
  }
});

Deno.test("parseNetworkConfig: unsafe plugin types → code 7", () => {
  for (const type of ["", "../bin/sh", "/bin/sh", "a/b", "..", "x..y", "nul\0"]) {
    assert.equal(
      cniCode(() => parseNetworkConfig({ cniVersion: "1.0.0", name: "n", plugins: [{ type }] })),
      7,
      JSON.stringify(type),
    );
  }
});

Deno.test("assertPluginType and validateNetworkName", () => {
  assertPluginType("bridge");
  assertPluginType("sriov-cni_2.x");
  assert.equal(cniCode(() => assertPluginType("../x")), 7);
  validateNetworkName("net-a.b_c");
  assert.equal(cniCode(() => validateNetworkName("")), 7);
  assert.equal(cniCode(() => validateNetworkName("-lead")), 7);
  assert.equal(cniCode(() => validateNetworkName("ns/net")), 7);
});

Deno.test("parseNetworkConfig: random malformed inputs give typed errors", () => {
  const samples = ["", "{", "1", '"s"', "true", '{"name":{}}', '{"plugins":null,"name":"n"}'];
  for (let i = 0; i < 200; i++) {
    const len = Math.floor(Math.random() * 20);
    let s = "";
    for (let j = 0; j < len; j++) s += '{}[]":,nametypeplugins0 '[Math.floor(Math.random() * 25)];
    samples.push(s);
  }
  for (const s of samples) {
    try {
      parseNetworkConfig(s);
    } catch (err) {
      assert.ok(err instanceof CniError, `input ${JSON.stringify(s)} threw ${err}`);
    }
  }
});
