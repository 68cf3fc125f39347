/**
 * libc's page-cache advice for files the installer has just written: `posix_fadvise(2)` with
 * `POSIX_FADV_DONTNEED`. Declarations only; the library is opened by the caller
 * (lib/install/page_cache.ts) on first use, so importing this module needs no `--allow-ffi`.
 *
 * @module
 */

/** glibc's shared object name (`man 7 libc`). */
export const PAGE_CACHE_LIBC_PATH = "libc.so.6";

/** `POSIX_FADV_DONTNEED` (linux/fadvise.h): the pages of the range are not needed soon. */
export const POSIX_FADV_DONTNEED = 4;

/** The libc symbols of the page-cache advice, each with its C prototype. */
export const PAGE_CACHE_SYMBOLS = {
  /** `int open(const char *pathname, int flags, ...);` (fcntl.h) — called without `mode`. */
  open: { parameters: ["buffer", "i32"], result: "i32" },
  /** `int close(int fd);` (unistd.h) */
  close: { parameters: ["i32"], result: "i32" },
  /**
   * `int posix_fadvise(int fd, off_t offset, off_t len, int advice);` (fcntl.h,
   * `man 2 posix_fadvise`): 0 on success, else the error number (errno is not set).
   */
  posix_fadvise: { parameters: ["i32", "i64", "i64", "i32"], result: "i32" },
} as const satisfies Deno.ForeignLibraryInterface;
