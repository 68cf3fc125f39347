/**
 * Decodes real kernel replies captured as hex (tests/fixtures/netlink/*.hex, made by
 * capture.ts from a scratch netns) and compares them with iproute2's JSON view of the same
 * namespace captured at the same time. Needs --allow-read only.
 */

import assert from "node:assert/strict";
import {
  decodeAddress,
  decodeError,
  decodeLink,
  decodeRoute,
  FakeTransport,
  LinkNotFoundError,
  NetlinkDecodeError,
  NetlinkError,
  NetlinkHandle,
  type NetlinkMessage,
  parseMessages,
  RTM_NEWADDR,
  RTM_NEWLINK,
  RTM_NEWROUTE,
} from "../../lib/netlink/mod.ts";
import { restamp } from "../fixtures/netlink/fake_kernel.ts";
import {
  comparableAddrs,
  comparableIpAddrs,
  comparableIpLinks,
  comparableIpRoutes,
  comparableLinks,
  comparableRoutes,
  type IpAddrLink,
  type IpLink,
  type IpRoute,
} from "../fixtures/netlink/netns.ts";

const dir = new URL("../fixtures/netlink/", import.meta.url);

function datagrams(name: string): Uint8Array[] {
  return Deno.readTextFileSync(new URL(name, dir)).split("\n")
    .filter((l) => l && !l.startsWith("#"))
    .map((l) => new Uint8Array(l.match(/../g)!.map((h) => parseInt(h, 16))));
}

function messages(name: string, type: number): NetlinkMessage[] {
  return datagrams(name).flatMap(parseMessages).filter((m) => m.header.type === type);
}

const view = JSON.parse(Deno.readTextFileSync(new URL("ip_view.json", dir))) as {
  portId: number;
  link: IpLink[];
  addr: IpAddrLink[];
  route4: IpRoute[];
  route6: IpRoute[];
};

Deno.test("fixture: link dump decodes to what ip -j -d link showed", () => {
  const links = messages("link_dump.hex", RTM_NEWLINK).map(decodeLink);
  assert.ok(links.length >= 6);
  assert.deepEqual(comparableLinks(links), comparableIpLinks(view.link));
  const kinds = new Set(links.map((l) => l.kind));
  for (const k of ["veth", "bridge", "macvlan", "vxlan"]) assert.ok(kinds.has(k), k);
});

Deno.test("fixture: every reply carries the capturing socket's port id", () => {
  for (const f of ["link_dump.hex", "addr_dump.hex", "route_dump.hex", "error_ext_ack.hex"]) {
    for (const m of datagrams(f).flatMap(parseMessages)) assert.equal(m.header.pid, view.portId, f);
  }
});

Deno.test("fixture: address dump decodes to what ip -j addr showed", () => {
  const addrs = messages("addr_dump.hex", RTM_NEWADDR).map(decodeAddress);
  assert.deepEqual(comparableAddrs(addrs), comparableIpAddrs(view.addr));
});

Deno.test("fixture: route dump decodes to what ip -j route show table all showed", () => {
  const links = messages("link_dump.hex", RTM_NEWLINK).map(decodeLink);
  const names = new Map(links.map((l) => [l.index, l.name]));
  const routes = messages("route_dump.hex", RTM_NEWROUTE)
    .filter((m) => m.payload[0] === 2 || m.payload[0] === 10).map(decodeRoute);
  const want = [...comparableIpRoutes(2, view.route4), ...comparableIpRoutes(10, view.route6)]
    .sort();
  assert.deepEqual(comparableRoutes(routes, names), want);
  assert.ok(routes.some((r) => r.dst === "0.0.0.0/0" && r.gateway === "10.9.0.254"));
  assert.ok(routes.some((r) => r.dst === "::/0" && r.gateway === "fd09::fe"));
});

Deno.test("fixture: ENETUNREACH with the kernel's extended-ack message", () => {
  const [m] = datagrams("error_ext_ack.hex").flatMap(parseMessages);
  const e = decodeError(m);
  assert.equal(e.error, -101);
  assert.equal(e.extAckMessage, "Nexthop has invalid gateway");
});

function replay(file: string): FakeTransport {
  const data = datagrams(file);
  return new FakeTransport({
    respond: (req, pid) => data.map((d) => restamp(d, parseMessages(req)[0].header.seq, pid)),
  });
}

Deno.test("fixture: the API decodes replayed real replies", () => {
  using links = new NetlinkHandle(replay("link_dump.hex"));
  assert.deepEqual(comparableLinks(links.linkList()), comparableIpLinks(view.link));
  using addrs = new NetlinkHandle(replay("addr_dump.hex"));
  assert.deepEqual(comparableAddrs(addrs.addrList()), comparableIpAddrs(view.addr));
  using enodev = new NetlinkHandle(replay("link_enodev.hex"));
  assert.throws(() => enodev.linkByName("nope0"), LinkNotFoundError);
  using unreachable = new NetlinkHandle(replay("error_ext_ack.hex"));
  assert.throws(
    () => unreachable.routeReplace({ dst: "0.0.0.0/0", gateway: "203.0.113.1", oif: 2 }),
    (e) => e instanceof NetlinkError && e.extAckMessage === "Nexthop has invalid gateway",
  );
});

Deno.test("fixture: every truncation of every real datagram is a typed error or a clean decode", () => {
  let errors = 0;
  for (const f of ["link_dump.hex", "addr_dump.hex", "route_dump.hex", "error_ext_ack.hex"]) {
    for (const d of datagrams(f)) {
      for (let cut = 0; cut < d.length; cut++) {
        const bytes = d.slice(0, cut);
        try {
          for (const m of parseMessages(bytes)) {
            if (m.header.type === RTM_NEWLINK) decodeLink(m);
            else if (m.header.type === RTM_NEWADDR) decodeAddress(m);
            else if (m.header.type === RTM_NEWROUTE) decodeRoute(m);
            else if (m.header.type === 2) decodeError(m);
          }
        } catch (e) {
          if (!(e instanceof NetlinkDecodeError)) throw e;
          errors++;
        }
      }
    }
  }
  assert.ok(errors > 0);
});
