/**
 * Tests of lib/netlink/{message,link,address,route}.ts: round trips through the encoders and
 * decoders, NLMSG_ERROR with extended ack, NLMSG_DONE, multi-message datagrams. Pure.
 */

import assert from "node:assert/strict";
import {
  type Address,
  decodeAddress,
  decodeDone,
  decodeError,
  decodeHeader,
  decodeLink,
  decodeRoute,
  encodeMessage,
  infinibandGuid,
  type Link,
  linkFlagNames,
  NetlinkDecodeError,
  type NetlinkMessage,
  NetlinkWriter,
  NLM_F_ACK_TLVS,
  NLM_F_CAPPED,
  NLM_F_MULTI,
  NLMSG_DONE,
  NLMSG_ERROR,
  NLMSGERR_ATTR_MSG,
  NLMSGERR_ATTR_OFFS,
  parseMessages,
  type Route,
  RTM_NEWADDR,
  RTM_NEWLINK,
  RTM_NEWROUTE,
  writeAddress,
  writeLink,
  writeRoute,
} from "../../lib/netlink/mod.ts";

function one(type: number, body: (w: NetlinkWriter) => void, flags = 0): NetlinkMessage {
  const msgs = parseMessages(encodeMessage({ type, flags, seq: 7, pid: 99 }, body));
  assert.equal(msgs.length, 1);
  return msgs[0];
}

Deno.test("nlmsghdr round trips and nlmsg_len covers the padded body", () => {
  const bytes = encodeMessage({ type: 18, flags: 0x301, seq: 0xfffffffe, pid: 12345 }, (w) => {
    w.u8(0).pad();
  });
  assert.equal(bytes.length, 20);
  assert.deepEqual(decodeHeader(bytes), {
    length: 20,
    type: 18,
    flags: 0x301,
    seq: 0xfffffffe,
    pid: 12345,
  });
});

Deno.test("a datagram with several messages splits at aligned boundaries", () => {
  const a = encodeMessage({ type: 16, flags: NLM_F_MULTI, seq: 1, pid: 2 }, (w) => w.u8(1));
  const b = encodeMessage(
    { type: NLMSG_DONE, flags: NLM_F_MULTI, seq: 1, pid: 2 },
    (w) => w.i32(0),
  );
  const d = new Uint8Array([...a, ...b]);
  const msgs = parseMessages(d);
  assert.deepEqual(msgs.map((m) => m.header.type), [16, NLMSG_DONE]);
  assert.equal(msgs[0].payload.length, 4);
  assert.equal(msgs[1].offset, a.length + 16);
  assert.equal(decodeDone(msgs[1]).error, 0);
});

Deno.test("parseMessages rejects impossible lengths with the offset", () => {
  const d = encodeMessage({ type: 16, flags: 0, seq: 1, pid: 2 }, (w) => w.u32(0));
  new DataView(d.buffer).setUint32(0, 200, true);
  assert.throws(() => parseMessages(d), (e) => e instanceof NetlinkDecodeError && e.offset === 0);
  assert.throws(() => parseMessages(d.subarray(0, 10)), /Truncated message header/);
  new DataView(d.buffer).setUint32(0, 8, true);
  assert.throws(() => parseMessages(d), /Message length 8 out of range/);
});

Deno.test("link round trip: every decoded field", () => {
  const link: Link = {
    index: 7,
    name: "net1",
    type: 1,
    flags: 0x11043,
    mac: "02:aa:bb:cc:dd:ee",
    broadcast: "ff:ff:ff:ff:ff:ff",
    mtu: 9000,
    operState: "UP",
    kind: "macvlan",
    slaveKind: "bridge",
    masterIndex: 3,
    parentIndex: 2,
  };
  const got = decodeLink(one(RTM_NEWLINK, (w) => writeLink(w, link)));
  assert.deepEqual(got, link);
  assert.deepEqual(linkFlagNames(link.flags), ["BROADCAST", "MULTICAST", "UP", "LOWER_UP"]);
});

Deno.test("link without address or kind (e.g. a tunnel with no hardware address)", () => {
  const link: Link = {
    index: 1,
    name: "t",
    type: 65534,
    flags: 0,
    mac: "",
    mtu: 1480,
    operState: "DOWN",
  };
  assert.deepEqual(decodeLink(one(RTM_NEWLINK, (w) => writeLink(w, link))), link);
});

Deno.test("IPoIB: 20-byte address exposes the GUID (last 8 bytes)", () => {
  const mac = "00:00:10:49:fe:80:00:00:00:00:00:00:0c:42:a1:03:00:4b:12:34";
  const link: Link = {
    index: 5,
    name: "ib0",
    type: 32,
    flags: 0x1003,
    mac,
    mtu: 2044,
    operState: "UP",
    kind: "ipoib",
    infinibandGuid: "0c:42:a1:03:00:4b:12:34",
  };
  assert.deepEqual(decodeLink(one(RTM_NEWLINK, (w) => writeLink(w, link))), link);
  assert.equal(infinibandGuid(1, new Uint8Array(20)), undefined, "only ARPHRD_INFINIBAND");
  assert.equal(infinibandGuid(32, new Uint8Array(6)), undefined, "only 20-byte addresses");
});

