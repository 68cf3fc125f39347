/**
 * The shape checks of a network configuration list and of one plugin configuration, written
 * out by hand ({@link NETWORK_CONFIG_CHECKS}): lib/cni/types.ts's zod schemas with the same
 * acceptance and the same issue text, so lib/cni/netconf.ts parses a config without loading
 * zod (issue 30). The fuzz target `netconf` keeps the two agreeing.
 *
 * @module
 */

import { type ShapeIssue, zodDetails, zodReceived } from "./decode.ts";
import { CniError, CniErrorCode } from "./errors.ts";

/**
 * The fields of a configuration list that `parseNetworkConfigWith` (lib/cni/netconf.ts) reads, as its shape
 * check returns them (zod's output for lib/cni/types.ts's list schema).
 */
export interface NetworkConfigFields {
  /** Network name, non-empty. */
  name: string;
  /** `cniVersion`, when present (a string). */
  cniVersion?: string;
  /** CNI 1.1 `cniVersions`, when present (a list of strings). */
  cniVersions?: string[];
  /** `plugins`, when present (a list; its entries are checked one by one). */
  plugins?: unknown[];
}

/**
 * The shape checks `parseNetworkConfigWith` (lib/cni/netconf.ts) runs: each returns the checked fields or
 * throws CniError code 7 with the issues in the details: {@link NETWORK_CONFIG_CHECKS} (used),
 * or lib/cni/types.ts's zod schemas (the reference the fuzz target compares them with).
 */
export interface NetworkConfigChecks {
  /**
   * Checks the top level (a JSON object): `name` a non-empty string, `cniVersion` a string,
   * `cniVersions` a list of strings, `disableCheck`/`disableGC` a boolean or a string,
   * `plugins` a list; all but `name` optional.
   * @param decoded the decoded object.
   * @param src `" (source: …)"` or `""`, for error details.
   * @returns the fields read.
   */
  list(decoded: Record<string, unknown>, src: string): NetworkConfigFields;
  /**
   * Checks one plugin object: `type` a string, `capabilities` (optional) an object.
   * @param plugin the plugin object.
   * @param where e.g. `"plugins[1]"`, for error details.
   * @param src as for `list`.
   * @returns the plugin's `type`.
   */
  plugin(plugin: Record<string, unknown>, where: string, src: string): { type: string };
}

/**
 * True for a non-null, non-array object (a JSON object).
 * @param v any decoded JSON value.
 * @returns whether `v` can be read as `Record<string, unknown>`.
 * @example
 * ```ts
 * isPlainObject({ a: 1 }); // true
 * isPlainObject([1]); // false
 * ```
 */
export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** zod's `invalid_type` message. */
function expected(type: string, v: unknown): string {
  return `Invalid input: expected ${type}, received ${zodReceived(v)}`;
}

/**
 * The shape checks of a configuration list and of one plugin configuration, written out by
 * hand: they accept exactly what lib/cni/types.ts's zod schemas (the reference) accept and
 * report the same issues in the same words and order, so errors read as before while the
 * per-call path never loads zod for them (≈ 72 modules, 460 KiB of source; issue 30). The fuzz
 * target `netconf` (tests/fuzz/netconf.ts) keeps the two agreeing on generated and mutated
 * configs: accepted or not, the fields read, and the error's code, msg and details.
 */
export const NETWORK_CONFIG_CHECKS: NetworkConfigChecks = {
  list(d, src) {
    const issues: ShapeIssue[] = [];
    const { name, cniVersion, cniVersions, disableCheck, disableGC, plugins } = d;
    if (typeof name !== "string") issues.push({ message: "name must be a string", path: ["name"] });
    // zod runs `.min(1)` on anything with a `length` (an array, `{"length": 0}`), typed or not.
    const length = (name as { length?: unknown } | null | undefined)?.length;
    if (length !== undefined && !((length as number) >= 1)) {
      issues.push({ message: "name must not be empty", path: ["name"] });
    }
    if (cniVersion !== undefined && typeof cniVersion !== "string") {
      issues.push({ message: expected("string", cniVersion), path: ["cniVersion"] });
    }
    if (cniVersions !== undefined) {
      if (!Array.isArray(cniVersions)) {
        issues.push({ message: expected("array", cniVersions), path: ["cniVersions"] });
      } else {
        cniVersions.forEach((v, i) => {
          if (typeof v !== "string") {
            issues.push({ message: expected("string", v), path: ["cniVersions", i] });
          }
        });
      }
    }
    for (const [key, v] of [["disableCheck", disableCheck], ["disableGC", disableGC]] as const) {
      if (v !== undefined && typeof v !== "boolean" && typeof v !== "string") {
        issues.push({ message: "Invalid input", path: [key] }); // zod: a union none matched
      }
    }
    if (plugins !== undefined && !Array.isArray(plugins)) {
      issues.push({ message: expected("array", plugins), path: ["plugins"] });
    }
    if (issues.length > 0) {
      throw new CniError(
        CniErrorCode.InvalidNetworkConfig,
        "invalid network config",
        `${zodDetails({ issues })}${src}`,
      );
    }
    const out: NetworkConfigFields = { name: name as string };
    if (cniVersion !== undefined) out.cniVersion = cniVersion as string;
    if (cniVersions !== undefined) out.cniVersions = [...cniVersions as string[]];
    if (plugins !== undefined) out.plugins = [...plugins as unknown[]];
    return out;
  },
  plugin(p, where, src) {
    const issues: ShapeIssue[] = [];
    const { type, capabilities } = p;
    if (typeof type !== "string") {
      issues.push({ message: "plugin type must be a string", path: ["type"] });
    }
    if (capabilities !== undefined && !isPlainObject(capabilities)) {
      issues.push({ message: expected("record", capabilities), path: ["capabilities"] });
    }
    if (issues.length > 0) {
      throw new CniError(
        CniErrorCode.InvalidNetworkConfig,
        "type" in p ? "invalid plugin config" : "missing plugin type",
        `${where}: ${zodDetails({ issues })}${src}`,
      );
    }
    return { type: type as string };
  },
};
