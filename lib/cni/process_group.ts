/**
 * Process groups of delegates: each delegate runs in a process group of its own (exec.ts), so
 * that it and everything it starts (its IPAM plugin, iptables) can be stopped together — also
 * by a later process, when the one that started it was killed (containerd and CRI-O kill the
 * plugin's PID on their timeout, never its group; a SIGKILLed `manifold daemon` leaves its
 * delegates running). A group is named by its {@link ProcessGroup} identity — pgid plus the
 * leader's start time, boot and PID namespace — so that a recycled PID is never signalled.
 *
 * Linux only: reads `/proc/<pid>/stat` (proc(5)), `/proc/sys/kernel/random/boot_id` and
 * `/proc/self/ns/pid` through lib/fs/procfs.ts (libc: Deno refuses /proc without
 * `--allow-all`), so it needs `--allow-ffi`.
 *
 * @module
 */

import { CniError, CniErrorCode } from "./errors.ts";
import { listPids, readProcFile, readProcLink } from "../fs/procfs.ts";
import { errorText } from "../util/text.ts";
import { sleep } from "../util/timer.ts";

/**
 * Who a delegate's process group is: its id and what makes that id unambiguous.
 * Serialised as JSON by lib/multinet/cache/delegate_groups.ts.
 */
export interface ProcessGroup {
  /** Process group id = the leader's PID (the delegate, or the wrapper that exec'd it). */
  pgid: number;
  /** The leader's start time, clock ticks after boot (proc(5) `/proc/<pid>/stat` field 22). */
  startTime: number;
  /** `/proc/sys/kernel/random/boot_id` when noted: a PID means nothing after a reboot. */
  bootId: string;
  /** `/proc/self/ns/pid` of the noting process, e.g. `"pid:[4026531836]"`: PIDs are per namespace. */
  pidNs: string;
}

/** One `/proc/<pid>/stat` line, the fields used here. */
interface Stat {
  /** proc(5) field 3: R, S, D, Z, T, X… */
  state: string;
  /** Field 5: the process group id. */
  pgrp: number;
  /** Field 22: start time in clock ticks after boot. */
  startTime: number;
}

/**
 * Parses a `/proc/<pid>/stat` line (proc(5)); the command name (field 2) may hold spaces and
 * parentheses, so fields are counted after its last `)`.
 * @param text the file's content
 * @returns state, pgrp and start time, or undefined for anything else
 * @example
 * ```ts
 * parseStat("42 (a) b) S 1 42 42 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 777 0 0"); // {state:"S",pgrp:42,startTime:777}
 * ```
 */
export function parseStat(text: string): Stat | undefined {
  const close = text.lastIndexOf(")");
  if (close < 0) return undefined;
  // After ") ": field 3 (state) is index 0, field 5 (pgrp) index 2, field 22 index 19.
  const f = text.slice(close + 2).split(" ");
  const pgrp = Number(f[2]);
  const startTime = Number(f[19]);
  if (!f[0] || !Number.isSafeInteger(pgrp) || !Number.isSafeInteger(startTime)) return undefined;
  return { state: f[0], pgrp, startTime };
}

function readStat(pid: number): Stat | undefined {
  const text = readProcFile(`/proc/${pid}/stat`);
  return text === undefined ? undefined : parseStat(text);
}

/** Whether a process in `state` still runs code: not a zombie (Z) nor dead (X). */
function running(state: string): boolean {
  return state !== "Z" && state !== "X" && state !== "x";
}

let host: { bootId: string; pidNs: string } | undefined;

/**
 * Loads libc's file symbols (the FFI `dlopen`, ≈ 1.2 ms) and reads this host's identity ({@link ProcessGroup}'s
 * `bootId` and `pidNs`) now, before the first group is noted, so that {@link processGroupOf}
 * right after a spawn costs ≈ 75 µs. Never throws: without `--allow-ffi` or /proc, the first
 * {@link processGroupOf} reports the failure as before.
 */
export function prefetchGroupIdentity(): void {
  try {
    hostIdentity();
  } catch { /* reported by processGroupOf */ }
}

/** This boot's id and this process's PID namespace, read once per process. */
function hostIdentity(): { bootId: string; pidNs: string } {
  if (host) return host;
  const bootId = readProcFile("/proc/sys/kernel/random/boot_id")?.trim() ?? "";
  return host = { bootId, pidNs: readProcLink("/proc/self/ns/pid") ?? "" };
}

/**
 * The identity of the process group led by `pid` (a delegate just spawned in a group of its
 * own): pgid = `pid`, with the leader's start time, the boot id and the PID namespace. Reads
 * synchronously (one `/proc/<pid>/stat`, ≈ 10 µs; the first call also the boot id and the
 * namespace), so that it can be noted before the caller does anything else.
 * @param pid the leader's PID (`Deno.ChildProcess.pid`)
 * @returns the identity, or undefined when the process is already gone (reaped)
 */
