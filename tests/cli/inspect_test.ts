/**
 * Tests of lib/cli/inspect.ts (`manifold inspect`). Pure report/format tests need no
 * permissions; `runInspect` tests need read/write/env/ffi; the kernel cases need root and
 * build scratch namespaces `mfi-<random>` (host links `mfi<random>…`), removed in `finally`.
 * Run with `deno test -A tests/cli/`.
 */

import assert from "node:assert/strict";
import {
  buildInspectReport,
  formatInspectJson,
  formatInspectTable,
  INSPECT_USAGE,
  type InspectReport,
  runInspect,
} from "../../lib/cli/mod.ts";
import {
  AttachmentCache,
  CACHE_SCHEMA_VERSION,
  type CachedAttachment,
  type CacheRecord,
} from "../../lib/multinet/cache/cache.ts";
import type { NetnsSnapshot, Route } from "../../lib/netlink/mod.ts";
import { ip, ipJson, sh } from "../support/netns.ts";

const root = (() => {
  try {
    return Deno.uid() === 0;
  } catch {
    return false; // no --allow-sys: the pure tests still run
  }
})();

// ---------------------------------------------------------------------------------------
// Fixtures

function iface(
  name: string,
  index: number,
  mac: string,
  addresses: string[],
  extra: { mtu?: number; kind?: string; operState?: string; infinibandGuid?: string } = {},
) {
  return {
    name,
    index,
    mac,
    mtu: extra.mtu ?? 1500,
    operState: extra.operState ?? "UP",
    flags: 0,
    type: 1,
    ...(extra.kind ? { kind: extra.kind } : {}),
    ...(extra.infinibandGuid ? { infinibandGuid: extra.infinibandGuid } : {}),
    addresses,
  };
}

function route(dst: string, gateway: string | undefined, oif: number, priority: number): Route {
  return {
    family: dst.includes(":") ? 10 : 2,
    dst,
    ...(gateway ? { gateway } : {}),
    oif,
    priority,
    table: 254,
    protocol: 3,
    scope: 0,
    type: 1,
    flags: 0,
    tos: 0,
  };
}

const snapshot: NetnsSnapshot = {
  netns: "/var/run/netns/cni-1234",
  interfaces: [
    iface("net1", 3, "02:bb:00:00:00:02", ["192.0.2.2/24", "2001:db8::2/64", "fe80::2/64"], {
      mtu: 9000,
      kind: "macvlan",
    }),
    iface("lo", 1, "00:00:00:00:00:00", ["127.0.0.1/8", "::1/128"], { operState: "UNKNOWN" }),
    iface("eth0", 2, "0a:58:0a:f4:01:49", ["10.244.1.73/24", "169.254.1.1/16"], {
      kind: "veth",
    }),
    iface("ib0", 4, "80:00:00:48:fe:80:00:00:00:00:00:00:00:02:c9:03:00:0f:21:61", [], {
      mtu: 2044,
      infinibandGuid: "00:02:c9:03:00:0f:21:61",
    }),
  ],
  routes: [
    route("::/0", "2001:db8::1", 3, 1024),
    route("10.244.1.0/24", undefined, 2, 0),
    route("0.0.0.0/0", "192.0.2.1", 3, 0),
    {
      ...route("0.0.0.0/0", undefined, 0, 100),
      oif: undefined,
      nexthops: [
        { oif: 3, gateway: "192.0.2.254", weight: 1, flags: 0 },
        { oif: 2, gateway: "10.244.1.1", weight: 1, flags: 0 },
      ],
    },
  ],
};

function attachment(
  statusName: string,
  ifName: string,
  result: unknown,
  extra: Partial<CachedAttachment> = {},
): CachedAttachment {
  return {
    statusName,
    isDefault: false,
    ifName,
    conflist: { cniVersion: "1.0.0", name: statusName, plugins: [{ type: "macvlan" }] },
    capabilityArgs: {},
    cniArgs: [],
    state: "added",
    ...(result !== undefined ? { result } : {}),
    ...extra,
  };
}

function result(ifName: string, mac: string, ips: string[], sandbox: string) {
  return {
    cniVersion: "1.0.0",
    interfaces: [{ name: ifName, mac, sandbox }],
    ips: ips.map((address) => ({ address, interface: 0 })),
  };
}

