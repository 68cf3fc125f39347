/**
 * Starting a plugin with glibc's `posix_spawn(3)` through FFI (native/spawn.ts), for the
 * per-call plugin: the child leads a session and process group of its own from its first
 * instruction (`POSIX_SPAWN_SETSID`, set in the child before its exec), started by a
 * `CLONE_VFORK` clone. `Deno.Command` can give the same group only through an exec of setsid(1)
 * in front of the plugin (≈ 0.5 ms a delegate) or a fork of the whole plugin process
 * (`detached`, ≈ 1-1.5 ms a spawn, measured), and loads its own implementation on first use
 * (≈ 2 ms of main-thread JavaScript, plus ≈ 2 ms more for the first spawn and the first write).
 *
 * What exec.ts gets is a {@link SpawnedChild}: the config written and the output read on the
 * main thread with plain FFI calls (no web streams: their first use costs ≈ 2.5 ms of
 * main-thread JavaScript in a plugin process, measured), `status` resolving when the child is
 * reaped, `kill` signalling it until then. The child gets exactly `argv` and `env` (nothing
 * inherited but descriptors 0-2, which are the pipes: every other descriptor of this process
 * is close-on-exec), every signal at its default action and none blocked, as Go's os/exec
 * gives a child.
 *
 * This process's ends of the pipes are non-blocking and read and written on the main thread;
 * a wait for one of them is a `poll` on a thread of Deno's blocking pool, in slices of
 * {@link POLL_SLICE_MS} so that a read or write stopped while its pipe stays open (a grandchild
 * holds it) lets its descriptor go within one slice. The child's end is waited for the same
 * way, a `poll` of its pidfd (`waitid` with `WNOWAIT` on a blocking-pool thread where there is
 * none), and it is reaped on the main thread: never between its spawn and the synchronous code
 * that follows it, which can therefore read its process group by PID. Nothing else in the
 * process waits for it (Deno's own process API reaps only the children it started, by PID).
 *
 * @module
 */

import { openLibcFiles } from "../../native/libc.ts";
import {
  SIGNAL_NAMES,
  SPAWN,
  SPAWN_ERRNO_TEXT,
  SPAWN_LIBC_PATH,
  SPAWN_SYMBOLS,
  type SpawnLibc,
} from "../../native/spawn.ts";
import type { CappedRead, PendingWrite, SpawnedChild } from "./exec_types.ts";

/** The longest a wait on a pipe lasts before it looks whether its stream was stopped, ms. */
export const POLL_SLICE_MS = 100;

/** Bytes of the one buffer each output pipe is read into (as child_streams.ts). */
const READ_BUFFER_BYTES = 16 * 1024;

/** `strerror`'s text for `errno` (`"errno N"` for one not listed). */
export function errnoText(errno: number): string {
  return SPAWN_ERRNO_TEXT[errno] ?? `errno ${errno}`;
}

let lib: SpawnLibc | null | undefined;
/** posix_spawn refused `POSIX_SPAWN_SETSID` (glibc < 2.26): this process uses Deno.Command. */
let unsupported = false;
const encoder = new TextEncoder();

/**
 * Binds the spawn symbols (the FFI `dlopen`, ≈ 1 ms: libc is already mapped) and libc's file
 * symbols, so that the first {@link spawnNative} costs only the spawn. Never throws.
 * @returns whether {@link spawnNative} can be tried in this process
 */
export function prefetchNativeSpawn(): boolean {
  if (lib === undefined) {
    try {
      lib = Deno.dlopen(SPAWN_LIBC_PATH, SPAWN_SYMBOLS).symbols;
      openLibcFiles();
    } catch {
      lib = null; // no --allow-ffi, or no libc.so.6 (not glibc)
    }
  }
  return lib !== null && !unsupported;
}

/**
 * The error of a spawn that failed, worded as setsid(1) words it: `failed to execute <path>:
 * <strerror>`.
 */
export class SpawnError extends Error {
  /** The errno value posix_spawn returned. */
  readonly errno: number;

  /**
   * @param path the program that was not started
   * @param errno its errno value
   */
  constructor(path: string, errno: number) {
    super(`failed to execute ${path}: ${errnoText(errno)}`);
    this.name = "SpawnError";
    this.errno = errno;
  }
}

