/**
 * Network configuration parsing without zod (the per-call hot path): the wire types, the
 * name/type/version rules and {@link parseNetworkConfig}. Its shape checks
 * ({@link NETWORK_CONFIG_CHECKS}) are lib/cni/types.ts's zod schemas written out by hand —
 * the same acceptance, the same issue text — so an ADD or DEL never loads zod to parse a
 * network config (issue 30: zod is 72 modules, ≈ 460 KiB of source, ≈ 9–14 ms of a call);
 * the fuzz target `netconf` keeps the two agreeing. Keys unknown to Manifold reach delegates
 * untouched (CNI SPEC "Section 1: Network configuration format", libcni
 * `NetworkConfFromBytes` / `ConfListFromConf`).
 *
 * @module
 */

import { CniError, CniErrorCode } from "./errors.ts";
import { CURRENT_VERSION, isSupportedVersion, parseVersion } from "./version.ts";
import {
  isPlainObject,
  NETWORK_CONFIG_CHECKS,
  type NetworkConfigChecks,
} from "./netconf_checks.ts";

export {
  isPlainObject,
  NETWORK_CONFIG_CHECKS,
  type NetworkConfigChecks,
  type NetworkConfigFields,
} from "./netconf_checks.ts";

/**
 * A parsed network configuration list (CNI SPEC 1.1 "Network configuration lists").
 * A single plugin configuration is wrapped into a one-plugin list (libcni
 * `ConfListFromConf`).
 */
export interface NetworkConfigList {
  /** The negotiated version: `cniVersion`, or the highest supported entry of `cniVersions`. */
  cniVersion: string;
  /** Network name, `^[a-zA-Z0-9][a-zA-Z0-9_.-]*$` (libcni `ValidateNetworkName`). */
  name: string;
  /** Plugin configurations in invocation order; every original key is kept. */
  plugins: Record<string, unknown>[];
  /** CNI SPEC 1.0 `disableCheck`: CHECK becomes a no-op. */
  disableCheck: boolean;
  /** CNI SPEC 1.1 `disableGC`: GC becomes a no-op. */
  disableGC: boolean;
  /** The configuration list as a raw object (a synthesized list for a single conf). */
  raw: Record<string, unknown>;
}

/** Options of {@link parseNetworkConfig}. */
export interface ParseNetworkConfigOptions {
  /** Where the config came from (file path, NAD name); only used in error details. */
  source?: string;
}

/**
 * The version assumed when a configuration has no `cniVersion` (libcni
 * `version.ConfigDecoder`: an empty version decodes as "0.1.0").
 */
export const DEFAULT_CONFIG_VERSION = "0.1.0";

const NAME_RE = /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/;

/**
 * Throws unless `type` is a safe plugin binary name: non-empty, without "/", "..",
 * or NUL, so it can never escape a `CNI_PATH` directory (libcni `FindInPath`
 * rejects path separators).
 *
 * @param type the plugin `type`, e.g. `"bridge"`.
 * @param where context for the error details, e.g. `"plugins[1]"`.
 * @throws {CniError} code 7 (invalid network config) when unsafe.
 * @example
 * ```ts
 * assertPluginType("bridge"); // ok
 * assertPluginType("../sh"); // throws CniError 7
 * ```
 */
export function assertPluginType(type: string, where = ""): void {
  let problem = "";
  if (type === "") problem = "plugin type must not be empty";
  else if (type.includes("/")) problem = `plugin type "${type}" must not contain "/"`;
  else if (type.includes("..")) problem = `plugin type "${type}" must not contain ".."`;
  else if (type.includes("\0")) problem = "plugin type must not contain NUL";
  if (problem) throw new CniError(CniErrorCode.InvalidNetworkConfig, problem, where);
}

/**
 * Throws unless `name` is a valid network name (libcni `ValidateNetworkName`:
 * `^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`).
 *
 * @param name the network `name`.
 * @throws {CniError} code 7 when missing or containing other characters.
 * @example
 * ```ts
 * validateNetworkName("macvlan-conf"); // ok
 * ```
 */
