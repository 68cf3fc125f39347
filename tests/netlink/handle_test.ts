/**
 * Tests of lib/netlink/handle.ts and inspect.ts over a fake kernel: the iproute2-like API,
 * sequence/port checks, dump retries, typed errors, and the default-route algorithm. Pure.
 */

import assert from "node:assert/strict";
import {
  encodeMessage,
  FakeTransport,
  LinkNotFoundError,
  NetlinkDumpInterruptedError,
  NetlinkError,
  NetlinkHandle,
  NetlinkProtocolError,
  NLM_F_CREATE,
  NLM_F_MULTI,
  NLM_F_REPLACE,
  NLMSG_DONE,
  parseMessages,
  replaceDefaultRoutes,
  RTM_NEWLINK,
  RTM_NEWROUTE,
  takeSnapshot,
  writeLink,
} from "../../lib/netlink/mod.ts";
import { FakeKernel, testLink, testRoute } from "../fixtures/netlink/fake_kernel.ts";

const LINKS = [
  testLink(1, "lo", { type: 772, mac: "00:00:00:00:00:00", flags: 0x10049, operState: "UNKNOWN" }),
  testLink(2, "eth0", { kind: "veth" }),
  testLink(3, "net1", { kind: "macvlan", mtu: 1400 }),
  testLink(4, "net2", { kind: "vxlan", operState: "DOWN" }),
  testLink(5, "ib0", {
    type: 32,
    mac: "00:00:10:49:fe:80:00:00:00:00:00:00:0c:42:a1:03:00:4b:12:34",
    infinibandGuid: "0c:42:a1:03:00:4b:12:34",
  }),
];

Deno.test("linkList reads a multi-part dump across datagrams", () => {
  const k = new FakeKernel({ links: LINKS }, { perDatagram: 2 });
  using h = new NetlinkHandle(k.transport);
  assert.deepEqual(h.linkList(), LINKS);
});

Deno.test("linkByName / linkByIndex; a missing link is LinkNotFoundError", () => {
  const k = new FakeKernel({ links: LINKS });
  using h = new NetlinkHandle(k.transport);
  assert.equal(h.linkByName("net1").index, 3);
  assert.equal(h.linkByIndex(4).name, "net2");
  assert.throws(
    () => h.linkByName("nope"),
    (e) => e instanceof LinkNotFoundError && e.link === "nope",
  );
  assert.throws(() => h.linkByIndex(99), LinkNotFoundError);
});

Deno.test("kernel errors carry errno and the extended-ack message", () => {
  const k = new FakeKernel({ links: LINKS });
  using h = new NetlinkHandle(k.transport);
  assert.throws(
    () => h.routeReplace({ dst: "0.0.0.0/0", gateway: "203.0.113.1", oif: 2 }),
    (e) =>
      e instanceof NetlinkError && e.errno === 101 &&
      e.extAckMessage === "Nexthop has invalid gateway" &&
      e.message === "RTM_NEWROUTE failed with ENETUNREACH: Nexthop has invalid gateway",
  );
  assert.throws(
    () => h.routeDel(testRoute(2, "10.0.0.0/8", { oif: 2 })),
    (e) => e instanceof NetlinkError && e.errno === 3,
  );
});

Deno.test("routeReplace sends NLM_F_CREATE|NLM_F_REPLACE and a fresh seq each time", () => {
  const k = new FakeKernel({ links: LINKS });
  using h = new NetlinkHandle(k.transport);
  h.routeReplace({ dst: "10.0.0.0/8", oif: 2 });
  h.routeReplace({ dst: "10.1.0.0/16", oif: 2 });
  const [a, b] = k.transport.sent.map((d) => parseMessages(d)[0].header);
  assert.equal(a.type, RTM_NEWROUTE);
  assert.equal(a.flags & (NLM_F_CREATE | NLM_F_REPLACE), NLM_F_CREATE | NLM_F_REPLACE);
  assert.equal(b.seq, (a.seq + 1) >>> 0);
  assert.deepEqual(k.routes.map((r) => [r.dst, r.scope, r.protocol]), [
    ["10.0.0.0/8", 253, 3],
    ["10.1.0.0/16", 253, 3],
  ]);
});

