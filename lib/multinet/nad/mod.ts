/**
 * Where NetworkAttachmentDefinitions come from (NPWG v1.3 §3): the {@link NadSource} interface,
 * the Kubernetes API, the node-local mirror `manifold mirror` keeps, and a directory
 * (standalone mode); a NAD's `spec.config` as untrusted input.
 * @module
 */
export * from "./source.ts";
export * from "./mirror.ts";
export * from "./api_sources.ts";
