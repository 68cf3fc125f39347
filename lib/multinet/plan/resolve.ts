/**
 * Delegate resolution: from a network reference (or a Multus `clusterNetwork` /
 * `defaultNetworks` / `delegates[i]` entry) to the CNI configuration Manifold will run,
 * as a {@link Delegate} (NPWG v1.3 §3.4.1, §3.4.2, §7.4; Multus `getNetDelegate`,
 * `getKubernetesDelegate`, `getCNIConfigFromFile`).
 *
 * Configurations are parsed with `parseNetworkConfig` (lib/cni/types.ts): single confs
 * are wrapped into a one-plugin conflist object, every original key kept.
 *
 * @module
 */

import { checkJsonDepth } from "../../cni/decode.ts";
import { CniError, CniErrorCode } from "../../cni/errors.ts";
import { type NetworkConfigList, parseNetworkConfig } from "../../cni/netconf.ts";
import { findConfByName, readConfDir } from "./conf_dir.ts";
import { checkNadConfigSize, parseNadConfig } from "../nad/config.ts";
import type { NetworkAttachmentDefinition } from "../../k8s/types.ts";
import type { NadSource } from "../nad/source.ts";
import { isDns1123Subdomain, parseNetworkReference } from "./selection_parse.ts";
import { type Delegate, RESOURCE_NAME_ANNOTATION } from "../types.ts";

export { MAX_NAD_CONFIG_BYTES } from "../nad/config.ts";

/**
 * Plugin types that are Manifold itself by default: a delegate of one of these types is
 * refused (no recursive delegation). Callers add Manifold's own configured `type` with
 * `selfTypes` when it differs.
 */
export const DEFAULT_SELF_TYPES: readonly string[] = ["manifold"];

/** What every resolution takes to refuse recursive delegation. */
export interface SelfTypeOptions {
  /**
   * Plugin types that name Manifold itself (its configured `type`); a delegate with a
   * plugin of one of these types is refused with code 7. Default {@link DEFAULT_SELF_TYPES}.
   */
  selfTypes?: readonly string[];
}

/** Options of {@link resolveNetwork}. */
export interface ResolveOptions extends SelfTypeOptions {
  /** Where NetworkAttachmentDefinitions are read from. */
  nads: NadSource;
  /** Directory of on-disk CNI configs for NADs without `spec.config` (Multus `confDir`, default `/etc/cni/multus/net.d`). */
  confDir: string;
  /** Multus `namespaceIsolation`: a pod may only use NADs of its own namespace and of `globalNamespaces`. */
  namespaceIsolation: boolean;
  /** Namespaces whose NADs every pod may use under isolation (Multus `globalNamespaces`; pass `["default"]` for Multus's default). */
  globalNamespaces: string[];
  /** The pod's namespace. */
  podNamespace: string;
  /** Mark the delegate as the cluster default network (the `v1.multus-cni.io/default-network` annotation); default false. */
  isDefault?: boolean;
  /**
   * When the NAD does not exist, still look for a CNI config named after it in `confDir`
   * (convenient for standalone mode). Default false: like Multus, a reference to a missing
   * NAD fails, so NAD objects (and RBAC on them) stay the gate to on-disk configs.
   */
  allowMissingNad?: boolean;
}

/** Options of {@link resolveClusterNetwork}. */
export interface ClusterNetworkOptions extends SelfTypeOptions {
  /** Where NetworkAttachmentDefinitions are read from. */
  nads: NadSource;
  /** Directory of on-disk CNI configs (Multus `confDir`). */
  confDir: string;
  /** Namespace of `clusterNetwork` / `defaultNetworks` NADs (Multus `multusNamespace`, default `kube-system`). */
  multusNamespace: string;
}

