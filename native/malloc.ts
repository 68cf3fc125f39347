/**
 * glibc allocator controls for the long-running daemon: `mallopt` and `malloc_trim`.
 * Declarations only; the library is opened by the caller (lib/daemon/memory.ts) on first use,
 * so importing this module needs no `--allow-ffi`.
 *
 * @module
 */

/** glibc's shared object name (`man 7 libc`). */
export const MALLOC_LIBC_PATH = "libc.so.6";

/** `mallopt` parameter: allocations of at least this many bytes get their own mmap (malloc.h). */
export const M_MMAP_THRESHOLD: number = -3;

/** The glibc allocator symbols the daemon calls, each with its C prototype. */
export const MALLOC_SYMBOLS = {
  /** `int mallopt(int param, int value);` (malloc.h, `man 3 mallopt`): 1 on success. */
  mallopt: { parameters: ["i32", "i32"], result: "i32" },
  /** `int malloc_trim(size_t pad);` (malloc.h, `man 3 malloc_trim`): 1 when memory was released. */
  malloc_trim: { parameters: ["usize"], result: "i32" },
} as const satisfies Deno.ForeignLibraryInterface;
