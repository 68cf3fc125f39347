/**
 * Leaf helpers with no knowledge of CNI, Kubernetes or netlink: hot-path timers, text
 * formatting and fast shape checks (zod's subset for the per-call path). Every other folder may
 * import this one; it imports nothing of the project.
 * @module
 */
export * from "./timer.ts";
export * from "./text.ts";
export * from "./abortable.ts";
export * from "./shape.ts";
