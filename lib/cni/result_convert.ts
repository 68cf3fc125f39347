/**
 * CNI results of every version: decoding into the normalized 1.x shape and
 * conversion between versions through ONE registry of per-family codecs (like
 * libcni's `pkg/types/internal/convert.go` registry). Families (see
 * {@link resultFamily}):
 *
 * - "legacy" 0.1.0/0.2.0: `ip4` / `ip6` objects, each with `ip`, `gateway`, `routes`.
 * - "current" 0.3.0/0.3.1/0.4.0: `interfaces`, `ips[]` with `version` "4"|"6", `routes`.
 * - "v1" 1.0.0/1.1.0: like "current" without `version`; 1.1 adds interface `mtu`,
 *   `socketPath`, `pciID` and route `mtu`, `advmss`, `priority`, `table`, `scope`.
 *
 * Results are validated by the fast checks of lib/cni/result_codecs.ts; a result they do not
 * accept needs zod's schemas (lib/cni/result_schemas.ts): lib/cni/result.ts, the door for
 * everyone else, loads them at once; the per-call path (runtime, skel) imports this module
 * and wraps its calls in `withResultSchemas`, which loads them only then (issue 30). Without
 * them such a call throws `RESULT_SCHEMAS_NEEDED`.
 *
 * Sources: CNI SPEC 0.2.0/0.3.0/1.1 "Result", libcni `types/020`, `types/040`, `types/100`.
 *
 * @module
 */

import { CniError, CniErrorCode } from "./errors.ts";
import type { CniResult } from "./result_types.ts";
import { DEFAULT_CONFIG_VERSION, isPlainObject } from "./netconf.ts";
import { isSupportedVersion, resultFamily, SUPPORTED_VERSIONS } from "./version.ts";
import { CODECS } from "./result_codecs.ts";

/**
 * The `cniVersion` a raw result declares; a result without one is a 0.1.0 result
 * (libcni `version.ConfigDecoder` / `types020.SupportedVersions` include "").
 *
 * @param raw a decoded result object.
 * @returns the declared version string, not necessarily supported.
 * @throws {CniError} code 6 when `raw` is not an object or `cniVersion` is not a string.
 * @example
 * ```ts
 * resultVersion({ cniVersion: "0.4.0", ips: [] }); // "0.4.0"
 * ```
 */
export function resultVersion(raw: unknown): string {
  if (!isPlainObject(raw)) {
    throw new CniError(CniErrorCode.DecodingFailure, "result must be a JSON object");
  }
  const v = raw.cniVersion;
  if (v === undefined || v === "") return DEFAULT_CONFIG_VERSION;
  if (typeof v !== "string") {
    throw new CniError(CniErrorCode.DecodingFailure, "result cniVersion must be a string");
  }
  return v;
}

/**
 * Decodes a result of any supported version into the normalized 1.x shape:
 * `ip4`/`ip6` become `ips` (their routes are merged into `routes`), `ips[].version`
 * is dropped, `null`s and empty arrays/`dns` are omitted. `cniVersion` is kept as
 * sent (0.1.0 when absent).
 *
 * @param raw the decoded JSON a plugin printed.
 * @returns the normalized result.
 * @throws {CniError} code 6 on a bad shape (with the zod issues in details); code 1
 *   for an unknown `cniVersion`.
 * @example
 * ```ts
 * parseResult({ cniVersion: "0.2.0", ip4: { ip: "10.0.0.2/24" } });
 * // { cniVersion: "0.2.0", ips: [{ address: "10.0.0.2/24" }] }
 * ```
 */
export function parseResult(raw: unknown): CniResult {
  const version = resultVersion(raw);
  if (!isSupportedVersion(version)) {
    throw new CniError(
      CniErrorCode.IncompatibleVersion,
      `unsupported result version "${version}"`,
      `supported versions: ${SUPPORTED_VERSIONS.join(", ")}`,
    );
  }
  return CODECS[resultFamily(version)].decode(raw as Record<string, unknown>, version);
}

/**
 * A delegate's result decoded once: the raw JSON object as the plugin printed it (forwarded
 * as `prevResult`, cached for DEL/CHECK, returned to the runtime) and its normalized value
 * (read by network-status building and the kernel check). Both describe the same result in
 * `result.cniVersion`.
 */
