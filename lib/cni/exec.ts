/**
 * Executing a plugin binary (libcni `pkg/invoke` `Exec`/`RawExec`): the small
 * {@link PluginExec} interface and its real implementation {@link ProcessPluginExec} — a
 * child process in a process group of its own, with exactly the given environment, the
 * config on stdin, bounded time and bounded output. The CNI protocol on top (environment,
 * decoding) is invoke.ts; the recording fake is exec_fake.ts; process groups are
 * process_group.ts; writing the child's stdin and reading its capped output, spawn/child_streams.ts.
 *
 * @module
 */

import { delegateEnv } from "./recursion.ts";
import {
  killGroup,
  prefetchGroupIdentity,
  type ProcessGroup,
  processGroupOf,
} from "./process_group.ts";
import {
  denoChild,
  prefetchNativeSpawn,
  spawnError,
  spawnNative,
  type Wrapper,
  wrapperFailure,
} from "./spawn/mod.ts";

export { pluginName } from "./spawn/mod.ts";
import { errorText } from "../util/text.ts";
import { whenIdle } from "../util/idle.ts";
import { sleep, startTimer, type Timer } from "../util/timer.ts";
import type {
  ExecRequest,
  ExecResponse,
  GroupTracker,
  PluginExec,
  SpawnedChild,
} from "./exec_types.ts";

export type {
  CappedRead,
  ExecRequest,
  ExecResponse,
  GroupTracker,
  PendingWrite,
  PluginExec,
  SpawnedChild,
} from "./exec_types.ts";

/**
 * Loads what the first spawn needs, now: the posix_spawn symbols where a `nativeSpawn` executor
 * exists (spawn/native.ts, ≈ 1 ms), else Deno's process API (loaded on first access: ≈ 2 ms of
 * main-thread JavaScript); and the group identity a delegate's note needs
 * ({@link prefetchGroupIdentity}). Called while the main thread would otherwise wait, so the first
 * delegate's spawn does not pay it. Idempotent.
 * @param opts `idle`: queue the loading for the main thread's next wait for an API answer
 *   (lib/util/idle.ts) instead — for an ADD whose pod GET is on the main thread's path; the group
 *   identity is then read at the first spawn, while the intent record's fsyncs run (A/B, 30 pairs
 *   twice: `attached1` −1.0 and −2.2 ms against reading it in the NAD GETs' wait)
 */
export function prefetchSpawn(opts: { idle?: boolean } = {}): void {
  const load = () => {
    if (!nativePreferred || !prefetchNativeSpawn()) void Deno.Command;
  };
  if (opts.idle) {
    // Once per process: `manifold daemon` runs many ADDs in-process, and its few API requests
    // per ADD would not run a task for each (the queue would grow without end).
    if (idleQueued) return;
    idleQueued = true;
    whenIdle(load);
    return;
  }
  load();
  prefetchGroupIdentity();
}

/**
 * A {@link ProcessPluginExec} with `nativeSpawn` exists in this process: {@link prefetchSpawn}
 * binds posix_spawn (spawn/native.ts) rather than loading `Deno.Command`.
 */
let nativePreferred = false;

/** {@link prefetchSpawn}'s idle task was queued (it needs queueing once per process). */
let idleQueued = false;

