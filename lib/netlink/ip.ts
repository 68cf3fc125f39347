/**
 * Text forms of the addresses netlink carries: IPv4/IPv6 (as `inet_ntop(3)` prints them,
 * so they compare equal to iproute2's output), CIDR prefixes and hardware addresses.
 *
 * @module
 */

import { AF_INET, AF_INET6 } from "./constants.ts";

/** An address parsed from text: family (`AF_INET`/`AF_INET6`) and network-order bytes. */
export interface ParsedIp {
  /** `AF_INET` (2) or `AF_INET6` (10). */
  family: number;
  /** 4 or 16 bytes, network byte order. */
  bytes: Uint8Array;
}

/** A prefix parsed from `"a.b.c.d/nn"` or `"x::y/nn"`. */
export interface ParsedCidr extends ParsedIp {
  /** Prefix length in bits. */
  prefixLength: number;
}

/**
 * Formats 4 or 16 network-order bytes like glibc `inet_ntop` (RFC 5952 zero compression,
 * runs of two or more zero groups, IPv4-mapped/compatible tails in dotted form).
 *
 * @param bytes 4 (IPv4) or 16 (IPv6) bytes, network byte order
 * @returns the address text, or hex bytes joined by `:` for other lengths
 * @example formatIp(new Uint8Array([10, 0, 0, 1])) // "10.0.0.1"
 */
export function formatIp(bytes: Uint8Array): string {
  if (bytes.length === 4) return `${bytes[0]}.${bytes[1]}.${bytes[2]}.${bytes[3]}`;
  if (bytes.length !== 16) return formatMac(bytes);
  const words: number[] = [];
  for (let i = 0; i < 16; i += 2) words.push((bytes[i] << 8) | bytes[i + 1]);
  let bestBase = -1, bestLen = 0, curBase = -1, curLen = 0;
  for (let i = 0; i < 8; i++) {
    if (words[i] === 0) {
      if (curBase === -1) (curBase = i), (curLen = 1);
      else curLen++;
    } else if (curBase !== -1) {
      if (curLen > bestLen) (bestBase = curBase), (bestLen = curLen);
      curBase = -1;
    }
  }
  if (curBase !== -1 && curLen > bestLen) (bestBase = curBase), (bestLen = curLen);
  if (bestLen < 2) bestBase = -1;
  let out = "";
  for (let i = 0; i < 8; i++) {
    if (bestBase !== -1 && i >= bestBase && i < bestBase + bestLen) {
      if (i === bestBase) out += ":";
      continue;
    }
    if (i !== 0) out += ":";
    if (
      i === 6 && bestBase === 0 &&
      (bestLen === 6 || (bestLen === 5 && words[5] === 0xffff))
    ) {
      out += `${bytes[12]}.${bytes[13]}.${bytes[14]}.${bytes[15]}`;
      break;
    }
    out += words[i].toString(16);
  }
  if (bestBase !== -1 && bestBase + bestLen === 8) out += ":";
  return out;
}

/**
 * Formats a hardware address as lowercase hex pairs joined by `:` (any length, as
 * iproute2 prints `IFLA_ADDRESS`, linux/if_link.h).
 *
 * @param bytes the address bytes
 * @returns e.g. `"02:00:00:00:00:01"`; `""` for no bytes
 * @example formatMac(new Uint8Array([2, 0, 0, 0, 0, 1])) // "02:00:00:00:00:01"
 */
export function formatMac(bytes: Uint8Array): string {
  let out = "";
  for (let i = 0; i < bytes.length; i++) {
    if (i) out += ":";
    out += bytes[i].toString(16).padStart(2, "0");
  }
  return out;
}

const V4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/;

function parseV4(text: string): Uint8Array | undefined {
  const m = V4.exec(text);
  if (!m) return undefined;
  const out = new Uint8Array(4);
  for (let i = 0; i < 4; i++) {
    const n = Number(m[i + 1]);
    if (n > 255) return undefined;
    out[i] = n;
  }
  return out;
}

function parseV6(text: string): Uint8Array | undefined {
  let tail: Uint8Array | undefined;
  let s = text;
  const lastColon = s.lastIndexOf(":");
  if (s.includes(".")) {
    tail = parseV4(s.slice(lastColon + 1));
    if (!tail) return undefined;
    s = s.slice(0, lastColon + 1) + "0:0";
  }
  const halves = s.split("::");
  if (halves.length > 2) return undefined;
  const parse = (part: string): number[] | undefined => {
    if (part === "") return [];
    const groups = part.split(":");
    const out: number[] = [];
    for (const g of groups) {
      if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return undefined;
      out.push(parseInt(g, 16));
    }
    return out;
  };
  const head = parse(halves[0]);
  const rest = halves.length === 2 ? parse(halves[1]) : [];
  if (!head || !rest) return undefined;
  const fill = 8 - head.length - rest.length;
  if (halves.length === 2 ? fill < 1 : fill !== 0) return undefined;
  const words = [...head, ...new Array(halves.length === 2 ? fill : 0).fill(0), ...rest];
  const out = new Uint8Array(16);
  words.forEach((w, i) => {
    out[2 * i] = w >> 8;
    out[2 * i + 1] = w & 0xff;
  });
  if (tail) out.set(tail, 12);
  return out;
}

/**
 * Parses an IPv4 or IPv6 address.
 *
 * @param text e.g. `"10.0.0.1"` or `"fd00::1"`
 * @returns family and network-order bytes
 * @throws {TypeError} when `text` is not an address
 * @example parseIp("10.0.0.1").family // 2 (AF_INET)
 */
export function parseIp(text: string): ParsedIp {
  const v4 = parseV4(text);
  if (v4) return { family: AF_INET, bytes: v4 };
  const v6 = text.includes(":") ? parseV6(text) : undefined;
  if (v6) return { family: AF_INET6, bytes: v6 };
  throw new TypeError(`Invalid IP address ${JSON.stringify(text)}`);
}

/**
 * Parses `"addr/len"`; a bare address means a host prefix (/32 or /128).
 *
 * @param text e.g. `"10.0.0.0/24"`, `"::/0"`, `"fd00::1"`
 * @returns family, network-order bytes and prefix length in bits
 * @throws {TypeError} when `text` is not a prefix
 * @example parseCidr("0.0.0.0/0").prefixLength // 0
 */
export function parseCidr(text: string): ParsedCidr {
  const slash = text.indexOf("/");
  const ip = parseIp(slash === -1 ? text : text.slice(0, slash));
  const max = ip.bytes.length * 8;
  if (slash === -1) return { ...ip, prefixLength: max };
  const lenText = text.slice(slash + 1);
  const len = /^\d{1,3}$/.test(lenText) ? Number(lenText) : NaN;
  if (!(len >= 0 && len <= max)) {
    throw new TypeError(`Invalid prefix length in ${JSON.stringify(text)}`);
  }
  return { ...ip, prefixLength: len };
}

/**
 * The unspecified address of a family, as text.
 *
 * @param family `AF_INET` or `AF_INET6`
 * @returns `"0.0.0.0"` or `"::"`
 * @example anyAddress(10) // "::"
 */
export function anyAddress(family: number): string {
  return family === AF_INET6 ? "::" : "0.0.0.0";
}
