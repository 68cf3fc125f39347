/**
 * Reading the plugin's stdin once, import-free: main.ts reads it before choosing between the
 * daemon forwarder and the in-process dispatcher, and hands the same bytes to either.
 *
 * @module
 */

/** The plugin's stdin cap, bytes (1 MiB); the dispatcher's `DEFAULT_MAX_STDIN_BYTES`. */
export const MAX_STDIN_BYTES = 1024 * 1024;

/**
 * Reads stdin to its end, but at most `maxBytes + 1` bytes, so the caller can tell "over the
 * cap". A plain read loop: `Deno.stdin.readable` costs ≈ 4 ms to set up on every call.
 *
 * @param maxBytes the largest accepted input, bytes
 * @returns the bytes read (length ≤ `maxBytes + 1`)
 * @throws Deno I/O errors from the read
 * @example
 * ```ts
 * const bytes = await readStdinBytes(1024 * 1024);
 * ```
 */
export async function readStdinBytes(maxBytes: number): Promise<Uint8Array> {
  const bytes = new Uint8Array(maxBytes + 1);
  let off = 0;
  while (off < bytes.length) {
    const n = await Deno.stdin.read(bytes.subarray(off, Math.min(bytes.length, off + 65536)));
    if (n === null) break;
    off += n;
  }
  return bytes.slice(0, off);
}
