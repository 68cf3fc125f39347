/**
 * The child of native.ts's posix_spawn, as exec.ts drives it ({@link SpawnedChild}): its config
 * written and its output read on the main thread with plain FFI calls — no web streams, whose
 * first use costs ≈ 2.5 ms of main-thread JavaScript in a plugin process (measured) — `status`
 * resolving when it is reaped, `kill` signalling it until then.
 *
 * This process's ends of the pipes are non-blocking; a wait for one of them is a `poll` on a
 * thread of Deno's blocking pool, in slices of {@link POLL_SLICE_MS} so that a read or write
 * stopped while its pipe stays open (a grandchild holds it) lets its descriptor go within one
 * slice. The child's end is waited for the same way, a `poll` of its pidfd (`waitid` with
 * `WNOWAIT` on a blocking-pool thread where there is none), and it is reaped on the main thread:
 * never between its spawn and the synchronous code that follows it, which can therefore read its
 * process group by PID. Nothing else in the process waits for it (Deno's own process API reaps
 * only the children it started, by PID).
 *
 * @module
 */

import { errnoAt, openLibcFiles } from "../../../native/libc.ts";
import { SIGNAL_NAMES, SPAWN, SPAWN_ERRNO_TEXT, type SpawnLibc } from "../../../native/spawn.ts";
import type { CappedRead, PendingWrite, SpawnedChild } from "../exec_types.ts";
import { CappedBytes, READ_BUFFER_BYTES } from "./child_streams.ts";

/** The longest a wait on a pipe or a pidfd lasts before it looks whether to stop, ms. */
export const POLL_SLICE_MS = 100;

/**
 * `strerror`'s text for an errno value, glibc's wording.
 * @param errno e.g. 2
 * @returns e.g. `"No such file or directory"`; `"errno N"` for one not listed
 */
export function errnoText(errno: number): string {
  return SPAWN_ERRNO_TEXT[errno] ?? `errno ${errno}`;
}

/**
 * Polls `fd` for `events` once, for at most {@link POLL_SLICE_MS}, on a blocking-pool thread.
 * @returns `poll`'s result: 0 when the slice passed, > 0 ready, < 0 interrupted
 */
function pollSlice(S: SpawnLibc, fd: number, events: number): Promise<number> {
  const pfd = new DataView(new ArrayBuffer(8));
  pfd.setInt32(0, fd, true);
  pfd.setInt16(4, events, true);
  return S.poll(new Uint8Array(pfd.buffer), 1n, POLL_SLICE_MS);
}

/**
 * A `wait(2)` status as `Deno.CommandStatus` (sys/wait.h `WIFEXITED`/`WTERMSIG`).
 * @param status the status word `waitpid` filled
 * @returns the exit code, or 128 + the signal for a killed child with the signal's name (as
 *   Deno reports it; null for a real-time signal)
 */
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
    this.#waits++;
    try {
      while (!this.stopped) {
        if (await pollSlice(this.#S, this.fd, events) !== 0) return;
      }
    } finally {
      this.#waits--;
      if (this.stopped) this.stop();
    }
  }
}

/** The child of native.ts's `spawnNative`: its pipes read and written here. */
export class NativeChild implements SpawnedChild {
  readonly pid: number;
  readonly status: Promise<Deno.CommandStatus>;
  #S: SpawnLibc;
  #stdin: PipeEnd;
  #out: { stdout: PipeEnd; stderr: PipeEnd };
  #reaped = false;

  /**
   * Takes over a child just spawned, unreaped, and this process's ends of its pipes.
   * @param S the spawn symbols
   * @param pid the child's PID
   * @param stdin the write end of its stdin (non-blocking)
   * @param stdout the read end of its stdout (non-blocking)
   * @param stderr the read end of its stderr (non-blocking)
   */
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
          const e = errnoAt(S);
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
    const kept = new CappedBytes(cap);
    const done = (async () => {
      while (!end.stopped) {
        const n = Number(F.read(end.fd, buf, BigInt(buf.length)));
        if (n > 0) {
          kept.keep(buf.subarray(0, n));
          continue;
        }
        if (n < 0) {
          const e = errnoAt(S);
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
        return Promise.resolve(kept.result());
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
        throw new Error(`waitpid(${this.pid}): ${errnoText(errnoAt(S))}`);
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
    try {
      for (;;) {
        const ready = await pollSlice(S, pidfd, SPAWN.POLLIN);
        if (ready === 0) continue;
        // Readable (or the poll was interrupted): asked on this thread, where errno is.
        const now = S.waitpidNow(this.pid, new Uint8Array(status.buffer), SPAWN.WNOHANG);
        if (now === this.pid) return true;
        if (now < 0) throw new Error(`waitpid(${this.pid}): ${errnoText(errnoAt(S))}`);
        if (ready > 0) return false;
      }
    } finally {
      openLibcFiles().symbols.close(pidfd);
    }
  }
}
