/**
 * Kubeconfigs (`clientcmd/api/v1` `Config`) as a {@link KubeConnection}: one file or a
 * `KUBECONFIG` list merged as kubectl merges it ({@link kubeconfigPaths}), a context chosen by
 * name or `current-context`, users with a token, token file, client certificate or exec
 * credential plugin (run later, by the client: `../exec_credential.ts`).
 *
 * The room, one concern a file:
 * - `load.ts` — {@link loadKubeconfig}: the context's cluster and user as a connection
 *   (server URL, PEM files and base64 data, token, tokenFile);
 * - `document.ts` — reading a file as a checked document (`JSON.parse`, then the fast check
 *   {@link KUBECONFIG_SHAPE}) and kubectl's merge of a list;
 * - `schema.ts` — the zod schema ({@link checkKubeconfigWithZod}), for documents the fast
 *   check does not accept;
 * - `yaml.ts` — a file that is not JSON, read as YAML;
 * - `exec.ts` — an exec credential user ({@link EXEC_API_VERSIONS});
 * - `paths.ts` — the `KUBECONFIG` list ({@link kubeconfigPaths}).
 *
 * This door loads all but `yaml.ts` (and no zod, no `yaml`). The per-call path (issue 30)
 * imports `load.ts` directly: an ADD with a JSON kubeconfig the fast check accepts loads
 * `load.ts` and `document.ts` only; zod, `yaml` and the other files only when their branch
 * runs.
 *
 * @module
 */
// Types only, defined in ../connection.ts: this door does not load it (inClusterConnection).
export type { ExecCredentialConfig, InClusterOptions, KubeConnection } from "../connection.ts";
export { loadKubeconfig, type LoadKubeconfigOptions } from "./load.ts";
export { KUBECONFIG_SHAPE } from "./document.ts";
export { checkKubeconfigWithZod } from "./schema.ts";
export { EXEC_API_VERSIONS } from "./exec.ts";
export { kubeconfigPaths } from "./paths.ts";