Deno.test("NLM_F_DUMP_INTR: retried, then NetlinkDumpInterruptedError", () => {
  const once = new FakeKernel({ links: LINKS }, { interruptDumps: 1 });
  using h1 = new NetlinkHandle(once.transport);
  assert.equal(h1.linkList().length, LINKS.length);
  assert.equal(once.requests.length, 2, "one retry");

  const always = new FakeKernel({ links: LINKS }, { interruptDumps: 100 });
  using h2 = new NetlinkHandle(always.transport, { dumpAttempts: 3 });
  assert.throws(
    () => h2.linkList(),
    (e) => e instanceof NetlinkDumpInterruptedError && e.attempts === 3,
  );
  assert.equal(always.requests.length, 3);
});

function replyingWith(make: (seq: number, pid: number) => Uint8Array[]): FakeTransport {
  return new FakeTransport({
    respond: (req, pid) => make(parseMessages(req)[0].header.seq, pid),
  });
}

Deno.test("replies with a stale sequence number are skipped", () => {
  const t = replyingWith((seq, pid) => [
    encodeMessage(
      { type: RTM_NEWLINK, flags: NLM_F_MULTI, seq: seq - 1, pid },
      (w) => writeLink(w, LINKS[1]),
    ),
    encodeMessage(
      { type: RTM_NEWLINK, flags: NLM_F_MULTI, seq, pid },
      (w) => writeLink(w, LINKS[2]),
    ),
    encodeMessage({ type: NLMSG_DONE, flags: NLM_F_MULTI, seq, pid }, (w) => w.i32(0)),
  ]);
  using h = new NetlinkHandle(t);
  assert.deepEqual(h.linkList().map((l) => l.name), ["net1"]);
});

Deno.test("a reply with another port id is a protocol error", () => {
  const t = replyingWith((seq, pid) => [
    encodeMessage(
      { type: RTM_NEWLINK, flags: NLM_F_MULTI, seq, pid: pid + 1 },
      (w) => writeLink(w, LINKS[1]),
    ),
  ]);
  using h = new NetlinkHandle(t);
  assert.throws(() => h.linkList(), NetlinkProtocolError);
});

Deno.test("a dump that never ends is a typed error, not a hang", () => {
  const t = replyingWith((seq, pid) => [
    encodeMessage(
      { type: RTM_NEWLINK, flags: NLM_F_MULTI, seq, pid },
      (w) => writeLink(w, LINKS[1]),
    ),
  ]);
  using h = new NetlinkHandle(t);
  assert.throws(() => h.linkList(), (e) => e instanceof NetlinkError && e.errno === 11);
});

Deno.test("NLMSG_DONE with a negative error fails the dump", () => {
  const t = replyingWith((seq, pid) => [
    encodeMessage({ type: NLMSG_DONE, flags: NLM_F_MULTI, seq, pid }, (w) => w.i32(-22)),
  ]);
  using h = new NetlinkHandle(t);
  assert.throws(() => h.addrList(), (e) => e instanceof NetlinkError && e.errno === 22);
});

Deno.test("close is idempotent and later calls fail typed", () => {
  const k = new FakeKernel({ links: LINKS });
  const h = new NetlinkHandle(k.transport);
  h.close();
  h.close();
  h[Symbol.dispose]();
  assert.ok(k.transport.closed);
  assert.throws(() => h.linkList(), NetlinkError);
});

