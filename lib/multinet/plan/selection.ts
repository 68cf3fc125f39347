/**
 * Parsing and validation of the pod's network selection annotation
 * `k8s.v1.cni.cncf.io/networks` (NPWG v1.3 §4.1) and of single network references: the
 * parser of lib/multinet/plan/selection_parse.ts with the zod schema of an element loaded
 * (lib/multinet/plan/selection_schema.ts), so every call is synchronous and complete. The
 * per-call path imports selection_parse.ts instead and loads the schema only for an element
 * its fast check does not accept (issue 30).
 *
 * @module
 */

import { selectionSchemas } from "./selection_schema.ts";

export * from "./selection_parse.ts";

/**
 * True when `value` is an IPv4 or IPv6 address, optionally with a `/prefix`
 * (`"10.2.2.42/24"`, `"2001:db8::5/64"`; NPWG v1.3 §4.1.2.1.3). Leading zeros and zone
 * suffixes (`%eth0`) are rejected.
 *
 * @param value candidate address
 * @returns whether it is valid
 * @example
 * ```ts
 * isIpWithOptionalPrefix("10.2.2.42/24"); // true
 * isIpWithOptionalPrefix("10.2.2.300"); // false
 * ```
 */
export function isIpWithOptionalPrefix(value: string): boolean {
  return selectionSchemas().ipOrCidr.safeParse(value).success;
}
