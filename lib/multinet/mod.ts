/**
 * The NPWG multi-network logic, in rooms that follow the spec's parts: `plan/` (selection,
 * references, resolution, the pod plan), `nad/` (NAD sources), `cache/` (what DEL needs),
 * `status/` (network-status, the kernel check, publishing) and `verbs/` (ADD, DEL, CHECK, GC,
 * STATUS). This folder's top holds the configuration, the injected dependencies and the wiring.
 * @module
 */
export * from "./types.ts";
export * from "./config.ts";
export * from "./deps.ts";
export * from "./plugin.ts";
export * from "./wiring.ts";
export * from "./plan/mod.ts";
export * from "./nad/mod.ts";
export * from "./cache/mod.ts";
export * from "./status/mod.ts";
export * from "./verbs/mod.ts";
