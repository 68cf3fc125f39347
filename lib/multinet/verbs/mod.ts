/**
 * The CNI verbs of the delegating plugin (CNI SPEC "ADD", "DEL", "CHECK", "GC", "STATUS";
 * NPWG v1.3 §6–§7) and their runs: attach with rollback, best-effort detach, DEL's rebuild
 * without a cache, and GC's choice of networks.
 * @module
 */
export * from "./add.ts";
export * from "./add_run.ts";
export * from "./del.ts";
export * from "./check.ts";
export * from "./gc.ts";
export * from "./gc_networks.ts";
export * from "./teardown.ts";
export * from "./rebuild.ts";
export type { DetachFailure } from "./detach.ts";
