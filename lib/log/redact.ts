/**
 * Redaction of secrets before anything is logged: bearer tokens, kubeconfig contents,
 * client keys and passwords, found under well-known keys at any depth and inside text
 * (JSON or YAML embedded in a string, `Authorization` headers, JWTs, PEM private keys).
 *
 * @module
 */

/** The text put where a secret was. */
export const REDACTED = "[redacted]";

/** Keys (lower-case, without `-`, `_`, `.`) whose value is always a secret. */
const SECRET_KEYS = new Set([
  "token",
  "bearer",
  "password",
  "passwd",
  "pwd",
  "secret",
  "key",
  "keydata",
  "kubeconfig",
  "authorization",
  "proxyauthorization",
  "auth",
  "cookie",
  "setcookie",
  "credential",
  "credentials",
  "clientkey",
  "clientkeydata",
  "clientcertificatedata",
  "tlskey",
  "privatekey",
  "apikey",
]);

/** Key endings that mark a secret: `accessToken`, `id-token`, `client_secret`, `ssh.privateKey`, … */
const SECRET_SUFFIXES = [
  "token",
  "password",
  "passwd",
  "secret",
  "privatekey",
  "keydata",
  "apikey",
  "credentials",
];

/**
 * True when a key names a secret: compared case-insensitively with `-`, `_` and `.`
 * ignored, it is one of the known secret keys (`token`, `password`, `key`,
 * `client-key-data`, `kubeconfig`, `authorization`, …), ends like one (`accessToken`,
 * `id-token`, `client_secret`, `sshPrivateKey`), or starts with `kubeconfig`. Paths
 * such as `tokenFile` are not secrets.
 *
 * @param key an object key.
 * @returns whether its value must be redacted.
 * @example
 * ```ts
 * isSecretKey("client-key-data"); // true
 * isSecretKey("refresh_token"); // true
 * isSecretKey("tokenFile"); // false
 * ```
 */
export function isSecretKey(key: string): boolean {
  const k = key.toLowerCase().replace(/[-_.\s]/g, "");
  if (k === "") return false;
  if (SECRET_KEYS.has(k) || k.startsWith("kubeconfig")) return true;
  return SECRET_SUFFIXES.some((s) => k.endsWith(s));
}

const BEARER = /\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{8,}/gi;
const JWT = /\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{5,}/g;
/** A PEM private key block (any kind), or its start up to the end of the text when cut. */
const PEM_PRIVATE_KEY =
  /-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|$)/g;
/**
 * The start of a `"key": "value"` member of JSON inside a string, also of JSON escaped once
 * or more inside JSON (`\"key\": \"value\"`, up to 6 levels = 63 backslashes): group 1 =
 * the backslashes before each quote (a whole run: linear time on any input), group 2 = the
 * key; the match ends where the string value starts.
 */
const JSON_STRING_MEMBER = /(?<!\\)(\\{0,63})"([A-Za-z0-9_.\-]{1,64})\1"\s*:\s*\1"/g;
/** `key: value` at the start of a line (YAML, e.g. kubeconfig content in a string). */
const YAML_MEMBER = /(^|\n)([ \t-]*)([A-Za-z0-9_.\-]{1,64})([ \t]*:[ \t]+)([^\n]+)/g;
/** `key=value` in an argument list (`CNI_ARGS`, query strings). */
const ASSIGNMENT = /(^|[;&,\s])([A-Za-z0-9_.\-]{1,64})=([^;&,\s]+)/g;

/**
 * Masks secrets inside free text: `Bearer`/`Basic` credentials, JWTs, PEM private key
 * blocks, and the values of secret keys ({@link isSecretKey}) written as JSON string
 * members (also escaped JSON inside JSON), YAML lines or `key=value` pairs.
 *
 * @param text any string about to be logged.
 * @returns the text with every secret replaced by {@link REDACTED}.
 * @example
 * ```ts
 * redactText('config {"password":"hunter2"}'); // 'config {"password":"[redacted]"}'
 * redactText("got Bearer abcdefgh12"); // "got Bearer [redacted]"
 * ```
 */
export function redactText(text: string): string {
  let out = text;
  if (out.includes("-----BEGIN")) out = out.replace(PEM_PRIVATE_KEY, REDACTED);
  out = out.replace(BEARER, `$1 ${REDACTED}`).replace(JWT, REDACTED);
  if (out.includes('"')) out = redactJsonMembers(out);
  if (out.includes(":")) {
    out = out.replace(
      YAML_MEMBER,
      (all, start: string, indent: string, key: string, colon: string, value: string) =>
        isSecretKey(key) && value !== REDACTED && value !== `"${REDACTED}"`
          ? `${start}${indent}${key}${colon}${REDACTED}`
          : all,
    );
  }
  if (out.includes("=")) {
    out = out.replace(
      ASSIGNMENT,
      (all, start: string, key: string) => isSecretKey(key) ? `${start}${key}=${REDACTED}` : all,
    );
  }
  return out;
}

/** Replaces the string values of secret keys in JSON embedded (maybe escaped) in `text`. */
function redactJsonMembers(text: string): string {
  const re = new RegExp(JSON_STRING_MEMBER.source, "g");
  let out = "";
  let copied = 0;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    const start = m.index + m[0].length;
    if (!isSecretKey(m[2])) {
      // Rescan from the value's opening quote: the value may itself hold escaped JSON.
      re.lastIndex = start - 1;
      continue;
    }
    const end = closingQuote(text, start, m[1].length);
    out += text.slice(copied, start) + REDACTED;
    copied = end; // the closing quote (and its backslashes) is kept; the end when cut
    re.lastIndex = end;
  }
  return out + text.slice(copied);
}

/**
 * Where the JSON string value starting at `start` ends, for JSON escaped `level` times
 * (`level` backslashes before each structural quote; a quote inside the value has more):
 * the index of the backslashes before its closing quote, or `text.length` when cut.
 */
function closingQuote(text: string, start: number, level: number): number {
  for (let i = start; i < text.length; i++) {
    if (level === 0) {
      if (text[i] === "\\") i++;
      else if (text[i] === '"') return i;
      continue;
    }
    if (text[i] !== '"') continue;
    let run = 0;
    while (i - 1 - run >= start && text[i - 1 - run] === "\\") run++;
    if (run === level) return i - level;
  }
  return text.length;
}

/**
 * Returns a deep copy of `value` fit for a log line: the value of every secret key
 * ({@link isSecretKey}; empty values kept) becomes `"[redacted]"`, and every string goes
 * through {@link redactText}. Errors become `{name, message}`. Depth is capped at 32
 * levels (`"[too deep]"` below).
 *
 * @param value anything about to be logged.
 * @param depth the current depth (internal; leave out).
 * @returns a JSON-friendly copy without secrets.
 * @example
 * ```ts
 * redact({ token: "abc", a: { kubeconfig: "/etc/x" } });
 * // { token: "[redacted]", a: { kubeconfig: "[redacted]" } }
 * ```
 */
export function redact(value: unknown, depth = 0): unknown {
  if (depth > 32) return "[too deep]";
  if (typeof value === "string") return redactText(value);
  if (Array.isArray(value)) return value.map((v) => redact(v, depth + 1));
  if (value instanceof Error) {
    return redact({ name: value.name, message: value.message }, depth + 1);
  }
  if (value && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      const secret = isSecretKey(k) && v !== undefined && v !== null && v !== "";
      // defineProperty: a "__proto__" key stays a plain key of the copy.
      Object.defineProperty(out, k, {
        value: secret ? REDACTED : redact(v, depth + 1),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    return out;
  }
  return value;
}