export function processGroupOf(pid: number): ProcessGroup | undefined {
  const stat = readStat(pid);
  if (!stat) return undefined;
  const { bootId, pidNs } = hostIdentity();
  return { pgid: pid, startTime: stat.startTime, bootId, pidNs };
}

/**
 * Sends a signal to a whole process group (kill(2) with `-pgid`).
 * @param pgid the group
 * @param signal e.g. `"SIGKILL"`
 * @returns false when no process is in the group (ESRCH)
 */
export function killGroup(pgid: number, signal: Deno.Signal): boolean {
  try {
    Deno.kill(-pgid, signal);
    return true;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return false;
    throw e;
  }
}

/** The PIDs of the group's members that still run (zombies left out), from a /proc scan. */
function liveMembers(pgid: number): number[] {
  return listPids().filter((pid) => {
    const stat = readStat(pid);
    return stat !== undefined && stat.pgrp === pgid && running(stat.state);
  });
}

/**
 * Whether anything of the group still runs. Cheap while its leader runs (one stat read);
 * a /proc scan once the leader is a zombie or gone (a process whose parent died is reaped by
 * init or a subreaper, maybe late; members may outlive the leader).
 */
function groupRuns({ pgid, startTime }: ProcessGroup): boolean {
  const leader = readStat(pgid);
  if (leader && leader.startTime === startTime && running(leader.state)) return true;
  try {
    Deno.kill(-pgid, "SIGCONT"); // a probe: harmless to processes being stopped anyway
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return false;
  }
  return liveMembers(pgid).length > 0;
}

/** Options of {@link stopProcessGroup}. */
export interface StopOptions {
  /** How long the group gets to exit after SIGTERM before SIGKILL, ms. Default 500. */
  graceMs?: number;
  /** How long to wait for the group to be gone after SIGKILL, ms. Default 5000. */
  killWaitMs?: number;
  /** How often to look, ms. Default 20. */
  pollMs?: number;
}

/** What {@link stopProcessGroup} found and did. */
export type StopOutcome =
  /** Not running (any more), or the PID now names another process: nothing signalled. */
  | "gone"
  /** It exited within the grace period after SIGTERM. */
  | "terminated"
  /** It had to be SIGKILLed. */
  | "killed";

/**
 * Stops a delegate's process group that its starter left behind: only when `group` still
 * names that group — same boot, same PID namespace, and its leader (PID = pgid) alive with the
 * recorded start time — SIGTERM to the group, then SIGKILL after `graceMs`, then waits until
 * no member runs (zombies do not count: they run no code). A group whose leader already
 * exited is not signalled (its PID may have been recycled; members it left are not told apart
 * from a new group's).
 * @param group the identity noted when the delegate started
 * @param opts grace, wait and poll intervals
 * @returns `"gone"`, `"terminated"` or `"killed"`
 * @throws {CniError} code 11 when members still run `killWaitMs` after SIGKILL (uninterruptible
 *   sleep); code 5 when signalling fails otherwise (EPERM)
 */
export async function stopProcessGroup(
  group: ProcessGroup,
  opts: StopOptions = {},
): Promise<StopOutcome> {
  const { graceMs = 500, killWaitMs = 5000, pollMs = 20 } = opts;
  const here = hostIdentity();
  if (group.bootId !== here.bootId || group.pidNs !== here.pidNs) return "gone";
  const leader = readStat(group.pgid);
  if (!leader || leader.startTime !== group.startTime || !running(leader.state)) return "gone";
  const { pgid } = group;
  const signal = (sig: Deno.Signal) => {
    try {
      // The leader makes its group in its first instructions (setsid): before that, itself.
      if (!killGroup(pgid, sig)) Deno.kill(pgid, sig);
    } catch (e) {
      if (e instanceof Deno.errors.NotFound) return;
      throw new CniError(
        CniErrorCode.IoFailure,
        `cannot signal the process group ${pgid} of a delegate`,
        `${sig}: ${errorText(e)}`,
      );
    }
  };
  const exitsWithin = async (ms: number) => {
    const deadline = performance.now() + ms;
    while (groupRuns(group)) {
      if (performance.now() >= deadline) return false;
      await sleep(pollMs);
    }
    return true;
  };
  signal("SIGTERM");
  if (await exitsWithin(graceMs)) return "terminated";
  signal("SIGKILL");
  if (await exitsWithin(killWaitMs)) return "killed";
  throw new CniError(
    CniErrorCode.TryAgainLater,
    `the process group ${pgid} of a delegate still runs ${killWaitMs} ms after SIGKILL`,
    `members: ${liveMembers(pgid).join(" ")}`,
  );
}
