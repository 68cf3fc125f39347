/**
 * Kubernetes access for Manifold: {@link loadKubeconfig} / {@link inClusterConnection}
 * find the API server, {@link KubeClient} talks to it (Pods, NetworkAttachmentDefinitions,
 * pod status annotations, Events, list and watch), `types.ts` validates what comes back, and
 * {@link listWatch} keeps a copy of a collection current (`manifold mirror`).
 *
 * Importing this module does not load `yaml` (only a YAML kubeconfig does, lazily) nor
 * `node:https` (only `insecure-skip-tls-verify` does, lazily).
 *
 * @module
 */
export * from "./types.ts";
export * from "./kubeconfig.ts";
export * from "./client.ts";
export * from "./watch.ts";
export * from "./multinetwork.ts";
