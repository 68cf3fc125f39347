/**
 * CNI specification versions: which exist, comparison, and what each supports.
 * Source: CNI SPEC 1.1 "Version", SPEC 0.3.0 "Result".
 *
 * @module
 */

/** Every CNI spec version Manifold speaks, oldest first (CNI SPEC "VERSION" `supportedVersions`). */
export const SUPPORTED_VERSIONS = [
  "0.1.0",
  "0.2.0",
  "0.3.0",
  "0.3.1",
  "0.4.0",
  "1.0.0",
  "1.1.0",
] as const;

/** One of {@link SUPPORTED_VERSIONS}. */
export type CniVersion = typeof SUPPORTED_VERSIONS[number];

/** The newest version Manifold implements. */
export const CURRENT_VERSION: CniVersion = "1.1.0";

/**
 * Parses "MAJOR.MINOR.PATCH" into numbers; returns undefined for anything else.
 * @example parseVersion("0.3.1") // [0, 3, 1]
 */
export function parseVersion(v: string): [number, number, number] | undefined {
  const m = /^(\d{1,4})\.(\d{1,4})\.(\d{1,4})$/.exec(v);
  if (!m) return undefined;
  return [Number(m[1]), Number(m[2]), Number(m[3])];
}

/**
 * Compares two semantic versions: negative when a < b, 0 when equal, positive when a > b.
 * An unparsable version sorts before every valid one.
 * @example compareVersions("0.4.0", "1.0.0") < 0 // true
 */
export function compareVersions(a: string, b: string): number {
  const pa = parseVersion(a), pb = parseVersion(b);
  if (!pa || !pb) return (pa ? 1 : 0) - (pb ? 1 : 0);
  return pa[0] - pb[0] || pa[1] - pb[1] || pa[2] - pb[2];
}

/** True when `v` is one of {@link SUPPORTED_VERSIONS}. */
export function isSupportedVersion(v: string): v is CniVersion {
  return (SUPPORTED_VERSIONS as readonly string[]).includes(v);
}

/** True when a config of this version may receive CHECK (CNI SPEC 0.4.0 "CHECK": ≥ 0.4.0). */
export function supportsCheck(v: string): boolean {
  return compareVersions(v, "0.4.0") >= 0;
}

/** True when a config of this version may receive GC and STATUS (CNI SPEC 1.1: ≥ 1.1.0). */
export function supportsGcAndStatus(v: string): boolean {
  return compareVersions(v, "1.1.0") >= 0;
}

/**
 * The result-format family of a version: "legacy" (0.1.0/0.2.0: ip4/ip6),
 * "current" (0.3.x/0.4.0: interfaces, ips with `version`), "v1" (1.x: no `version` in ips).
 */
export function resultFamily(v: string): "legacy" | "current" | "v1" {
  if (compareVersions(v, "0.3.0") < 0) return "legacy";
  if (compareVersions(v, "1.0.0") < 0) return "current";
  return "v1";
}
