/**
 * Decoding untrusted JSON text with a zod schema at the edge (parse, then use: nothing
 * reads a field the schema did not check),
 * with the CNI error the spec gives for it: code 6, "failed to decode content"; and
 * the one nesting-depth limit every untrusted JSON document Manifold parses goes
 * through ({@link checkJsonDepth}: stdin config, the selection annotation, NAD
 * `spec.config`, delegate results, and everything {@link decodeJson} reads).
 *
 * Why a depth limit: `JSON.parse` itself is not the risk (V8's parser is iterative; it
 * parsed 200 000 nested arrays in 400 KB without trouble), but Manifold's recursive
 * steps are: `structuredClone` of a delegate config or result, `JSON.stringify`, zod and
 * the result converters hit "Maximum call stack size exceeded" at about 2 160 levels
 * (measured through the real plugin, Deno 2.9.6), surfacing as code 6 "not plain JSON
 * data" or, for a delegate result, code 999 after the attachment was made. Real CNI
 * documents are shallow (a conflist with IPAM ranges and a prevResult is under 12
 * levels), so {@link MAX_JSON_DEPTH} = 64 leaves room and stops the input long before
 * any walker can fail.
 *
 * @module
 */

import { CniError, CniErrorCode, type CniErrorCodeValue } from "./errors.ts";
import { errorText } from "../util/text.ts";

/**
 * Deepest nesting of arrays and objects accepted in untrusted JSON: 64 levels (`{}` and
 * `[]` are 1 level, `{"a":[1]}` 2). Manifold's limit, not the spec's.
 */
export const MAX_JSON_DEPTH = 64;

/** Whether {@link oneShotValidation} was called in this process. */
let oneShot = false;
/** zod's namespace, once a module that imports zod registered it ({@link tuneZod}). */
let zod: ZodConfigurable | undefined;

/** What {@link tuneZod} needs of zod's namespace: its `config`. */
export interface ZodConfigurable {
  /**
   * Sets zod's process-wide configuration.
   * @param config the keys to set; `jitless: true` turns off zod's compiled object parsers.
   * @returns zod's configuration.
   */
  config(config: { jitless?: boolean }): unknown;
}

/**
 * Tunes zod for a process that validates each schema about once — the plugin process of one
 * CNI call, not the daemon. zod 4 compiles every object schema into a parser with
 * `new Function` at its first parse (its "JIT"), which pays off only over many parses; turned
 * off, a plugin ADD or DEL is ≈ 4–6 ms faster (A/B of 24 paired calls, p50, runtime and mirror
 * modes). This module does not load zod (the hot path often never does, issue 30): the
 * setting reaches zod when it is loaded ({@link tuneZod}, called by the modules that import
 * it), or at once if it already is. zod reads it when it builds each object schema, and every
 * schema is built on first use. Process-wide and permanent.
 */
export function oneShotValidation(): void {
  oneShot = true;
  zod?.config({ jitless: true });
}

/**
 * Registers zod's namespace: every lib/ module that imports zod calls it at load, so that
 * {@link oneShotValidation} reaches zod whether it is loaded before or after that call.
 * @param z zod's namespace (`import { z } from "zod"`).
 * @example
 * ```ts
 * import { z } from "zod";
 * tuneZod(z);
 * ```
 */
export function tuneZod(z: ZodConfigurable): void {
  zod = z;
  if (oneShot) z.config({ jitless: true });
}

/** One zod issue as {@link zodDetails} reads it. */
interface IssueLike {
  message: string;
  path?: readonly PropertyKey[];
}

/**
 * One shape problem as zod reports it, built by the hand-written checks that stand in for a
 * zod schema on the per-call path (lib/cni/netconf_checks.ts, lib/k8s/types.ts,
 * lib/multinet/config_shape.ts); {@link zodDetails} prints a list of them.
 */
export interface ShapeIssue {
  /** zod 4's English message, e.g. `Invalid input: expected string, received number`. */
  message: string;
  /** Keys and indexes from the document's root to the value. */
  path: (string | number)[];
}

/**
 * How zod 4's English messages name a value's type (the `received …` of its invalid_type
 * issue), so hand-written checks print zod's exact text.
 * @param v any decoded JSON value.
 * @returns `array`, `null`, `NaN`, or `typeof v`.
 * @example
 * ```ts
 * zodReceived([1]); // "array"
 * ```
 */
export function zodReceived(v: unknown): string {
  if (Array.isArray(v)) return "array";
  if (v === null) return "null";
  if (typeof v === "number" && Number.isNaN(v)) return "NaN";
  return typeof v;
}

/**
 * zod's `prettifyError` text of a zod error, without loading zod: one `✖ <message>` line per
 * issue (fewest path segments first), each followed by `  → at <path>` when it has a path
 * (`a.b[0]["x-y"]`).
 * @param error a zod error (anything with `issues`).
 * @returns the text; `""` when `error` has no issues.
 * @example
 * ```ts
 * zodDetails({ issues: [{ message: "Invalid input", path: ["ips", 0, "address"] }] });
 * // "✖ Invalid input\n  → at ips[0].address"
 * ```
 */
export function zodDetails(error: unknown): string {
  const issues = [...((error as { issues?: IssueLike[] }).issues ?? [])]
    .sort((a, b) => (a.path?.length ?? 0) - (b.path?.length ?? 0));
  const lines: string[] = [];
  for (const issue of issues) {
    lines.push(`✖ ${issue.message}`);
    if (issue.path?.length) lines.push(`  → at ${pathText(issue.path)}`);
  }
  return lines.join("\n");
}