function record(
  containerId: string,
  netns: string,
  attachments: CachedAttachment[],
  extra: Partial<CacheRecord> = {},
): CacheRecord {
  return {
    schemaVersion: CACHE_SCHEMA_VERSION,
    containerId,
    netns,
    ifName: "eth0",
    pod: { namespace: "ns1", name: "web-0", uid: "5a1f9a2e" },
    cniVersion: "1.1.0",
    createdAt: "2026-03-01T12:00:00.000Z",
    attachments,
    ...extra,
  };
}

const NS = "/var/run/netns/cni-1234";

const podRecord = record("c0ffee", NS, [
  attachment("cbr0", "eth0", result("eth0", "0A:58:0A:F4:01:49", ["10.244.1.73/24"], NS), {
    isDefault: true,
  }),
  attachment("ns1/net-a", "net1", result("net1", "02:bb:00:00:00:99", ["192.0.2.2/24"], NS), {
    defaultRoute: ["192.0.2.1"],
  }),
  attachment("ns1/net-b", "net2", result("net2", "02:cc:00:00:00:03", ["198.51.100.2/24"], NS)),
  attachment("ns1/dpdk", "net3", { cniVersion: "1.0.0", interfaces: [{ name: "net3" }] }),
  attachment("ns1/broken", "net4", { cniVersion: "1.0.0", interfaces: "nope" }),
  attachment("ns1/half", "net5", undefined, { state: "adding" }),
], {
  defaultRouteChange: {
    ifName: "net1",
    added: [{ dst: "0.0.0.0/0", gateway: "192.0.2.1", metric: 0 }],
    removed: [
      { dst: "0.0.0.0/0", gateway: "10.244.1.1", ifName: "eth0" },
      { dst: "::/0", gateway: "fe80::1", ifName: "eth0" },
    ],
  },
});

// ---------------------------------------------------------------------------------------
// buildInspectReport (pure)

Deno.test("buildInspectReport --netns: every interface by ifindex, link-local apart", () => {
  const report = buildInspectReport(snapshot);
  assert.equal(report.version, 1);
  assert.equal(report.netns, NS);
  assert.deepEqual(report.interfaces.map((i) => i.ifName), ["lo", "eth0", "net1", "ib0"]);
  const [lo, eth0, net1, ib0] = report.interfaces;
  assert.deepEqual(lo, {
    ifName: "lo",
    present: true,
    index: 1,
    mac: "00:00:00:00:00:00",
    mtu: 1500,
    operState: "UNKNOWN",
    addresses: ["127.0.0.1/8", "::1/128"],
    linkLocalAddresses: [],
    problems: [],
  });
  assert.deepEqual(eth0.addresses, ["10.244.1.73/24"]);
  assert.deepEqual(eth0.linkLocalAddresses, ["169.254.1.1/16"]);
  assert.deepEqual(net1.addresses, ["192.0.2.2/24", "2001:db8::2/64"]);
  assert.deepEqual(net1.linkLocalAddresses, ["fe80::2/64"]);
  assert.equal(net1.kind, "macvlan");
  assert.equal(ib0.infinibandGuid, "00:02:c9:03:00:0f:21:61");
  assert.equal(ib0.mac, undefined, "IPoIB shows the GUID, not the 20-byte address");
  assert.equal(report.pod, undefined);
  assert.equal(report.defaultRouteChange, undefined);
});

Deno.test("buildInspectReport: default routes sorted (v4 first, metric, dev), multipath expanded", () => {
  const report = buildInspectReport(snapshot);
  assert.deepEqual(report.defaultRoutes, [
    { family: "inet", dst: "0.0.0.0/0", gateway: "192.0.2.1", dev: "net1", ifindex: 3, metric: 0 },
    {
      family: "inet",
      dst: "0.0.0.0/0",
      gateway: "10.244.1.1",
      dev: "eth0",
      ifindex: 2,
      metric: 100,
    },
    {
      family: "inet",
      dst: "0.0.0.0/0",
      gateway: "192.0.2.254",
      dev: "net1",
      ifindex: 3,
      metric: 100,
    },
    {
      family: "inet6",
      dst: "::/0",
      gateway: "2001:db8::1",
      dev: "net1",
      ifindex: 3,
      metric: 1024,
    },
  ]);
});

