/**
 * Dropping an executable's written pages from the page cache once it is installed.
 *
 * A file the installer has just written (the source bundle's `deno`, the compiled binary) stays
 * in the page cache as the write left it: on Linux 6.x in large folios, and every process that
 * maps the file then maps whole folios of its text, touched or not. Each plugin call's resident
 * set grew by that much: an ADD's peak RSS was 63.7–77.6 MiB with the freshly copied `deno`
 * against 57.5–58.3 MiB once those pages were dropped (measured with scripts/bench.ts
 * `--installed` and `/usr/bin/time`, the same bundle). Nothing else frees them on a node
 * without memory pressure, so the installer advises the kernel that the pages are not needed
 * (`posix_fadvise(POSIX_FADV_DONTNEED)`, after the fsync, so they are clean); the first call then
 * reads the binary as any program is read, through readahead.
 *
 * @module
 */

import {
  PAGE_CACHE_LIBC_PATH,
  PAGE_CACHE_SYMBOLS,
  POSIX_FADV_DONTNEED,
} from "../../native/page_cache.ts";
import { O_RDONLY_CLOEXEC } from "../../native/libc.ts";

let lib: Deno.DynamicLibrary<typeof PAGE_CACHE_SYMBOLS> | undefined;

/**
 * Advises the kernel to drop `path`'s clean pages from the page cache (pages mapped by running
 * processes stay). Advice only: a failure changes nothing but memory figures.
 *
 * @param path a file written and fsynced (installer view)
 * @returns true when the advice was given; false when it could not be (no `--allow-ffi`, no
 *   such file, an error from the kernel). Never throws.
 */
export function dropPageCache(path: string): boolean {
  try {
    lib ??= Deno.dlopen(PAGE_CACHE_LIBC_PATH, PAGE_CACHE_SYMBOLS);
    const fd = lib.symbols.open(new TextEncoder().encode(`${path}\0`), O_RDONLY_CLOEXEC);
    if (fd < 0) return false;
    try {
      return lib.symbols.posix_fadvise(fd, 0n, 0n, POSIX_FADV_DONTNEED) === 0;
    } finally {
      lib.symbols.close(fd);
    }
  } catch {
    return false;
  }
}
