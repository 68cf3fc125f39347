/**
 * Addresses: `struct ifaddrmsg` (8 bytes, linux/if_addr.h) and the `IFA_*` attributes,
 * decoded into {@link Address}.
 *
 * @module
 */

import { AttributeDecoder, HOST_LITTLE_ENDIAN, type NetlinkWriter } from "./attributes.ts";
import { IFA_ADDRESS, IFA_FLAGS, IFA_LABEL, IFA_LOCAL } from "./constants.ts";
import { NetlinkDecodeError } from "./errors.ts";
import { formatIp, parseIp } from "./ip.ts";
import type { NetlinkMessage } from "./message.ts";

/** `sizeof(struct ifaddrmsg)` in bytes (linux/if_addr.h). */
export const IFADDRMSG_LEN = 8;

/** An interface address as the kernel reports it in `RTM_NEWADDR`. */
export interface Address {
  /** `ifa_family`: `AF_INET` (2) or `AF_INET6` (10). */
  family: number;
  /** `ifa_prefixlen` in bits. */
  prefixlen: number;
  /** `ifa_index`: the link's ifindex. */
  ifindex: number;
  /** `ifa_scope`: `RT_SCOPE_*` (linux/rtnetlink.h), 0 global, 253 link, 254 host. */
  scope: number;
  /** `IFA_FLAGS` when present, else `ifa_flags` (`IFA_F_*`, linux/if_addr.h). */
  flags: number;
  /** `IFA_ADDRESS`: the peer on point-to-point links, else the same as `local`. */
  address?: string;
  /** `IFA_LOCAL`: the interface's own address (IPv4; IPv6 only with a peer). */
  local?: string;
  /** `IFA_LABEL` (IPv4 only). */
  label?: string;
}

/**
 * The interface's own address of `a` with its prefix — what iproute2 prints as `inet`:
 * `IFA_LOCAL` if present, else `IFA_ADDRESS`.
 *
 * @param a the address
 * @returns `"a.b.c.d/nn"` or `"x::y/nn"`
 * @example addressCidr({ family: 2, prefixlen: 24, ifindex: 2, scope: 0, flags: 0, local: "10.0.0.2" }) // "10.0.0.2/24"
 */
export function addressCidr(a: Address): string {
  return `${a.local ?? a.address ?? ""}/${a.prefixlen}`;
}

/**
 * Writes `struct ifaddrmsg`.
 *
 * @param w the writer
 * @param m family, prefix length, flags, scope and ifindex (default 0)
 */
export function writeIfAddrMsg(
  w: NetlinkWriter,
  m: { family?: number; prefixlen?: number; flags?: number; scope?: number; ifindex?: number },
): void {
  w.u8(m.family ?? 0).u8(m.prefixlen ?? 0).u8(m.flags ?? 0).u8(m.scope ?? 0).u32(m.ifindex ?? 0);
}

/**
 * Decodes an `RTM_NEWADDR` message; nothing aliases the receive buffer afterwards.
 *
 * @param message the message
 * @returns the address
 * @throws {NetlinkDecodeError} on a truncated header or malformed attributes
 */
export function decodeAddress(message: NetlinkMessage): Address {
  const p = message.payload;
  if (p.length < IFADDRMSG_LEN) {
    throw new NetlinkDecodeError("Truncated ifaddrmsg", message.offset);
  }
  const v = new DataView(p.buffer, p.byteOffset, IFADDRMSG_LEN);
  const a: Address = {
    family: p[0],
    prefixlen: p[1],
    flags: p[2],
    scope: p[3],
    ifindex: v.getUint32(4, HOST_LITTLE_ENDIAN),
  };
  const ad = new AttributeDecoder(p.subarray(IFADDRMSG_LEN), message.offset + IFADDRMSG_LEN);
  while (ad.next()) {
    switch (ad.type) {
      case IFA_ADDRESS:
        a.address = formatIp(ad.bytes());
        break;
      case IFA_LOCAL:
        a.local = formatIp(ad.bytes());
        break;
      case IFA_LABEL:
        a.label = ad.string();
        break;
      case IFA_FLAGS:
        a.flags = ad.u32();
        break;
    }
  }
  ad.finish();
  return a;
}

/**
 * Encodes an {@link Address} as an `RTM_NEWADDR` payload — the inverse of
 * {@link decodeAddress} (fake kernel, round-trip tests). `flags` above 0xff go to `IFA_FLAGS`.
 *
 * @param w the writer
 * @param a the address
 */
export function writeAddress(w: NetlinkWriter, a: Address): void {
  writeIfAddrMsg(w, { ...a, flags: a.flags & 0xff });
  if (a.address !== undefined) w.attr(IFA_ADDRESS, parseIp(a.address).bytes);
  if (a.local !== undefined) w.attr(IFA_LOCAL, parseIp(a.local).bytes);
  if (a.label !== undefined) w.attrString(IFA_LABEL, a.label);
  if (a.flags > 0xff) w.attrU32(IFA_FLAGS, a.flags);
}
