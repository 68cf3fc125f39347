/**
 * Routes: `struct rtmsg` (12 bytes, linux/rtnetlink.h), the `RTA_*` attributes and
 * `struct rtnexthop` for multipath routes, decoded into {@link Route}.
 *
 * @module
 */

import { AttributeDecoder, HOST_LITTLE_ENDIAN, type NetlinkWriter } from "./attributes.ts";
import {
  AF_INET6,
  RT_TABLE_UNSPEC,
  RTA_DST,
  RTA_GATEWAY,
  RTA_IIF,
  RTA_MULTIPATH,
  RTA_OIF,
  RTA_PREFSRC,
  RTA_PRIORITY,
  RTA_SRC,
  RTA_TABLE,
} from "./constants.ts";
import { NetlinkDecodeError } from "./errors.ts";
import { anyAddress, formatIp, parseCidr, parseIp } from "./ip.ts";
import type { NetlinkMessage } from "./message.ts";

/** `sizeof(struct rtmsg)` in bytes (linux/rtnetlink.h). */
export const RTMSG_LEN = 12;
/** `sizeof(struct rtnexthop)` in bytes (linux/rtnetlink.h). */
export const RTNEXTHOP_LEN = 8;

/** One next hop of a multipath route (`struct rtnexthop` + `RTA_GATEWAY`). */
export interface NextHop {
  /** `rtnh_ifindex`. */
  oif: number;
  /** `RTA_GATEWAY` inside the next hop. */
  gateway?: string;
  /** Weight = `rtnh_hops + 1`. */
  weight: number;
  /** `rtnh_flags` (`RTNH_F_*`). */
  flags: number;
}

/** A route as the kernel reports it in `RTM_NEWROUTE`. */
export interface Route {
  /** `rtm_family`: `AF_INET` (2) or `AF_INET6` (10). */
  family: number;
  /** `RTA_DST` + `rtm_dst_len` as `"a.b.c.d/nn"`; a default route is `"0.0.0.0/0"` / `"::/0"`. */
  dst: string;
  /** `RTA_SRC` + `rtm_src_len` (source routing), `undefined` when absent. */
  src?: string;
  /** `RTA_GATEWAY`. */
  gateway?: string;
  /** `RTA_OIF`: outgoing ifindex. */
  oif?: number;
  /** `RTA_IIF`: incoming ifindex. */
  iif?: number;
  /** `RTA_PRIORITY`: the metric; 0 when absent. */
  priority: number;
  /** `RTA_TABLE` (or `rtm_table`): 254 main, 255 local. */
  table: number;
  /** `rtm_protocol`: `RTPROT_*`, e.g. 2 kernel, 3 boot, 4 static. */
  protocol: number;
  /** `rtm_scope`: `RT_SCOPE_*`, 0 universe, 253 link, 254 host. */
  scope: number;
  /** `rtm_type`: `RTN_*`, 1 unicast, 2 local, 3 broadcast, 5 multicast. */
  type: number;
  /** `rtm_flags` (`RTM_F_*`, `RTNH_F_*`). */
  flags: number;
  /** `rtm_tos`. */
  tos: number;
  /** `RTA_PREFSRC`. */
  prefsrc?: string;
  /** `RTA_MULTIPATH` next hops. */
  nexthops?: NextHop[];
}

/**
 * Whether `r` is a default route (`rtm_dst_len` 0).
 *
 * @param r the route
 * @returns true for `"0.0.0.0/0"` and `"::/0"`
 * @example isDefaultRoute({ dst: "::/0" } as Route) // true
 */
export function isDefaultRoute(r: Pick<Route, "dst">): boolean {
  return r.dst.endsWith("/0");
}

/**
 * Writes `struct rtmsg`.
 *
 * @param w the writer
 * @param m the fields (default 0)
 */
export function writeRtMsg(
  w: NetlinkWriter,
  m: {
    family?: number;
    dstLen?: number;
    srcLen?: number;
    tos?: number;
    table?: number;
    protocol?: number;
    scope?: number;
    type?: number;
    flags?: number;
  },
): void {
  const table = m.table ?? 0;
  w.u8(m.family ?? 0).u8(m.dstLen ?? 0).u8(m.srcLen ?? 0).u8(m.tos ?? 0)
    .u8(table < 256 ? table : RT_TABLE_UNSPEC).u8(m.protocol ?? 0).u8(m.scope ?? 0)
    .u8(m.type ?? 0).u32(m.flags ?? 0);
}