/**
 * Starts `argv[0]` (an absolute path; no PATH search) with `argv` and exactly `env`, in a new
 * session whose process group it leads (pgid = its PID), its stdin, stdout and stderr pipes to
 * this process.
 * @param argv the program and its arguments (`[path]` for a CNI plugin)
 * @param env the child's whole environment
 * @returns the child, or undefined when this process cannot spawn this way (no FFI, not glibc,
 *   glibc < 2.26, or descriptor 0-2 closed): the caller uses `Deno.Command`
 * @throws {SpawnError} when the program cannot be executed (its errno: ENOENT, EACCES,
 *   ETXTBSY, ENOEXEC…), or pipes cannot be made (EMFILE); {@link TypeError} for a NUL byte in
 *   an argument or the environment
 */
export function spawnNative(
  argv: readonly string[],
  env: Record<string, string>,
): SpawnedChild | undefined {
  if (!prefetchNativeSpawn()) return undefined;
  const S = lib!;
  const F = openLibcFiles().symbols;
  const args = argv.map((a) => cString(a, "argument"));
  const envs = Object.entries(env).map(([k, v]) => {
    if (k === "" || k.includes("=")) throw new TypeError(`invalid environment variable name ${k}`);
    return cString(`${k}=${v}`, "environment variable");
  });
  const fds = new Int32Array(6);
  let made = 0;
  const closeAll = () => {
    for (let i = 0; i < made; i++) F.close(fds[i]);
  };
  for (; made < 6; made += 2) {
    if (S.pipe2(new Uint8Array(fds.buffer, made * 4, 8), SPAWN.O_CLOEXEC) !== 0) {
      const e = errno(S);
      closeAll();
      throw new SpawnError(argv[0], e);
    }
  }
  // Descriptors 0-2 closed in this process would make a pipe one of them, which dup2 onto
  // itself leaves close-on-exec: not this way.
  if (fds.some((fd) => fd <= 2)) {
    closeAll();
    return undefined;
  }
  const [inRead, inWrite, outRead, outWrite, errRead, errWrite] = fds;
  const actions = new Uint8Array(SPAWN.FILE_ACTIONS_BYTES);
  const attr = new Uint8Array(SPAWN.ATTR_BYTES);
  const pid = new Int32Array(1);
  let r: number;
  S.posix_spawn_file_actions_init(actions);
  try {
    if (
      S.posix_spawn_file_actions_adddup2(actions, inRead, 0) !== 0 ||
      S.posix_spawn_file_actions_adddup2(actions, outWrite, 1) !== 0 ||
      S.posix_spawn_file_actions_adddup2(actions, errWrite, 2) !== 0 ||
      S.posix_spawnattr_init(attr) !== 0 ||
      S.posix_spawnattr_setsigdefault(attr, ALL_SIGNALS) !== 0 ||
      S.posix_spawnattr_setsigmask(attr, NO_SIGNALS) !== 0 ||
      S.posix_spawnattr_setflags(
          attr,
          SPAWN.POSIX_SPAWN_SETSID | SPAWN.POSIX_SPAWN_SETSIGDEF | SPAWN.POSIX_SPAWN_SETSIGMASK,
        ) !== 0
    ) {
      closeAll();
      return undefined;
    }
    r = S.posix_spawn(
      new Uint8Array(pid.buffer),
      args[0],
      actions,
      attr,
      pointerArray(args),
      pointerArray(envs),
    );
  } finally {
    S.posix_spawn_file_actions_destroy(actions);
  }
  F.close(inRead);
  F.close(outWrite);
  F.close(errWrite);
  if (r !== 0) {
    F.close(inWrite);
    F.close(outRead);
    F.close(errRead);
    if (r === SPAWN.EINVAL) {
      // The flags refused (glibc < 2.26): Deno.Command for the rest of the process.
      unsupported = true;
      return undefined;
    }
    throw new SpawnError(argv[0], r);
  }
  for (const fd of [inWrite, outRead, errRead]) S.fcntl(fd, SPAWN.F_SETFL, SPAWN.O_NONBLOCK);
  return new NativeChild(S, pid[0], inWrite, outRead, errRead);
}

/** A NUL-terminated copy of `s`. @throws {TypeError} when `s` holds a NUL byte */
function cString(s: string, what: string): Uint8Array {
  if (s.includes("\0")) throw new TypeError(`${what} holds a NUL byte`);
  return encoder.encode(`${s}\0`);
}

