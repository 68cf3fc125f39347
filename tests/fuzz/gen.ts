/**
 * Domain generators for the fuzz targets: DNS-1123 names, interface names, IPv4/IPv6
 * addresses and prefixes, MAC addresses and GUIDs — valid most of the time, with near misses
 * (a byte too long, upper case, a leading zero, an out-of-range octet) the rest.
 *
 * @module
 */

import type { Rng } from "../support/fuzz.ts";

const LABEL_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789-";
const ALNUM = "abcdefghijklmnopqrstuvwxyz0123456789";

/**
 * A DNS-1123 label (NPWG v1.3 §3.3), or a near miss with probability `bad`: empty, 64
 * characters, a leading/trailing `-`, upper case, `_`.
 *
 * @param r the case's generator
 * @param bad probability of a near miss (default 0.1)
 * @returns the label
 */
export function dnsLabel(r: Rng, bad = 0.1): string {
  if (r.chance(bad)) {
    return r.pick([
      "",
      "-a",
      "a-",
      "A",
      "a_b",
      "a".repeat(64),
      "é",
      "a b",
      `${r.pick(["x", "y"])}\u0000`,
    ]);
  }
  const n = r.chance(0.05) ? 63 : r.range(1, 10);
  let s = ALNUM[r.int(ALNUM.length)];
  for (let i = 1; i < n - 1; i++) s += LABEL_CHARS[r.int(LABEL_CHARS.length)];
  if (n > 1) s += ALNUM[r.int(ALNUM.length)];
  return s;
}

/**
 * A DNS-1123 subdomain (labels joined with `.`, ≤ 253 characters), sometimes 254+ long or with
 * an empty unit when `bad` hits.
 *
 * @param r the case's generator
 * @param bad probability of a near miss (default 0.1)
 * @returns the name
 */
export function dnsSubdomain(r: Rng, bad = 0.1): string {
  if (r.chance(0.03)) {
    // Around the 253-character limit.
    const units: string[] = [];
    while (units.join(".").length < 250) units.push("a".repeat(62));
    return units.join(".").slice(0, r.range(252, 254)).replace(/\.$/, "a");
  }
  const n = r.chance(0.7) ? 1 : r.range(2, 4);
  const parts = Array.from({ length: n }, () => dnsLabel(r, bad / n));
  if (r.chance(bad / 2)) parts.splice(r.int(parts.length + 1), 0, "");
  return parts.join(".");
}

/** Characters for interface names: ASCII, multi-byte UTF-8, and the kernel's forbidden ones. */
const IFNAME_CHARS = [
  ..."abcdefghijklmnopqrstuvwxyz0123456789-_.",
  "é", // 2 bytes c3 a9
  "à", // 2 bytes c3 a0: the kernel's isspace(0xa0) rejects it
  "😀", // 4 bytes
  "\u00a0",
  ":",
  "/",
  " ",
  "\t",
  "\u000b",
  "\0",
  "@",
];

/**
 * An interface name around the kernel's 15-byte limit, with multi-byte characters and
 * forbidden ones (`/`, `:`, whitespace, NUL) mixed in.
 *
 * @param r the case's generator
 * @param exclude characters never to use (e.g. `"@/"` where they are syntax)
 * @returns the name
 */
export function interfaceName(r: Rng, exclude = ""): string {
  if (r.chance(0.05)) return r.pick([".", "..", "", "net1", "eth0"]);
  const chars = IFNAME_CHARS.filter((c) => !exclude.includes(c));
  const plain = chars.filter((c) => /^[a-z0-9]$/.test(c));
  const n = r.length(15);
  let s = "";
  for (let i = 0; i < n; i++) s += r.chance(0.85) ? r.pick(plain) : r.pick(chars);
  return s;
}

/**
 * An IPv4 address, sometimes invalid (octet 256, leading zero, three octets).
 *
 * @param r the case's generator
 * @param bad probability of an invalid address (default 0.05)
 * @returns dotted-quad text
 */
export function ipv4(r: Rng, bad = 0.05): string {
  if (r.chance(bad)) {
    return r.pick(["256.1.1.1", "01.2.3.4", "1.2.3", "1.2.3.4.5", "1.2.3.-1", " 1.2.3.4"]);
  }
  return `${r.int(256)}.${r.int(256)}.${r.int(256)}.${r.int(256)}`;
}

/**
 * An IPv6 address in full, compressed or IPv4-suffixed form, sometimes invalid.
 *
 * @param r the case's generator
 * @param bad probability of an invalid address (default 0.05)
 * @returns IPv6 text
 */
