/**
 * The pod's attachment plan (NPWG v1.3 §3.3–§4, §6.1): the pod a call is for, its network
 * selection, network references, delegate resolution, the cluster default network and
 * `defaultNetworks`, KEP-3698 entries, and the one plan every verb and `explain` build.
 * @module
 */
export * from "./pod.ts";
export * from "./selection.ts";
export * from "./resolve.ts";
export * from "./plan.ts";
export * from "./pod_plan.ts";
export * from "./networks.ts";
export * from "./pod_network_annotation.ts";
export * from "./pod_networks.ts";
export * from "./pod_network_plan.ts";
