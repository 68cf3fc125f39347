/**
 * CIDR arithmetic for `ipBlock`: parse and print IPv4/IPv6 prefixes (IPv6 in RFC 5952
 * form) and split `cidr` minus `except` into the covering CIDRs — the Kuryr network-policy
 * spec's example: `1.1.1.0/24` except `1.1.1.0/26` → `1.1.1.64/26`, `1.1.1.128/25`.
 *
 * @module
 */

/** Address family of a prefix. */
export type IpFamily = "ipv4" | "ipv6";

/** A parsed prefix: network address as a big integer (host bits cleared), length in bits. */
export interface Prefix {
  /** Address family. */
  family: IpFamily;
  /** Network address (host bits clear), most significant bit first. */
  addr: bigint;
  /** Prefix length in bits (0–32 or 0–128). */
  len: number;
}

const BITS: Record<IpFamily, number> = { ipv4: 32, ipv6: 128 };

function parseV4(s: string): bigint | null {
  const parts = s.split(".");
  if (parts.length !== 4) return null;
  let v = 0n;
  for (const p of parts) {
    if (!/^\d{1,3}$/.test(p) || Number(p) > 255) return null;
    v = (v << 8n) | BigInt(Number(p));
  }
  return v;
}

function parseV6(s: string): bigint | null {
  let text = s.toLowerCase();
  if (text.includes(".")) { // embedded IPv4 (RFC 4291 §2.2 form 3): rewrite as two words
    const cut = text.lastIndexOf(":") + 1;
    const v4 = parseV4(text.slice(cut));
    if (v4 === null || cut === 0) return null;
    text = `${text.slice(0, cut)}${(v4 >> 16n).toString(16)}:${(v4 & 0xffffn).toString(16)}`;
  }
  const halves = text.split("::");
  if (halves.length > 2) return null;
  const group = (h: string) => (h === "" ? [] : h.split(":"));
  const head = group(halves[0]);
  const tail = halves.length === 2 ? group(halves[1]) : [];
  if (![...head, ...tail].every((g) => /^[0-9a-f]{1,4}$/.test(g))) return null;
  const n = head.length + tail.length;
  if (halves.length === 1 ? n !== 8 : n > 7) return null;
  const words = [...head, ...Array(8 - n).fill("0"), ...tail];
  return words.reduce((acc, w) => (acc << 16n) | BigInt(parseInt(w, 16)), 0n);
}

/**
 * Parses an address without prefix length.
 *
 * @param text `"10.1.2.3"`, `"fd00::1"`, `"::ffff:1.2.3.4"`
 * @returns family and value, or `null` when the text is not an address
 * @example parseIp("10.0.0.1") // { family: "ipv4", addr: 167772161n, len: 32 }
 */
export function parseIp(text: string): Prefix | null {
  if (text.includes(":")) {
    const addr = parseV6(text);
    return addr === null ? null : { family: "ipv6", addr, len: 128 };
  }
  const addr = parseV4(text);
  return addr === null ? null : { family: "ipv4", addr, len: 32 };
}

/**
 * Parses `addr/len`, clearing host bits (`10.1.2.3/24` → `10.1.2.0/24`).
 *
 * @param text a CIDR
 * @returns the prefix, or `null` when malformed
 * @example formatPrefix(parseCidr("10.1.2.3/24")!) // "10.1.2.0/24"
 */
export function parseCidr(text: string): Prefix | null {
  const slash = text.indexOf("/");
  if (slash < 0) return null;
  const ip = parseIp(text.slice(0, slash));
  const lenText = text.slice(slash + 1);
  if (!ip || !/^\d{1,3}$/.test(lenText)) return null;
  const len = Number(lenText);
  const bits = BITS[ip.family];
  if (len > bits) return null;
  const host = (1n << BigInt(bits - len)) - 1n;
  return { family: ip.family, addr: ip.addr & ~host, len };
}

