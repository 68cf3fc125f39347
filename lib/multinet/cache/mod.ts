/**
 * The attachment cache: what DEL, CHECK and GC need when the NADs or the API server are gone —
 * records, their file names, tombstones and the per-container lock.
 * @module
 */
export * from "./cache.ts";
export * from "./tombstones.ts";
