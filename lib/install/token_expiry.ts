/**
 * When a mounted service-account token is due, read from its own claims without verifying
 * it (only the API server can): the installer warns when the token it mirrors for the plugin
 * is past that time, which means kubelet stopped replacing it (the ServiceAccount was deleted,
 * or kubelet cannot reach the API server) and the plugin's API calls are being refused.
 *
 * A projected token is a JWT (RFC 7519) whose payload carries `iat` and `exp`; when the API
 * server extended its lifetime (`--service-account-extend-token-expiration`, on by default: a
 * 3607 s pod-bound request — kubelet's default — is signed for a year) the payload's
 * `kubernetes.io.warnafter` is the lifetime kubelet asked for, which is also the TokenRequest's
 * `status.expirationTimestamp` that kubelet rotates against: it requests a new token once
 * `now > expirationTimestamp − 20 % of expirationSeconds − jitter (≤ 10 s)`, or the token is
 * 24 h old, and keeps serving the old one while refreshing fails until it expires
 * (kubernetes pkg/kubelet/token/token_manager.go `requiresRefresh`; the claims:
 * pkg/serviceaccount/claims.go `privateClaims.WarnAfter`). tests/realapi/token_rotation_test.ts
 * checks both cases against the real API server.
 *
 * @module
 */

import { z } from "zod";

/** The payload claims read here; everything else is ignored. NumericDate: seconds since epoch. */
const Claims = z.looseObject({
  iat: z.number().optional(),
  exp: z.number(),
  "kubernetes.io": z.looseObject({ warnafter: z.number().optional() }).optional(),
});

/** When a token is due, from {@link tokenDue}. */
export interface TokenDue {
  /** When kubelet's lifetime for the token ends (`warnafter` when present, else `exp`). */
  due: Date;
  /** Which claim gave {@link TokenDue.due}. */
  claim: "warnafter" | "exp";
  /** `exp`: when the API server stops accepting it (for an extended token, a year on). */
  expires: Date;
  /** `iat` (issued at), when present. */
  issuedAt?: Date;
}

/**
 * Reads when a service-account token is due from its JWT payload (not verified).
 *
 * @param token the token text (surrounding white space ignored)
 * @returns the due time, or undefined when the token is not a JWT with a numeric `exp`
 *   (an opaque token: nothing can be said, so nothing is claimed)
 * @example
 * ```ts
 * tokenDue("e30.eyJleHAiOjE3MDAwMDAwMDB9.x")?.due.toISOString(); // "2023-11-14T22:13:20.000Z"
 * ```
 */
export function tokenDue(token: string): TokenDue | undefined {
  const parts = token.trim().split(".");
  if (parts.length !== 3) return undefined;
  let payload: unknown;
  try {
    payload = JSON.parse(new TextDecoder().decode(base64UrlDecode(parts[1])));
  } catch {
    return undefined;
  }
  const parsed = Claims.safeParse(payload);
  if (!parsed.success) return undefined;
  const { iat, exp } = parsed.data;
  const warnafter = parsed.data["kubernetes.io"]?.warnafter;
  const issuedAt = iat === undefined ? undefined : new Date(iat * 1000);
  const expires = new Date(exp * 1000);
  return warnafter !== undefined
    ? { due: new Date(warnafter * 1000), claim: "warnafter", expires, issuedAt }
    : { due: expires, claim: "exp", expires, issuedAt };
}

/** base64url (RFC 4648 §5) without padding to bytes. @throws {Error} on a bad character */
function base64UrlDecode(s: string): Uint8Array {
  if (!/^[A-Za-z0-9_-]*$/.test(s)) throw new Error("not base64url");
  const b64 = s.replaceAll("-", "+").replaceAll("_", "/") + "===".slice((s.length + 3) % 4);
  return Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
}