Deno.test("address round trip: IPv4 with label, IPv6, flags above 8 bits", () => {
  const cases: Address[] = [
    {
      family: 2,
      prefixlen: 24,
      flags: 0x80,
      scope: 0,
      ifindex: 3,
      address: "10.1.2.3",
      local: "10.1.2.3",
      label: "net1",
    },
    { family: 10, prefixlen: 64, flags: 0x280, scope: 253, ifindex: 3, address: "fe80::1" },
    {
      family: 2,
      prefixlen: 32,
      flags: 0,
      scope: 0,
      ifindex: 9,
      address: "10.0.0.2",
      local: "10.0.0.1",
    },
  ];
  for (const a of cases) {
    assert.deepEqual(decodeAddress(one(RTM_NEWADDR, (w) => writeAddress(w, a))), a);
  }
});

Deno.test("route round trip: default, prefix, table > 255, v6, multipath", () => {
  const base = { tos: 0, flags: 0, protocol: 3, scope: 0, type: 1 };
  const cases: Route[] = [
    { ...base, family: 2, dst: "0.0.0.0/0", gateway: "10.0.0.1", oif: 2, priority: 0, table: 254 },
    {
      ...base,
      family: 2,
      dst: "10.20.0.0/16",
      gateway: "10.0.0.1",
      oif: 2,
      priority: 7,
      table: 1000,
    },
    { ...base, family: 10, dst: "::/0", gateway: "fd00::1", oif: 4, priority: 1024, table: 254 },
    {
      ...base,
      family: 2,
      dst: "192.168.0.0/24",
      priority: 0,
      table: 254,
      prefsrc: "10.0.0.2",
      nexthops: [
        { oif: 2, gateway: "10.0.0.1", weight: 1, flags: 0 },
        { oif: 3, gateway: "10.0.1.1", weight: 3, flags: 0 },
      ],
    },
    { ...base, family: 2, dst: "10.0.0.0/8", src: "10.1.0.0/16", iif: 5, priority: 0, table: 254 },
  ];
  for (const r of cases) {
    assert.deepEqual(decodeRoute(one(RTM_NEWROUTE, (w) => writeRoute(w, r))), r);
  }
});

Deno.test("writeRoute refuses a gateway of the other family", () => {
  const r: Route = {
    family: 2,
    dst: "0.0.0.0/0",
    gateway: "fd00::1",
    priority: 0,
    table: 254,
    protocol: 3,
    scope: 0,
    type: 1,
    flags: 0,
    tos: 0,
  };
  assert.throws(() => writeRoute(new NetlinkWriter(), r), TypeError);
});

function errorMessage(
  flags: number,
  error: number,
  tlvs: (w: NetlinkWriter) => void,
  fullCopy = false,
) {
  const request = encodeMessage(
    { type: 24, flags: 5, seq: 3, pid: 0 },
    (w) => w.u32(0xabcdef).u32(1),
  );
  return one(NLMSG_ERROR, (w) => {
    w.i32(error);
    w.bytes(fullCopy ? request : request.subarray(0, 16));
    tlvs(w);
  }, flags);
}

Deno.test("NLMSG_ERROR: capped request copy + extended ack TLVs", () => {
  const m = errorMessage(NLM_F_CAPPED | NLM_F_ACK_TLVS, -101, (w) => {
    w.attrString(NLMSGERR_ATTR_MSG, "Nexthop has invalid gateway").attrU32(NLMSGERR_ATTR_OFFS, 28);
  });
  const e = decodeError(m);
  assert.equal(e.error, -101);
  assert.equal(e.request.type, 24);
  assert.equal(e.request.seq, 3);
  assert.equal(e.extAckMessage, "Nexthop has invalid gateway");
  assert.equal(e.extAckOffset, 28);
});

Deno.test("NLMSG_ERROR: full request copy (no NLM_F_CAPPED) is skipped before TLVs", () => {
  const m = errorMessage(NLM_F_ACK_TLVS, -22, (w) => w.attrString(NLMSGERR_ATTR_MSG, "bad"), true);
  assert.equal(decodeError(m).extAckMessage, "bad");
});

Deno.test("NLMSG_ERROR: plain ACK and plain error without TLVs", () => {
  assert.deepEqual(decodeError(errorMessage(NLM_F_CAPPED, 0, () => {})).error, 0);
  const e = decodeError(errorMessage(0, -17, () => {}, true));
  assert.equal(e.error, -17);
  assert.equal(e.extAckMessage, undefined);
  assert.throws(() => decodeError(one(NLMSG_ERROR, (w) => w.i32(-1))), NetlinkDecodeError);
});

Deno.test("NLMSG_DONE carrying a dump error and ext ack message", () => {
  const m = one(NLMSG_DONE, (w) => {
    w.i32(-22);
    w.attrString(NLMSGERR_ATTR_MSG, "Invalid header for link dump");
  }, NLM_F_MULTI | NLM_F_ACK_TLVS);
  assert.deepEqual(decodeDone(m), { error: -22, extAckMessage: "Invalid header for link dump" });
  assert.deepEqual(decodeDone(one(NLMSG_DONE, () => {})), { error: 0 });
});

Deno.test("truncated fixed headers are decode errors", () => {
  assert.throws(() => decodeLink(one(RTM_NEWLINK, (w) => w.u32(0))), /Truncated ifinfomsg/);
  assert.throws(() => decodeAddress(one(RTM_NEWADDR, (w) => w.u32(0))), /Truncated ifaddrmsg/);
  assert.throws(() => decodeRoute(one(RTM_NEWROUTE, (w) => w.u32(0))), /Truncated rtmsg/);
});
