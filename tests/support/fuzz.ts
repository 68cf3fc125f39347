/**
 * Seeded, reproducible property/fuzz testing for Manifold's parsers of untrusted input
 * (STYLE.md "Tests": random and malformed inputs must produce a typed error, never a crash or
 * a hang).
 *
 * - {@link Rng}: a small seeded PRNG (mulberry32). Every case gets its own generator seeded from
 *   `(seed, case index)` ({@link caseSeed}), so one case replays alone, whatever ran before it.
 * - Generators: {@link randomString} (ASCII, Unicode, lone surrogates, NUL and controls, long
 *   runs), {@link randomJson} (bounded depth and size, edge numbers), {@link renderJson} (JSON
 *   text with exotic number tokens such as `1e999` and `-0`, odd whitespace, duplicate keys).
 * - Mutators: {@link mutateJson} (structure-aware: keys, values, types, duplication, nesting),
 *   {@link mutateText} (tokens, deletions, duplication, truncation), {@link mutateBytes} (bit
 *   flips, length fields set to boundary values, truncation, splicing).
 * - {@link fuzz}: runs a {@link FuzzTarget} over many cases. The oracle: the call returns a
 *   value that satisfies the target's `check`, or throws a `CniError` with one of the target's
 *   codes and a non-empty `msg` (or an error the target's `typedError` accepts); anything else
 *   (TypeError, RangeError, a leaking zod error, a case slower than 1000 ms) is a
 *   {@link FuzzFailure} naming the target, seed, case index and input, and how to replay it
 *   (`FUZZ_SEED=<seed> FUZZ_CASE=<index>`).
 *
 * Pure: reading `FUZZ_*` variables is skipped without `--allow-env` ({@link fuzzEnv}).
 *
 * @example
 * ```ts
 * const stats = fuzz({
 *   name: "args",
 *   generate: (r) => randomString(r, { maxLength: 40 }),
 *   call: (s) => parseCniArgs(s),
 *   codes: [4],
 * }, { seed: 1, runs: 1000 });
 * stats.accepted + stats.rejected === stats.cases; // true
 * ```
 *
 * @module
 */

import { CniError, CniErrorCode } from "../../lib/cni/errors.ts";

// ------------------------------------------------------------------------------------ PRNG

/**
 * Mixes a 32-bit value (the murmur3 finaliser): a cheap hash so that neighbouring seeds and
 * case indices give unrelated streams.
 *
 * @param x any number (used as a 32-bit integer)
 * @returns an unsigned 32-bit hash
 * @example mix32(1) !== mix32(2) // true
 */
export function mix32(x: number): number {
  x = Math.imul(x ^ (x >>> 16), 0x85ebca6b);
  x = Math.imul(x ^ (x >>> 13), 0xc2b2ae35);
  return (x ^ (x >>> 16)) >>> 0;
}

/**
 * The seed of case `index` of a run seeded with `seed`; {@link fuzz} builds each case's
 * {@link Rng} from it so any case replays on its own.
 *
 * @param seed the run's seed (unsigned 32-bit)
 * @param index the case index (≥ 0)
 * @returns the case's seed (unsigned 32-bit)
 * @example caseSeed(42, 7) === caseSeed(42, 7) // true
 */
export function caseSeed(seed: number, index: number): number {
  return mix32((seed >>> 0) ^ mix32(index + 0x9e3779b9));
}

/** A seeded pseudo-random generator (mulberry32), fast and good enough for fuzzing. */
export class Rng {
  #a: number;

  /** @param seed unsigned 32-bit seed; the same seed gives the same stream */
  constructor(seed: number) {
    this.#a = seed >>> 0;
  }