/**
 * Resolves a pod's network reference to a delegate.
 *
 * Order:
 * 1. isolation (NPWG v1.3 §7.4): with `namespaceIsolation`, a NAD outside the pod's
 *    namespace and outside `globalNamespaces` is refused;
 * 2. the NAD is read; it must exist (unless `allowMissingNad`);
 * 3. §3.4.1 in the listed order: (1) non-empty `spec.config` → that config; (2) a
 *    `*.conflist` in `confDir` whose `"name"` equals the NAD name; (3) a `*.conf` or
 *    `*.json` (like libcni) with that `"name"`; files are tried in lexical order and files
 *    that cannot be read or parsed are skipped; (4) otherwise fail.
 *
 * §3.4.2: a `spec.config` without `"name"` (or with `""`) gets the NAD name injected. The
 * delegate's `statusName` is `"<ns>/<name>"`, `source` `"nad:<ns>/<name>"` or
 * `"file:<path>"`, `resourceName` the NAD's `k8s.v1.cni.cncf.io/resourceName` annotation.
 *
 * Limits on `spec.config` (untrusted): at most {@link MAX_NAD_CONFIG_BYTES} (256 KiB) of
 * UTF-8 and at most `MAX_JSON_DEPTH` (64) levels of nesting. A delegate whose plugin `type`
 * is Manifold itself (`opts.selfTypes`, default `["manifold"]`) is refused: no recursive
 * delegation.
 *
 * @param ref the NAD reference (from {@link parseNetworkReference} or a selection element)
 * @param opts see {@link ResolveOptions}
 * @returns the delegate (conflist object, never shared with the NadSource)
 * @throws {CniError} code 7 on an isolation violation (naming the pod namespace and the
 *   NAD), a missing NAD, or when no config is found (naming the NAD, with the files tried in
 *   `details`); code 7 when `spec.config` is larger than 256 KiB
 *   (`network attachment definition "ns/n": spec.config is N bytes, more than the limit of
 *   262144 bytes`) or nests deeper than 64 levels, or when a plugin's type is Manifold
 *   itself (`… plugin type "manifold" (plugins[0]) is Manifold itself: recursive delegation
 *   refused`); the code of `parseNetworkConfig` (6 decoding, 7 invalid, 1 version) when
 *   `spec.config` is invalid, with `msg` prefixed by the NAD; errors of the NadSource as is
 */
export async function resolveNetwork(
  ref: { namespace: string; name: string },
  opts: ResolveOptions,
): Promise<Delegate> {
  const id = `${ref.namespace}/${ref.name}`;
  if (
    opts.namespaceIsolation && ref.namespace !== opts.podNamespace &&
    !opts.globalNamespaces.includes(ref.namespace)
  ) {
    const allowed = [opts.podNamespace, ...opts.globalNamespaces].join(", ");
    throw new CniError(
      CniErrorCode.InvalidNetworkConfig,
      `namespace isolation: pods in namespace "${opts.podNamespace}" may not use network attachment definition "${id}" (allowed namespaces: ${allowed})`,
    );
  }
  const nad = await opts.nads.get(ref.namespace, ref.name);
  if (nad === undefined && !opts.allowMissingNad) {
    throw new CniError(
      CniErrorCode.InvalidNetworkConfig,
      `network attachment definition "${id}" not found`,
    );
  }
  return await delegateForNad(ref, nad, {
    confDir: opts.confDir,
    isDefault: opts.isDefault ?? false,
    selfTypes: opts.selfTypes,
  });
}

async function delegateForNad(
  ref: { namespace: string; name: string },
  nad: NetworkAttachmentDefinition | undefined,
  opts: { confDir: string; isDefault: boolean } & SelfTypeOptions,
): Promise<Delegate> {
  const { confDir, isDefault } = opts;
  const id = `${ref.namespace}/${ref.name}`;
  const context = `network attachment definition "${id}"`;
  const resourceName = nad?.metadata.annotations?.[RESOURCE_NAME_ANNOTATION];
  const withResource = (d: Delegate): Delegate => resourceName ? { ...d, resourceName } : d;
  const config = nad?.spec.config;
  if (config !== undefined && config.trim() !== "") {
    const list = withContext(context, () => {
      checkNadConfigSize(config);
      const parsed = parseNadConfig(config, ref.name, `nad:${id}`);
      refuseSelf(parsed, opts.selfTypes);
      return parsed;
    });
    return withResource(delegateOf(list, { statusName: id, isDefault, source: `nad:${id}` }));
  }
  const found = await findConfByName(confDir, ref.name);
  if (found.match) {
    const { list, path } = found.match;
    withContext(`${context} (config ${path})`, () => refuseSelf(list, opts.selfTypes));
    return withResource(delegateOf(list, { statusName: id, isDefault, source: `file:${path}` }));
  }
  const why = nad === undefined ? "does not exist" : "has no spec.config";
  throw new CniError(
    CniErrorCode.InvalidNetworkConfig,
    `network attachment definition "${id}" ${why} and no CNI config named "${ref.name}" was found in ${confDir} (NPWG v1.3 §3.4.1)`,
    found.tried.join("\n"),
  );
}

