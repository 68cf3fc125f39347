/**
 * Links: `struct ifinfomsg` (16 bytes, linux/rtnetlink.h) and the `IFLA_*` attributes
 * Manifold reports (linux/if_link.h), decoded into {@link Link}.
 *
 * @module
 */

import { AttributeDecoder, HOST_LITTLE_ENDIAN, type NetlinkWriter } from "./attributes.ts";
import {
  AF_UNSPEC,
  ARPHRD_INFINIBAND,
  IFLA_ADDRESS,
  IFLA_BROADCAST,
  IFLA_IFNAME,
  IFLA_INFO_KIND,
  IFLA_INFO_SLAVE_KIND,
  IFLA_LINK,
  IFLA_LINKINFO,
  IFLA_MASTER,
  IFLA_MTU,
  IFLA_OPERSTATE,
  LINK_FLAG_NAMES,
  OPER_STATES,
} from "./constants.ts";
import { NetlinkDecodeError } from "./errors.ts";
import { formatMac } from "./ip.ts";
import type { NetlinkMessage } from "./message.ts";

/** `sizeof(struct ifinfomsg)` in bytes (linux/rtnetlink.h). */
export const IFINFOMSG_LEN = 16;

/** A link as the kernel reports it in `RTM_NEWLINK`. */
export interface Link {
  /** `ifi_index`. */
  index: number;
  /** `IFLA_IFNAME`. */
  name: string;
  /** `ifi_type`: `ARPHRD_*` (linux/if_arp.h), e.g. 1 ether, 772 loopback, 32 InfiniBand. */
  type: number;
  /** `ifi_flags`: `IFF_*` bits (linux/if.h). */
  flags: number;
  /** `IFLA_ADDRESS` as lowercase `xx:xx:…` of any length; `""` when the link has none. */
  mac: string;
  /** `IFLA_BROADCAST` in the same form, `undefined` when absent. */
  broadcast?: string;
  /** `IFLA_MTU` in bytes. */
  mtu: number;
  /** `IFLA_OPERSTATE` as iproute2 names it: `"UP"`, `"DOWN"`, `"UNKNOWN"`, … */
  operState: string;
  /** `IFLA_LINKINFO`/`IFLA_INFO_KIND`, e.g. `"veth"`, `"bridge"`; absent for physical links. */
  kind?: string;
  /** `IFLA_LINKINFO`/`IFLA_INFO_SLAVE_KIND`, e.g. `"bridge"` for a bridge port. */
  slaveKind?: string;
  /** `IFLA_MASTER`: ifindex of the master (bridge, bond, VRF). */
  masterIndex?: number;
  /** `IFLA_LINK`: ifindex of the lower or peer link (may be in another netns). */
  parentIndex?: number;
  /**
   * For `ARPHRD_INFINIBAND` links with a 20-byte address: the port GUID, the last 8 bytes,
   * as `"xx:xx:xx:xx:xx:xx:xx:xx"` (NPWG v1.3 §5.3.3.1 `infiniband-guid`).
   */
  infinibandGuid?: string;
}

/**
 * The IPoIB port GUID of a hardware address: the last 8 of its 20 bytes.
 *
 * @param type `ifi_type` (`ARPHRD_*`)
 * @param address `IFLA_ADDRESS` bytes
 * @returns `"xx:…"` (8 pairs) for InfiniBand, else `undefined`
 * @example infinibandGuid(32, new Uint8Array(20).fill(1)) // "01:01:01:01:01:01:01:01"
 */
export function infinibandGuid(type: number, address: Uint8Array): string | undefined {
  if (type !== ARPHRD_INFINIBAND || address.length !== 20) return undefined;
  return formatMac(address.subarray(12));
}

/**
 * iproute2's names of the `IFF_*` bits set in `flags` (linux/if.h), e.g. for comparing with
 * `ip -j link`'s `flags` array.
 *
 * @param flags `ifi_flags`
 * @returns names such as `["BROADCAST", "MULTICAST", "UP", "LOWER_UP"]`
 * @example linkFlagNames(0x11003) // ["BROADCAST", "MULTICAST", "UP", "LOWER_UP"]
 */
export function linkFlagNames(flags: number): string[] {
  return LINK_FLAG_NAMES.filter(([bit]) => (flags & bit) !== 0).map(([, n]) => n);
}

/** Fields of `struct ifinfomsg` for a request (linux/rtnetlink.h). */
export interface IfInfoMsg {
  /** `ifi_family` (default `AF_UNSPEC`). */
  family?: number;
  /** `ifi_type`. */
  type?: number;
  /** `ifi_index`. */
  index?: number;
  /** `ifi_flags`. */
  flags?: number;
  /** `ifi_change`. */
  change?: number;
}

