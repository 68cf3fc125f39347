/**
 * Redaction of secrets before anything is logged: bearer tokens, kubeconfig
 * contents, client keys and passwords found under well-known keys, at any depth.
 *
 * @module
 */

const SECRET_KEY =
  /^(token|bearer|password|passwd|secret|client-key-data|client-certificate-data|key|keyData|kubeconfig|authorization|privateKey|private-key)$/i;
const BEARER = /\b(Bearer)\s+[A-Za-z0-9._~+/=-]{8,}/g;
const JWT = /\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{5,}/g;

/** The text put where a secret was. */
export const REDACTED = "[redacted]";

/**
 * Returns a deep copy of `value` with secret-looking keys replaced by `"[redacted]"`
 * and bearer tokens / JWTs inside strings masked. Depth is capped at 32 levels.
 * @example redact({ token: "abc", a: { kubeconfig: "/etc/x" } }) // {token:"[redacted]",a:{kubeconfig:"[redacted]"}}
 */
export function redact(value: unknown, depth = 0): unknown {
  if (depth > 32) return "[too deep]";
  if (typeof value === "string") {
    return value.replace(BEARER, `$1 ${REDACTED}`).replace(JWT, REDACTED);
  }
  if (Array.isArray(value)) return value.map((v) => redact(v, depth + 1));
  if (value instanceof Error) {
    return redact({ name: value.name, message: value.message }, depth + 1);
  }
  if (value && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      out[k] = SECRET_KEY.test(k) && v !== undefined && v !== "" ? REDACTED : redact(v, depth + 1);
    }
    return out;
  }
  return value;
}