/**
 * Resolves a Multus `clusterNetwork` or `defaultNetworks` entry (Multus `getNetDelegate`):
 * - no `/` → (1) the NAD `<multusNamespace>/<spec>` (resolved as in {@link resolveNetwork},
 *   without isolation), (2) a config in `confDir` whose `"name"` is `spec` (`*.conflist`
 *   first, then `*.conf` / `*.json`);
 * - starting with `/` → a path: for a directory, the lexically first `*.conf`, `*.conflist`
 *   or `*.json` that parses (others skipped); for a file, that file;
 * - otherwise `"ns/name"` → that NAD (a Manifold extension; Multus would stat it as a
 *   relative path).
 *
 * `statusName` is `"<ns>/<name>"` for NAD-based delegates and the config's `"name"` for
 * file-based ones; `source` is `"nad:…"` or `"file:<path>"`.
 *
 * @param spec the configured entry, e.g. `"k8s-pod-network"`, `"/etc/cni/net.d"`
 * @param opts see {@link ClusterNetworkOptions}; `isDefault` marks the cluster default network
 * @returns the delegate
 * @throws {CniError} code 7 when nothing is found (`details` lists what was tried) or the
 *   entry is malformed, or when the config's plugin type is Manifold itself (`opts.selfTypes`,
 *   recursive delegation); a NAD's limits as in {@link resolveNetwork}; a named file's parse
 *   error keeps its code (6/7/1) with the path in `msg`
 */
export async function resolveClusterNetwork(
  spec: string,
  opts: ClusterNetworkOptions & { isDefault: boolean },
): Promise<Delegate> {
  const entry = spec.trim();
  if (entry === "") {
    throw new CniError(CniErrorCode.InvalidNetworkConfig, "empty cluster network name");
  }
  if (entry.startsWith("/")) return await delegateFromPath(entry, opts);
  if (entry.includes("/")) {
    const ref = parseNetworkReference(entry, opts.multusNamespace);
    if (ref.interface !== undefined) {
      throw new CniError(
        CniErrorCode.InvalidNetworkConfig,
        `invalid cluster network "${entry}": an "@interface" suffix is not supported here`,
      );
    }
    return await resolveNetwork(ref, {
      nads: opts.nads,
      confDir: opts.confDir,
      namespaceIsolation: false,
      globalNamespaces: [],
      podNamespace: opts.multusNamespace,
      isDefault: opts.isDefault,
      selfTypes: opts.selfTypes,
    });
  }
  const tried: string[] = [];
  if (isDns1123Subdomain(entry)) {
    const nad = await opts.nads.get(opts.multusNamespace, entry);
    if (nad !== undefined) {
      return await delegateForNad({ namespace: opts.multusNamespace, name: entry }, nad, opts);
    }
    tried.push(`network attachment definition "${opts.multusNamespace}/${entry}": not found`);
  }
  const found = await findConfByName(opts.confDir, entry);
  if (found.match) {
    const { list, path } = found.match;
    withContext(
      `cluster network "${entry}" (config ${path})`,
      () => refuseSelf(list, opts.selfTypes),
    );
    return delegateOf(list, {
      statusName: list.name,
      isDefault: opts.isDefault,
      source: `file:${path}`,
    });
  }
  throw new CniError(
    CniErrorCode.InvalidNetworkConfig,
    `cluster network "${entry}" not found: no network attachment definition "${opts.multusNamespace}/${entry}" and no CNI config with that name in ${opts.confDir}`,
    [...tried, ...found.tried].join("\n"),
  );
}

/**
 * Makes a delegate of one inline Multus `delegates[i]` entry (a conf or a conflist).
 * `statusName` is its `"name"`, `source` `"inline:delegates[i]"`.
 *
 * @param conf the entry as decoded from the Manifold/Multus config (not modified)
 * @param index its index in `delegates` (for messages and `source`)
 * @param isDefault true for `delegates[0]`, the cluster default network
 * @param opts `selfTypes`: plugin types that are Manifold itself (default `["manifold"]`)
 * @returns the delegate; its conflist is a copy
 * @throws {CniError} the code of `parseNetworkConfig` (7 invalid, 6 not an object,
 *   1 version) with `msg` prefixed by `delegates[i]`; code 7 when a plugin's type is
 *   Manifold itself (recursive delegation)
 * @example
 * ```ts
 * delegateFromInline({ cniVersion: "1.0.0", name: "cbr0", type: "bridge" }, 0, true);
 * // {statusName: "cbr0", isDefault: true, source: "inline:delegates[0]",
 * //  conflist: {name: "cbr0", cniVersion: "1.0.0", plugins: [{cniVersion: "1.0.0", name: "cbr0", type: "bridge"}]}}
 * ```
 */
