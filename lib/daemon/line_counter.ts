/**
 * Line counts of an append-only file (the forwarder's fallbacks file, one line per in-process
 * fallback), for `manifold_fallback_total` (lib/daemon/metrics.ts): only what was appended since
 * the last count is read.
 *
 * @module
 */

/**
 * Number of lines in a file, read at once: the forwarder appends one line per fallback.
 * A missing file counts 0; a last line without its newline still counts.
 *
 * @param path the fallbacks file
 * @returns the line count
 * @throws Deno.errors other than NotFound (e.g. PermissionDenied)
 */
export async function countLines(path: string): Promise<number> {
  return (await new LineCounter(path).count());
}

/**
 * Counts the lines of an append-only file across calls, reading only what was appended since
 * the last call (same inode, not shorter); a replaced or truncated file is counted afresh.
 */
export class LineCounter {
  readonly #path: string;
  #ino: number | null = null;
  #size = 0;
  #newlines = 0;
  #endsWithNewline = true;

  /**
   * A counter for one file.
   *
   * @param path the file to count; it need not exist yet
   */
  constructor(path: string) {
    this.#path = path;
  }

  /**
   * The file's line count now (0 when it does not exist).
   *
   * @returns lines, an unterminated last line included
   * @throws Deno.errors other than NotFound (e.g. PermissionDenied)
   */
  async count(): Promise<number> {
    let file: Deno.FsFile;
    try {
      file = await Deno.open(this.#path, { read: true });
    } catch (e) {
      if (e instanceof Deno.errors.NotFound) {
        this.#reset(null);
        return 0;
      }
      throw e;
    }
    try {
      const st = await file.stat();
      if (st.ino !== this.#ino || st.size < this.#size) this.#reset(st.ino);
      else await file.seek(this.#size, Deno.SeekMode.Start);
      const buf = new Uint8Array(64 * 1024);
      for (;;) {
        const n = await file.read(buf);
        if (n === null) break;
        for (let i = 0; i < n; i++) if (buf[i] === 0x0a) this.#newlines++;
        if (n > 0) this.#endsWithNewline = buf[n - 1] === 0x0a;
        this.#size += n;
      }
      return this.#newlines + (this.#endsWithNewline ? 0 : 1);
    } finally {
      file.close();
    }
  }

  #reset(ino: number | null): void {
    this.#ino = ino;
    this.#size = 0;
    this.#newlines = 0;
    this.#endsWithNewline = true;
  }
}
