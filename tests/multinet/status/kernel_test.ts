import assert from "node:assert/strict";
import { parseResult } from "../../../lib/cni/result.ts";
import type { CacheRecord } from "../../../lib/multinet/cache/cache.ts";
import {
  applyDefaultRoute,
  claimsSandboxInterface,
  type KernelAccess,
  reconcileStatus,
} from "../../../lib/multinet/status/kernel.ts";
import type { NetnsSnapshot } from "../../../lib/netlink/inspect.ts";
import type { Route } from "../../../lib/netlink/route.ts";

function iface(name: string, index: number, mac: string, addresses: string[], mtu = 1500) {
  return { name, index, mac, mtu, operState: "UP", flags: 0, type: 1, addresses };
}

const snapshot: NetnsSnapshot = {
  interfaces: [
    iface("lo", 1, "00:00:00:00:00:00", ["127.0.0.1/8"]),
    iface("eth0", 2, "0a:58:0a:f4:01:49", ["10.244.1.73/24", "fe80::858:aff:fef4:149/64"]),
    iface("net1", 3, "02:11:22:33:44:55", ["192.0.2.2/24", "2001:db8::2/64"], 9000),
  ],
  routes: [],
};

Deno.test("reconcileStatus: agreeing delegate → kernel values, no problems; link-local left out", () => {
  const { entry, problems } = reconcileStatus(
    {
      name: "cbr0",
      interface: "eth0",
      ips: ["10.244.1.73/24"],
      mac: "0A:58:0A:F4:01:49",
      default: true,
    },
    snapshot,
    true,
  );
  assert.deepEqual(problems, []);
  assert.deepEqual(entry.ips, ["10.244.1.73/24"]);
  assert.equal(entry.mac, "0a:58:0a:f4:01:49");
  assert.equal(entry.mtu, 1500);
});

Deno.test("reconcileStatus: other MAC, missing IP, bare IP accepted; kernel verifies", () => {
  const { entry, problems } = reconcileStatus(
    {
      name: "ns/a",
      interface: "net1",
      ips: ["192.0.2.2", "198.51.100.9/24"],
      mac: "02:00:00:00:00:01",
      default: false,
    },
    snapshot,
    true,
  );
  assert.equal(problems.length, 2);
  assert.match(problems[0], /MAC of net1 is 02:11:22:33:44:55/);
  assert.match(problems[1], /198\.51\.100\.9\/24/);
  assert.equal(entry.mac, "02:11:22:33:44:55");
  assert.equal(entry.mtu, 9000);
  // The delegate's addresses the kernel holds, in the kernel's form; the missing one is dropped,
  // and 2001:db8::2, which the kernel holds but the delegate did not return, is not reported.
  assert.deepEqual(entry.ips, ["192.0.2.2/24"]);
});

Deno.test("reconcileStatus: missing interface is a problem only when the delegate claimed it", () => {
  const claimed = reconcileStatus(
    {
      name: "ns/a",
      interface: "net7",
      ips: ["1.2.3.4/24"],
      mac: "02:00:00:00:00:07",
      default: false,
    },
    snapshot,
    true,
  );
  assert.equal(claimed.problems.length, 1);
  assert.deepEqual(Object.keys(claimed.entry).sort(), ["default", "interface", "name"]);
  const userspace = reconcileStatus(
    { name: "ns/vhost", interface: "net8", default: false },
    snapshot,
    false,
  );
  assert.deepEqual(userspace.problems, []);
  assert.deepEqual(userspace.entry, { name: "ns/vhost", interface: "net8", default: false });
});

Deno.test("reconcileStatus: IPoIB interfaces report the GUID, not a 20-byte mac", () => {
  const ib: NetnsSnapshot = {
    interfaces: [{
      ...iface("ib0", 4, "80:00:00:48:fe:80:00:00:00:00:00:00:24:8a:07:03:00:8d:ae:2f", [
        "198.51.100.1/24",
      ], 2044),
      type: 32,
      infinibandGuid: "24:8a:07:03:00:8d:ae:2f",
    }],
    routes: [],
  };
  const { entry } = reconcileStatus({ name: "ns/ib", interface: "ib0", default: false }, ib, true);
  assert.equal(entry["infiniband-guid"], "24:8a:07:03:00:8d:ae:2f");
  assert.equal(entry.mac, undefined);
  assert.equal(entry.mtu, 2044);
});

Deno.test("claimsSandboxInterface reads the decoded result of any version", () => {
  assert.equal(
    claimsSandboxInterface(
      { cniVersion: "1.0.0", interfaces: [{ name: "net1", sandbox: "/x" }] },
      "net1",
    ),
    true,
  );
  assert.equal(
    claimsSandboxInterface({ cniVersion: "1.0.0", interfaces: [{ name: "net1" }] }, "net1"),
    false,
  );
  assert.equal(
    claimsSandboxInterface(
      parseResult({ cniVersion: "0.2.0", ip4: { ip: "10.0.0.2/24" } }),
      "eth0",
    ),
    false,
  );
  assert.equal(
    claimsSandboxInterface(
      parseResult({ cniVersion: "0.3.1", interfaces: [{ name: "eth0", sandbox: "/x" }] }),
      "eth0",
    ),
    true,
  );
  assert.equal(claimsSandboxInterface(undefined, "eth0"), false);
});