/** Options of {@link ProcessPluginExec}. */
export interface ProcessPluginExecOptions {
  /** Cap for each of stdout and stderr in bytes; the rest is drained and dropped. Default 4 MiB. */
  maxOutputBytes?: number;
  /** Extra spawn attempts after ETXTBSY ("text file busy"). Default 5. */
  spawnRetries?: number;
  /** First retry delay in ms, doubled on each retry. Default 20. */
  retryDelayMs?: number;
  /** How long to keep reading output after the child exited, in ms (a grandchild may hold the pipes). Default 500. */
  drainGraceMs?: number;
  /**
   * Run every plugin chrooted into this directory (the plugin config's `chrootDir`, e.g.
   * `"/hostroot"` where the host's `/` is mounted): `chroot(8) DIR PATH`, so `req.path`, the
   * dynamic loader and libraries, `CNI_PATH`, `CNI_NETNS` and every file the plugin opens are
   * the root's (Multus thick `chrootDir`). Unset: the process's own root.
   */
  chrootDir?: string;
  /** The chroot(8) binary; default {@link CHROOT_BINARY}. */
  chrootBinary?: string;
  /**
   * The setsid(1) binary that puts each plugin in a session and process group of its own;
   * default {@link SETSID_BINARY}. When it cannot be spawned (absent), Deno's `detached`
   * (setsid in the forked child) is used instead for the rest of the process: the same group,
   * a fork instead of a vfork (slower in a large process), supplementary groups dropped.
   */
  setsidBinary?: string;
  /** Told of each plugin's process group (default: nobody). */
  groups?: GroupTracker;
  /**
   * Start plugins with posix_spawn through FFI (spawn/native.ts: the session made in the child
   * before its exec, a `CLONE_VFORK` clone, no setsid(1) exec, Deno's process API never loaded)
   * where this process can (glibc ≥ 2.26, `--allow-ffi`); else as without it. For the per-call
   * plugin, whose few delegates each pay these costs on the pod's path. Default false.
   */
  nativeSpawn?: boolean;
}

/** GNU coreutils' chroot(8): `chroot DIR COMMAND` chroots, changes to `/` and execs COMMAND. */
export const CHROOT_BINARY = "/usr/sbin/chroot";

/**
 * util-linux setsid(1) (Essential in Debian, so in every Debian image and host): `setsid
 * COMMAND` calls setsid(2) and execs COMMAND in place — its caller is never a group leader, so
 * it does not fork — hence the PID is the plugin's and the plugin leads a new process group
 * (pgid = PID) in a new session. It exits 126/127 with one `setsid: failed to execute …` line
 * when COMMAND cannot be executed.
 */
export const SETSID_BINARY = "/usr/bin/setsid";

/** setsid(1) binaries found absent in this process: plugins are then spawned `detached`. */
const absentSetsid = new Set<string>();

/** Default output cap per stream: 4 MiB. */
export const DEFAULT_MAX_OUTPUT_BYTES = 4 * 1024 * 1024;

/**
 * Runs plugins as child processes, with `Deno.Command` or (`nativeSpawn`) posix_spawn through
 * FFI (spawn/native.ts, `POSIX_SPAWN_SETSID` instead of setsid(1)): a cleared environment plus
 * exactly `req.env` and the delegation marker `MANIFOLD_DELEGATION_DEPTH` (its depth + 1:
 * a Manifold started as a delegate refuses to work, see lib/cni/recursion.ts), no
 * arguments, config on stdin. Each plugin leads a process group of its own (through
 * setsid(1), {@link SETSID_BINARY}: `setsid [chroot DIR] PATH`, every step an exec in place,
 * so the child's PID is the plugin's and its exit status is the plugin's); the optional
 * {@link GroupTracker} is told of it. Spawning is retried on ETXTBSY
 * (the binary is still open for writing, e.g. just installed; libcni `RawExec` does
 * the same); the group is SIGKILLed after `timeoutMs` (the plugin and what it started,
 * e.g. its IPAM plugin); each output stream is capped.
 * Needs `--allow-run` (and read access to the binary).
 *
 * @example
 * ```ts
 * const exec = new ProcessPluginExec({ maxOutputBytes: 1 << 20 });
 * ```
 */
export class ProcessPluginExec implements PluginExec {
  #maxOutputBytes: number;
  #spawnRetries: number;
  #retryDelayMs: number;
  #drainGraceMs: number;
  #chroot: { dir: string; binary: string } | undefined;
  #setsid: string;
  #groups: GroupTracker | undefined;
  #nativeSpawn: boolean;