Deno.test("buildInspectReport --pod: attachments in ADD order, claims reconciled with the kernel", () => {
  const report = buildInspectReport(snapshot, {
    record: podRecord,
    otherSandboxes: [
      { containerId: "aaa", createdAt: "2026-02-01T00:00:00.000Z", netns: "/x" },
      { containerId: "bbb", createdAt: "2026-02-02T00:00:00.000Z", netns: "/y" },
    ],
  });
  assert.deepEqual(report.pod, { namespace: "ns1", name: "web-0", uid: "5a1f9a2e" });
  assert.deepEqual(report.sandbox, {
    containerId: "c0ffee",
    createdAt: "2026-03-01T12:00:00.000Z",
    netns: NS,
  });
  assert.deepEqual(report.otherSandboxes?.map((s) => s.containerId), ["bbb", "aaa"]);
  assert.deepEqual(
    report.interfaces.map((i) => [i.network, i.ifName, i.isDefault, i.present]),
    [
      ["cbr0", "eth0", true, true],
      ["ns1/net-a", "net1", false, true],
      ["ns1/net-b", "net2", false, false],
      ["ns1/dpdk", "net3", false, false],
      ["ns1/broken", "net4", false, false],
      ["ns1/half", "net5", false, false],
    ],
  );
  const [eth0, net1, net2, net3, net4, net5] = report.interfaces;
  assert.deepEqual(eth0.problems, [], "case-insensitive MAC match, same IP");
  assert.deepEqual(eth0.claimed, { mac: "0A:58:0A:F4:01:49", ips: ["10.244.1.73/24"] });
  assert.equal(eth0.mac, "0a:58:0a:f4:01:49", "the kernel's MAC is shown");
  assert.deepEqual(net1.problems, [
    "MAC of net1 is 02:bb:00:00:00:02, the delegate reported 02:bb:00:00:00:99",
  ]);
  assert.equal(net1.mtu, 9000);
  assert.deepEqual(net2.problems, [
    "interface net2 reported by the delegate is missing from the sandbox",
  ]);
  assert.deepEqual(net2.addresses, []);
  assert.deepEqual(net3.problems, [], "no sandbox interface claimed: not a problem");
  assert.equal(net4.problems.length, 1);
  assert.match(net4.problems[0], /^cached delegate result cannot be decoded: /);
  assert.deepEqual(net5.problems, ["ADD of this attachment did not finish"]);
  assert.equal(net5.state, "adding");
  assert.deepEqual(report.defaultRouteChange, podRecord.defaultRouteChange);
  assert.deepEqual(report.problems, [
    "default route 0.0.0.0/0 via 10.244.1.1 dev eth0 removed by ADD is back",
  ]);
});

Deno.test("buildInspectReport --pod: a recorded default route the kernel lost is a problem", () => {
  const report = buildInspectReport({ ...snapshot, routes: [] }, { record: podRecord });
  assert.deepEqual(report.problems, [
    "default route 0.0.0.0/0 via 192.0.2.1 dev net1 metric 0 added by ADD is missing",
  ]);
  assert.deepEqual(report.defaultRoutes, []);
});

Deno.test("buildInspectReport is deterministic and does not alias its inputs", () => {
  const rec = structuredClone(podRecord);
  const a = buildInspectReport(snapshot, { record: rec });
  const b = buildInspectReport(structuredClone(snapshot), { record: structuredClone(podRecord) });
  assert.equal(formatInspectJson(a), formatInspectJson(b));
  a.defaultRouteChange!.added.length = 0;
  assert.equal(rec.defaultRouteChange!.added.length, 1);
  assert.deepEqual(rec, podRecord, "the record is not modified");
});

// ---------------------------------------------------------------------------------------
// formatInspectTable / formatInspectJson (pure)

