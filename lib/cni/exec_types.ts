/**
 * What executing a plugin binary takes and gives (libcni `pkg/invoke` `Exec`): the request
 * (path, stdin, environment, timeout, stdin gate), the response (status, captured output), the
 * {@link PluginExec} contract and the {@link GroupTracker} told of each plugin's process group.
 * Implemented by exec.ts (real processes) and exec_fake.ts (a recording fake).
 *
 * @module
 */

import type { ProcessGroup } from "./process_group.ts";

/** One plugin execution request. */
export interface ExecRequest {
  /** Absolute path of the plugin binary. */
  path: string;
  /** Bytes written to the child's stdin (the JSON config). */
  stdin: Uint8Array;
  /**
   * The child's complete environment (nothing is inherited). {@link ProcessPluginExec}
   * adds only the delegation marker `MANIFOLD_DELEGATION_DEPTH` (lib/cni/recursion.ts).
   */
  env: Record<string, string>;
  /** Kill the child (its whole process group) with SIGKILL after this many milliseconds. */
  timeoutMs: number;
  /**
   * The child is spawned at once but `stdin` is written only once this resolves (a plugin does
   * nothing before it has read its config): its start-up overlaps the caller's wait, e.g. the
   * intent record becoming durable. When it rejects, nothing is written, the child's group is
   * killed, and {@link PluginExec.exec} rejects with the gate's error.
   */
  stdinGate?: Promise<void>;
}

/** What a plugin execution produced. */
export interface ExecResponse {
  /** Exit code (128 + signal number when killed by a signal). */
  code: number;
  /** Terminating signal name, e.g. "SIGKILL", or null. */
  signal: string | null;
  /** Captured stdout, at most the exec's output cap. */
  stdout: Uint8Array;
  /** Captured stderr, at most the exec's output cap. */
  stderr: Uint8Array;
  /** True when the child was killed because `timeoutMs` elapsed. */
  timedOut: boolean;
  /** True when stdout or stderr was cut at the output cap (optional, Manifold extension). */
  truncated?: boolean;
}

/** Runs a plugin binary (libcni `invoke.Exec`). */
export interface PluginExec {
  /**
   * Runs one plugin to completion.
   * @throws {CniError} when the binary cannot be started at all.
   */
  exec(req: ExecRequest): Promise<ExecResponse>;
}

/**
 * Told when a plugin's process group starts and when its leader exited, so that the group can
 * be noted where a later process finds it (lib/multinet/cache/delegate_groups.ts notes ADDs).
 * Neither call may throw; both are synchronous. `started` runs right after the spawn (the
 * plugin already runs): this process can be killed at any await, and a note written later than
 * the first one would leave the plugin unnoted meanwhile — or, with a `stdinGate`, once the gate
 * opens, just before the config is written (until then the plugin can do nothing and dies with
 * this process).
 */
export interface GroupTracker {
  /**
   * Whether this execution's group is wanted; only then is it identified (a procfs read
   * through libc, loaded on first use: ≈ 3–13 ms once per process).
   */
  tracks(req: ExecRequest): boolean;
  /** The plugin runs as leader of `group`. */
  started(req: ExecRequest, group: ProcessGroup): void;
  /** The plugin (the leader of `group`) exited, was killed, or timed out. */
  ended(req: ExecRequest, group: ProcessGroup): void;
}

/** A write to a child's stdin in progress (spawn/child_streams.ts `writeAll`). */
export interface PendingWrite {
  /** Resolves when all bytes were written and stdin closed (or writing failed). */
  done: Promise<void>;
  /**
   * Aborts a write still pending (nobody reads stdin) and resolves once it gave up: within one
   * poll slice for spawn/native.ts (once the stdin gate settled), at once for `Deno.Command`,
   * whose write in flight into a pipe a grandchild holds open unread cannot be cancelled and is
   * left to end with that pipe.
   */
  finish(): Promise<void>;
}

/** A read of a child's output stream in progress (spawn/child_streams.ts `readCapped`). */
export interface CappedRead {
  /** Resolves when the stream ended. */
  done: Promise<void>;
  /** Stops reading (if still going) and returns what was kept. */
  finish(): Promise<{ bytes: Uint8Array; truncated: boolean }>;
}

/**
 * A running plugin as exec.ts drives it, whichever way it was started (`Deno.Command`, or
 * posix_spawn in spawn/native.ts): its PID, its end, and its pipes as spawn/child_streams.ts's
 * pending write and capped reads.
 */
export interface SpawnedChild {
  /** The child's PID (its process group's and session's id too). */
  readonly pid: number;
  /** Resolves once it exited and was reaped. */
  readonly status: Promise<Deno.CommandStatus>;
  /** Sends it a signal. @throws once it was reaped (its PID may name another process) */
  kill(signal: Deno.Signal): void;
  /** Writes `data` to its stdin once `gate` resolves, then closes stdin (as `writeAll`). */
  feed(data: Uint8Array, gate?: Promise<void>): PendingWrite;
  /** Reads its stdout or stderr, keeping at most `cap` bytes (as `readCapped`); once each. */
  capture(stream: "stdout" | "stderr", cap: number): CappedRead;
  /** Stops reading both outputs when neither was captured (a child given up before its run). */
  dropOutput(): Promise<void>;
}