export interface DecodedResult {
  /** The raw result object; unknown keys survive. */
  raw: Record<string, unknown>;
  /** The same result in the normalized 1.x shape ({@link parseResult}). */
  result: CniResult;
}

/**
 * Decodes a raw result of any supported version once ({@link parseResult}), keeping the raw
 * object next to its normalized value.
 *
 * @param raw the decoded JSON a plugin printed (or a cached result).
 * @returns the raw object (not copied) and its normalized value.
 * @throws {CniError} code 6 on a bad shape; code 1 for an unknown `cniVersion`.
 * @example
 * ```ts
 * decodeResult({ cniVersion: "1.0.0", ips: [{ address: "10.0.0.2/24" }] }).result.ips;
 * // [{ address: "10.0.0.2/24" }]
 * ```
 */
export function decodeResult(raw: unknown): DecodedResult {
  const result = parseResult(raw);
  return { raw: raw as Record<string, unknown>, result };
}

/**
 * Converts a decoded result to another supported version without decoding it again. Within one
 * family the raw object is copied with only `cniVersion` changed (unknown keys survive) and the
 * normalized value is reused; across families the raw object is encoded from the normalized
 * value (and that encoder output, not the delegate's text, is normalized again). Interface
 * details and `ips[].interface` cannot be expressed in 0.1.0/0.2.0 and are dropped there;
 * CNI 1.1-only interface fields are dropped for 0.3.x/0.4.0.
 *
 * @param decoded from {@link decodeResult}.
 * @param toVersion target version, one of `SUPPORTED_VERSIONS`.
 * @returns a fresh raw object in `toVersion` and its normalized value.
 * @throws {CniError} code 1 for an unsupported version, or when the target cannot hold the
 *   result (0.1.0/0.2.0: more than one address per IP family, no address at all, or a route of
 *   a family without an address).
 * @example
 * ```ts
 * convertDecoded(decodeResult({ cniVersion: "0.4.0", ips: [] }), "0.3.1").raw.cniVersion; // "0.3.1"
 * ```
 */
export function convertDecoded(decoded: DecodedResult, toVersion: string): DecodedResult {
  if (!isSupportedVersion(toVersion)) {
    throw new CniError(
      CniErrorCode.IncompatibleVersion,
      `cannot convert result to unsupported version "${toVersion}"`,
      `supported versions: ${SUPPORTED_VERSIONS.join(", ")}`,
    );
  }
  const from = resultFamily(decoded.result.cniVersion);
  const to = resultFamily(toVersion);
  if (from === to) {
    const raw = structuredClone(decoded.raw);
    raw.cniVersion = toVersion;
    return { raw, result: { ...decoded.result, cniVersion: toVersion } };
  }
  const raw = CODECS[to].encode(decoded.result, toVersion);
  return { raw, result: CODECS[to].decode(raw, toVersion) };
}

/**
 * Converts a result of any supported version to any supported version, both
 * directions ({@link decodeResult} then {@link convertDecoded}). Within one family the raw
 * object is copied with only `cniVersion` changed (unknown keys survive); across families it
 * goes through the normalized shape.
 *
 * @param raw a result object of any supported version.
 * @param toVersion target version, one of `SUPPORTED_VERSIONS`.
 * @returns a fresh raw result object in `toVersion`.
 * @throws {CniError} code 1 for an unsupported version, or when the target cannot hold
 *   the result (0.1.0/0.2.0: more than one address per IP family, no address at all,
 *   or a route of a family without an address); code 6 on a bad shape.
 * @example
 * ```ts
 * convertResult({ cniVersion: "1.0.0", ips: [{ address: "10.0.0.2/24" }] }, "0.4.0");
 * // { cniVersion: "0.4.0", ips: [{ version: "4", address: "10.0.0.2/24" }] }
 * ```
 */
export function convertResult(raw: unknown, toVersion: string): Record<string, unknown> {
  if (!isSupportedVersion(toVersion)) {
    throw new CniError(
      CniErrorCode.IncompatibleVersion,
      `cannot convert result to unsupported version "${toVersion}"`,
      `supported versions: ${SUPPORTED_VERSIONS.join(", ")}`,
    );
  }
  return convertDecoded(decodeResult(raw), toVersion).raw;
}