Deno.test("formatInspectTable --pod: header, rows, problems, routes, recorded change", () => {
  const report = buildInspectReport(snapshot, {
    record: podRecord,
    otherSandboxes: [{ containerId: "aaa", createdAt: "2026-02-01T00:00:00.000Z", netns: "/x" }],
  });
  const expected = [
    "Pod ns1/web-0 (uid 5a1f9a2e)",
    "Sandbox c0ffee (newest of 2 sandboxes, created 2026-03-01T12:00:00.000Z; older: aaa)",
    "Network namespace /var/run/netns/cni-1234",
    "",
    "NETWORK     IFNAME  DEFAULT  MAC/GUID           MTU   STATE  KIND     ADDRESSES                    PROBLEMS",
    "cbr0        eth0    yes      0a:58:0a:f4:01:49  1500  UP     veth     10.244.1.73/24               -",
    "ns1/net-a   net1    no       02:bb:00:00:00:02  9000  UP     macvlan  192.0.2.2/24,2001:db8::2/64  1",
    "ns1/net-b   net2    no       (missing)          -     -      -        -                            1",
    "ns1/dpdk    net3    no       (missing)          -     -      -        -                            -",
    "ns1/broken  net4    no       (missing)          -     -      -        -                            1",
    "ns1/half    net5    no       (missing)          -     -      -        -                            1",
    "",
    "Problems (delegate claim vs kernel):",
    "  ns1/net-a (net1): MAC of net1 is 02:bb:00:00:00:02, the delegate reported 02:bb:00:00:00:99",
    "  ns1/net-b (net2): interface net2 reported by the delegate is missing from the sandbox",
    "  ns1/broken (net4): cached delegate result cannot be decoded: invalid 1.0.0 result: " +
    "✖ Invalid input: expected array, received string → at interfaces",
    "  ns1/half (net5): ADD of this attachment did not finish",
    "  default route 0.0.0.0/0 via 10.244.1.1 dev eth0 removed by ADD is back",
    "",
    "Default routes:",
    "  DST        GATEWAY      DEV   METRIC",
    "  0.0.0.0/0  192.0.2.1    net1  0",
    "  0.0.0.0/0  10.244.1.1   eth0  100",
    "  0.0.0.0/0  192.0.2.254  net1  100",
    "  ::/0       2001:db8::1  net1  1024",
    "",
    "Recorded default-route change (attachment net1):",
    "  added   0.0.0.0/0 via 192.0.2.1 dev net1 metric 0",
    "  removed 0.0.0.0/0 via 10.244.1.1 dev eth0",
    "  removed ::/0 via fe80::1 dev eth0",
    "",
  ].join("\n");
  assert.equal(formatInspectTable(report), expected);
});

Deno.test("formatInspectTable --netns: index column, GUID for IPoIB, no link-local", () => {
  const report = buildInspectReport({ ...snapshot, routes: [] });
  assert.equal(
    formatInspectTable(report),
    [
      "Network namespace /var/run/netns/cni-1234",
      "",
      "INDEX  IFNAME  MAC/GUID                 MTU   STATE    KIND     ADDRESSES",
      "1      lo      00:00:00:00:00:00        1500  UNKNOWN  -        127.0.0.1/8,::1/128",
      "2      eth0    0a:58:0a:f4:01:49        1500  UP       veth     10.244.1.73/24",
      "3      net1    02:bb:00:00:00:02        9000  UP       macvlan  192.0.2.2/24,2001:db8::2/64",
      "4      ib0     00:02:c9:03:00:0f:21:61  2044  UP       -        -",
      "",
      "Default routes: none",
      "",
    ].join("\n"),
  );
});

// deno-lint-ignore no-control-regex
const CONTROL_BUT_NEWLINE = /[\x00-\x09\x0b-\x1f\x7f-\x9f]/;

