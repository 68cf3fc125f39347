/**
 * Integration (root): `default-route` (NPWG v1.3 §4.1.2.1.9) in fresh scratch namespaces —
 * IPv4, IPv6, several gateways, and `[]` — cross-checked with `ip -j route show default`.
 * Run with `deno test -A tests/netlink/`.
 */

import assert from "node:assert/strict";
import { NetlinkError, setDefaultRoute } from "../../lib/netlink/mod.ts";
import { ScratchNetns } from "../fixtures/netlink/netns.ts";

const ignore = Deno.uid() !== 0;

interface IpRoute {
  dst: string;
  gateway?: string;
  dev: string;
  metric?: number;
}

/** eth0 plays the cluster default network, net1 the attachment with `default-route`. */
function pod(tag: string): ScratchNetns {
  const ns = new ScratchNetns(tag);
  try {
    ns.batch([
      "link set lo up",
      "link add eth0 type veth peer name eth0p",
      "link add net1 type veth peer name net1p",
      "link set eth0 up",
      "link set eth0p up",
      "link set net1 up",
      "link set net1p up",
      "addr add 10.1.0.5/24 dev eth0",
      "addr add fd01::5/64 dev eth0 nodad",
      "addr add 10.2.0.5/24 dev net1",
      "addr add fd02::5/64 dev net1 nodad",
      "route add default via 10.1.0.1 dev eth0",
      "route add default via fd01::1 dev eth0",
    ]);
    return ns;
  } catch (e) {
    ns[Symbol.dispose]();
    throw e;
  }
}

function defaults(ns: ScratchNetns): string[] {
  const v4 = ns.json<IpRoute[]>("-4", "route", "show", "default");
  const v6 = ns.json<IpRoute[]>("-6", "route", "show", "default");
  return [...v4, ...v6].map((r) => `${r.dev} ${r.gateway} ${r.metric ?? 0}`).sort();
}

Deno.test({
  name: "default-route IPv4: moved to the attachment, IPv6 untouched",
  ignore,
  fn() {
    using ns = pod("dr4");
    const change = setDefaultRoute(ns.path, { ifName: "net1", gateways: ["10.2.0.1"] });
    assert.deepEqual(defaults(ns), ["eth0 fd01::1 1024", "net1 10.2.0.1 0"]);
    assert.deepEqual(change.removed.map((r) => r.gateway), ["10.1.0.1"]);
    assert.deepEqual(change.added.map((r) => r.gateway), ["10.2.0.1"]);
  },
});

Deno.test({
  name: "default-route IPv6: moved to the attachment, IPv4 untouched",
  ignore,
  fn() {
    using ns = pod("dr6");
    const change = setDefaultRoute(ns.path, { ifName: "net1", gateways: ["fd02::1"] });
    assert.deepEqual(defaults(ns), ["eth0 10.1.0.1 0", "net1 fd02::1 1024"]);
    assert.deepEqual(change.removed.map((r) => r.gateway), ["fd01::1"]);
  },
});

Deno.test({
  name: "default-route with several gateways: increasing metric in list order, both families",
  ignore,
  fn() {
    using ns = pod("drm");
    setDefaultRoute(ns.path, {
      ifName: "net1",
      gateways: ["10.2.0.1", "fd02::1", "10.2.0.2", "fd02::2"],
    });
    assert.deepEqual(defaults(ns), [
      "net1 10.2.0.1 0",
      "net1 10.2.0.2 1",
      "net1 fd02::1 1024",
      "net1 fd02::2 1025",
    ]);
    // Applying it again is idempotent.
    const again = setDefaultRoute(ns.path, {
      ifName: "net1",
      gateways: ["10.2.0.1", "fd02::1", "10.2.0.2", "fd02::2"],
    });
    assert.deepEqual(again.removed, []);
    assert.equal(defaults(ns).length, 4);
  },
});

Deno.test({
  name: "default-route [] removes the attachment's default routes only",
  ignore,
  fn() {
    using ns = pod("dre");
    ns.batch([
      "route add default via 10.2.0.1 dev net1 metric 50",
      "route add default via fd02::1 dev net1 metric 50",
    ]);
    const change = setDefaultRoute(ns.path, { ifName: "net1", gateways: [] });
    assert.deepEqual(defaults(ns), ["eth0 10.1.0.1 0", "eth0 fd01::1 1024"]);
    assert.equal(change.removed.length, 2);
    assert.equal(change.added.length, 0);
  },
});

Deno.test({
  name: "default-route with an off-link gateway fails with the kernel's message",
  ignore,
  fn() {
    using ns = pod("drx");
    assert.throws(
      () => setDefaultRoute(ns.path, { ifName: "net1", gateways: ["203.0.113.1"] }),
      (e) => e instanceof NetlinkError && e.errno === 101 && /gateway/i.test(e.extAckMessage ?? ""),
    );
    assert.deepEqual(defaults(ns), ["eth0 10.1.0.1 0", "eth0 fd01::1 1024"], "nothing changed");
  },
});