export function validateNetworkName(name: string): void {
  if (name === "") throw new CniError(CniErrorCode.InvalidNetworkConfig, "missing network name");
  if (!NAME_RE.test(name)) {
    throw new CniError(
      CniErrorCode.InvalidNetworkConfig,
      "invalid characters found in network name",
      name,
    );
  }
}

/**
 * Parses a network configuration with the given shape checks: a conflist (has `plugins`) or a single plugin
 * configuration (has `type`, wrapped into a one-plugin list like libcni
 * `ConfListFromConf`). Honours CNI 1.1 `cniVersions` by picking the highest version
 * Manifold supports (also considering `cniVersion`). A missing version means
 * {@link DEFAULT_CONFIG_VERSION}. `disableCheck` / `disableGC` accept booleans or the
 * strings "true"/"false" (libcni `readBool`).
 *
 * Plugin objects keep every original key; the returned objects are copies, never
 * the caller's input.
 *
 * @param text JSON text, or an already-decoded object.
 * @param opts `source` is only copied into error details.
 * @param checks the shape checks (zod's in lib/cni/types.ts, or the fast ones).
 * @returns the parsed list.
 * @throws {CniError} code 6 for invalid JSON or a non-object; code 7 for a missing or
 *   invalid name, empty/invalid `plugins`, or an unsafe/missing plugin `type`;
 *   code 1 when no usable version is offered; whatever `checks` throws.
 * @example
 * ```ts
 * const list = parseNetworkConfigWith('{"cniVersion":"1.0.0","name":"n","type":"bridge"}', {}, checks);
 * list.plugins[0].type; // "bridge"
 * ```
 */
export function parseNetworkConfigWith(
  text: string | Record<string, unknown>,
  opts: ParseNetworkConfigOptions,
  checks: NetworkConfigChecks,
): NetworkConfigList {
  const src = opts.source ? ` (source: ${opts.source})` : "";
  let decoded: unknown;
  if (typeof text === "string") {
    try {
      decoded = JSON.parse(text);
    } catch (err) {
      throw new CniError(
        CniErrorCode.DecodingFailure,
        "failed to decode network config",
        `${(err as Error).message}${src}`,
      );
    }
  } else {
    decoded = structuredCloneJson(text);
  }
  if (!isPlainObject(decoded)) {
    throw new CniError(
      CniErrorCode.DecodingFailure,
      "network config must be a JSON object",
      `got ${describe(decoded)}${src}`,
    );
  }
  const top = checks.list(decoded, src);
  try {
    validateNetworkName(top.name);
  } catch (err) {
    const e = err as CniError;
    throw new CniError(e.code, e.msg, `${e.details}${src}`);
  }

  const cniVersion = negotiateVersion(top.cniVersion, top.cniVersions, src);
  const disableCheck = readBool(decoded, "disableCheck", src);
  const disableGC = readBool(decoded, "disableGC", src);

  let plugins: Record<string, unknown>[];
  let raw: Record<string, unknown>;
  if ("plugins" in decoded) {
    const list = top.plugins;
    if (!list || list.length === 0) {
      throw new CniError(CniErrorCode.InvalidNetworkConfig, "no plugins in list", src.trim());
    }
    plugins = list.map((p, i) => checkPlugin(p, `plugins[${i}]`, src, checks));
    raw = decoded;
  } else {
    if (!("type" in decoded)) {
      throw new CniError(
        CniErrorCode.InvalidNetworkConfig,
        "network config has neither plugins nor type",
        src.trim(),
      );
    }
    const single = checkPlugin(decoded, "type", src, checks);
    plugins = [single];
    raw = { name: top.name, cniVersion, plugins: [single] };
    if (disableCheck) raw.disableCheck = true;
    if (disableGC) raw.disableGC = true;
  }
  return { cniVersion, name: top.name, plugins, disableCheck, disableGC, raw };
}