function formatAddr(family: IpFamily, addr: bigint): string {
  if (family === "ipv4") {
    return [24n, 16n, 8n, 0n].map((s) => String((addr >> s) & 0xffn)).join(".");
  }
  const words = Array.from(
    { length: 8 },
    (_, i) => Number((addr >> BigInt(112 - 16 * i)) & 0xffffn),
  );
  // RFC 5952 §4.2: compress the longest run (≥ 2) of zero words, the first on a tie.
  let best = -1, bestLen = 1;
  for (let i = 0; i < 8;) {
    if (words[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && words[j] === 0) j++;
    if (j - i > bestLen) [best, bestLen] = [i, j - i];
    i = j;
  }
  const hex = (ws: number[]) => ws.map((w) => w.toString(16)).join(":");
  if (best < 0) return hex(words);
  return `${hex(words.slice(0, best))}::${hex(words.slice(best + bestLen))}`;
}

/**
 * Prints a prefix as `addr/len` (IPv6 in RFC 5952 form).
 *
 * @param p the prefix
 * @returns the CIDR text
 * @example formatPrefix({ family: "ipv6", addr: 1n, len: 128 }) // "::1/128"
 */
export function formatPrefix(p: Prefix): string {
  return `${formatAddr(p.family, p.addr)}/${p.len}`;
}

/**
 * Canonical text of an address (for set elements and de-duplication).
 *
 * @param text an address
 * @returns the canonical form, or `null` when not an address
 * @example canonicalIp("FD00:0:0::1") // "fd00::1"
 */
export function canonicalIp(text: string): string | null {
  const p = parseIp(text);
  return p ? formatAddr(p.family, p.addr) : null;
}

function contains(outer: Prefix, inner: Prefix): boolean {
  if (outer.family !== inner.family || outer.len > inner.len) return false;
  const shift = BigInt(BITS[outer.family] - outer.len);
  return (inner.addr >> shift) === (outer.addr >> shift);
}

function subtractOne(block: Prefix, hole: Prefix): Prefix[] {
  if (contains(hole, block)) return [];
  if (!contains(block, hole)) return [block];
  // Split down to the hole, keeping the sibling half at every level.
  const out: Prefix[] = [];
  let cur = block;
  const bits = BITS[block.family];
  while (cur.len < hole.len) {
    const len = cur.len + 1;
    const bit = 1n << BigInt(bits - len);
    const low = { family: cur.family, addr: cur.addr, len };
    const high = { family: cur.family, addr: cur.addr | bit, len };
    const inLow = contains(low, hole);
    out.push(inLow ? high : low);
    cur = inLow ? low : high;
  }
  return out;
}

/**
 * `cidr` minus every `except` prefix, as the smallest list of disjoint covering CIDRs.
 * Excepts outside `cidr` or of the other family are ignored; overlapping excepts are fine.
 *
 * @param cidr the block, e.g. `"1.1.1.0/24"`
 * @param except the holes, e.g. `["1.1.1.0/26"]`
 * @returns CIDR texts sorted by address (`[]` when the holes cover the block)
 * @throws {RangeError} when a prefix is malformed (callers validate first)
 * @example splitExcept("1.1.1.0/24", ["1.1.1.0/26"]) // ["1.1.1.64/26", "1.1.1.128/25"]
 */
export function splitExcept(cidr: string, except: readonly string[] = []): string[] {
  const block = parseCidr(cidr);
  if (!block) throw new RangeError(`Invalid CIDR ${cidr}`);
  let blocks = [block];
  for (const e of except) {
    const hole = parseCidr(e);
    if (!hole) throw new RangeError(`Invalid CIDR ${e}`);
    blocks = blocks.flatMap((b) => subtractOne(b, hole));
  }
  return blocks.sort((a, b) => (a.addr < b.addr ? -1 : a.addr > b.addr ? 1 : 0)).map(formatPrefix);
}
