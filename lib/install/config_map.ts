/**
 * Manifold's node configuration as one cluster object: deploy/'s ConfigMap
 * `kube-system/manifold-config`, key `plugin-conf.json`, holds the keys of the plugin entry
 * (a JSON object, e.g. `{"nadMirrorDir": "/run/k8s.cni.cncf.io/nads", "daemonSocket": …}`).
 * The installer of every node writes `00-manifold.conflist` from it (`manifold install
 * --plugin-conf-file`, the ConfigMap mounted), and `kubectl manifold explain` on a machine with
 * no node config reads the same object through the API, so both see one source of truth.
 *
 * @module
 */

import { z } from "zod";
import { POD_ANNOTATIONS_CAPABILITY } from "../multinet/types.ts";
import { MANIFOLD_NETWORK_NAME } from "./conflist.ts";

/** Where deploy/ keeps the node configuration: namespace, name and data key. */
export const MANIFOLD_CONFIG_MAP = {
  namespace: "kube-system",
  name: "manifold-config",
  key: "plugin-conf.json",
} as const;

/** The part of a `v1` ConfigMap read here: string data (binaryData and the rest ignored). */
const ConfigMapData = z.object({ data: z.record(z.string(), z.string()).optional() });

/**
 * The `plugin-conf.json` text of the ConfigMap as the API returned it (untrusted: checked with
 * zod, not cast).
 *
 * @param body the decoded JSON body of `GET /api/v1/namespaces/{ns}/configmaps/{name}`
 * @param source what it came from, for the message (e.g. `"configmap kube-system/manifold-config"`)
 * @returns the text of the data key {@link MANIFOLD_CONFIG_MAP}`.key`
 * @throws {Error} when the body is not a ConfigMap with string data, or the key is missing
 * @example
 * ```ts
 * pluginConfText({ data: { "plugin-conf.json": "{}" } }, "configmap x"); // "{}"
 * ```
 */
export function pluginConfText(body: unknown, source: string): string {
  const parsed = ConfigMapData.safeParse(body);
  if (!parsed.success) {
    throw new Error(`${source} is not a ConfigMap with string data: ${parsed.error.message}`);
  }
  const text = parsed.data.data?.[MANIFOLD_CONFIG_MAP.key];
  if (text === undefined) throw new Error(`${source} has no data key "${MANIFOLD_CONFIG_MAP.key}"`);
  return text;
}

/**
 * Parses the keys of the plugin entry given as JSON text (`--plugin-conf`, the ConfigMap's
 * `plugin-conf.json`). Only the shape is checked here; the keys themselves are validated with
 * the whole entry (`parseManifoldConf`) before anything is written or explained.
 *
 * @param text JSON text of an object
 * @param source what it came from, for the message (e.g. `"--plugin-conf"`)
 * @returns the object
 * @throws {Error} when the text is not JSON or not an object (message names `source`)
 * @example
 * ```ts
 * parsePluginConf('{"logLevel":"debug"}', "--plugin-conf"); // { logLevel: "debug" }
 * ```
 */
export function parsePluginConf(text: string, source: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new Error(`${source} is not valid JSON: ${e instanceof Error ? e.message : String(e)}`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new Error(`${source} must be a JSON object`);
  }
  return value as Record<string, unknown>;
}

/**
 * The plugin entry a node's installer would write from the ConfigMap's keys, as seen from a
 * machine that is not a node: the cluster network cannot be read there (each node's installer
 * picks the first CNI config of its own `/etc/cni/net.d`), so unless the keys name one as a
 * NAD (`clusterNetwork: "ns/name"` or a bare NAD name), a placeholder inline delegate
 * (`type: "<node-local>"`) stands for it, and node-local paths (`nadMirrorDir`, `chrootDir`,
 * `kubeconfig`, …) are dropped: the NADs come from the API instead.
 *
 * @param keys the ConfigMap's `plugin-conf.json` object
 * @returns `{ entry, assumed }`: the entry (with `name` and `cniVersion` as libcni injects
 *   them) for `parseManifoldConf`, and one line per node-local input that was assumed
 */
export function clusterViewEntry(
  keys: Record<string, unknown>,
): { entry: Record<string, unknown>; assumed: string[] } {
  const entry: Record<string, unknown> = { ...keys };
  const assumed: string[] = [];
  for (const k of ["nadMirrorDir", "chrootDir", "kubeconfig", "logFile", "cniDir", "nadDir"]) {
    if (k in entry) {
      assumed.push(`"${k}" is a path on the node: not read here (NADs come from the API)`);
      delete entry[k];
    }
  }
  const cn = entry.clusterNetwork;
  if (typeof cn !== "string" || cn === "" || cn.startsWith("/")) {
    delete entry.clusterNetwork;
    if (!Array.isArray(entry.delegates) || entry.delegates.length === 0) {
      entry.delegates = [{ cniVersion: "1.0.0", name: "cluster-network", type: "<node-local>" }];
      assumed.push(
        typeof cn === "string" && cn.startsWith("/")
          ? `the cluster network is the node's file ${cn}: not read here`
          : "the cluster network is each node's first CNI config (chosen by its installer): not read here",
      );
    }
  }
  // The installer adds the cluster network's capabilities to the runtime's pod annotations.
  entry.capabilities = { [POD_ANNOTATIONS_CAPABILITY]: true, ...(entry.capabilities ?? {}) };
  assumed.push(
    `capabilities: ${POD_ANNOTATIONS_CAPABILITY} only (a node adds its cluster network's)`,
  );
  entry.type = "manifold";
  entry.name = MANIFOLD_NETWORK_NAME;
  entry.cniVersion ??= "1.0.0";
  return { entry, assumed };
}
