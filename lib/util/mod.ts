/**
 * Leaf helpers with no knowledge of CNI, Kubernetes or netlink: hot-path timers, text
 * formatting, fast shape checks (zod's subset for the per-call path) and lazy imports (a module
 * loaded only when its branch runs). Every other folder may
 * import this one; it imports nothing of the project.
 * @module
 */
export * from "./timer.ts";
export * from "./text.ts";
export * from "./abortable.ts";
export * from "./shape.ts";
export * from "./lazy.ts";