/** A zod issue path as zod prints it: `.key`, `[0]`, `["odd key"]`. */
function pathText(path: readonly PropertyKey[]): string {
  let out = "";
  for (const seg of path) {
    if (typeof seg === "number") out += `[${seg}]`;
    else if (typeof seg === "symbol") out += `[${JSON.stringify(String(seg))}]`;
    else if (/[^\w$]/.test(seg)) out += `[${JSON.stringify(seg)}]`;
    else out += out === "" ? seg : `.${seg}`;
  }
  return out;
}

/**
 * Measures how deeply arrays and objects nest in a decoded JSON value: 0 for a scalar
 * (string, number, boolean, null), 1 for `{}` or `[]`, one more per level inside. The
 * walk uses an explicit stack, never recursion, so any depth is measured safely; it
 * stops as soon as the depth exceeds `stopAfter` and returns that first depth over it
 * (a value with a reference cycle, which `JSON.parse` never builds, is measured only up
 * to there).
 *
 * @param value a decoded JSON value (plain objects, arrays and scalars).
 * @param stopAfter stop once the depth exceeds this many levels; default unbounded.
 * @returns the nesting depth in levels, or `stopAfter + 1` when it is larger.
 * @example
 * ```ts
 * jsonDepth("x"); // 0
 * jsonDepth({ a: [1, { b: {} }] }); // 4
 * jsonDepth(JSON.parse("[".repeat(100) + "]".repeat(100)), 64); // 65
 * ```
 */
export function jsonDepth(value: unknown, stopAfter = Infinity): number {
  if (value === null || typeof value !== "object") return 0;
  let max = 0;
  const stack: [object, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!;
    if (depth > max) {
      max = depth;
      if (max > stopAfter) return max;
    }
    const children = Array.isArray(node) ? node : Object.values(node);
    for (const child of children) {
      if (child !== null && typeof child === "object") stack.push([child, depth + 1]);
    }
  }
  return max;
}

/** Options of {@link checkJsonDepth}. */
export interface JsonDepthOptions {
  /** Largest accepted depth in levels; default {@link MAX_JSON_DEPTH} (64). */
  maxDepth?: number;
  /**
   * CNI error code when the limit is exceeded; default 7 (invalid network config, for
   * configs and annotations). Use 6 (decoding failure) for content such as a delegate's
   * result.
   */
  code?: CniErrorCodeValue;
}

/**
 * Refuses a decoded JSON value nested deeper than the limit (see the module doc for why).
 * Call it right after `JSON.parse` of untrusted text, before anything walks the value.
 *
 * @param value the decoded JSON value.
 * @param what names the content and where it came from, e.g. `"network config on stdin"`,
 *   `"network selection annotation"`, `'spec.config of network attachment definition "ns/n"'`,
 *   `"result of plugin bridge"`.
 * @param opts the limit (default 64 levels) and the error code (default 7).
 * @throws {CniError} `opts.code` (7 by default, or 6): `"<what> is nested more than 64
 *   levels deep (limit 64)"`, details giving the limit and the rule.
 * @example
 * ```ts
 * checkJsonDepth({ a: [1] }, "network config on stdin"); // ok
 * checkJsonDepth(JSON.parse("[".repeat(65) + "]".repeat(65)), "network config on stdin");
 * // throws CniError 7 "network config on stdin is nested more than 64 levels deep (limit 64)"
 * ```
 */
export function checkJsonDepth(value: unknown, what: string, opts: JsonDepthOptions = {}): void {
  const max = opts.maxDepth ?? MAX_JSON_DEPTH;
  if (jsonDepth(value, max) <= max) return;
  throw new CniError(
    opts.code ?? CniErrorCode.InvalidNetworkConfig,
    `${what} is nested more than ${max} levels deep (limit ${max})`,
    `Manifold accepts at most ${max} levels of nested JSON arrays and objects in untrusted input`,
  );
}

/**
 * What {@link decodeJson} needs of a schema: zod's `safeParse` (every zod schema is one).
 * Kept structural so the public surface names no zod type.
 */
export interface SafeParser<T> {
  /**
   * Validates `value`.
   * @param value decoded JSON.
   * @returns `{success: true, data}` or `{success: false, error}` (a zod error).
   */
  safeParse(value: unknown): { success: true; data: T } | { success: false; error: unknown };
}

/**
 * Parses `text` as JSON and validates it with `schema`; the value must not nest deeper
 * than {@link MAX_JSON_DEPTH} levels.
 * @param text the raw text (a file, an annotation, a child's output).
 * @param schema the zod schema of the expected shape.
 * @param what names the content in errors, e.g. `"device-info"`, `"network-status annotation"`.
 * @returns the validated value.
 * @throws {CniError} code 6: `"<what> is not valid JSON"` (details: the parser's message),
 *   `"<what> is nested more than 64 levels deep (limit 64)"`, or `"<what> is invalid"`
 *   (details: the prettified zod issues).
 * @example
 * ```ts
 * decodeJson('{"a":1}', z.object({ a: z.number() }), "example"); // { a: 1 }
 * decodeJson("{", z.object({}), "example"); // throws CniError 6 "example is not valid JSON"
 * ```
 */
export function decodeJson<T>(text: string, schema: SafeParser<T>, what: string): T {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new CniError(
      CniErrorCode.DecodingFailure,
      `${what} is not valid JSON`,
      errorText(e),
    );
  }
  checkJsonDepth(raw, what, { code: CniErrorCode.DecodingFailure });
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    throw new CniError(
      CniErrorCode.DecodingFailure,
      `${what} is invalid`,
      zodDetails(parsed.error),
    );
  }
  return parsed.data;
}