  /** The next unsigned 32-bit value. */
  u32(): number {
    this.#a = (this.#a + 0x6d2b79f5) >>> 0;
    let t = this.#a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  }

  /** A float in [0, 1). */
  float(): number {
    return this.u32() / 4294967296;
  }

  /**
   * An integer in [0, n).
   * @param n exclusive upper bound (> 0)
   */
  int(n: number): number {
    return Math.floor(this.float() * n);
  }

  /**
   * An integer in [lo, hi], both inclusive.
   * @param lo lower bound
   * @param hi upper bound (≥ lo)
   */
  range(lo: number, hi: number): number {
    return lo + this.int(hi - lo + 1);
  }

  /**
   * True with probability `p`.
   * @param p probability in [0, 1]
   */
  chance(p: number): boolean {
    return this.float() < p;
  }

  /**
   * A uniformly chosen element.
   * @param list a non-empty list
   */
  pick<T>(list: readonly T[]): T {
    return list[this.int(list.length)];
  }

  /**
   * A small length biased towards short values and the boundaries around `max`:
   * 0, 1, a short one, or one of `max - 1`, `max`, `max + 1`.
   *
   * @param max the interesting upper bound (e.g. 15 for an interface name)
   * @returns a length ≥ 0
   */
  length(max: number): number {
    const x = this.float();
    if (x < 0.1) return this.int(2);
    if (x < 0.75) return 1 + this.int(Math.min(max, 12));
    if (x < 0.9) return this.range(0, max);
    return Math.max(0, max + this.range(-1, 1));
  }
}

// ------------------------------------------------------------------------------ generators

/** Strings that often break parsers: empty, whitespace, NUL, separators, huge numbers, prototype keys. */
export const INTERESTING_STRINGS: readonly string[] = [
  "",
  " ",
  "\t",
  "\n",
  "\0",
  "\u00a0",
  "\u2028",
  "\ufeff",
  "\ud800",
  "\udfff",
  "😀",
  "é",
  "à",
  "null",
  "true",
  "0",
  "-1",
  "1e999",
  "NaN",
  "__proto__",
  "constructor",
  "toString",
  "hasOwnProperty",
  "..",
  ".",
  "/",
  "a/b",
  "@",
  ":",
  ";",
  "=",
  ",",
  "\\",
  '"',
  "[",
  "{",
  "%00",
  "${x}",
  "a".repeat(64),
  "a".repeat(254),
];

const ASCII_PRINTABLE = Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i)).join("");
const CONTROL = Array.from({ length: 32 }, (_, i) => String.fromCharCode(i)).join("") + "\x7f";

const CODE_POINTS = new Map<string, string[]>();

/** The characters of `alphabet` by code point (so astral characters stay whole), cached. */
function codePoints(alphabet: string): string[] {
  let chars = CODE_POINTS.get(alphabet);
  if (!chars) {
    chars = [...alphabet];
    if (CODE_POINTS.size < 256) CODE_POINTS.set(alphabet, chars);
  }
  return chars;
}

/** Options of {@link randomString}. */
export interface RandomStringOptions {
  /** Longest length in characters for ordinary strings (default 24); long runs go beyond. */
  maxLength?: number;
  /** Characters preferred most of the time (default printable ASCII). */
  alphabet?: string;
  /** Probability of a long run (hundreds to thousands of units, default 0.02). */
  longChance?: number;
}

/**
 * A random string: mostly from `alphabet`, sometimes with Unicode (BMP, astral pairs, lone
 * surrogates), NUL and control characters, one of {@link INTERESTING_STRINGS}, or a long run.
 *
 * @param r the case's generator
 * @param opts length, alphabet and long-run probability
 * @returns the string
 * @example randomString(new Rng(1), { alphabet: "ab", maxLength: 4 }) // e.g. "abba"; sometimes "\u2028", a long run…
 */
export function randomString(r: Rng, opts: RandomStringOptions = {}): string {
  const max = opts.maxLength ?? 24;
  const alphabet = codePoints(opts.alphabet ?? ASCII_PRINTABLE);
  const x = r.float();
  if (x < 0.08) return r.pick(INTERESTING_STRINGS);
  if (x < 0.08 + (opts.longChance ?? 0.02)) {
    const unit = r.chance(0.5) ? alphabet[r.int(alphabet.length)] : randomChar(r, alphabet);
    return unit.repeat(r.range(100, 5000));
  }
  const n = r.length(max);
  let s = "";
  const mixed = r.chance(0.25);
  for (let i = 0; i < n; i++) {
    s += mixed ? randomChar(r, alphabet) : alphabet[r.int(alphabet.length)];
  }
  return s;
}

/**
 * One random character: usually from `alphabet`, else ASCII, a control character, a BMP
 * character, an astral character (surrogate pair) or a lone surrogate.
 *
 * @param r the case's generator
 * @param alphabet preferred characters (a string, or its characters)
 * @returns one character: one or two UTF-16 units (sometimes a lone surrogate)
 */
export function randomChar(r: Rng, alphabet: string | readonly string[] = ASCII_PRINTABLE): string {
  const chars = typeof alphabet === "string" ? codePoints(alphabet) : alphabet;
  const x = r.float();
  if (x < 0.6) return r.pick(chars);
  if (x < 0.75) return ASCII_PRINTABLE[r.int(ASCII_PRINTABLE.length)];
  if (x < 0.83) return CONTROL[r.int(CONTROL.length)];
  if (x < 0.93) return String.fromCharCode(0x80 + r.int(0xd800 - 0x80));
  if (x < 0.98) return String.fromCodePoint(0x10000 + r.int(0x100000));
  return String.fromCharCode(0xd800 + r.int(0x800));
}

