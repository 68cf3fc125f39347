/**
 * Tests of lib/cni/result.ts: decoding every result version and converting between
 * every pair of supported versions (libcni convert registry). Pure.
 */

import assert from "node:assert/strict";
import { CniError } from "../../lib/cni/errors.ts";
import { convertResult, parseResult, resultVersion } from "../../lib/cni/result.ts";
import { resultFamily, SUPPORTED_VERSIONS } from "../../lib/cni/version.ts";

/** The same attachment (one IPv4 + one IPv6, routes, DNS) in every version's shape. */
function sample(version: string): Record<string, unknown> {
  const dns = { nameservers: ["10.1.0.10"], domain: "cluster.local", search: ["svc"] };
  switch (resultFamily(version)) {
    case "legacy":
      return {
        cniVersion: version,
        ip4: {
          ip: "10.1.0.5/16",
          gateway: "10.1.0.1",
          routes: [{ dst: "0.0.0.0/0", gw: "10.1.0.1" }],
        },
        ip6: { ip: "fd00::5/64", gateway: "fd00::1", routes: [{ dst: "::/0" }] },
        dns,
      };
    case "current":
      return {
        cniVersion: version,
        interfaces: [{ name: "eth0", mac: "0a:58:0a:01:00:05", sandbox: "/var/run/netns/x" }],
        ips: [
          { version: "4", interface: 0, address: "10.1.0.5/16", gateway: "10.1.0.1" },
          { version: "6", interface: 0, address: "fd00::5/64", gateway: "fd00::1" },
        ],
        routes: [{ dst: "0.0.0.0/0", gw: "10.1.0.1" }, { dst: "::/0" }],
        dns,
      };
    default:
      return {
        cniVersion: version,
        interfaces: [{ name: "eth0", mac: "0a:58:0a:01:00:05", sandbox: "/var/run/netns/x" }],
        ips: [
          { interface: 0, address: "10.1.0.5/16", gateway: "10.1.0.1" },
          { interface: 0, address: "fd00::5/64", gateway: "fd00::1" },
        ],
        routes: [{ dst: "0.0.0.0/0", gw: "10.1.0.1" }, { dst: "::/0" }],
        dns,
      };
  }
}

function cniCode(fn: () => unknown): number {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof CniError, `expected CniError, got ${err}`);
    return err.code;
  }
  assert.fail("expected an error");
}

for (const v of SUPPORTED_VERSIONS) {
  Deno.test(`parseResult ${v}: normalizes into the 1.x shape`, () => {
    const r = parseResult(sample(v));
    assert.equal(r.cniVersion, v);
    assert.deepEqual(r.ips?.map((i) => i.address), ["10.1.0.5/16", "fd00::5/64"]);
    assert.deepEqual(r.ips?.map((i) => i.gateway), ["10.1.0.1", "fd00::1"]);
    assert.ok(r.ips?.every((i) => !("version" in i)));
    assert.deepEqual(r.routes, [{ dst: "0.0.0.0/0", gw: "10.1.0.1" }, { dst: "::/0" }]);
    assert.equal(r.dns?.domain, "cluster.local");
    if (resultFamily(v) === "legacy") assert.equal(r.interfaces, undefined);
    else assert.deepEqual(r.interfaces?.[0].name, "eth0");
  });
}

Deno.test("parseResult: 1.1 interface and route fields survive", () => {
  const r = parseResult({
    cniVersion: "1.1.0",
    interfaces: [{ name: "net1", mtu: 9000, socketPath: "/run/vhu.sock", pciID: "0000:03:00.1" }],
    ips: [{ address: "192.168.1.2/24", interface: 0 }],
    routes: [{ dst: "10.0.0.0/8", gw: "192.168.1.1", mtu: 1400, advmss: 1360, table: 100 }],
  });
  assert.deepEqual(r.interfaces, [
    { name: "net1", mtu: 9000, socketPath: "/run/vhu.sock", pciID: "0000:03:00.1" },
  ]);
  assert.deepEqual(r.routes?.[0], {
    dst: "10.0.0.0/8",
    gw: "192.168.1.1",
    mtu: 1400,
    advmss: 1360,
    table: 100,
  });
});

Deno.test("parseResult: empty dns, nulls and empty arrays are omitted", () => {
  // host-local 1.0.0 really prints `"dns": {}`.
  const r = parseResult({
    cniVersion: "1.0.0",
    ips: [{ address: "10.99.0.2/24", gateway: "10.99.0.1" }],
    dns: {},
    routes: [],
    interfaces: null,
  });
  assert.deepEqual(r, {
    cniVersion: "1.0.0",
    ips: [{ address: "10.99.0.2/24", gateway: "10.99.0.1" }],
  });
});

