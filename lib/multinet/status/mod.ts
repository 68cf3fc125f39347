/**
 * What the pod is told and what the kernel holds (NPWG v1.3 §5): the network-status
 * annotation, the KEP-3698 per-network status, the kernel check, and where status and events
 * are published (API or files).
 * @module
 */
export * from "./network_status.ts";
export * from "./kernel.ts";
export * from "./pod_network_status.ts";