function route(dst: string, oif: number, gateway?: string, priority = 0): Route {
  return {
    family: dst.includes(":") ? 10 : 2,
    dst,
    gateway,
    oif,
    priority,
    table: 254,
    protocol: 4,
    scope: 0,
    type: 1,
    flags: 0,
    tos: 0,
  };
}

Deno.test("applyDefaultRoute: calls the kernel, edits cached results of interfaces that lost routes, records the change", async () => {
  const calls: unknown[] = [];
  const kernel: KernelAccess = {
    inspect: () => Promise.resolve(snapshot),
    setDefaultRoute: (netns, req) => {
      calls.push([netns, req]);
      return Promise.resolve({
        ifName: "net1",
        ifindex: 3,
        added: [route("0.0.0.0/0", 3, "192.0.2.1", 0)],
        removed: [route("0.0.0.0/0", 2, "10.244.1.1")],
      });
    },
  };
  const defaultResult = {
    cniVersion: "1.0.0",
    ips: [{ address: "10.244.1.73/24", gateway: "10.244.1.1" }],
    routes: [{ dst: "0.0.0.0/0", gw: "10.244.1.1" }, { dst: "::/0" }, { dst: "10.96.0.0/12" }],
  };
  const record = {
    attachments: [
      {
        statusName: "cbr0",
        isDefault: true,
        ifName: "eth0",
        conflist: {},
        capabilityArgs: {},
        cniArgs: [],
        state: "added",
        result: defaultResult,
      },
      {
        statusName: "ns/a",
        isDefault: false,
        ifName: "net1",
        conflist: {},
        capabilityArgs: {},
        cniArgs: [],
        state: "added",
        result: { cniVersion: "1.0.0" },
        defaultRoute: ["192.0.2.1"],
      },
    ],
  } as unknown as CacheRecord;
  assert.equal(await applyDefaultRoute(kernel, "/var/run/netns/p", record), snapshot);
  assert.deepEqual(calls, [["/var/run/netns/p", { ifName: "net1", gateways: ["192.0.2.1"] }]]);
  // Only the IPv4 default route left eth0's cached result; the IPv6 one and others stay.
  assert.deepEqual((record.attachments[0].result as typeof defaultResult).routes, [
    { dst: "::/0" },
    { dst: "10.96.0.0/12" },
  ]);
  assert.deepEqual(defaultResult.routes.length, 3, "the original result object is not mutated");
  assert.deepEqual(record.defaultRouteChange, {
    ifName: "net1",
    added: [{ dst: "0.0.0.0/0", gateway: "192.0.2.1", metric: 0 }],
    removed: [{ dst: "0.0.0.0/0", gateway: "10.244.1.1", ifName: "eth0" }],
  });
});

Deno.test("applyDefaultRoute: nothing requested → no kernel call", async () => {
  const kernel: KernelAccess = {
    inspect: () => Promise.reject(new Error("not expected")),
    setDefaultRoute: () => Promise.reject(new Error("not expected")),
  };
  const record = { attachments: [{ ifName: "eth0" }] } as unknown as CacheRecord;
  assert.equal(await applyDefaultRoute(kernel, "/x", record), undefined);
});

Deno.test("reconcileStatus: ips are the delegate's, verified; other spellings match, extra kernel addresses are not reported", () => {
  const { entry, problems } = reconcileStatus(
    {
      name: "ns/a",
      interface: "net1",
      ips: ["2001:0DB8:0:0::2/64", "192.0.2.2/24"],
      default: false,
    },
    snapshot,
    true,
  );
  assert.deepEqual(problems, []);
  assert.deepEqual(entry.ips, ["2001:db8::2/64", "192.0.2.2/24"], "delegate order, kernel form");
  // eth0 holds a link-local and the delegate returned one address: only that one is reported.
  const eth0 = reconcileStatus(
    { name: "cbr0", interface: "eth0", ips: ["10.244.1.73/24"], default: true },
    snapshot,
    true,
  );
  assert.deepEqual(eth0.entry.ips, ["10.244.1.73/24"]);
  // A delegate that returned no address gets none from the kernel.
  const none = reconcileStatus({ name: "ns/b", interface: "net1", default: false }, snapshot, true);
  assert.equal(none.entry.ips, undefined);
  // A different prefix length is reported as the kernel holds it, with a problem.
  const other = reconcileStatus(
    { name: "ns/c", interface: "net1", ips: ["192.0.2.2/16"], default: false },
    snapshot,
    true,
  );
  assert.deepEqual(other.entry.ips, ["192.0.2.2/24"]);
  assert.match(other.problems[0], /192\.0\.2\.2\/16 reported by the delegate is 192\.0\.2\.2\/24/);
});