export function ipv6(r: Rng, bad = 0.05): string {
  if (r.chance(bad)) {
    return r.pick([":::", "1::2::3", "12345::", "g::1", "fe80::1%eth0", "1:2:3:4:5:6:7:8:9"]);
  }
  const words = Array.from({ length: 8 }, () => (r.chance(0.4) ? 0 : r.int(0x10000)));
  const x = r.float();
  if (x < 0.3) return words.map((w) => w.toString(16)).join(":");
  if (x < 0.4) {
    return `::ffff:${r.int(256)}.${r.int(256)}.${r.int(256)}.${r.int(256)}`;
  }
  // Compress the longest run of zeros (RFC 5952 shape), or a random run.
  const start = r.int(8);
  const len = r.range(1, 8 - start);
  const head = words.slice(0, start).map((w) => w.toString(16)).join(":");
  const tail = words.slice(start + len).map((w) => w.toString(16)).join(":");
  return `${head}::${tail}`;
}

/**
 * An IPv4 or IPv6 address (60/40).
 * @param r the case's generator
 * @param bad probability of an invalid address
 * @returns address text
 */
export function ip(r: Rng, bad = 0.05): string {
  return r.chance(0.6) ? ipv4(r, bad) : ipv6(r, bad);
}

/**
 * An address with a prefix (`"10.1.2.3/24"`, `"2001:db8::5/64"`), sometimes an out-of-range
 * prefix or none.
 *
 * @param r the case's generator
 * @param bad probability of an invalid prefix (default 0.05)
 * @returns CIDR text
 */
export function cidr(r: Rng, bad = 0.05): string {
  const v4 = r.chance(0.6);
  const addr = v4 ? ipv4(r, bad) : ipv6(r, bad);
  if (r.chance(bad)) {
    return r.pick([addr, `${addr}/`, `${addr}/${v4 ? 33 : 129}`, `${addr}/-1`, `${addr}/024`]);
  }
  return `${addr}/${r.int(v4 ? 33 : 129)}`;
}

/**
 * Hex pairs joined with `:` (a MAC with 6 bytes, a GUID with 8), lower or upper case,
 * sometimes a byte short or long.
 *
 * @param r the case's generator
 * @param bytes how many bytes
 * @param bad probability of a wrong length or separator (default 0.05)
 * @returns the text
 */
export function hexPairs(r: Rng, bytes: number, bad = 0.05): string {
  const n = r.chance(bad) ? bytes + r.pick([-1, 1]) : bytes;
  const s = Array.from({ length: n }, () => r.int(256).toString(16).padStart(2, "0")).join(
    r.chance(bad) ? "-" : ":",
  );
  return r.chance(0.2) ? s.toUpperCase() : s;
}

/**
 * True while bug "zod-1" of the fuzz report is open: zod 4.1.12's `z.record` (its
 * `isPlainObject`) reads `o.constructor.prototype`, so a JSON object with an own `"constructor"`
 * key is rejected ("expected record") and `{"constructor": null}` throws a `TypeError` — in the
 * selection's `cni-args`, a plugin's `capabilities`, pod annotations and cache records. Fixed
 * upstream (colinhacks/zod#5066, PR #5098) in zod 4.1.13. While true, the selection and config
 * targets rename such keys to `"constructor_"`; the ignored regression test is in
 * `tests/fuzz/fuzz_test.ts`.
 */
export const KNOWN_BUG_ZOD_RECORD = false;

/** Renames every own `"constructor"` key in `v` (deeply, in place); true when one was found. */
function renameConstructorKeys(v: unknown): boolean {
  if (typeof v !== "object" || v === null) return false;
  let found = false;
  if (Array.isArray(v)) {
    for (const e of v) found = renameConstructorKeys(e) || found;
    return found;
  }
  const o = v as Record<string, unknown>;
  if (Object.hasOwn(o, "constructor")) {
    const value = o["constructor"];
    Reflect.deleteProperty(o, "constructor");
    Object.defineProperty(o, "constructor_", {
      value,
      enumerable: true,
      writable: true,
      configurable: true,
    });
    found = true;
  }
  for (const k of Object.keys(o)) found = renameConstructorKeys(o[k]) || found;
  return found;
}

/**
 * While {@link KNOWN_BUG_ZOD_RECORD}: `text` with every own `"constructor"` key of its JSON
 * renamed to `"constructor_"` (re-rendered canonically), else `text` unchanged.
 *
 * @param text JSON text (or anything; text that does not parse is returned as is)
 * @returns the text to use
 */
export function dodgeZodRecordText(text: string): string {
  if (!KNOWN_BUG_ZOD_RECORD || !text.includes("constructor")) return text;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return text;
  }
  return renameConstructorKeys(value) ? JSON.stringify(value) : text;
}

/**
 * While {@link KNOWN_BUG_ZOD_RECORD}: renames every own `"constructor"` key of a decoded value
 * in place (see {@link dodgeZodRecordText}).
 *
 * @param value a decoded JSON value
 * @returns the same value
 */
export function dodgeZodRecordValue<T>(value: T): T {
  if (KNOWN_BUG_ZOD_RECORD) renameConstructorKeys(value);
  return value;
}
