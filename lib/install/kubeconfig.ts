/**
 * The kubeconfig the node installer writes for the plugin. It names the service-account
 * token by *file* (`tokenFile`), which the plugin reads again on every API request, so a
 * rotated projected token is used at once (Multus #852, where the token was copied into the
 * kubeconfig and expired). JSON, which is YAML too: the plugin parses it without loading a
 * YAML parser (lib/k8s/kubeconfig/document.ts).
 *
 * The plugin runs on the host, where the pod's projected token path does not exist; the
 * installer therefore mirrors `token` and `ca.crt` into a host directory next to the
 * kubeconfig ({@link SERVICE_ACCOUNT_FILES}) and refreshes the copy whenever kubelet rotates
 * the token.
 *
 * @module
 */

/** Files of the service-account directory mirrored to the host: the token and the CA. */
export const SERVICE_ACCOUNT_FILES = { token: "token", ca: "ca.crt" } as const;

/** Sub-directory of the CNI configuration directory holding the kubeconfig and credentials. */
export const MANIFOLD_CONF_SUBDIR = "manifold.d";
/** File name of the plugin's kubeconfig inside {@link MANIFOLD_CONF_SUBDIR}. */
export const KUBECONFIG_NAME = "manifold.kubeconfig";

/** Options of {@link buildPluginKubeconfig}. */
export interface PluginKubeconfigOptions {
  /** API server URL, e.g. `"https://10.96.0.1:443"` or `"https://[fd00::1]:443"`. */
  server: string;
  /** Host path of the token file (read per request by the plugin). */
  tokenFile: string;
  /** Host path of the PEM CA bundle; absent: the system roots. */
  certificateAuthority?: string;
}

/**
 * Builds the plugin's kubeconfig (`clientcmd/api/v1` `Config`): one cluster, one user with
 * `tokenFile`, one context, selected as `current-context`.
 *
 * @param options server URL and host paths
 * @returns the kubeconfig object (serialise with `JSON.stringify`)
 * @example
 * ```ts
 * buildPluginKubeconfig({ server: "https://10.96.0.1:443",
 *   tokenFile: "/etc/cni/net.d/manifold.d/token",
 *   certificateAuthority: "/etc/cni/net.d/manifold.d/ca.crt" })["current-context"]; // "manifold"
 * ```
 */
export function buildPluginKubeconfig(options: PluginKubeconfigOptions): Record<string, unknown> {
  const cluster: Record<string, unknown> = { server: options.server };
  if (options.certificateAuthority) {
    cluster["certificate-authority"] = options.certificateAuthority;
  }
  return {
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name: "manifold", cluster }],
    users: [{ name: "manifold", user: { tokenFile: options.tokenFile } }],
    contexts: [{ name: "manifold", context: { cluster: "manifold", user: "manifold" } }],
    "current-context": "manifold",
  };
}

/**
 * The API server URL of the in-cluster environment (`rest.InClusterConfig`):
 * `https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT`, an IPv6 host bracketed.
 *
 * @param env the process environment
 * @returns the URL, or undefined when either variable is unset
 * @example
 * ```ts
 * serverFromEnv({ KUBERNETES_SERVICE_HOST: "fd00::1", KUBERNETES_SERVICE_PORT: "443" });
 * // "https://[fd00::1]:443"
 * ```
 */
export function serverFromEnv(env: Record<string, string | undefined>): string | undefined {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (!host || !port) return undefined;
  return `https://${host.includes(":") ? `[${host}]` : host}:${port}`;
}