/** A NULL-terminated array of pointers to `items` (kept alive by the caller). */
function pointerArray(items: Uint8Array[]): Uint8Array {
  const out = new BigUint64Array(items.length + 1);
  items.forEach((b, i) => out[i] = BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(b))));
  return new Uint8Array(out.buffer);
}

/** glibc's `sigfillset`: every signal but its two internal ones (32, 33). */
const ALL_SIGNALS = (() => {
  const set = new Uint8Array(SPAWN.SIGSET_BYTES);
  for (let sig = 1; sig <= 64; sig++) {
    if (sig === 32 || sig === 33) continue;
    set[(sig - 1) >> 3] |= 1 << ((sig - 1) & 7);
  }
  return set;
})();
const NO_SIGNALS = new Uint8Array(SPAWN.SIGSET_BYTES);

function errno(S: SpawnLibc): number {
  const p = S.__errno_location();
  return p === null ? 0 : new Deno.UnsafePointerView(p).getInt32();
}

/** `wait(2)` status → `Deno.CommandStatus` (128 + signal for a killed child, as Deno's). */
export function decodeWaitStatus(status: number): Deno.CommandStatus {
  const sig = status & 0x7f;
  if (sig === 0) {
    const code = (status >> 8) & 0xff;
    return { success: code === 0, code, signal: null };
  }
  return { success: false, code: 128 + sig, signal: SIGNAL_NAMES[sig] ?? null };
}

/** One descriptor of this process's end of a pipe, closed once no wait on it is in flight. */
class PipeEnd {
  #S: SpawnLibc;
  readonly fd: number;
  /** Stopped (cancelled, aborted or at its end): no more I/O. */
  stopped = false;
  #open = true;
  #waits = 0;

  constructor(S: SpawnLibc, fd: number) {
    this.#S = S;
    this.fd = fd;
  }

  /** Stops the end; its descriptor is closed now, or when the wait in flight returns. */
  stop(): void {
    this.stopped = true;
    if (this.#open && this.#waits === 0) {
      this.#open = false;
      openLibcFiles().symbols.close(this.fd);
    }
  }

  /** Waits until the pipe is ready for `events`, or the end was stopped. */
  async wait(events: number): Promise<void> {
    const pfd = new DataView(new ArrayBuffer(8));
    pfd.setInt32(0, this.fd, true);
    pfd.setInt16(4, events, true);
    this.#waits++;
    try {
      while (!this.stopped) {
        if (await this.#S.poll(new Uint8Array(pfd.buffer), 1n, POLL_SLICE_MS) !== 0) return;
      }
    } finally {
      this.#waits--;
      if (this.stopped) this.stop();
    }
  }
}

/** The child of {@link spawnNative}: its pipes read and written here, without web streams. */
class NativeChild implements SpawnedChild {
  readonly pid: number;
  readonly status: Promise<Deno.CommandStatus>;
  #S: SpawnLibc;
  #stdin: PipeEnd;
  #out: { stdout: PipeEnd; stderr: PipeEnd };
  #reaped = false;

  constructor(S: SpawnLibc, pid: number, stdin: number, stdout: number, stderr: number) {
    this.#S = S;
    this.pid = pid;
    this.#stdin = new PipeEnd(S, stdin);
    this.#out = { stdout: new PipeEnd(S, stdout), stderr: new PipeEnd(S, stderr) };
    this.status = this.#reap();
  }

