/**
 * Integration (root): real sockets in fresh scratch namespaces (`mfnl-*`) with veth,
 * bridge, macvlan-on-bridge and vxlan links whose MTUs and MACs are set by `ip`. Manifold's
 * view must equal `ip -j -n <ns> link/addr/route` for every field it reports.
 * Run with `deno test -A tests/netlink/`.
 */

import assert from "node:assert/strict";
import {
  addressCidr,
  inspectNetns,
  LinkNotFoundError,
  NetlinkHandle,
  NetnsError,
  openNetlinkSocket,
} from "../../lib/netlink/mod.ts";
import {
  buildTopology,
  comparableAddrs,
  comparableIpAddrs,
  comparableIpLinks,
  comparableIpRoutes,
  comparableLinks,
  comparableRoutes,
  type IpAddrLink,
  type IpLink,
  type IpRoute,
  ScratchNetns,
} from "../fixtures/netlink/netns.ts";

const ignore = Deno.uid() !== 0;

function netnsId(): string {
  return Deno.readLinkSync("/proc/thread-self/ns/net");
}

Deno.test({
  name: "links, addresses and routes equal ip -j for every reported field",
  ignore,
  fn() {
    using ns = new ScratchNetns("view");
    buildTopology(ns);
    using h = new NetlinkHandle(openNetlinkSocket({ netns: ns.path }));
    const links = h.linkList();
    assert.deepEqual(
      comparableLinks(links),
      comparableIpLinks(ns.json<IpLink[]>("-d", "link", "show")),
    );
    const byName = new Map(links.map((l) => [l.name, l]));
    assert.equal(byName.get("v0")!.mtu, 1450);
    assert.equal(byName.get("v0")!.mac, "02:aa:00:00:00:01");
    assert.equal(byName.get("br0")!.kind, "bridge");
    assert.equal(byName.get("mv0")!.kind, "macvlan");
    assert.equal(byName.get("mv0")!.parentIndex, byName.get("br0")!.index);
    assert.equal(byName.get("v1")!.masterIndex, byName.get("br0")!.index);
    assert.equal(byName.get("vx0")!.mac, "02:dd:00:00:00:01");

    assert.deepEqual(
      comparableAddrs(h.addrList()),
      comparableIpAddrs(ns.json<IpAddrLink[]>("addr", "show")),
    );

    const names = new Map(links.map((l) => [l.index, l.name]));
    const want = [
      ...comparableIpRoutes(2, ns.json<IpRoute[]>("-4", "route", "show", "table", "all")),
      ...comparableIpRoutes(10, ns.json<IpRoute[]>("-6", "route", "show", "table", "all")),
    ].sort();
    assert.deepEqual(comparableRoutes(h.routeList(), names), want);
    assert.deepEqual(
      h.addrList({ family: 2, ifindex: byName.get("v0")!.index }).map(addressCidr),
      ["10.9.0.1/24"],
    );
  },
});

Deno.test({
  name: "inspectNetns reports name, MAC, MTU, oper state and addresses like ip",
  ignore,
  fn() {
    using ns = new ScratchNetns("insp");
    buildTopology(ns);
    const snap = inspectNetns(ns.path);
    const ipLinks = ns.json<IpLink[]>("link", "show");
    const ipAddrs = ns.json<IpAddrLink[]>("addr", "show");
    assert.equal(snap.interfaces.length, ipLinks.length);
    for (const l of ipLinks) {
      const i = snap.interfaces.find((x) => x.index === l.ifindex)!;
      assert.equal(i.name, l.ifname);
      assert.equal(i.mac, l.address ?? "");
      assert.equal(i.mtu, l.mtu);
      assert.equal(i.operState, l.operstate);
      const a = ipAddrs.find((x) => x.ifindex === l.ifindex)!;
      assert.deepEqual(i.addresses, a.addr_info.map((x) => `${x.local}/${x.prefixlen}`), l.ifname);
    }
    assert.ok(snap.routes.every((r) => r.table === 254));
    assert.equal(snap.netns, ns.path);
  },
});

Deno.test({
  name: "a link removed after the socket was opened is detected",
  ignore,
  fn() {
    using ns = new ScratchNetns("rm");
    buildTopology(ns);
    using h = new NetlinkHandle(openNetlinkSocket({ netns: ns.path }));
    const before = h.linkByName("mv0");
    ns.ip("link", "del", "mv0");
    assert.throws(
      () => h.linkByName("mv0"),
      (e) => e instanceof LinkNotFoundError && e.link === "mv0",
    );
    assert.throws(() => h.linkByIndex(before.index), LinkNotFoundError);
    assert.ok(!h.linkList().some((l) => l.name === "mv0"));
    assert.ok(!inspectNetns(ns.path).interfaces.some((i) => i.name === "mv0"));
  },
});

