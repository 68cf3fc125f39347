/**
 * The attachment cache: what DEL, CHECK and GC need when the NADs or the API server are gone —
 * records, their file names, tombstones, the per-container lock and the notes of running
 * delegate ADDs.
 * @module
 */
export * from "./cache.ts";
export * from "./tombstones.ts";
export * from "./delegate_groups.ts";