/** Numbers at the edges of what JSON, JavaScript and zod distinguish. */
export const EDGE_NUMBERS: readonly number[] = [
  0,
  -0,
  1,
  -1,
  0.5,
  -0.5,
  1.5,
  255,
  256,
  65535,
  65536,
  2 ** 31 - 1,
  2 ** 31,
  2 ** 32 - 1,
  2 ** 32,
  2 ** 53 - 1,
  2 ** 53,
  2 ** 53 + 2,
  -(2 ** 53),
  1e21,
  1e308,
  -1e308,
  5e-324,
  Number.MAX_VALUE,
  Infinity,
  -Infinity,
  NaN,
];

/**
 * A random number: a small integer, one of {@link EDGE_NUMBERS}, or a random double.
 * `Infinity`, `-Infinity` and `NaN` only with `nonFinite` (JSON text renders the infinities as
 * `1e999`/`-1e999`, see {@link renderJson}).
 *
 * @param r the case's generator
 * @param nonFinite whether NaN and the infinities may be returned
 * @returns the number
 */
export function randomNumber(r: Rng, nonFinite = false): number {
  const x = r.float();
  let n: number;
  if (x < 0.5) n = r.range(-3, 300);
  else if (x < 0.85) n = r.pick(EDGE_NUMBERS);
  else n = (r.float() - 0.5) * 10 ** r.range(-5, 20);
  if (!nonFinite && !Number.isFinite(n)) return 0;
  return n;
}

/** Options of {@link randomJson}. */
export interface RandomJsonOptions {
  /** Deepest nesting (default 3). */
  depth?: number;
  /** Most keys or elements per container (default 5). */
  breadth?: number;
  /** Keys to prefer (the target's own, so random objects hit real fields). */
  keys?: readonly string[];
  /** Values to mix in (the target's interesting values). */
  values?: readonly unknown[];
  /** Whether NaN/Infinity may appear (default false: JSON-representable values only). */
  nonFinite?: boolean;
}

/**
 * A random JSON value of bounded depth and size: null, booleans, numbers (edge values
 * included), strings ({@link randomString}), arrays and objects whose keys come from
 * `opts.keys` or are random.
 *
 * @param r the case's generator
 * @param opts depth, breadth, preferred keys and values
 * @returns a JSON value (objects are plain, created with own `__proto__` keys when chosen)
 */
export function randomJson(r: Rng, opts: RandomJsonOptions = {}): unknown {
  const depth = opts.depth ?? 3;
  const x = r.float();
  if (opts.values && opts.values.length > 0 && x < 0.2) return structuredClone(r.pick(opts.values));
  if (depth <= 0 || x < 0.55) {
    const y = r.float();
    if (y < 0.1) return null;
    if (y < 0.2) return r.chance(0.5);
    if (y < 0.5) return randomNumber(r, opts.nonFinite);
    return randomString(r);
  }
  const breadth = opts.breadth ?? 5;
  const child = { ...opts, depth: depth - 1 };
  const n = r.int(breadth + 1);
  if (x < 0.75) return Array.from({ length: n }, () => randomJson(r, child));
  const out: Record<string, unknown> = {};
  for (let i = 0; i < n; i++) {
    const key = opts.keys && opts.keys.length > 0 && r.chance(0.6)
      ? r.pick(opts.keys)
      : randomString(r, { maxLength: 8 });
    define(out, key, randomJson(r, child));
  }
  return out;
}

/** Sets an own data property even for `"__proto__"` (like `JSON.parse` does). */
function define(o: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(o, key, { value, enumerable: true, writable: true, configurable: true });
}

/**
 * Renders a value as JSON text, with variations a careful parser must survive: random
 * whitespace, numbers as exotic tokens (`1e999` for ±Infinity, `-0`, `1E2`, `0.0e0`), and
 * sometimes a duplicated key whose earlier copy `JSON.parse` overrides. Without `r` it is plain
 * `JSON.stringify` except for the infinities.
 *
 * @param value a JSON-like value (NaN renders as `null`, `undefined` members are left out)
 * @param r the case's generator, or undefined for canonical text
 * @returns JSON text that `JSON.parse` accepts
 * @example renderJson({ a: Infinity }) // '{"a":1e999}'
 */