  kill(signal: Deno.Signal): void {
    if (this.#reaped) throw new TypeError("Child process has already terminated");
    Deno.kill(this.pid, signal);
  }

  feed(data: Uint8Array, gate?: Promise<void>): PendingWrite {
    const S = this.#S;
    const end = this.#stdin;
    const done = (async () => {
      try {
        if (gate) await gate;
        let off = 0;
        while (off < data.length && !end.stopped) {
          const n = Number(S.write(end.fd, data.subarray(off), BigInt(data.length - off)));
          if (n > 0) {
            off += n;
            continue;
          }
          const e = errno(S);
          if (e === SPAWN.EINTR) continue;
          if (e !== SPAWN.EAGAIN) return; // EPIPE: it exited (or was killed) without reading
          await end.wait(SPAWN.POLLOUT);
        }
      } catch {
        // The gate failed: nothing written (the caller stops the child).
      } finally {
        end.stop(); // closes stdin: the plugin sees the end of its config
      }
    })();
    return {
      done,
      finish() {
        end.stop(); // a write still waiting for room gives up within one poll slice
        return done;
      },
    };
  }

  capture(stream: "stdout" | "stderr", cap: number): CappedRead {
    const S = this.#S;
    const F = openLibcFiles().symbols;
    const end = this.#out[stream];
    const buf = new Uint8Array(READ_BUFFER_BYTES);
    const chunks: Uint8Array[] = [];
    let kept = 0;
    let truncated = false;
    const done = (async () => {
      while (!end.stopped) {
        const n = Number(F.read(end.fd, buf, BigInt(buf.length)));
        if (n > 0) {
          const take = Math.min(n, cap - kept);
          if (take > 0) {
            chunks.push(buf.slice(0, take));
            kept += take;
          }
          if (take < n) truncated = true;
          continue;
        }
        if (n < 0) {
          const e = errno(S);
          if (e === SPAWN.EINTR) continue;
          if (e === SPAWN.EAGAIN) {
            await end.wait(SPAWN.POLLIN);
            continue;
          }
        }
        break; // the end of the pipe (every writer closed it), or a read error: keep what came
      }
      end.stop();
    })();
    return {
      done,
      finish() {
        // Stopped now (a grandchild may hold the pipe): what was kept is the answer; a wait in
        // flight closes the descriptor when it returns.
        end.stop();
        const bytes = new Uint8Array(kept);
        let off = 0;
        for (const c of chunks) {
          bytes.set(c, off);
          off += c.length;
        }
        return Promise.resolve({ bytes, truncated });
      },
    };
  }

  dropOutput(): Promise<void> {
    this.#out.stdout.stop();
    this.#out.stderr.stop();
    return Promise.resolve();
  }

  async #reap(): Promise<Deno.CommandStatus> {
    const S = this.#S;
    const status = new Int32Array(1);
    try {
      if (await this.#reapByPidfd(status)) return decodeWaitStatus(status[0]);
      const info = new Uint8Array(SPAWN.SIGINFO_BYTES);
      for (;;) {
        // Until it exited, left unreaped (WNOWAIT): reaped below, on this thread. 0, or -1 for
        // EINTR on the waiting thread (its errno is not readable here) or no such child any
        // more: either way asked on this thread, where errno is.
        await S.waitid(SPAWN.P_PID, this.pid, info, SPAWN.WEXITED | SPAWN.WNOWAIT);
        const now = S.waitpidNow(this.pid, new Uint8Array(status.buffer), SPAWN.WNOHANG);
        if (now === this.pid) break;
        if (now === 0) continue;
        throw new Error(`waitpid(${this.pid}): ${errnoText(errno(S))}`);
      }
    } finally {
      this.#reaped = true;
    }
    return decodeWaitStatus(status[0]);
  }

  /**
   * Waits for the child's end by polling a pidfd in slices of {@link POLL_SLICE_MS}, then reaps
   * it on this thread (`WNOHANG`). A blocking wait would hold a thread of Deno's blocking
   * pool (32 threads) for the child's whole life: 32 children at once, and no pipe's `poll`
   * could run any more. The child is unreaped, so its PID cannot name another process here.
   * @returns true once reaped into `status`; false to wait with a blocking `waitid` instead
   *   (no `pidfd_open`: glibc < 2.36, Linux < 5.3, or refused; or a readable pidfd of a child
   *   not yet reapable, as older kernels signal a leader whose other threads still run)
   * @throws {Error} when the child cannot be waited for (ECHILD: reaped elsewhere)
   */
  async #reapByPidfd(status: Int32Array): Promise<boolean> {
    const S = this.#S;
    const pidfd = S.pidfd_open === null ? -1 : S.pidfd_open(this.pid, 0);
    if (pidfd < 0) return false;
    const pfd = new DataView(new ArrayBuffer(8));
    pfd.setInt32(0, pidfd, true);
    pfd.setInt16(4, SPAWN.POLLIN, true);
    try {
      for (;;) {
        const ready = await S.poll(new Uint8Array(pfd.buffer), 1n, POLL_SLICE_MS);
        if (ready === 0) continue;
        // Readable (or the poll was interrupted): asked on this thread, where errno is.
        const now = S.waitpidNow(this.pid, new Uint8Array(status.buffer), SPAWN.WNOHANG);
        if (now === this.pid) return true;
        if (now < 0) throw new Error(`waitpid(${this.pid}): ${errnoText(errno(S))}`);
        if (ready > 0) return false;
      }
    } finally {
      openLibcFiles().symbols.close(pidfd);
    }
  }
}
