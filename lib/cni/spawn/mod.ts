/**
 * Starting a plugin process: with posix_spawn through FFI (native.ts, the per-call plugin's way,
 * its child in native_child.ts) or with `Deno.Command` (child_streams.ts: its web streams as
 * exec.ts drives them), and the words for a plugin that did not start (failures.ts). exec.ts,
 * the executor, is this room's one user.
 *
 * @module
 */
export * from "./native.ts";
export { decodeWaitStatus, errnoText, POLL_SLICE_MS } from "./native_child.ts";
export * from "./child_streams.ts";
export * from "./failures.ts";
export type { CappedRead, ExecResponse, PendingWrite, SpawnedChild } from "../exec_types.ts";
export type { CniError, CniErrorCodeValue, CniErrorJson } from "../errors.ts";