export function renderJson(value: unknown, r?: Rng): string {
  const ws = () => (r && r.chance(0.05) ? r.pick([" ", "\n", "\t", "\r\n ", "  "]) : "");
  const num = (n: number): string => {
    if (Number.isNaN(n)) return "null";
    if (n === Infinity) return "1e999";
    if (n === -Infinity) return "-1e999";
    if (Object.is(n, -0)) return "-0";
    if (r && Number.isInteger(n) && Math.abs(n) < 1e15 && r.chance(0.05)) {
      return r.pick([`${n}.0`, `${n}e0`, `${n}E+0`, `${n}0e-1`]);
    }
    return String(n);
  };
  const go = (v: unknown): string => {
    if (v === null || v === undefined) return "null";
    if (typeof v === "number") return num(v);
    if (typeof v === "boolean") return v ? "true" : "false";
    if (typeof v === "string") return JSON.stringify(v);
    if (Array.isArray(v)) return `[${ws()}${v.map((e) => go(e)).join(`,${ws()}`)}${ws()}]`;
    if (typeof v === "object") {
      const parts: string[] = [];
      for (const [k, e] of Object.entries(v as Record<string, unknown>)) {
        if (e === undefined) continue;
        if (r && r.chance(0.01)) {
          parts.push(`${JSON.stringify(k)}:${go(randomJson(r, { depth: 1 }))}`);
        }
        parts.push(`${ws()}${JSON.stringify(k)}${ws()}:${ws()}${go(e)}`);
      }
      return `{${parts.join(",")}${ws()}}`;
    }
    return "null";
  };
  return go(value);
}

// -------------------------------------------------------------------------------- mutators

/** What {@link mutateJson} prefers to insert: the target's keys and values. */
export interface JsonDictionary {
  /** Keys of the target's schema (and near misses). */
  keys?: readonly string[];
  /** Valid and near-valid values of those keys. */
  values?: readonly unknown[];
}

/**
 * Returns a structure-aware mutation of a JSON value (the input is not modified): one to
 * `rounds` edits at random places — replace a value (dictionary value, random JSON, another
 * type, an edge number, a string edit), add/delete/rename a key, duplicate/remove/reorder array
 * elements, nest a value in an array or object, repeat an element many times.
 *
 * @param r the case's generator
 * @param value the valid sample to mutate
 * @param dict the target's keys and values
 * @param rounds most edits (default 3)
 * @returns the mutated copy
 */
export function mutateJson(
  r: Rng,
  value: unknown,
  dict: JsonDictionary = {},
  rounds = 3,
): unknown {
  let root = structuredClone(value);
  const n = 1 + r.int(rounds);
  for (let i = 0; i < n; i++) root = mutateOnce(r, root, dict);
  return root;
}

function mutateOnce(r: Rng, root: unknown, dict: JsonDictionary): unknown {
  // Walk to a random node, remembering its parent to replace it.
  let parent: Record<string, unknown> | unknown[] | undefined;
  let key: string | number | undefined;
  let node = root;
  for (let d = 0; d < 6 && r.chance(0.7); d++) {
    if (Array.isArray(node) && node.length > 0) {
      parent = node;
      key = r.int(node.length);
      node = node[key];
    } else if (isObject(node) && Object.keys(node).length > 0) {
      parent = node;
      key = r.pick(Object.keys(node));
      node = node[key];
    } else break;
  }
  const replaced = editNode(r, node, dict);
  if (parent === undefined) return replaced;
  if (Array.isArray(parent)) parent[key as number] = replaced;
  else define(parent, key as string, replaced);
  return root;
}

function editNode(r: Rng, node: unknown, dict: JsonDictionary): unknown {
  const x = r.float();
  if (Array.isArray(node) && x < 0.5) {
    const y = r.float();
    if (y < 0.2 || node.length === 0) node.push(randomValue(r, dict));
    else if (y < 0.4) node.push(structuredClone(r.pick(node)));
    else if (y < 0.6) node.splice(r.int(node.length), 1);
    else if (y < 0.7) node.reverse();
    else if (y < 0.8) node.length = 0;
    else if (y < 0.9) {
      const e = r.pick(node);
      for (let i = r.range(2, 40); i > 0; i--) node.push(structuredClone(e));
    } else node.splice(r.int(node.length), 0, [r.pick(node)]);
    return node;
  }
  if (isObject(node) && x < 0.6) {
    const keys = Object.keys(node);
    const y = r.float();
    const newKey = () =>
      dict.keys && dict.keys.length > 0 && r.chance(0.7)
        ? r.pick(dict.keys)
        : randomString(r, { maxLength: 10 });
    if (y < 0.35 || keys.length === 0) define(node, newKey(), randomValue(r, dict));
    else if (y < 0.6) delete node[r.pick(keys)];
    else if (y < 0.75) {
      const k = r.pick(keys);
      const v = node[k];
      delete node[k];
      define(node, newKey(), v);
    } else if (y < 0.9) define(node, newKey(), structuredClone(node[r.pick(keys)]));
    else return { [newKey()]: node };
    return node;
  }
  const y = r.float();
  if (y < 0.35) return randomValue(r, dict);
  if (y < 0.5) return changeType(r, node);
  if (y < 0.6) return r.chance(0.5) ? [node] : { [r.pick(dict.keys ?? ["x"])]: node };
  if (typeof node === "string" && y < 0.85) return mutateText(r, node, [], 2);
  if (typeof node === "number" && y < 0.85) {
    return r.chance(0.5) ? randomNumber(r) : node + r.range(-2, 2);
  }
  return randomJson(r, { depth: 2, keys: dict.keys, values: dict.values });
}

