/**
 * Text helpers shared by every layer: an error as one message, a multi-line message on one
 * line, and untrusted text made safe for a terminal. Pure, no imports.
 *
 * @module
 */

/**
 * An error as one message: an `Error`'s short message (a `CniError`'s `msg`, CNI SPEC "Error",
 * else `message`), then its string `details` after `": "`, then its `cause`'s message after
 * `": "`; anything else as `String(e)`.
 *
 * @param e any thrown value
 * @param options `multiline`: details go on the following lines, indented by two spaces
 *   (reports for people), instead of after `": "`
 * @returns the message; may span lines when `details` does (see {@link oneLine})
 * @example
 * ```ts
 * errorText(new Error("connect failed", { cause: new Error("ECONNREFUSED") }));
 * // "connect failed: ECONNREFUSED"
 * ```
 */
export function errorText(e: unknown, options: { multiline?: boolean } = {}): string {
  if (!(e instanceof Error)) return String(e);
  const { msg, details } = e as { msg?: unknown; details?: unknown };
  const short = typeof msg === "string" ? msg : e.message;
  const text = typeof details !== "string" || details === ""
    ? short
    : options.multiline
    ? `${short}\n  ${details.replace(/\n/g, "\n  ")}`
    : `${short}: ${details}`;
  return e.cause instanceof Error ? `${text}: ${e.cause.message}` : text;
}

/**
 * A multi-line message on one line, for events, logs and table cells: a prettified zod error's
 * `"✖ problem\n  → at path"` pairs become `"✖ problem → at path"`, other line breaks (with the
 * spaces around them) become `"; "`.
 *
 * @param s any text
 * @returns the text without line breaks, trimmed
 * @example
 * ```ts
 * oneLine("✖ Invalid input\n  → at name\n✖ Too big"); // "✖ Invalid input → at name; ✖ Too big"
 * ```
 */
export function oneLine(s: string): string {
  return s.replace(/\s*\n\s*(?=→)/g, " ").replace(/\s*\n\s*/g, "; ").trim();
}

// deno-lint-ignore no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/g;
// deno-lint-ignore no-control-regex
const CONTROL_BUT_NEWLINE = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/g;

/**
 * Escapes C0/C1 control characters (U+0000–U+001F, U+007F–U+009F) as `\xNN`, so names and
 * messages from the kernel, a cache file or the API cannot drive a terminal.
 *
 * @param s untrusted text
 * @param options `keepNewlines`: leave `"\n"` as it is (multi-line reports)
 * @returns the text with every other control character escaped
 * @example
 * ```ts
 * printable("eth0\u001b[2J"); // "eth0\\x1b[2J"
 * ```
 */
export function printable(s: string, options: { keepNewlines?: boolean } = {}): string {
  return s.replace(
    options.keepNewlines ? CONTROL_BUT_NEWLINE : CONTROL,
    (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`,
  );
}
