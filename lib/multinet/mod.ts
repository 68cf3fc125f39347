/**
 * The NPWG multi-network logic: selection, resolution, planning, attach/detach
 * orchestration, network-status and the DEL cache.
 * @module
 */
export * from "./types.ts";
export * from "./config.ts";
export * from "./pod.ts";
export * from "./selection.ts";
export * from "./resolve.ts";
export * from "./nad_source.ts";
export * from "./nad_mirror.ts";
export * from "./plan.ts";
export * from "./pod_plan.ts";
export * from "./rebuild.ts";
export * from "./status.ts";
export * from "./cache.ts";
export * from "./networks.ts";
export * from "./deps.ts";
export * from "./cmd_add.ts";
export * from "./add_run.ts";
export * from "./cmd_del.ts";
export * from "./cmd_check.ts";
export * from "./cmd_gc.ts";
export * from "./gc_networks.ts";
export * from "./teardown.ts";
export type { DetachFailure } from "./detach.ts";
export * from "./tombstones.ts";
export * from "./kernel.ts";
export * from "./plugin.ts";
export * from "./wiring.ts";
export * from "./api_sources.ts";
export * from "./pod_network_annotation.ts";
export * from "./pod_networks.ts";
export * from "./pod_network_status.ts";
