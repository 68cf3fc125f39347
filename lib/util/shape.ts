/**
 * Fast shape checks: a few combinators that accept a conservative subset of what the
 * equivalent zod schema accepts and return the value zod would return (objects and arrays
 * copied the way zod copies them, known keys first), or throw {@link NOT_FAST} for anything
 * else. The per-call path (issue 30) checks its hot shapes with them and loads zod (≈ 72
 * modules, 460 KiB of source, 9–14 ms) only when a check throws `NOT_FAST`: zod then accepts
 * the input or reports it with its own words, so errors read exactly as before. Each use has a
 * fuzz target (tests/fuzz/fast_checks.ts, fast_checks_api.ts) asserting: whenever the fast check accepts, zod
 * accepts with a deep-equal value.
 *
 * Conservative on purpose: an object with an own `__proto__` key (zod's copy would change its
 * prototype or drop the key), a non-finite or unsafe number, a format the check does not know
 * — all go to zod.
 *
 * @module
 */

/** Thrown by a fast check that does not accept its input: "ask zod", not "invalid". */
export const NOT_FAST: unique symbol = Symbol("not accepted by the fast check");

/** A fast check: returns the value as zod would, or throws {@link NOT_FAST}. */
export type Shape<T> = (value: unknown) => T;

/** A key of a {@link loose} object: its check, and whether it may be absent (`undefined`). */
export type Field = Shape<unknown> | { optional: Shape<unknown> };

/** Throws {@link NOT_FAST}. */
function no(): never {
  throw NOT_FAST;
}

/** A JSON object without an own `__proto__` key. */
function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v) &&
    Object.getPrototypeOf(v) === Object.prototype && !Object.hasOwn(v, "__proto__");
}

/** `z.string()`. */
export const str: Shape<string> = (v): string => typeof v === "string" ? v : no();
/** `z.boolean()`. */
export const bool: Shape<boolean> = (v): boolean => typeof v === "boolean" ? v : no();
/** `z.number()` (finite). */
export const num: Shape<number> = (v): number =>
  typeof v === "number" && Number.isFinite(v) ? v : no();
/** `z.unknown()`: any value, by reference. */
export const unknown: Shape<unknown> = (v): unknown => v;

/**
 * `z.number().int()` with an optional lower bound (`.min(min)` / `.nonnegative()`).
 * @param min the smallest value accepted (default: none).
 * @returns the check.
 */
export function int(min = -Infinity): Shape<number> {
  return (v) => Number.isSafeInteger(v) && (v as number) >= min ? v as number : no();
}

/**
 * `z.string().regex(re)`.
 * @param re the pattern.
 * @returns the check.
 */
export function matching(re: RegExp): Shape<string> {
  return (v) => typeof v === "string" && re.test(v) ? v : no();
}

/**
 * `z.literal(x)` / `z.enum([...])`: one of the given primitives.
 * @param values the values accepted.
 * @returns the check.
 */
export function oneOf<T extends string | number | boolean>(...values: T[]): Shape<T> {
  return (v) => values.includes(v as T) ? v as T : no();
}

/**
 * `schema.nullish()`: `null` and `undefined` pass as they are.
 * @param shape the check of other values.
 * @returns the check.
 */
export function nullish<T>(shape: Shape<T>): Shape<T | null | undefined> {
  return (v) => v === null || v === undefined ? v : shape(v);
}

/**
 * `z.array(schema)`: a new array of the checked elements.
 * @param shape the check of each element.
 * @returns the check.
 */
export function array<T>(shape: Shape<T>): Shape<T[]> {
  return (v) => Array.isArray(v) ? v.map((e) => shape(e)) : no();
}

/**
 * `z.tuple([a, b, …])` without a rest: an array of exactly that many checked elements.
 * @param shapes the check of each position.
 * @returns the check.
 */
export function tuple<T extends unknown[]>(...shapes: { [K in keyof T]: Shape<T[K]> }): Shape<T> {
  return (v) =>
    Array.isArray(v) && v.length === shapes.length ? v.map((e, i) => shapes[i](e)) as T : no();
}

/**
 * `z.record(z.string(), schema)`: a new object with every own key, values checked.
 * @param shape the check of each value.
 * @returns the check.
 */
