/**
 * When a mounted service-account token is due, read from its own claims without verifying
 * it (only the API server can): the installer warns when the token it mirrors for the plugin
 * is past that time, which means kubelet stopped replacing it (the ServiceAccount was deleted,
 * or kubelet cannot reach the API server) and the plugin's API calls are being refused.
 *
 * A projected token is a JWT (RFC 7519) whose payload carries `iat` and `exp`; when the API
 * server extended its lifetime (`--service-account-extend-token-expiration`, a 3607 s request
 * from kubelet signed for a year) the payload's `kubernetes.io.warnafter` is the lifetime
 * kubelet asked for, and kubelet rotates against that (it refreshes a token once 80 % of its
 * lifetime has passed; Kubernetes API reference, `ServiceAccountTokenProjection.expirationSeconds`).
 * Source: kubernetes pkg/serviceaccount/claims.go (`privateClaims`, `WarnAfter`).
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
  return warnafter !== undefined
    ? { due: new Date(warnafter * 1000), claim: "warnafter", issuedAt }
    : { due: new Date(exp * 1000), claim: "exp", issuedAt };
}

/** base64url (RFC 4648 §5) without padding to bytes. @throws {Error} on a bad character */
function base64UrlDecode(s: string): Uint8Array {
  if (!/^[A-Za-z0-9_-]*$/.test(s)) throw new Error("not base64url");
  const b64 = s.replaceAll("-", "+").replaceAll("_", "/") + "===".slice((s.length + 3) % 4);
  return Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
}
