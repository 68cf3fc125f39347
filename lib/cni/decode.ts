/**
 * Decoding untrusted JSON text with a zod schema at the edge (STYLE.md "Validation"),
 * with the CNI error the spec gives for it: code 6, "failed to decode content".
 *
 * @module
 */

import { z } from "zod";
import { CniError, CniErrorCode } from "./errors.ts";

/**
 * Parses `text` as JSON and validates it with `schema`.
 * @param text the raw text (a file, an annotation, a child's output).
 * @param schema the zod schema of the expected shape.
 * @param what names the content in errors, e.g. `"device-info"`, `"network-status annotation"`.
 * @returns the validated value.
 * @throws {CniError} code 6: `"<what> is not valid JSON"` (details: the parser's message) or
 *   `"<what> is invalid"` (details: the prettified zod issues).
 * @example
 * ```ts
 * decodeJson('{"a":1}', z.object({ a: z.number() }), "example"); // { a: 1 }
 * decodeJson("{", z.object({}), "example"); // throws CniError 6 "example is not valid JSON"
 * ```
 */
export function decodeJson<T>(text: string, schema: z.ZodType<T>, what: string): T {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new CniError(
      CniErrorCode.DecodingFailure,
      `${what} is not valid JSON`,
      e instanceof Error ? e.message : String(e),
    );
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    throw new CniError(
      CniErrorCode.DecodingFailure,
      `${what} is invalid`,
      z.prettifyError(parsed.error),
    );
  }
  return parsed.data;
}