Deno.test("takeSnapshot joins addresses to interfaces and keeps main-table routes", () => {
  const k = new FakeKernel({
    links: LINKS,
    addrs: [
      {
        family: 2,
        prefixlen: 24,
        flags: 0,
        scope: 0,
        ifindex: 3,
        local: "10.1.0.5",
        address: "10.1.0.5",
      },
      { family: 10, prefixlen: 64, flags: 0, scope: 0, ifindex: 3, address: "fd01::5" },
      {
        family: 2,
        prefixlen: 8,
        flags: 0,
        scope: 254,
        ifindex: 1,
        local: "127.0.0.1",
        address: "127.0.0.1",
      },
    ],
    routes: [
      testRoute(2, "0.0.0.0/0", { gateway: "10.1.0.1", oif: 3 }),
      testRoute(2, "127.0.0.1/32", { table: 255, type: 2, oif: 1 }),
    ],
  });
  using h = new NetlinkHandle(k.transport);
  const snap = takeSnapshot(h);
  const net1 = snap.interfaces.find((i) => i.name === "net1")!;
  assert.deepEqual(net1, {
    name: "net1",
    index: 3,
    mac: "02:00:00:00:00:03",
    mtu: 1400,
    operState: "UP",
    flags: 0x11043,
    type: 1,
    kind: "macvlan",
    addresses: ["10.1.0.5/24", "fd01::5/64"],
  });
  assert.equal(
    snap.interfaces.find((i) => i.name === "ib0")!.infinibandGuid,
    "0c:42:a1:03:00:4b:12:34",
  );
  assert.deepEqual(snap.routes.map((r) => r.dst), ["0.0.0.0/0"]);
});

function defaultsOf(k: FakeKernel) {
  return k.routes.filter((r) => r.dst.endsWith("/0")).map((r) =>
    `${r.oif} ${r.gateway} ${r.priority}`
  )
    .sort();
}

Deno.test("default-route: moves IPv4 default to the attachment, keeps IPv6 elsewhere", () => {
  const k = new FakeKernel({
    links: LINKS,
    routes: [
      testRoute(2, "0.0.0.0/0", { gateway: "10.0.0.1", oif: 2 }),
      testRoute(10, "::/0", { gateway: "fd00::1", oif: 2, priority: 1024 }),
      testRoute(2, "10.1.0.0/24", { oif: 3, scope: 253 }),
    ],
  });
  using h = new NetlinkHandle(k.transport);
  const change = replaceDefaultRoutes(h, { ifName: "net1", gateways: ["10.1.0.1", "10.1.0.2"] });
  assert.deepEqual(defaultsOf(k), ["2 fd00::1 1024", "3 10.1.0.1 0", "3 10.1.0.2 1"]);
  assert.deepEqual(change.added.map((r) => [r.gateway, r.priority]), [["10.1.0.1", 0], [
    "10.1.0.2",
    1,
  ]]);
  assert.deepEqual(change.removed.map((r) => r.gateway), ["10.0.0.1"]);
  assert.equal(change.ifindex, 3);
});

Deno.test("default-route: [] removes only the attachment's default routes", () => {
  const k = new FakeKernel({
    links: LINKS,
    routes: [
      testRoute(2, "0.0.0.0/0", { gateway: "10.0.0.1", oif: 2 }),
      testRoute(2, "0.0.0.0/0", { gateway: "10.1.0.1", oif: 3, priority: 5 }),
      testRoute(10, "::/0", { gateway: "fd01::1", oif: 3, priority: 1024 }),
    ],
  });
  using h = new NetlinkHandle(k.transport);
  const change = replaceDefaultRoutes(h, { ifName: "net1", gateways: [] });
  assert.deepEqual(defaultsOf(k), ["2 10.0.0.1 0"]);
  assert.equal(change.removed.length, 2);
  assert.equal(change.added.length, 0);
});

Deno.test("default-route: IPv6 gateways get 1024, 1025 and text is normalised", () => {
  const k = new FakeKernel({
    links: LINKS,
    routes: [testRoute(10, "::/0", { gateway: "fd00::1", oif: 2, priority: 1024 })],
  });
  using h = new NetlinkHandle(k.transport);
  replaceDefaultRoutes(h, { ifName: "net1", gateways: ["fd01:0:0::1", "fd01::2"] });
  assert.deepEqual(defaultsOf(k), ["3 fd01::1 1024", "3 fd01::2 1025"]);
});

Deno.test("default-route: unknown interface and bad gateway are typed errors", () => {
  const k = new FakeKernel({ links: LINKS });
  using h = new NetlinkHandle(k.transport);
  assert.throws(() => replaceDefaultRoutes(h, { ifName: "nope", gateways: [] }), LinkNotFoundError);
  assert.throws(
    () => replaceDefaultRoutes(h, { ifName: "net1", gateways: ["10.1.0.300"] }),
    TypeError,
  );
});
