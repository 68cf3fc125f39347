/**
 * Leaf helpers with no knowledge of CNI, Kubernetes or netlink: hot-path timers and text
 * formatting. Every other folder may import this one; it imports nothing of the project.
 * @module
 */
export * from "./timer.ts";
export * from "./text.ts";
export * from "./abortable.ts";