export function record<T>(shape: Shape<T>): Shape<Record<string, T>> {
  return (v) => {
    if (!isObject(v)) no();
    const out: Record<string, T> = {};
    for (const k of Object.keys(v)) out[k] = shape(v[k]);
    return out;
  };
}

/**
 * `z.looseObject({...})`: a new object with the known keys first (in `fields` order, absent
 * optional ones left out), then every other key as it is.
 * @param fields the known keys and their checks (`{ optional: check }` for `.optional()`).
 * @returns the check.
 */
export function loose(fields: Record<string, Field>): Shape<Record<string, unknown>> {
  const entries = Object.entries(fields).map(([k, f]) =>
    [k, typeof f === "function" ? f : f.optional, typeof f !== "function"] as const
  );
  return (v) => {
    if (!isObject(v)) no();
    const out: Record<string, unknown> = {};
    for (const [k, check, optional] of entries) {
      const value = v[k];
      if (value === undefined && optional) {
        if (k in v) out[k] = undefined;
        continue;
      }
      const checked = check(value);
      if (checked !== undefined || k in v) out[k] = checked;
    }
    for (const k in v) if (!Object.hasOwn(fields, k)) out[k] = v[k];
    return out;
  };
}

/** A dotted-quad IPv4 address without leading zeros (what zod's `z.ipv4()` accepts). */
function isIpv4(s: string): boolean {
  const parts = s.split(".");
  return parts.length === 4 &&
    parts.every((p) => /^(0|[1-9][0-9]{0,2})$/.test(p) && Number(p) <= 255);
}

/**
 * An IPv6 address of 8 hex groups, or with one `::` and at most 7 groups around it — a subset
 * of what zod's `z.ipv6()` and `z.cidrv6()` accept (no embedded IPv4, no zone).
 */
function isPlainIpv6(s: string): boolean {
  const groups = (t: string) => t === "" ? [] : t.split(":");
  const hex = (g: string) => /^[0-9a-fA-F]{1,4}$/.test(g);
  const halves = s.split("::");
  if (halves.length === 1) {
    const g = groups(s);
    return g.length === 8 && g.every(hex);
  }
  if (halves.length !== 2) return false;
  const [head, tail] = halves.map(groups);
  return head.length + tail.length <= 7 && [...head, ...tail].every(hex);
}

/** A prefix length written without leading zeros, at most `max`. */
function isPrefix(p: string, max: number): boolean {
  return /^(0|[1-9][0-9]{0,2})$/.test(p) && Number(p) <= max;
}

/** `z.union([z.ipv4(), z.ipv6()])`, conservatively (no embedded IPv4, no zone). */
export const ipAddress: Shape<string> = (v): string =>
  typeof v === "string" && (isIpv4(v) || isPlainIpv6(v)) ? v : no();

/** `z.union([z.cidrv4(), z.cidrv6()])`, conservatively. */
export const ipPrefix: Shape<string> = (v): string => {
  if (typeof v !== "string") no();
  const [addr, prefix, extra] = v.split("/");
  if (extra !== undefined || prefix === undefined) no();
  if (isIpv4(addr) && isPrefix(prefix, 32)) return v;
  if (isPlainIpv6(addr) && isPrefix(prefix, 128)) return v;
  return no();
};

/**
 * `z.strictObject({...})`: like {@link loose}, but any other key sends the input to zod.
 * @param fields the keys and their checks (`{ optional: check }` for `.optional()`).
 * @returns the check.
 */
export function strict(fields: Record<string, Field>): Shape<Record<string, unknown>> {
  const check = loose(fields);
  return (v) => {
    if (isObject(v) && Object.keys(v).some((k) => !Object.hasOwn(fields, k))) no();
    return check(v);
  };
}

/**
 * Runs a fast check.
 * @param shape the check.
 * @param value the input.
 * @returns the checked value, or `undefined` when the check does not accept it (ask zod).
 * @example
 * ```ts
 * fastCheck(loose({ name: str }), { name: "n", x: 1 }); // { name: "n", x: 1 }
 * fastCheck(loose({ name: str }), { name: 1 }); // undefined
 * ```
 */
export function fastCheck<T>(shape: Shape<T>, value: unknown): T | undefined {
  try {
    return shape(value);
  } catch (e) {
    if (e === NOT_FAST) return undefined;
    throw e;
  }
}
