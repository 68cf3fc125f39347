/**
 * The configuration the node installer writes for the container runtime:
 * `00-manifold.conflist`, one plugin of type `manifold` whose cluster default network is
 * the primary config file, declaring every capability the primary's plugins declare (so
 * the runtime keeps passing e.g. `portMappings` and `bandwidth`, which Manifold hands to the
 * default network only, NPWG v1.3 §7.5) plus `io.kubernetes.cri.pod-annotations` (so ADD
 * needs no pod GET).
 *
 * @module
 */

import type { NetworkConfigList } from "../cni/types.ts";
import { parseManifoldConf } from "../multinet/config.ts";
import { POD_ANNOTATIONS_CAPABILITY } from "../multinet/types.ts";

/** File name of the generated configuration; `00-` sorts before every usual primary. */
export const MANIFOLD_CONFIG_NAME = "00-manifold.conflist";
/** `name` of the generated configuration list (Multus: `multus-cni-network`). */
export const MANIFOLD_NETWORK_NAME = "manifold-cni-network";

/** Options of {@link generateManifoldConflist}. */
export interface ManifoldConflistOptions {
  /** The primary file as the plugin sees it on the host, e.g. `/etc/cni/net.d/10-flannel.conflist`. */
  clusterNetwork: string;
  /** Host path of the kubeconfig written for the plugin; absent: no `kubeconfig` key. */
  kubeconfig?: string;
  /** Host path of the readiness indicator file (Multus `readinessindicatorfile`). */
  readinessIndicatorFile?: string;
  /**
   * Further keys of the plugin entry (Manifold/Multus keys such as `logLevel`,
   * `namespaceIsolation`, `cniDir`); they win over the generated ones except `type`.
   */
  extra?: Record<string, unknown>;
  /** The list's `name`; default {@link MANIFOLD_NETWORK_NAME}. */
  name?: string;
}

/**
 * The union of the capabilities the plugins of a list declare `true` (CNI CONVENTIONS.md
 * "Dynamic Plugin specific fields"; Multus `getCapabilities`), keys in first-seen order.
 *
 * @param list the primary configuration
 * @returns e.g. `{ portMappings: true, bandwidth: true }`; `{}` when none
 * @example
 * ```ts
 * unionCapabilities(parseNetworkConfig({ cniVersion: "1.0.0", name: "n", plugins: [
 *   { type: "bridge" }, { type: "portmap", capabilities: { portMappings: true } }] }));
 * // { portMappings: true }
 * ```
 */
export function unionCapabilities(list: NetworkConfigList): Record<string, boolean> {
  const out: Record<string, boolean> = {};
  for (const plugin of list.plugins) {
    const caps = plugin.capabilities;
    if (typeof caps !== "object" || caps === null || Array.isArray(caps)) continue;
    for (const [name, on] of Object.entries(caps)) {
      if (on === true) out[name] = true;
    }
  }
  return out;
}

/**
 * Builds `00-manifold.conflist` for a primary configuration:
 * `{cniVersion: <the primary's>, name: "manifold-cni-network", plugins: [{type: "manifold",
 * clusterNetwork, kubeconfig?, readinessindicatorfile?, capabilities, ...extra}]}`.
 * The plugin entry is validated with `parseManifoldConf` before it is returned, so an
 * invalid configuration is never written.
 *
 * @param primary the parsed primary configuration (its negotiated `cniVersion` is used)
 * @param options paths as the plugin sees them on the host, extra keys
 * @returns the configuration list object
 * @throws {CniError} code 7 when the result is not a valid Manifold configuration (e.g. an
 *   `extra` key of the wrong type); details name the key
 * @example
 * ```ts
 * const conf = generateManifoldConflist(primaryList, {
 *   clusterNetwork: "/etc/cni/net.d/10-flannel.conflist",
 *   kubeconfig: "/etc/cni/net.d/manifold.d/manifold.kubeconfig",
 * });
 * conf.plugins[0].capabilities; // { portMappings: true, "io.kubernetes.cri.pod-annotations": true }
 * ```
 */
export function generateManifoldConflist(
  primary: NetworkConfigList,
  options: ManifoldConflistOptions,
): { cniVersion: string; name: string; plugins: [Record<string, unknown>] } {
  const plugin: Record<string, unknown> = {
    type: "manifold",
    clusterNetwork: options.clusterNetwork,
  };
  if (options.kubeconfig) plugin.kubeconfig = options.kubeconfig;
  if (options.readinessIndicatorFile) {
    plugin.readinessindicatorfile = options.readinessIndicatorFile;
  }
  plugin.capabilities = { ...unionCapabilities(primary), [POD_ANNOTATIONS_CAPABILITY]: true };
  for (const [k, v] of Object.entries(options.extra ?? {})) {
    if (k !== "type" && k !== "name" && k !== "cniVersion") plugin[k] = structuredClone(v);
  }
  const name = options.name ?? MANIFOLD_NETWORK_NAME;
  // What the plugin will receive from the runtime (libcni injects name and cniVersion).
  parseManifoldConf({ ...plugin, name, cniVersion: primary.cniVersion });
  return { cniVersion: primary.cniVersion, name, plugins: [plugin] };
}

/**
 * The file text of a configuration: 2-space indented JSON and a final newline.
 *
 * @param conf the object from {@link generateManifoldConflist}
 * @returns the text to write
 */
export function renderConfig(conf: Record<string, unknown>): string {
  return `${JSON.stringify(conf, null, 2)}\n`;
}

/**
 * Whether a file's text is a configuration the installer generated (a list whose only
 * plugin has type `manifold`), so that only Manifold's own file is ever removed.
 *
 * @param text the file's content
 * @returns true for Manifold's configuration, false for anything else (including non-JSON)
 */
export function isManifoldConfig(text: string): boolean {
  try {
    const v = JSON.parse(text) as { plugins?: unknown; type?: unknown };
    if (v?.type === "manifold") return true;
    return Array.isArray(v?.plugins) && v.plugins.length === 1 &&
      (v.plugins[0] as { type?: unknown })?.type === "manifold";
  } catch {
    return false;
  }
}