Deno.test({
  name: "the socket stays in the pod netns and the thread returns to its own",
  ignore,
  fn() {
    const home = netnsId();
    using ns = new ScratchNetns("stay");
    ns.ip("link", "add", "mfnlstay0", "type", "veth", "peer", "name", "mfnlstay1");
    using h = new NetlinkHandle(openNetlinkSocket({ netns: ns.path }));
    assert.equal(netnsId(), home, "thread is back in its namespace");
    using host = new NetlinkHandle(openNetlinkSocket());
    assert.ok(h.linkList().some((l) => l.name === "mfnlstay0"));
    assert.ok(!host.linkList().some((l) => l.name === "mfnlstay0"));
    // /proc/<pid>/ns/net paths work too (our own process: the host namespace).
    using self = new NetlinkHandle(openNetlinkSocket({ netns: `/proc/${Deno.pid}/ns/net` }));
    // Other processes may add or remove host links meanwhile: compare a quiet pair of listings.
    const names = (hd: NetlinkHandle) => hd.linkList().map((l) => l.name).join(",");
    let same = false;
    for (let i = 0; i < 5 && !same; i++) same = names(self) === names(host);
    assert.ok(same, `${names(self)} != ${names(host)}`);
  },
});

Deno.test({
  name: "a missing or non-netns path is a NetnsError and leaves the thread at home",
  ignore,
  fn() {
    const home = netnsId();
    assert.throws(
      () => openNetlinkSocket({ netns: "/var/run/netns/mfnl-does-not-exist" }),
      (e) => e instanceof NetnsError && e.errno === 2,
    );
    assert.throws(
      () => openNetlinkSocket({ netns: "/etc/hostname" }),
      (e) => e instanceof NetnsError && e.errno === 22,
    );
    assert.equal(netnsId(), home);
  },
});

Deno.test({
  name: "libc fallback: an unloadable libmnl (env override) still gives a working socket",
  ignore,
  async fn() {
    using ns = new ScratchNetns("fb");
    buildTopology(ns);
    const mod = new URL("../../lib/netlink/mod.ts", import.meta.url).href;
    const log = new URL("../../lib/log/mod.ts", import.meta.url).href;
    const code = `
      import { NetlinkHandle, openNetlinkSocket } from ${JSON.stringify(mod)};
      import { createLogger } from ${JSON.stringify(log)};
      const logger = createLogger({ level: "warning" });
      const a = openNetlinkSocket({ netns: ${JSON.stringify(ns.path)}, logger });
      const b = openNetlinkSocket({ netns: ${JSON.stringify(ns.path)}, logger });
      using h = new NetlinkHandle(a);
      b.close();
      console.log(JSON.stringify({ backend: a.backend, links: h.linkList().map((l) => l.name) }));`;
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["eval", code],
      env: { MANIFOLD_LIBMNL_PATH: "/nonexistent/mfnl/libmnl.so.0" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const stderr = new TextDecoder().decode(out.stderr);
    assert.ok(out.success, stderr);
    const got = JSON.parse(new TextDecoder().decode(out.stdout));
    assert.equal(got.backend, "libc");
    assert.deepEqual(got.links.sort(), ["br0", "lo", "mv0", "v0", "v1", "vx0"]);
    const warnings = stderr.split("\n").filter((l) => l.includes("libmnl unavailable"));
    assert.equal(warnings.length, 1, "the fallback is logged once");
    // And in-process: the default path uses libmnl.
    using sock = openNetlinkSocket({ netns: ns.path });
    assert.equal(sock.backend, "libmnl");
  },
});

Deno.test({
  name: "the libc backend decodes the same view as the libmnl backend",
  ignore,
  fn() {
    using ns = new ScratchNetns("both");
    buildTopology(ns);
    using viaMnl = new NetlinkHandle(openNetlinkSocket({ netns: ns.path }));
    using viaLibc = new NetlinkHandle(
      openNetlinkSocket({ netns: ns.path, libmnlPath: "/nonexistent/mfnl/libmnl.so.0" }),
    );
    assert.equal((viaLibc.transport as { backend?: string }).backend, "libc");
    assert.deepEqual(viaLibc.linkList(), viaMnl.linkList());
    assert.deepEqual(viaLibc.addrList(), viaMnl.addrList());
    assert.deepEqual(viaLibc.routeList(), viaMnl.routeList());
    viaLibc.routeReplace({
      dst: "10.77.0.0/16",
      gateway: "10.9.0.254",
      oif: viaMnl.linkByName("v0").index,
    });
    assert.ok(viaMnl.routeList().some((r) => r.dst === "10.77.0.0/16"));
  },
});

Deno.test({
  name: "dumping 300 links needs several datagrams and stays consistent",
  ignore,
  fn() {
    using ns = new ScratchNetns("many");
    ns.batch(Array.from({ length: 150 }, (_, i) => `link add mfa${i} type veth peer name mfb${i}`));
    using h = new NetlinkHandle(openNetlinkSocket({ netns: ns.path }));
    const links = h.linkList();
    assert.equal(links.length, 301);
    assert.deepEqual(
      comparableLinks(links),
      comparableIpLinks(ns.json<IpLink[]>("-d", "link", "show")),
    );
  },
});
