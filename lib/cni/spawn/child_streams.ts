/**
 * A plugin child's pipes (exec.ts): writing the config to its stdin and reading its stdout and
 * stderr up to a cap, each with a `done` promise and a `finish()` that stops what is still
 * pending — a grandchild may hold a pipe open after the plugin exited.
 *
 * @module
 */

import type { CappedRead, PendingWrite, SpawnedChild } from "../exec_types.ts";

export type { CappedRead, PendingWrite } from "../exec_types.ts";

/**
 * Writes `data` to a child's stdin and closes it, in the background. A child that exits without
 * reading (or is killed) ends the write silently.
 *
 * @param stream the child's stdin (`Deno.ChildProcess.stdin`)
 * @param data the bytes to write (the JSON config)
 * @param gate nothing is written before it resolves; when it rejects, nothing is written at
 *   all (the caller stops the child)
 * @returns the pending write: `done` when written and closed (or failed), `finish()` to abort
 *   a write still pending (resolving at once: a write in flight into a pipe that a grandchild
 *   holds open unread cannot be cancelled — an abort waits for it — so it is left to end with
 *   the grandchild); never rejects
 */
export function writeAll(
  stream: WritableStream<Uint8Array>,
  data: Uint8Array,
  gate?: Promise<void>,
): PendingWrite {
  const w = stream.getWriter();
  let settled = false;
  const done = (async () => {
    try {
      if (gate) await gate;
      await w.write(data);
      await w.close();
    } catch {
      // The child exited without reading stdin, or was killed: nothing to do.
    } finally {
      settled = true;
    }
  })();
  return {
    done,
    finish() {
      // The abort settles only once a write in flight returns: not awaited.
      if (!settled) w.abort().catch(() => {});
      return Promise.resolve();
    },
  };
}

/**
 * Bytes of the one buffer each output stream is read into. A default reader of a child's pipe
 * allocates a new 64 KiB buffer per read, garbage only at the next full GC: ≈ 0.5 MiB of
 * external memory per pod ADD, tens of MiB of RSS in `manifold daemon` under concurrent ADDs.
 */
export const READ_BUFFER_BYTES = 16 * 1024;

/**
 * What is kept of an output stream: at most `cap` bytes, copied out of the reused read buffer;
 * the rest is only counted as dropped. The one keeper of both ways a child's output is read
 * ({@link readCapped}, spawn/native_child.ts).
 */
export class CappedBytes {
  #cap: number;
  #chunks: Uint8Array[] = [];
  #kept = 0;
  #truncated = false;

  /**
   * An empty keeper.
   * @param cap bytes kept at most
   */
  constructor(cap: number) {
    this.#cap = cap;
  }

  /** Keeps what fits of `view` (copied: the buffer is read into again). */
  keep(view: Uint8Array): void {
    const take = Math.min(view.length, this.#cap - this.#kept);
    if (take > 0) {
      this.#chunks.push(view.slice(0, take));
      this.#kept += take;
    }
    if (take < view.length) this.#truncated = true;
  }

  /**
   * What was kept.
   * @returns the kept bytes, in one array, and whether any were dropped
   */
  result(): { bytes: Uint8Array; truncated: boolean } {
    const bytes = new Uint8Array(this.#kept);
    let off = 0;
    for (const c of this.#chunks) {
      bytes.set(c, off);
      off += c.length;
    }
    return { bytes, truncated: this.#truncated };
  }
}

/**
 * Reads a child's output stream in the background into one reused buffer of
 * {@link READ_BUFFER_BYTES} bytes, keeping at most `cap` bytes; the rest is drained and dropped.
 *
 * @param stream the child's stdout or stderr (a byte stream: `Deno.ChildProcess.stdout`)
 * @param cap bytes kept at most
 * @returns the pending read: `done` when the stream ended, `finish()` to stop reading and get
 *   the kept bytes and whether any were dropped; a broken or cancelled stream keeps what was
 *   read, never rejects
 */
export function readCapped(stream: ReadableStream<Uint8Array>, cap: number): CappedRead {
  // A BYOB reader fills (and hands back) one buffer; what is kept is copied out at its size.
  const reader = stream.getReader({ mode: "byob" });
  const kept = new CappedBytes(cap);
  const done = (async () => {
    try {
      let buf = new Uint8Array(READ_BUFFER_BYTES);
      for (;;) {
        const { value, done } = await reader.read(buf);
        if (done || value === undefined) return;
        kept.keep(value);
        buf = new Uint8Array(value.buffer);
      }
    } catch {
      // Cancelled or broken pipe: keep what we have.
    }
  })();
  return {
    done,
    async finish() {
      try {
        await reader.cancel();
      } catch { /* already closed */ }
      await done;
      try {
        reader.releaseLock();
      } catch { /* ignore */ }
      return kept.result();
    },
  };
}

/**
 * A `Deno.Command` child as exec.ts drives it ({@link SpawnedChild}): its stdin through
 * {@link writeAll}, its outputs through {@link readCapped}.
 * @param child the spawned child, its three pipes `"piped"`
 * @returns the same child behind the {@link SpawnedChild} calls
 */
export function denoChild(child: Deno.ChildProcess): SpawnedChild {
  return {
    pid: child.pid,
    status: child.status,
    kill: (signal) => child.kill(signal),
    feed: (data, gate) => writeAll(child.stdin, data, gate),
    capture: (stream, cap) => readCapped(child[stream], cap),
    dropOutput: () =>
      Promise.all([child.stdout.cancel(), child.stderr.cancel()]).then(() => {}, () => {}),
  };
}