Deno.test("formatInspectTable: empty report; control characters in names are escaped", () => {
  const empty: InspectReport = {
    version: 1,
    netns: "/var/run/netns/x",
    interfaces: [],
    defaultRoutes: [],
    problems: [],
  };
  assert.equal(
    formatInspectTable(empty),
    "Network namespace /var/run/netns/x\n\nNo interfaces.\n\nDefault routes: none\n",
  );
  const evil = buildInspectReport(snapshot, {
    record: record("c1", NS, [attachment("ns1/\x1b[31mred\x07", "eth0", undefined)], {
      pod: { namespace: "ns1", name: "a\nb", uid: "" },
    }),
  });
  const table = formatInspectTable(evil);
  assert.doesNotMatch(table, CONTROL_BUT_NEWLINE);
  assert.match(table, /ns1\/\\x1b\[31mred\\x07/);
  assert.match(table, /^Pod ns1\/a\\x0ab$/m);
  const json = formatInspectJson({ ...evil, netns: "/x\u0085" });
  assert.doesNotMatch(json, CONTROL_BUT_NEWLINE);
  assert.equal(JSON.parse(json).netns, "/x\u0085");
});

Deno.test("formatInspectJson: the report's shape, parseable, newline-terminated", () => {
  const report = buildInspectReport(snapshot, { record: podRecord });
  const text = formatInspectJson(report);
  assert.ok(text.endsWith("}\n"));
  const parsed = JSON.parse(text);
  assert.deepEqual(parsed, JSON.parse(JSON.stringify(report)));
  assert.deepEqual(Object.keys(parsed), [
    "version",
    "netns",
    "interfaces",
    "defaultRoutes",
    "problems",
    "pod",
    "sandbox",
    "otherSandboxes",
    "defaultRouteChange",
  ]);
  assert.deepEqual(parsed.interfaces[1], {
    network: "ns1/net-a",
    isDefault: false,
    state: "added",
    ifName: "net1",
    present: true,
    index: 3,
    kind: "macvlan",
    mac: "02:bb:00:00:00:02",
    mtu: 9000,
    operState: "UP",
    addresses: ["192.0.2.2/24", "2001:db8::2/64"],
    linkLocalAddresses: ["fe80::2/64"],
    claimed: { mac: "02:bb:00:00:00:99", ips: ["192.0.2.2/24"] },
    problems: ["MAC of net1 is 02:bb:00:00:00:02, the delegate reported 02:bb:00:00:00:99"],
  });
});

// ---------------------------------------------------------------------------------------
// runInspect: usage, not found (no root needed)

async function run(args: string[], env: Record<string, string> = {}) {
  let stdout = "";
  let stderr = "";
  const code = await runInspect(args, {
    stdout: (s) => void (stdout += s),
    stderr: (s) => void (stderr += s),
    env,
  });
  return { code, stdout, stderr };
}

Deno.test("runInspect --help prints usage and exits 0", async () => {
  for (const args of [["--help"], ["-h"], ["--pod", "x", "--help"]]) {
    const r = await run(args);
    assert.equal(r.code, 0, args.join(" "));
    assert.equal(r.stdout, INSPECT_USAGE);
    assert.equal(r.stderr, "");
  }
});

Deno.test("runInspect: usage errors exit 2 with one clear line and a hint, no stack", async () => {
  const cases: [string[], RegExp][] = [
    [[], /one of --netns or a pod \(POD -n NAMESPACE, or --pod\) is required/],
    [["-n", "ns1", "--netns", "x"], /-n\/--namespace goes with a pod name/],
    [["web-0", "-n", "ns1", "--pod", "ns1/web-0"], /--pod cannot be used with -n/],
    [["--netns", "x", "-o", "table"], /must be json or yaml/],
    [["--bogus"], /Unknown option '--bogus'/],
    [["--netns"], /--netns/],
    [["--netns", ""], /--netns needs a path or a name/],
    [["--netns", "a", "--pod", "b/c"], /cannot be used together/],
    [["--pod", "web-0"], /--pod must be namespace\/name, got "web-0"/],
    [["--pod", "a/b/c"], /--pod must be namespace\/name/],
    [["--pod", "/b"], /--pod must be namespace\/name/],
    [["--netns", "x", "--cni-dir", "/tmp"], /--cni-dir only goes with --pod/],
    [["--netns", "x", "extra"], /--netns and a pod cannot be used together/],
    [["--json=yes", "--netns", "x"], /--json/],
  ];
  for (const [args, message] of cases) {
    const r = await run(args);
    assert.equal(r.code, 2, `${JSON.stringify(args)}: ${r.stderr}`);
    assert.equal(r.stdout, "");
    assert.match(r.stderr, /^manifold inspect: /);
    assert.match(r.stderr, message);
    assert.match(r.stderr, /Try 'manifold inspect --help'\.\n$/);
    assert.doesNotMatch(r.stderr, /\n\s+at /, "no stack trace");
  }
});

Deno.test("runInspect --pod: pod not in the cache exits 1 (empty, missing dir, tombstone, damaged)", async () => {
  const dir = await Deno.makeTempDir({ prefix: "mfi-cache-" });
  try {
    let r = await run(["--pod", "ns1/web-0", "--cni-dir", `${dir}/missing`]);
    assert.equal(r.code, 1);
    assert.equal(
      r.stderr,
      `manifold inspect: no sandbox of pod ns1/web-0 in the cache at ${dir}/missing\n`,
    );
    const cache = new AttachmentCache(dir);
    await cache.writeTombstone(record("dead1", "/var/run/netns/gone", []));
    await cache.write(record("other", "/var/run/netns/gone", [], {
      pod: { namespace: "ns1", name: "web-1", uid: "" },
    }));
    await Deno.writeTextFile(`${dir}/broken.json`, '{"schemaVersion": 1, "contai');
    r = await run(["--pod", "ns1/web-0"], { MANIFOLD_CNI_DIR: dir });
    assert.equal(r.code, 1);
    assert.equal(r.stdout, "");
    assert.match(r.stderr, /warning: skipping cache record broken: .*truncated/);
    assert.match(r.stderr, new RegExp(`no sandbox of pod ns1/web-0 in the cache at ${dir}\n$`));
    // A live record whose netns is gone: 1, naming the sandbox.
    await cache.write(record("live1", "/var/run/netns/mfi-gone-xyz", []));
    r = await run(["--pod", "ns1/web-0", "--cni-dir", dir, "--json"]);
    assert.equal(r.code, 1);
    assert.equal(r.stdout, "");
    assert.match(
      r.stderr,
      /Cannot open network namespace \/var\/run\/netns\/mfi-gone-xyz: ENOENT \(sandbox live1 of pod ns1\/web-0\)\n$/,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("runInspect --netns: a namespace that does not exist exits 1 with a message", async () => {
  for (const arg of ["mfi-nosuch-0b1c", "/proc/999999999/ns/net", "/etc/hostname"]) {
    const r = await run(["--netns", arg]);
    assert.equal(r.code, 1, `${arg}: ${r.stderr}`);
    assert.equal(r.stdout, "");
    assert.match(r.stderr, /^manifold inspect: Cannot (open|enter) network namespace /);
    assert.doesNotMatch(r.stderr, /\n\s+at /);
  }
});

// ---------------------------------------------------------------------------------------
// Kernel (root): scratch netns mfi-<id>, veth + macvlan on a host bridge

interface IpLink {
  ifindex: number;
  ifname: string;
  address?: string;
  mtu: number;
  operstate: string;
  linkinfo?: { info_kind?: string };
}
interface IpAddr {
  ifindex: number;
  addr_info: { local: string; prefixlen: number }[];
}

/** Builds `mfi-<id>`: eth0 (veth, peer on the host) and net1 (macvlan on host bridge). */
async function scratch() {
  const id = crypto.randomUUID().replaceAll("-", "").slice(0, 6);
  const ns = `mfi-${id}`;
  const bridge = `mfi${id}`;
  const hostVeth = `mfi${id}h`;
  const cleanup = async () => {
    await sh("ip", ["netns", "del", ns]);
    await sh("ip", ["link", "del", hostVeth]);
    await sh("ip", ["link", "del", bridge]);
  };
  try {
    await ip("netns", "add", ns);
    await ip("-n", ns, "link", "set", "lo", "up");
    await ip("link", "add", hostVeth, "type", "veth", "peer", "name", `mfi${id}p`);
    await ip("link", "set", `mfi${id}p`, "netns", ns);
    await ip("-n", ns, "link", "set", `mfi${id}p`, "name", "eth0");
    await ip("link", "add", bridge, "type", "bridge");
    await ip("link", "set", bridge, "up");
    await ip("link", "add", `mfi${id}m`, "link", bridge, "type", "macvlan", "mode", "bridge");
    await ip("link", "set", `mfi${id}m`, "netns", ns);
    await ip("-n", ns, "link", "set", `mfi${id}m`, "name", "net1");
    const links: [string, string, string][] = [
      ["eth0", "02:aa:00:00:00:01", "1450"],
      ["net1", "02:bb:00:00:00:02", "1400"],
    ];
    for (const [name, mac, mtu] of links) {
      // No kernel-made link-local address: what we compare must not change under us.
      await ip("-n", ns, "link", "set", name, "address", mac, "mtu", mtu, "addrgenmode", "none");
    }
    await ip("link", "set", hostVeth, "up");
    await ip("-n", ns, "addr", "add", "10.99.0.2/24", "dev", "eth0");
    await ip("-n", ns, "addr", "add", "fe80::1234/64", "dev", "eth0", "nodad");
    await ip("-n", ns, "addr", "add", "192.0.2.2/24", "dev", "net1");
    await ip("-n", ns, "addr", "add", "2001:db8::2/64", "dev", "net1", "nodad");
    await ip("-n", ns, "link", "set", "eth0", "up");
    await ip("-n", ns, "link", "set", "net1", "up");
    await ip("-n", ns, "route", "add", "default", "via", "192.0.2.1", "dev", "net1");
    await ip("-n", ns, "-6", "route", "add", "default", "via", "2001:db8::1", "dev", "net1");
    // Wait until the oper states settle (veth carrier comes up asynchronously).
    for (let i = 0; i < 50; i++) {
      const links = await ipJson<IpLink[]>(ns, "link", "show");
      if (links.every((l) => l.ifname === "lo" || l.operstate === "UP")) break;
      await new Promise((r) => setTimeout(r, 20));
    }
  } catch (e) {
    await cleanup();
    throw e;
  }
  return { ns, path: `/var/run/netns/${ns}`, cleanup };
}

Deno.test({
  name: "runInspect --netns --json equals ip -j -n <ns> link/addr (root)",
  ignore: !root,
  async fn() {
    const s = await scratch();
    try {
      for (const arg of [s.ns, s.path]) {
        const r = await run(["--netns", arg, "--json"]);
        assert.equal(r.code, 0, r.stderr);
        assert.equal(r.stderr, "");
        const report = JSON.parse(r.stdout) as InspectReport;
        assert.equal(report.netns, s.path);
        const links = await ipJson<IpLink[]>(s.ns, "-d", "link", "show");
        const addrs = await ipJson<IpAddr[]>(s.ns, "addr", "show");
        const addrOf = (index: number) =>
          addrs.find((a) => a.ifindex === index)!.addr_info.map((x) => `${x.local}/${x.prefixlen}`);
        assert.deepEqual(
          report.interfaces.map((i) => ({
            index: i.index,
            name: i.ifName,
            mac: i.mac,
            mtu: i.mtu,
            operState: i.operState,
            kind: i.kind,
            addresses: [...i.addresses, ...i.linkLocalAddresses].sort(),
          })),
          links.sort((a, b) => a.ifindex - b.ifindex).map((l) => ({
            index: l.ifindex,
            name: l.ifname,
            mac: l.address,
            mtu: l.mtu,
            operState: l.operstate,
            kind: l.linkinfo?.info_kind,
            addresses: addrOf(l.ifindex).sort(),
          })),
        );
        const eth0 = report.interfaces.find((i) => i.ifName === "eth0")!;
        assert.deepEqual(
          [eth0.mac, eth0.mtu, eth0.kind, eth0.addresses, eth0.linkLocalAddresses],
          ["02:aa:00:00:00:01", 1450, "veth", ["10.99.0.2/24"], ["fe80::1234/64"]],
        );
        const net1 = report.interfaces.find((i) => i.ifName === "net1")!;
        assert.deepEqual(
          [net1.mac, net1.mtu, net1.kind, net1.addresses],
          ["02:bb:00:00:00:02", 1400, "macvlan", ["192.0.2.2/24", "2001:db8::2/64"]],
        );
        const routes = await ipJson<
          { dst: string; gateway?: string; dev: string; metric?: number }[]
        >(
          s.ns,
          "route",
          "show",
          "default",
        );
        const routes6 = await ipJson<
          { dst: string; gateway?: string; dev: string; metric?: number }[]
        >(
          s.ns,
          "-6",
          "route",
          "show",
          "default",
        );
        assert.deepEqual(
          report.defaultRoutes.map((d) => [d.gateway, d.dev, d.metric]),
          [...routes, ...routes6].map((d) => [d.gateway, d.dev, d.metric ?? 0]),
        );
      }
    } finally {
      await s.cleanup();
    }
  },
});

Deno.test({
  name: "runInspect --pod: newest live sandbox, kernel values, MAC mismatch reported (root)",
  ignore: !root,
  async fn() {
    const s = await scratch();
    const dir = await Deno.makeTempDir({ prefix: "mfi-cache-" });
    try {
      const cache = new AttachmentCache(dir);
      const attachments = [
        attachment("cbr0", "eth0", result("eth0", "02:aa:00:00:00:01", ["10.99.0.2/24"], s.path), {
          isDefault: true,
        }),
        attachment(
          "ns1/net-a",
          "net1",
          result("net1", "02:bb:00:00:00:99", ["192.0.2.2/24", "2001:db8::2/64"], s.path),
          { defaultRoute: ["192.0.2.1"] },
        ),
      ];
      const change = {
        ifName: "net1",
        added: [{ dst: "0.0.0.0/0", gateway: "192.0.2.1", metric: 0 }],
        removed: [{ dst: "0.0.0.0/0", gateway: "10.99.0.1", ifName: "eth0" }],
      };
      await cache.write(record("older1", s.path, attachments, {
        createdAt: "2026-03-01T11:00:00.000Z",
      }));
      await cache.write(record("newest", s.path, attachments, {
        createdAt: "2026-03-01T12:00:00.000Z",
        defaultRouteChange: change,
      }));
      await cache.writeTombstone(
        record("deleted", s.path, attachments, { createdAt: "2026-03-01T13:00:00.000Z" }),
      );

      const r = await run(["--pod", "ns1/web-0", "--cni-dir", dir, "--json"]);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stderr, "");
      const report = JSON.parse(r.stdout) as InspectReport;
      // kubectl's habits: POD -n NAMESPACE and -o yaml give the same report.
      const y = await run(["web-0", "-n", "ns1", "--cni-dir", dir, "-o", "yaml"]);
      assert.equal(y.code, 0, y.stderr);
      assert.deepEqual((await import("yaml")).parse(y.stdout), report);
      assert.equal(report.sandbox?.containerId, "newest");
      assert.deepEqual(report.otherSandboxes?.map((x) => x.containerId), ["older1"]);
      assert.equal(report.netns, s.path);
      const [eth0, net1] = report.interfaces;
      assert.deepEqual(
        [eth0.network, eth0.ifName, eth0.isDefault, eth0.mac, eth0.mtu, eth0.operState],
        ["cbr0", "eth0", true, "02:aa:00:00:00:01", 1450, "UP"],
      );
      assert.deepEqual(eth0.problems, []);
      assert.deepEqual(
        [net1.network, net1.ifName, net1.isDefault, net1.mac, net1.mtu, net1.kind],
        ["ns1/net-a", "net1", false, "02:bb:00:00:00:02", 1400, "macvlan"],
      );
      assert.deepEqual(net1.claimed?.mac, "02:bb:00:00:00:99");
      assert.deepEqual(net1.problems, [
        "MAC of net1 is 02:bb:00:00:00:02, the delegate reported 02:bb:00:00:00:99",
      ]);
      assert.deepEqual(report.defaultRoutes, [
        {
          family: "inet",
          dst: "0.0.0.0/0",
          gateway: "192.0.2.1",
          dev: "net1",
          ifindex: net1.index,
          metric: 0,
        },
        {
          family: "inet6",
          dst: "::/0",
          gateway: "2001:db8::1",
          dev: "net1",
          ifindex: net1.index,
          metric: 1024,
        },
      ]);
      assert.deepEqual(report.defaultRouteChange, change);
      assert.deepEqual(report.problems, []);

      const table = await run(["--pod", "ns1/web-0", "--cni-dir", dir]);
      assert.equal(table.code, 0, table.stderr);
      assert.match(table.stdout, /^Sandbox newest \(newest of 2 sandboxes, /m);
      assert.match(table.stdout, /^ns1\/net-a\s+net1\s+no\s+02:bb:00:00:00:02\s+1400\s+/m);
      assert.match(table.stdout, /MAC of net1 is 02:bb:00:00:00:02, the delegate reported/);
      assert.doesNotMatch(table.stdout, /fe80::/, "link-local left out of the table");
      if (Deno.env.get("MFI_SHOW_TABLE")) console.log(`\n${table.stdout}`);
    } finally {
      await Deno.remove(dir, { recursive: true });
      await s.cleanup();
    }
  },
});

// ---------------------------------------------------------------------------------------
// End to end through main.ts, once the lead wires `manifold inspect` there.

const mainPath = new URL("../../main.ts", import.meta.url);

Deno.test({
  name: "deno run main.ts inspect --netns <ns> --json (root)",
  ignore: !root,
  async fn() {
    const s = await scratch();
    try {
      const r = await sh(Deno.execPath(), [
        "run",
        "-A",
        mainPath.pathname,
        "inspect",
        "--netns",
        s.ns,
        "--json",
      ]);
      assert.equal(r.code, 0, r.stderr);
      const report = JSON.parse(r.stdout) as InspectReport;
      assert.deepEqual(report.interfaces.map((i) => i.ifName), ["lo", "eth0", "net1"]);
      const bad = await sh(Deno.execPath(), ["run", "-A", mainPath.pathname, "inspect", "--nope"]);
      assert.equal(bad.code, 2);
    } finally {
      await s.cleanup();
    }
  },
});