/**
 * Writes `struct ifinfomsg`.
 *
 * @param w the writer
 * @param m the fields (all default 0)
 */
export function writeIfInfoMsg(w: NetlinkWriter, m: IfInfoMsg = {}): void {
  w.u8(m.family ?? AF_UNSPEC).u8(0).u16(m.type ?? 0).i32(m.index ?? 0).u32(m.flags ?? 0)
    .u32(m.change ?? 0);
}

/**
 * Decodes an `RTM_NEWLINK` message into a {@link Link}; strings are copied, nothing aliases
 * the receive buffer afterwards.
 *
 * @param message the message
 * @returns the link
 * @throws {NetlinkDecodeError} on a truncated header or malformed attributes
 */
export function decodeLink(message: NetlinkMessage): Link {
  const p = message.payload;
  if (p.length < IFINFOMSG_LEN) {
    throw new NetlinkDecodeError("Truncated ifinfomsg", message.offset);
  }
  const v = new DataView(p.buffer, p.byteOffset, IFINFOMSG_LEN);
  const link: Link = {
    type: v.getUint16(2, HOST_LITTLE_ENDIAN),
    index: v.getInt32(4, HOST_LITTLE_ENDIAN),
    flags: v.getUint32(8, HOST_LITTLE_ENDIAN),
    name: "",
    mac: "",
    mtu: 0,
    operState: "UNKNOWN",
  };
  const ad = new AttributeDecoder(p.subarray(IFINFOMSG_LEN), message.offset + IFINFOMSG_LEN);
  while (ad.next()) {
    switch (ad.type) {
      case IFLA_IFNAME:
        link.name = ad.string();
        break;
      case IFLA_ADDRESS: {
        const b = ad.bytes();
        link.mac = formatMac(b);
        const guid = infinibandGuid(link.type, b);
        if (guid) link.infinibandGuid = guid;
        break;
      }
      case IFLA_BROADCAST:
        link.broadcast = formatMac(ad.bytes());
        break;
      case IFLA_MTU:
        link.mtu = ad.u32();
        break;
      case IFLA_OPERSTATE: {
        const s = ad.u8();
        link.operState = OPER_STATES[s] ?? "UNKNOWN";
        break;
      }
      case IFLA_MASTER:
        link.masterIndex = ad.u32();
        break;
      case IFLA_LINK:
        link.parentIndex = ad.u32();
        break;
      case IFLA_LINKINFO: {
        const info = ad.nested();
        while (info.next()) {
          if (info.type === IFLA_INFO_KIND) link.kind = info.string();
          else if (info.type === IFLA_INFO_SLAVE_KIND) link.slaveKind = info.string();
        }
        ad.adopt(info);
        break;
      }
    }
  }
  ad.finish();
  return link;
}

/**
 * Encodes a {@link Link} as an `RTM_NEWLINK` payload (ifinfomsg + attributes) — the inverse
 * of {@link decodeLink}, used by the fake kernel in tests and by round-trip tests.
 *
 * @param w the writer
 * @param link the link
 */
export function writeLink(w: NetlinkWriter, link: Link): void {
  writeIfInfoMsg(w, { type: link.type, index: link.index, flags: link.flags });
  w.attrString(IFLA_IFNAME, link.name);
  if (link.mac) w.attr(IFLA_ADDRESS, macBytes(link.mac));
  if (link.broadcast !== undefined) w.attr(IFLA_BROADCAST, macBytes(link.broadcast));
  w.attrU32(IFLA_MTU, link.mtu);
  const state = OPER_STATES.indexOf(link.operState as (typeof OPER_STATES)[number]);
  w.attrU8(IFLA_OPERSTATE, state === -1 ? 0 : state);
  if (link.masterIndex !== undefined) w.attrU32(IFLA_MASTER, link.masterIndex);
  if (link.parentIndex !== undefined) w.attrU32(IFLA_LINK, link.parentIndex);
  if (link.kind !== undefined || link.slaveKind !== undefined) {
    w.nested(IFLA_LINKINFO, (n) => {
      if (link.kind !== undefined) n.attrString(IFLA_INFO_KIND, link.kind);
      if (link.slaveKind !== undefined) n.attrString(IFLA_INFO_SLAVE_KIND, link.slaveKind);
    });
  }
}

function macBytes(mac: string): Uint8Array {
  if (mac === "") return new Uint8Array(0);
  return new Uint8Array(mac.split(":").map((h) => parseInt(h, 16)));
}