Deno.test("parseResult: bad shapes → code 6, unknown version → code 1", () => {
  assert.equal(cniCode(() => parseResult(null)), 6);
  assert.equal(cniCode(() => parseResult([])), 6);
  assert.equal(cniCode(() => parseResult({ cniVersion: 1 })), 6);
  assert.equal(cniCode(() => parseResult({ cniVersion: "1.0.0", ips: [{}] })), 6);
  assert.equal(
    cniCode(() => parseResult({ cniVersion: "1.0.0", ips: [{ address: "10.1.2.300/24" }] })),
    6,
  );
  assert.equal(
    cniCode(() =>
      parseResult({ cniVersion: "0.4.0", ips: [{ version: "5", address: "1.2.3.4/8" }] })
    ),
    6,
  );
  assert.equal(cniCode(() => parseResult({ cniVersion: "0.2.0", ip4: { ip: "nope" } })), 6);
  assert.equal(cniCode(() => parseResult({ cniVersion: "7.0.0" })), 1);
  assert.equal(cniCode(() => parseResult({ cniVersion: "0.3.5" })), 1);
});

Deno.test("resultVersion: absent cniVersion is a 0.1.0 result", () => {
  assert.equal(resultVersion({ ip4: { ip: "10.0.0.2/24" } }), "0.1.0");
  assert.equal(parseResult({ ip4: { ip: "10.0.0.2/24" } }).ips?.[0].address, "10.0.0.2/24");
});

for (const from of SUPPORTED_VERSIONS) {
  for (const to of SUPPORTED_VERSIONS) {
    Deno.test(`convertResult ${from} → ${to}`, () => {
      const out = convertResult(sample(from), to);
      assert.equal(out.cniVersion, to);
      // The converted result decodes and carries the same addresses, routes and DNS.
      const r = parseResult(out);
      assert.deepEqual(r.ips?.map((i) => i.address), ["10.1.0.5/16", "fd00::5/64"]);
      assert.deepEqual(r.routes?.map((x) => x.dst).sort(), ["0.0.0.0/0", "::/0"]);
      assert.equal(r.dns?.nameservers?.[0], "10.1.0.10");
      const fam = resultFamily(to);
      if (fam === "legacy") {
        assert.ok("ip4" in out && "ip6" in out && !("ips" in out));
      } else if (fam === "current") {
        const ips = out.ips as Record<string, unknown>[];
        assert.deepEqual(ips.map((i) => i.version), ["4", "6"]);
      } else {
        const ips = out.ips as Record<string, unknown>[];
        assert.ok(ips.every((i) => !("version" in i)));
      }
      // Exact round trips within what both ends can express.
      if (resultFamily(from) === fam) assert.deepEqual(out, { ...sample(from), cniVersion: to });
      else if (fam !== "legacy" && resultFamily(from) !== "legacy") {
        assert.deepEqual(out, sample(to));
      }
    });
  }
}

Deno.test("convertResult: legacy → 1.0 builds the exact 1.0 shape", () => {
  assert.deepEqual(
    convertResult({
      cniVersion: "0.2.0",
      ip4: { ip: "10.0.0.2/24", gateway: "10.0.0.1", routes: [{ dst: "0.0.0.0/0" }] },
    }, "1.0.0"),
    {
      cniVersion: "1.0.0",
      ips: [{ address: "10.0.0.2/24", gateway: "10.0.0.1" }],
      routes: [{ dst: "0.0.0.0/0" }],
    },
  );
});

Deno.test("convertResult: 1.1-only interface fields are dropped for 0.4.0", () => {
  const out = convertResult({
    cniVersion: "1.1.0",
    interfaces: [{ name: "net1", mac: "aa:bb:cc:dd:ee:ff", mtu: 9000, pciID: "0000:03:00.1" }],
    ips: [{ address: "10.0.0.2/24", interface: 0 }],
  }, "0.4.0");
  assert.deepEqual(out, {
    cniVersion: "0.4.0",
    interfaces: [{ name: "net1", mac: "aa:bb:cc:dd:ee:ff" }],
    ips: [{ version: "4", interface: 0, address: "10.0.0.2/24" }],
  });
});

Deno.test("convertResult: same family keeps unknown keys", () => {
  const out = convertResult({
    cniVersion: "1.0.0",
    interfaces: [{ name: "eth0", metadata: { k: "v" } }],
  }, "1.1.0");
  assert.deepEqual(out, {
    cniVersion: "1.1.0",
    interfaces: [{ name: "eth0", metadata: { k: "v" } }],
  });
});

Deno.test("convertResult: impossible conversions → code 1", () => {
  const twoV4 = {
    cniVersion: "1.0.0",
    ips: [{ address: "10.0.0.2/24" }, { address: "10.0.1.2/24" }],
  };
  for (const to of ["0.1.0", "0.2.0"]) {
    assert.equal(cniCode(() => convertResult(twoV4, to)), 1);
    assert.equal(cniCode(() => convertResult({ cniVersion: "0.4.0" }, to)), 1);
    assert.equal(
      cniCode(() =>
        convertResult({
          cniVersion: "1.0.0",
          ips: [{ address: "10.0.0.2/24" }],
          routes: [{ dst: "::/0" }],
        }, to)
      ),
      1,
    );
  }
  assert.equal(cniCode(() => convertResult(sample("1.0.0"), "2.0.0")), 1);
  assert.equal(cniCode(() => convertResult({ cniVersion: "1.0.0", ips: 3 }, "0.4.0")), 6);
});

Deno.test("convertResult: never mutates its input", () => {
  const input = sample("1.1.0");
  const copy = structuredClone(input);
  for (const to of SUPPORTED_VERSIONS) convertResult(input, to);
  assert.deepEqual(input, copy);
});
