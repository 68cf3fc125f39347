/**
 * Tells a cut-off JSON document (a write that did not reach the disk whole) from text that
 * never was JSON, so a damaged cache record is reported as "truncated" or "unparsable"
 * (`lib/multinet/cache/record.ts`).
 *
 * @module
 */

/** Thrown inside {@link isJsonPrefix} when the input ends before the value does. */
const END = Symbol("end of input");

/**
 * True when `text` is the beginning of some valid JSON document (a cut-off write), false when
 * it contains a character no JSON document could have there (RFC 8259 grammar; nesting
 * deeper than 512 counts as invalid). Meant for text `JSON.parse` rejected: a complete
 * document followed by more text (trailing garbage) gives false.
 *
 * @param text the file's text, trailing NULs already removed
 * @returns true for a proper prefix of a JSON document
 * @example
 * ```ts
 * isJsonPrefix('{"a": [1, 2'); // true
 * isJsonPrefix('{"a": x');     // false
 * ```
 */
export function isJsonPrefix(text: string): boolean {
  let i = 0;
  const peek = (): string => {
    while (i < text.length && " \t\n\r".includes(text[i])) i++;
    if (i >= text.length) throw END;
    return text[i];
  };
  const fail = (): never => {
    throw new SyntaxError("invalid");
  };
  const literal = (word: string) => {
    for (const ch of word) {
      if (i >= text.length) throw END;
      if (text[i++] !== ch) fail();
    }
  };
  const string = () => {
    i++; // opening quote
    for (;;) {
      if (i >= text.length) throw END;
      const ch = text[i++];
      if (ch === '"') return;
      if (ch < " ") fail();
      if (ch === "\\") {
        if (i >= text.length) throw END;
        const esc = text[i++];
        if (esc === "u") {
          for (let k = 0; k < 4; k++) {
            if (i >= text.length) throw END;
            if (!/[0-9a-fA-F]/.test(text[i++])) fail();
          }
        } else if (!'"\\/bfnrt'.includes(esc)) fail();
      }
    }
  };
  const digit = () => i < text.length && text[i] >= "0" && text[i] <= "9";
  const digits = () => {
    if (i >= text.length) throw END;
    if (!digit()) fail();
    while (digit()) i++;
  };
  const number = () => {
    if (text[i] === "-") i++;
    if (i >= text.length) throw END;
    if (text[i] === "0") i++;
    else digits();
    if (text[i] === ".") {
      i++;
      digits();
    }
    if (text[i] === "e" || text[i] === "E") {
      i++;
      if (text[i] === "+" || text[i] === "-") i++;
      digits();
    }
  };
  const value = (depth: number): void => {
    if (depth > 512) fail();
    const ch = peek();
    if (ch === "{") {
      i++;
      if (peek() === "}") return void i++;
      for (;;) {
        if (peek() !== '"') fail();
        string();
        if (peek() !== ":") fail();
        i++;
        value(depth + 1);
        const next = peek();
        i++;
        if (next === "}") return;
        if (next !== ",") fail();
      }
    }
    if (ch === "[") {
      i++;
      if (peek() === "]") return void i++;
      for (;;) {
        value(depth + 1);
        const next = peek();
        i++;
        if (next === "]") return;
        if (next !== ",") fail();
      }
    }
    if (ch === '"') return string();
    if (ch === "t") return literal("true");
    if (ch === "f") return literal("false");
    if (ch === "n") return literal("null");
    if (ch === "-" || (ch >= "0" && ch <= "9")) return number();
    fail();
  };
  try {
    value(0);
    return false; // complete value, yet JSON.parse failed: trailing garbage
  } catch (err) {
    return err === END;
  }
}