function randomValue(r: Rng, dict: JsonDictionary): unknown {
  if (dict.values && dict.values.length > 0 && r.chance(0.6)) {
    return structuredClone(r.pick(dict.values));
  }
  return randomJson(r, { depth: 2, keys: dict.keys, values: dict.values });
}

function changeType(r: Rng, v: unknown): unknown {
  switch (r.int(7)) {
    case 0:
      return v === null || v === undefined
        ? ""
        : typeof v === "object"
        ? JSON.stringify(v)
        : String(v);
    case 1:
      return typeof v === "string" ? Number(v) : typeof v === "number" ? String(v) : 0;
    case 2:
      return null;
    case 3:
      return !v;
    case 4:
      return [];
    case 5:
      return {};
    default:
      return typeof v === "string" ? v.toUpperCase() : v;
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * Returns a text mutation of `text`: one to `rounds` edits — insert a token (from `tokens` or
 * {@link INTERESTING_STRINGS}), delete a span, replace a character with a random one (Unicode,
 * NUL, surrogates), duplicate a span, repeat a token many times, or truncate.
 *
 * @param r the case's generator
 * @param text the sample
 * @param tokens the target's syntax tokens, e.g. `["{", "\"name\"", ","]`
 * @param rounds most edits (default 6)
 * @returns the mutated text
 * @example mutateText(new Rng(1), "a=b;c=d", ["=", ";"]).length >= 0 // true
 */
export function mutateText(
  r: Rng,
  text: string,
  tokens: readonly string[] = [],
  rounds = 6,
): string {
  let s = text;
  const token =
    () => (tokens.length > 0 && r.chance(0.8) ? r.pick(tokens) : r.pick(INTERESTING_STRINGS));
  const n = 1 + r.int(rounds);
  for (let i = 0; i < n; i++) {
    const at = r.int(s.length + 1);
    const x = r.float();
    if (x < 0.35) s = s.slice(0, at) + token() + s.slice(at);
    else if (x < 0.6) s = s.slice(0, at) + s.slice(at + 1 + r.int(8));
    else if (x < 0.75) s = s.slice(0, at) + randomChar(r) + s.slice(at + 1);
    else if (x < 0.85) s = s.slice(0, at) + s.slice(at, at + 1 + r.int(20)) + s.slice(at);
    else if (x < 0.95) s = s.slice(0, at) + token().repeat(r.range(2, 50)) + s.slice(at);
    else s = s.slice(0, at);
  }
  return s;
}

/**
 * Returns a byte mutation of `bytes` (a copy): one to `rounds` edits — flip a bit, set a byte,
 * write a boundary value (0, 1, 3, 4, 15, 16, 0xff, 0xffff, the buffer length ± 1) as a u16 or u32
 * at a 2/4-aligned offset (where netlink keeps its length fields), insert or delete bytes,
 * duplicate a span, or truncate.
 *
 * @param r the case's generator
 * @param bytes the sample (e.g. an encoded netlink message)
 * @param rounds most edits (default 4)
 * @returns the mutated copy
 */
export function mutateBytes(r: Rng, bytes: Uint8Array, rounds = 4): Uint8Array {
  let b: Uint8Array = bytes.slice();
  const n = 1 + r.int(rounds);
  for (let i = 0; i < n; i++) {
    const x = r.float();
    if (b.length === 0) {
      b = Uint8Array.from({ length: r.int(24) }, () => r.int(256));
      continue;
    }
    const at = r.int(b.length);
    if (x < 0.2) b[at] ^= 1 << r.int(8);
    else if (x < 0.35) b[at] = r.int(256);
    else if (x < 0.65) {
      const values = [0, 1, 3, 4, 5, 8, 15, 16, 17, 20, 0x7f, 0x80, 0xff, 0x100, 0x7fff, 0xffff];
      const v = r.chance(0.7) ? r.pick(values) : b.length + r.range(-4, 4);
      const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
      if (r.chance(0.5)) {
        const off = at & ~1;
        if (off + 2 <= b.length) dv.setUint16(off, v & 0xffff, true);
      } else {
        const off = at & ~3;
        if (off + 4 <= b.length) dv.setUint32(off, v >>> 0, true);
      }
    } else if (x < 0.75) {
      const ins = Uint8Array.from({ length: 1 + r.int(8) }, () => r.int(256));
      b = concatBytes([b.subarray(0, at), ins, b.subarray(at)]);
    } else if (x < 0.85) b = concatBytes([b.subarray(0, at), b.subarray(at + 1 + r.int(8))]);
    else if (x < 0.93) {
      b = concatBytes([b.subarray(0, at), b.subarray(at, at + 1 + r.int(32)), b.subarray(at)]);
    } else b = b.slice(0, at);
  }
  return b;
}

/**
 * Concatenates byte arrays.
 * @param parts the arrays
 * @returns one new array
 * @example concatBytes([new Uint8Array([1]), new Uint8Array([2])]) // Uint8Array [1, 2]
 */
export function concatBytes(parts: readonly Uint8Array[]): Uint8Array<ArrayBuffer> {
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Uint8Array(n);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/**
 * A short, unambiguous rendering of any fuzz input for failure messages: strings and JSON with
 * `NaN`, `Infinity`, `-0`, `undefined` spelled out, byte arrays as hex, cut at `max` characters.
 *
 * @param v the input
 * @param max longest output (default 1500)
 * @returns the rendering
 * @example describeInput(new Uint8Array([1, 255])) // "<2 bytes> 01ff"
 */
export function describeInput(v: unknown, max = 1500): string {
  const seen = new WeakSet<object>();
  const go = (x: unknown): string => {
    if (x instanceof Uint8Array) {
      return `<${x.length} bytes> ${
        Array.from(x, (b) => b.toString(16).padStart(2, "0")).join("")
      }`;
    }
    if (typeof x === "number") return Object.is(x, -0) ? "-0" : String(x);
    if (typeof x === "string") return JSON.stringify(x);
    if (x === undefined) return "undefined";
    if (typeof x === "bigint") return `${x}n`;
    if (x === null || typeof x !== "object") return String(x);
    if (seen.has(x)) return "<cycle>";
    seen.add(x);
    if (Array.isArray(x)) return `[${x.map(go).join(",")}]`;
    return `{${Object.entries(x).map(([k, e]) => `${JSON.stringify(k)}:${go(e)}`).join(",")}}`;
  };
  const s = go(v);
  return s.length > max ? `${s.slice(0, max)}… (${s.length} characters)` : s;
}

// ---------------------------------------------------------------------------------- runner

/** Every CNI error code Manifold may produce (`CniErrorCode` values). */
export const CNI_CODES: readonly number[] = Object.values(CniErrorCode);

/**
 * A fuzz target: how to make an input, what to call, and what must hold.
 *
 * @typeParam I the input type
 * @typeParam O what `call` returns
 */
export interface FuzzTarget<I, O = unknown> {
  /** Short name used in messages and on the command line, e.g. `"selection"`. */
  readonly name: string;
  /** Makes one input from the case's generator (must be deterministic in `r`). */
  generate(r: Rng): I;
  /** Calls the code under test. */
  call(input: I): O;
  /**
   * The invariants of an accepted input; throw (e.g. `assert`) when one is broken. May call
   * more code (round trips); anything it throws is a failure.
   */
  check?(output: O, input: I): void;
  /**
   * The invariants of a rejected input (e.g. "a valid twin must not be rejected"); throw when
   * the rejection is wrong.
   */
  checkRejection?(error: unknown, input: I): void;
  /** CNI codes a rejection may carry (default {@link CNI_CODES}). */
  readonly codes?: readonly number[];
  /**
   * For targets whose typed errors are not `CniError` (netlink): the stats label of an
   * acceptable error, `undefined` for anything else. `CniError`s are still checked.
   */
  typedError?(error: unknown): string | undefined;
  /** Renders an input for a failure message (default {@link describeInput}). */
  show?(input: I): string;
}

/** Options of {@link fuzz}. */
export interface FuzzOptions {
  /** The run's seed (unsigned 32-bit). */
  seed: number;
  /** How many cases (default 1000). */
  runs?: number;
  /** Stop early after this many milliseconds (default: no limit). */
  timeBudgetMs?: number;
  /** A case slower than this fails (default 1000 ms). */
  maxCaseMs?: number;
  /** First case index (default 0); with `stride`, lets workers share one seed's cases. */
  first?: number;
  /** Distance between case indices (default 1). */
  stride?: number;
  /** Run only this case (replay); overrides `runs`, `first` and `stride`. */
  only?: number;
  /** Called before each case with its index (a watchdog's heartbeat); keep it cheap. */
  onCase?(index: number): void;
  /** Called every `progressEvery` cases with the running stats. */
  onProgress?(stats: FuzzStats): void;
  /** Cases between `onProgress` calls (default 10000). */
  progressEvery?: number;
}

/** What a run did. */
export interface FuzzStats {
  /** Target name. */
  target: string;
  /** The run's seed. */
  seed: number;
  /** Cases run. */
  cases: number;
  /** Cases whose call returned (and passed `check`). */
  accepted: number;
  /** Cases whose call threw an acceptable typed error. */
  rejected: number;
  /** Rejections by label: `"cni 7"` for CniError code 7, or the target's `typedError` label. */
  rejections: Record<string, number>;
  /** Slowest case in milliseconds (call and checks). */
  maxCaseMs: number;
  /** Index of the slowest case. */
  maxCaseIndex: number;
  /** Wall time of the run in milliseconds. */
  elapsedMs: number;
}

/** Stats of a run that has not run a case yet (`elapsedMs` as given). */
export function emptyFuzzStats(target: string, seed: number, elapsedMs = 0): FuzzStats {
  return {
    target,
    seed,
    cases: 0,
    accepted: 0,
    rejected: 0,
    rejections: {},
    maxCaseMs: 0,
    maxCaseIndex: -1,
    elapsedMs,
  };
}

/** A case broke the oracle: an untyped error, a broken property, or a case over the time limit. */
export class FuzzFailure extends Error {
  /** Target name. */
  readonly target: string;
  /** The run's seed. */
  readonly seed: number;
  /** The failing case's index: `FUZZ_SEED=<seed> FUZZ_CASE=<index>` replays it. */
  readonly index: number;
  /** The rendered (truncated) input. */
  readonly input: string;
  /** What went wrong, one line. */
  readonly reason: string;

  /**
   * @param target target name
   * @param seed the run's seed
   * @param index the failing case's index
   * @param details input rendering, reason and cause
   */
  constructor(
    target: string,
    seed: number,
    index: number,
    details: { input: string; reason: string; cause?: unknown },
  ) {
    const cause = details.cause instanceof Error
      ? `\n  error: ${details.cause.stack ?? details.cause.message}`
      : details.cause !== undefined
      ? `\n  error: ${String(details.cause)}`
      : "";
    super(
      `fuzz target "${target}" failed at case ${index} (seed ${seed}): ${details.reason}\n` +
        `  input: ${details.input}${cause}\n` +
        `  replay: FUZZ_SEED=${seed} FUZZ_CASE=${index} deno test -A tests/fuzz/fuzz_test.ts ` +
        `--filter "fuzz ${target}:"\n` +
        `     or: deno run -A scripts/fuzz.ts --target ${target} --seed ${seed} --case ${index}`,
      { cause: details.cause },
    );
    this.name = "FuzzFailure";
    this.target = target;
    this.seed = seed;
    this.index = index;
    this.input = details.input;
    this.reason = details.reason;
  }
}

/**
 * The stats label of an acceptable rejection, or why it is not acceptable.
 *
 * @param target the target (codes, typedError)
 * @param err what the call threw
 * @returns `{ label }` for a typed error, `{ problem }` otherwise
 */
export function classifyError(
  target: Pick<FuzzTarget<unknown>, "codes" | "typedError">,
  err: unknown,
): { label: string } | { problem: string } {
  if (err instanceof CniError) {
    const codes = target.codes ?? CNI_CODES;
    if (!codes.includes(err.code)) {
      return { problem: `CniError with code ${err.code}, expected one of ${codes.join(", ")}` };
    }
    if (typeof err.msg !== "string" || err.msg.trim() === "") {
      return { problem: "CniError with an empty msg" };
    }
    if (typeof err.details !== "string") return { problem: "CniError with non-string details" };
    return { label: `cni ${err.code}` };
  }
  const label = target.typedError?.(err);
  if (label !== undefined) return { label };
  const name = err instanceof Error ? err.name : typeof err;
  return { problem: `untyped ${name} escaped` };
}

/**
 * Runs `target` over `runs` cases (or one case with `only`) and returns what happened.
 * Each case: `generate` from a fresh {@link Rng} seeded with {@link caseSeed}, `call`, then
 * `check` (accepted) or the error oracle plus `checkRejection` (rejected). The case is timed
 * (call and checks) and fails over `maxCaseMs`.
 *
 * @param target the target
 * @param options seed, number of cases, time budget, hooks
 * @returns the run's stats
 * @throws {FuzzFailure} on the first failing case, naming seed and case index
 */
export function fuzz<I, O>(target: FuzzTarget<I, O>, options: FuzzOptions): FuzzStats {
  const seed = options.seed >>> 0;
  const maxCaseMs = options.maxCaseMs ?? 1000;
  const stride = options.only !== undefined ? 1 : options.stride ?? 1;
  const first = options.only ?? options.first ?? 0;
  const runs = options.only !== undefined ? 1 : options.runs ?? 1000;
  const budget = options.timeBudgetMs ?? Infinity;
  const progressEvery = options.progressEvery ?? 10000;
  const stats = emptyFuzzStats(target.name, seed);
  const show = (input: I) => {
    try {
      return target.show ? target.show(input) : describeInput(input);
    } catch {
      return describeInput(input);
    }
  };
  const start = performance.now();
  for (let k = 0; k < runs; k++) {
    const index = first + k * stride;
    options.onCase?.(index);
    const r = new Rng(caseSeed(seed, index));
    let input: I;
    try {
      input = target.generate(r);
    } catch (err) {
      throw new FuzzFailure(target.name, seed, index, {
        input: "(generator failed)",
        reason: "the input generator threw",
        cause: err,
      });
    }
    const fail = (reason: string, cause?: unknown): never => {
      throw new FuzzFailure(target.name, seed, index, { input: show(input), reason, cause });
    };
    const t0 = performance.now();
    let output: O;
    let threw = false;
    let error: unknown;
    try {
      output = target.call(input);
    } catch (err) {
      threw = true;
      error = err;
    }
    if (!threw) {
      try {
        target.check?.(output!, input);
      } catch (err) {
        fail(`property broken for an accepted input: ${firstLine(err)}`, err);
      }
      stats.accepted++;
    } else {
      const verdict = classifyError(target, error);
      if ("problem" in verdict) fail(verdict.problem, error);
      else {
        try {
          target.checkRejection?.(error, input);
        } catch (err) {
          fail(`property broken for a rejected input: ${firstLine(err)}`, err);
        }
        stats.rejected++;
        stats.rejections[verdict.label] = (stats.rejections[verdict.label] ?? 0) + 1;
      }
    }
    const dt = performance.now() - t0;
    if (dt > stats.maxCaseMs) {
      stats.maxCaseMs = dt;
      stats.maxCaseIndex = index;
    }
    if (dt > maxCaseMs) fail(`case took ${dt.toFixed(0)} ms, more than ${maxCaseMs} ms`);
    stats.cases++;
    if (options.onProgress && stats.cases % progressEvery === 0) {
      stats.elapsedMs = performance.now() - start;
      options.onProgress(stats);
    }
    if ((k & 63) === 63 && performance.now() - start > budget) break;
  }
  stats.elapsedMs = performance.now() - start;
  return stats;
}

function firstLine(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  const line = text.split("\n").find((l) => l.trim() !== "") ?? text;
  return line.length > 300 ? `${line.slice(0, 300)}…` : line;
}

/**
 * One-line summary of a run: cases, accepted, rejections by label, slowest case, throughput
 * and seed.
 *
 * @param s the stats
 * @returns e.g. `selection: 3000 cases, 1203 accepted, rejected {cni 7: 1797}, max 4.1 ms (#17), 25000 cases/s, seed 1`
 */
export function formatStats(s: FuzzStats): string {
  const rej = Object.entries(s.rejections).sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `${k}: ${v}`).join(", ");
  const rate = s.elapsedMs > 0 ? Math.round((s.cases * 1000) / s.elapsedMs) : 0;
  return `${s.target}: ${s.cases} cases, ${s.accepted} accepted, rejected {${rej}}, ` +
    `max ${s.maxCaseMs.toFixed(1)} ms (#${s.maxCaseIndex}), ${rate} cases/s, seed ${s.seed}`;
}

/** `FUZZ_SEED`, `FUZZ_RUNS` and `FUZZ_CASE` as read by {@link fuzzEnv}. */
export interface FuzzEnv {
  /** `FUZZ_SEED`: the run's seed. */
  seed?: number;
  /** `FUZZ_RUNS`: cases per target. */
  runs?: number;
  /** `FUZZ_CASE`: replay this case only. */
  only?: number;
}

/**
 * Reads `FUZZ_SEED`, `FUZZ_RUNS` and `FUZZ_CASE` when env access is already granted (no
 * prompt, nothing read under plain `deno test`).
 *
 * @returns the values that are set and valid
 * @throws {TypeError} when a variable is set but not a non-negative integer
 */
export function fuzzEnv(): FuzzEnv {
  const read = (variable: string): number | undefined => {
    try {
      if (Deno.permissions.querySync({ name: "env", variable }).state !== "granted") {
        return undefined;
      }
      const text = Deno.env.get(variable);
      if (text === undefined || text === "") return undefined;
      const n = Number(text);
      if (!Number.isSafeInteger(n) || n < 0) {
        throw new TypeError(`${variable}=${JSON.stringify(text)} is not a non-negative integer`);
      }
      return n;
    } catch (err) {
      if (err instanceof TypeError) throw err;
      return undefined;
    }
  };
  const out: FuzzEnv = {};
  const seed = read("FUZZ_SEED"), runs = read("FUZZ_RUNS"), only = read("FUZZ_CASE");
  if (seed !== undefined) out.seed = seed >>> 0;
  if (runs !== undefined) out.runs = runs;
  if (only !== undefined) out.only = only;
  return out;
}