  /**
   * An executor with the given limits.
   *
   * @param opts caps, retry and drain settings (all optional).
   */
  constructor(opts: ProcessPluginExecOptions = {}) {
    this.#maxOutputBytes = opts.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
    this.#spawnRetries = opts.spawnRetries ?? 5;
    this.#retryDelayMs = opts.retryDelayMs ?? 20;
    this.#drainGraceMs = opts.drainGraceMs ?? 500;
    this.#chroot = opts.chrootDir
      ? { dir: opts.chrootDir, binary: opts.chrootBinary ?? CHROOT_BINARY }
      : undefined;
    this.#setsid = opts.setsidBinary ?? SETSID_BINARY;
    this.#groups = opts.groups;
    this.#nativeSpawn = opts.nativeSpawn ?? false;
    if (this.#nativeSpawn) nativePreferred = true;
  }

  /**
   * Runs one plugin.
   * @param req path, stdin, environment and timeout.
   * @returns exit status and captured output; a timeout is reported, not thrown.
   * @throws {CniError} code 11 when the binary stays busy (ETXTBSY) after all retries;
   *   code 999 when it cannot be spawned otherwise (missing, not executable; details = the
   *   error, e.g. `failed to execute /opt/cni/bin/x: No such file or directory`; with a
   *   `chrootDir`: chroot(8) could not enter the root or run the plugin, details = its stderr);
   *   the `stdinGate`'s own error when it rejects (the plugin never got its config).
   */
  async exec(req: ExecRequest): Promise<ExecResponse> {
    for (let attempt = 0;; attempt++) {
      const [res, wrappers] = await this.#run(req);
      const failed = wrapperFailure(res, wrappers);
      if (failed === undefined) return res;
      const busy = /text file busy/i.test(failed);
      if (busy && attempt < this.#spawnRetries) {
        await sleep(this.#retryDelayMs * 2 ** attempt);
        continue;
      }
      throw spawnError(req.path, failed, busy, attempt);
    }
  }

  /** Runs the plugin once; returns what it did and the wrappers it ran under. */
  async #run(req: ExecRequest): Promise<[ExecResponse, Wrapper[]]> {
    const { child, wrappers, identity } = await this.#spawn(req);
    const tracker = this.#groups;
    // With a stdin gate, the group is noted once the gate opens, just before the config is
    // written: until then the plugin can do nothing, and dies with this process (end of its
    // stdin) — a note written earlier would outlive a crash that left no record to find it by.
    let exited = false;
    let noted = false;
    const group = "error" in identity ? undefined : identity.group;
    const note = () => {
      if (group && !exited) {
        tracker!.started(req, group);
        noted = true;
      }
    };
    const opened = req.stdinGate?.then(note);
    // The config next (the group was read at the spawn): the plugin waits for it. No await
    // until the group is noted.
    const writing = child.feed(req.stdin, opened);
    // A gate that fails: the plugin never gets its config and is stopped (its group).
    let gateFailed: { error: unknown } | undefined;
    opened?.catch((error) => {
      gateFailed = { error };
      try {
        if (!killGroup(child.pid, "SIGKILL")) child.kill("SIGKILL");
      } catch { /* already exited */ }
    });
    if ("error" in identity) {
      // Its group cannot be identified (no FFI): it must not run unnoted with its config,
      // which may already be in the pipe.
      try {
        if (!killGroup(child.pid, "SIGKILL")) child.kill("SIGKILL");
      } catch { /* already exited */ }
      await Promise.allSettled([
        child.status,
        writing.finish(),
        child.dropOutput(),
      ]);
      throw identity.error;
    }
    if (!opened) note();
    let timedOut = false;
    const timer = startTimer(req.timeoutMs, () => {
      timedOut = true;
      try {
        // The group: the plugin and what it started. Before its setsid, the plugin alone.
        if (!killGroup(child.pid, "SIGKILL")) child.kill("SIGKILL");
      } catch { /* already exited */ }
    });

    const out = child.capture("stdout", this.#maxOutputBytes);
    const err = child.capture("stderr", this.#maxOutputBytes);
    let status: Deno.CommandStatus;
    try {
      status = await child.status;
    } finally {
      timer.cancel();
      exited = true;
    }
    if (group && noted) tracker!.ended(req, group);
    // A grandchild may keep the pipes open after the child exits: read what is
    // there within a grace period, then stop.
    let graceTimer: Timer | undefined;
    const grace = new Promise<void>((resolve) => {
      graceTimer = startTimer(this.#drainGraceMs, resolve);
    });
    await Promise.race([Promise.all([out.done, err.done, writing.done]), grace]);
    graceTimer?.cancel();
    const [stdout, stderr] = await Promise.all([out.finish(), err.finish(), writing.finish()]);
    if (req.stdinGate) await req.stdinGate.catch(() => {});
    if (gateFailed) throw gateFailed.error;
    return [{
      code: status.code,
      signal: status.signal ?? null,
      stdout: stdout.bytes,
      stderr: stderr.bytes,
      timedOut,
      truncated: stdout.truncated || stderr.truncated,
    }, wrappers];
  }

  /**
   * Spawns `[chroot DIR] PATH` with posix_spawn (`nativeSpawn`, where this process can), else
   * `setsid [chroot DIR] PATH` with Deno.Command, or `detached` when setsid(1) is absent — each
   * synchronously, before the first await — and reads its group in the same run; retries
   * ETXTBSY of a spawn that reports it itself (posix_spawn, a direct spawn).
   */
  async #spawn(req: ExecRequest): Promise<Spawned> {
    for (let attempt = 0;; attempt++) {
      const chroot = this.#chroot ? [this.#chroot.binary, this.#chroot.dir] : [];
      const wrappers: Wrapper[] = this.#chroot
        ? [{ binary: this.#chroot.binary, label: "chroot: " }]
        : [];
      const env = delegateEnv(req.env);
      let setsid: string | undefined;
      try {
        // posix_spawn makes the session itself. Undefined where this process cannot spawn that
        // way (no FFI, glibc < 2.26): then setsid(1) in front, or Deno's `detached` without it.
        const native = this.#nativeSpawn ? spawnNative([...chroot, req.path], env) : undefined;
        if (native) return { child: native, wrappers, identity: this.#identify(req, native.pid) };
        setsid = absentSetsid.has(this.#setsid) ? undefined : this.#setsid;
        const argv = setsid ? [setsid, ...chroot, req.path] : [...chroot, req.path];
        if (setsid) wrappers.push({ binary: setsid, label: "" });
        const child = new Deno.Command(argv[0], {
          args: argv.slice(1),
          clearEnv: true,
          env,
          stdin: "piped",
          stdout: "piped",
          stderr: "piped",
          detached: setsid === undefined,
        }).spawn();
        return { child: denoChild(child), wrappers, identity: this.#identify(req, child.pid) };
      } catch (err) {
        if (setsid && err instanceof Deno.errors.NotFound) {
          absentSetsid.add(setsid); // this host has no setsid(1): Deno's `detached` from now on
          attempt--;
          continue;
        }
        // spawn/native.ts words its failure as setsid(1) does: `failed to execute …: <strerror>`.
        const message = errorText(err);
        const busy = /text file busy|os error 26/i.test(message);
        if (busy && attempt < this.#spawnRetries) {
          await sleep(this.#retryDelayMs * 2 ** attempt);
          continue;
        }
        throw spawnError(req.path, message, busy, attempt);
      }
    }
  }

  /**
   * The process group of a plugin just spawned, read in the same synchronous run as its spawn:
   * it cannot have been reaped yet (a reap runs in a later task, or a microtask after this
   * one), so its PID still names it even when it already exited — never a process that reused
   * the PID. Undefined when the tracker does not want it.
   */
  #identify(req: ExecRequest, pid: number): Spawned["identity"] {
    try {
      return { group: this.#groups?.tracks(req) ? processGroupOf(pid) : undefined };
    } catch (error) {
      return { error };
    }
  }
}

/**
 * A spawned plugin, the wrappers it runs under, and its process group when the tracker wants
 * it (or why it could not be identified: no FFI).
 */
interface Spawned {
  child: SpawnedChild;
  wrappers: Wrapper[];
  identity: { group?: ProcessGroup } | { error: unknown };
}