function decodeNextHops(data: Uint8Array, base: number): NextHop[] {
  const out: NextHop[] = [];
  const v = new DataView(data.buffer, data.byteOffset, data.byteLength);
  let pos = 0;
  while (pos < data.length) {
    if (data.length - pos < RTNEXTHOP_LEN) {
      throw new NetlinkDecodeError("Truncated rtnexthop", base + pos);
    }
    const len = v.getUint16(pos, HOST_LITTLE_ENDIAN);
    if (len < RTNEXTHOP_LEN || len > data.length - pos) {
      throw new NetlinkDecodeError(`Next hop length ${len} out of range`, base + pos);
    }
    const hop: NextHop = {
      flags: data[pos + 2],
      weight: data[pos + 3] + 1,
      oif: v.getInt32(pos + 4, HOST_LITTLE_ENDIAN),
    };
    const ad = new AttributeDecoder(
      data.subarray(pos + RTNEXTHOP_LEN, pos + len),
      base + pos + RTNEXTHOP_LEN,
    );
    while (ad.next()) if (ad.type === RTA_GATEWAY) hop.gateway = formatIp(ad.bytes());
    ad.finish();
    out.push(hop);
    pos += (len + 3) & ~3;
  }
  return out;
}

/**
 * Decodes an `RTM_NEWROUTE` message; nothing aliases the receive buffer afterwards.
 *
 * @param message the message
 * @returns the route
 * @throws {NetlinkDecodeError} on a truncated header or malformed attributes
 */
export function decodeRoute(message: NetlinkMessage): Route {
  const p = message.payload;
  if (p.length < RTMSG_LEN) throw new NetlinkDecodeError("Truncated rtmsg", message.offset);
  const v = new DataView(p.buffer, p.byteOffset, RTMSG_LEN);
  const family = p[0], dstLen = p[1], srcLen = p[2];
  const r: Route = {
    family,
    dst: "",
    tos: p[3],
    table: p[4],
    protocol: p[5],
    scope: p[6],
    type: p[7],
    flags: v.getUint32(8, HOST_LITTLE_ENDIAN),
    priority: 0,
  };
  let dst: string | undefined;
  const ad = new AttributeDecoder(p.subarray(RTMSG_LEN), message.offset + RTMSG_LEN);
  while (ad.next()) {
    switch (ad.type) {
      case RTA_DST:
        dst = formatIp(ad.bytes());
        break;
      case RTA_SRC:
        r.src = `${formatIp(ad.bytes())}/${srcLen}`;
        break;
      case RTA_GATEWAY:
        r.gateway = formatIp(ad.bytes());
        break;
      case RTA_OIF:
        r.oif = ad.u32();
        break;
      case RTA_IIF:
        r.iif = ad.u32();
        break;
      case RTA_PRIORITY:
        r.priority = ad.u32();
        break;
      case RTA_TABLE:
        r.table = ad.u32();
        break;
      case RTA_PREFSRC:
        r.prefsrc = formatIp(ad.bytes());
        break;
      case RTA_MULTIPATH:
        r.nexthops = decodeNextHops(ad.bytes(), ad.offset);
        break;
    }
  }
  ad.finish();
  r.dst = `${dst ?? anyAddress(family)}/${dstLen}`;
  return r;
}

/**
 * Encodes a {@link Route} as an `RTM_NEWROUTE`/`RTM_DELROUTE` payload — the inverse of
 * {@link decodeRoute}. `RTA_TABLE` is always written (tables above 255 need it).
 *
 * @param w the writer
 * @param r the route
 * @throws {TypeError} when `dst`, `gateway` or `prefsrc` is not an address of `r.family`
 */
export function writeRoute(w: NetlinkWriter, r: Route): void {
  const dst = parseCidr(r.dst);
  const src = r.src === undefined ? undefined : parseCidr(r.src);
  writeRtMsg(w, {
    family: r.family,
    dstLen: dst.prefixLength,
    srcLen: src?.prefixLength,
    tos: r.tos,
    table: r.table,
    protocol: r.protocol,
    scope: r.scope,
    type: r.type,
    flags: r.flags,
  });
  w.attrU32(RTA_TABLE, r.table);
  if (dst.prefixLength > 0) w.attr(RTA_DST, familyBytes(r.family, r.dst, dst.bytes));
  if (src) w.attr(RTA_SRC, src.bytes);
  if (r.iif !== undefined) w.attrU32(RTA_IIF, r.iif);
  if (r.oif !== undefined) w.attrU32(RTA_OIF, r.oif);
  if (r.gateway !== undefined) {
    w.attr(RTA_GATEWAY, familyBytes(r.family, r.gateway, parseIp(r.gateway).bytes));
  }
  if (r.priority) w.attrU32(RTA_PRIORITY, r.priority);
  if (r.prefsrc !== undefined) w.attr(RTA_PREFSRC, parseIp(r.prefsrc).bytes);
  if (r.nexthops) {
    const nexthops = r.nexthops;
    w.nested(RTA_MULTIPATH, (n) => {
      for (const hop of nexthops) {
        const at = n.length;
        n.u16(0).u8(hop.flags).u8(hop.weight - 1).i32(hop.oif);
        if (hop.gateway !== undefined) n.attr(RTA_GATEWAY, parseIp(hop.gateway).bytes);
        n.setU16(at, n.length - at);
      }
    });
  }
}

function familyBytes(family: number, text: string, bytes: Uint8Array): Uint8Array {
  if (bytes.length !== (family === AF_INET6 ? 16 : 4)) {
    throw new TypeError(`Address ${JSON.stringify(text)} does not match family ${family}`);
  }
  return bytes;
}