export function delegateFromInline(
  conf: Record<string, unknown>,
  index: number,
  isDefault: boolean,
  opts: SelfTypeOptions = {},
): Delegate {
  const where = `delegates[${index}]`;
  const list = withContext(where, () => {
    const parsed = parseNetworkConfig(conf, { source: where });
    refuseSelf(parsed, opts.selfTypes);
    return parsed;
  });
  return delegateOf(list, { statusName: list.name, isDefault, source: `inline:${where}` });
}

async function delegateFromPath(
  path: string,
  opts: { isDefault: boolean } & SelfTypeOptions,
): Promise<Delegate> {
  const { isDefault } = opts;
  let info: Deno.FileInfo;
  try {
    info = await Deno.stat(path);
  } catch (err) {
    throw new CniError(
      CniErrorCode.InvalidNetworkConfig,
      `cluster network "${path}" not found`,
      String(err),
    );
  }
  const toDelegate = (list: NetworkConfigList, file: string): Delegate =>
    delegateOf(list, { statusName: list.name, isDefault, source: `file:${file}` });
  if (!info.isDirectory) {
    let text: string;
    try {
      text = await Deno.readTextFile(path);
    } catch (err) {
      throw new CniError(
        CniErrorCode.IoFailure,
        `cannot read cluster network ${path}`,
        String(err),
      );
    }
    return toDelegate(
      withContext(`cluster network ${path}`, () => {
        const parsed = parseNetworkConfig(text, { source: path });
        checkJsonDepth(parsed.raw, "network config");
        refuseSelf(parsed, opts.selfTypes);
        return parsed;
      }),
      path,
    );
  }
  const { configs, tried } = await readConfDir(path);
  // Never pick Manifold's (or Multus's) own config as the cluster default network: that would
  // make the plugin delegate to itself (the boot race of Multus #1499).
  const first = configs.find((c) => {
    const own = c.list.plugins.some((p) => DELEGATING_TYPES.has(String(p.type)));
    if (own) tried.push(`${c.path}: skipped (a delegating plugin's own config)`);
    return !own;
  });
  if (first) return toDelegate(first.list, first.path);
  throw new CniError(
    CniErrorCode.InvalidNetworkConfig,
    `cluster network "${path}": no valid *.conf, *.conflist or *.json CNI config in the directory`,
    tried.join("\n"),
  );
}

/**
 * A delegate of a parsed network config: `conflist` is the list's raw object and `list` the
 * parsed list itself, so nothing downstream parses the config again.
 *
 * @param list the parsed config (`parseNetworkConfig`).
 * @param fields status name, default flag, source (and optionally resourceName).
 * @returns the delegate; `conflist === list.raw`.
 * @example
 * ```ts
 * delegateOf(parseNetworkConfig({ cniVersion: "1.0.0", name: "n", type: "bridge" }),
 *   { statusName: "n", isDefault: true, source: "test" }).list.plugins[0].type; // "bridge"
 * ```
 */
export function delegateOf(
  list: NetworkConfigList,
  fields: Omit<Delegate, "conflist" | "list">,
): Delegate {
  return { ...fields, conflist: list.raw, list };
}

/** Plugin types that are delegating plugins themselves, never a cluster default network. */
const DELEGATING_TYPES = new Set(["manifold", "multus", "multus-shim"]);

/**
 * Refuses a network config one of whose plugins is Manifold itself (code 7): running it
 * would make Manifold spawn itself for every pod, recursively.
 */
function refuseSelf(list: NetworkConfigList, selfTypes = DEFAULT_SELF_TYPES): void {
  list.plugins.forEach((p, i) => {
    const type = String(p.type);
    if (!selfTypes.includes(type)) return;
    throw new CniError(
      CniErrorCode.InvalidNetworkConfig,
      `plugin type "${type}" (plugins[${i}]) is Manifold itself: recursive delegation refused`,
      `a delegate must be another CNI plugin; Manifold's own types here: ${selfTypes.join(", ")}`,
    );
  });
}

/** Runs `fn`, prefixing the `msg` of a thrown CniError with `context` (code and details kept). */
function withContext<T>(context: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (err instanceof CniError) {
      throw new CniError(err.code, `${context}: ${err.msg}`, err.details);
    }
    throw err;
  }
}
