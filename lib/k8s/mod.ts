/**
 * Kubernetes access for Manifold: {@link loadKubeconfig} / {@link inClusterConnection}
 * find the API server (kubeconfig contexts, `KUBECONFIG` lists, exec credential plugins),
 * {@link KubeClient} talks to it (Pods, NetworkAttachmentDefinitions, pod status annotations,
 * Events, list and watch; DRA ResourceClaims and ResourceSlices in `resource.ts`), `types.ts`
 * validates what comes back, {@link listWatch} keeps a
 * copy of a collection current (`manifold mirror`), and every failure is a {@link KubeError}
 * (its CNI code is chosen by lib/multinet, never here).
 *
 * Importing this module does not load `yaml` (only a YAML kubeconfig does, lazily) nor
 * `node:https` (only `insecure-skip-tls-verify` does, lazily).
 *
 * @module
 */
export type { LogFields, Logger } from "../log/mod.ts";
export * from "./errors.ts";
export * from "./types.ts";
export * from "./connection.ts";
export * from "./kubeconfig/mod.ts";
export * from "./client.ts";
export * from "./watch.ts";
export {
  type ExecClusterInfo,
  type ExecCredential,
  type ExecCredentialOptions,
  ExecCredentialSource,
  execInfo,
  runExecCredentialPlugin,
  withExecCredential,
} from "./exec_credential.ts";
export * from "./label_selector.ts";
export * from "./multinetwork.ts";
export * from "./pod_list_watch.ts";
export * from "./resource.ts";
