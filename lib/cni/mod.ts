/**
 * The CNI spec layer: errors and versions, zod-validated wire types and config
 * parsing, result conversion, the CNI environment, plugin invocation, the runtime
 * role (libcni) and the plugin-side dispatcher (skel). Other folders import from here.
 *
 * @module
 */
export * from "./errors.ts";
export * from "./version.ts";
export * from "./types.ts";
export * from "./netconf.ts";
export * from "./result.ts";
export * from "./env.ts";
export * from "./exec.ts";
export * from "./exec_fake.ts";
export * from "./invoke.ts";
export * from "./runtime.ts";
export * from "./skel.ts";
export * from "./decode.ts";
export * from "./recursion.ts";
export type { ProcessGroup, StopOptions, StopOutcome } from "./process_group.ts";