function checkPlugin(
  p: unknown,
  where: string,
  src: string,
  checks: NetworkConfigChecks,
): Record<string, unknown> {
  if (!isPlainObject(p)) {
    throw new CniError(
      CniErrorCode.InvalidNetworkConfig,
      "plugin config must be an object",
      `${where}: got ${describe(p)}${src}`,
    );
  }
  assertPluginType(checks.plugin(p, where, src).type, `${where}${src}`);
  return p;
}

function negotiateVersion(
  cniVersion: string | undefined,
  cniVersions: string[] | undefined,
  src: string,
): string {
  if (cniVersions === undefined) {
    const v = cniVersion || DEFAULT_CONFIG_VERSION;
    if (!isSupportedVersion(v)) {
      throw new CniError(
        CniErrorCode.IncompatibleVersion,
        `unsupported CNI version "${v}"`,
        `supported up to ${CURRENT_VERSION}${src}`,
      );
    }
    return v;
  }
  const offered = cniVersion ? [...cniVersions, cniVersion] : [...cniVersions];
  for (const v of offered) {
    if (!parseVersion(v)) {
      throw new CniError(
        CniErrorCode.InvalidNetworkConfig,
        `invalid version "${v}" in cniVersions`,
        src.trim(),
      );
    }
  }
  const usable = offered.filter(isSupportedVersion).sort(compareSemver);
  const best = usable.at(-1);
  if (!best) {
    throw new CniError(
      CniErrorCode.IncompatibleVersion,
      "no supported version in cniVersions",
      `offered [${offered.join(", ")}], supported up to ${CURRENT_VERSION}${src}`,
    );
  }
  return best;
}

function compareSemver(a: string, b: string): number {
  const pa = parseVersion(a)!, pb = parseVersion(b)!;
  return pa[0] - pb[0] || pa[1] - pb[1] || pa[2] - pb[2];
}

function readBool(obj: Record<string, unknown>, key: string, src: string): boolean {
  const v = obj[key];
  if (v === undefined) return false;
  if (typeof v === "boolean") return v;
  if (typeof v === "string") {
    const s = v.toLowerCase();
    if (s === "true") return true;
    if (s === "false") return false;
  }
  throw new CniError(
    CniErrorCode.InvalidNetworkConfig,
    `invalid value for ${key}`,
    `expected a boolean, got ${JSON.stringify(v)}${src}`,
  );
}

function describe(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  return `a ${typeof v}`;
}

function structuredCloneJson<T>(v: T): T {
  try {
    return structuredClone(v);
  } catch (err) {
    throw new CniError(
      CniErrorCode.DecodingFailure,
      "network config is not plain JSON data",
      (err as Error).message,
    );
  }
}

/**
 * Parses a network configuration: a conflist (has `plugins`) or a single plugin
 * configuration (has `type`, wrapped into a one-plugin list like libcni
 * `ConfListFromConf`). Honours CNI 1.1 `cniVersions` by picking the highest version
 * Manifold supports (also considering `cniVersion`). A missing version means
 * {@link DEFAULT_CONFIG_VERSION}. `disableCheck` / `disableGC` accept booleans or the
 * strings "true"/"false" (libcni `readBool`). Shapes are checked by
 * {@link NETWORK_CONFIG_CHECKS} (zod's schemas written out; no zod loaded).
 *
 * Plugin objects keep every original key; the returned objects are copies, never
 * the caller's input.
 *
 * @param text JSON text, or an already-decoded object.
 * @param opts `source` is only copied into error details.
 * @returns the parsed list.
 * @throws {CniError} code 6 for invalid JSON or a non-object; code 7 for a missing or
 *   invalid name, empty/invalid `plugins`, or an unsafe/missing plugin `type` (details: the
 *   issues as zod words them); code 1 when no usable version is offered.
 * @example
 * ```ts
 * const list = parseNetworkConfig('{"cniVersion":"1.0.0","name":"n","type":"bridge"}');
 * list.plugins[0].type; // "bridge"
 * ```
 */
export function parseNetworkConfig(
  text: string | Record<string, unknown>,
  opts: ParseNetworkConfigOptions = {},
): NetworkConfigList {
  return parseNetworkConfigWith(text, opts, NETWORK_CONFIG_CHECKS);
}
