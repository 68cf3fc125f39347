/**
 * libc calls the daemon's process metrics need: its descriptor limit (`getrlimit`) and a walk
 * of `/proc/self/fd` (`opendir`/`readdir`), which Deno's own file API refuses without
 * `--allow-all`. Declarations only; the library is opened by the caller
 * (lib/daemon/process_fds.ts) on first use, so importing this module needs no `--allow-ffi`.
 *
 * @module
 */

/** glibc's shared object name (`man 7 libc`). */
export const PROCESS_LIBC_PATH = "libc.so.6";

/** `getrlimit` resource: the descriptor limit (sys/resource.h, x86-64 and arm64). */
export const RLIMIT_NOFILE: number = 7;

/** The libc symbols of the process metrics, each with its C prototype. */
export const PROCESS_SYMBOLS = {
  /**
   * `int getrlimit(int resource, struct rlimit *rlim);` (sys/resource.h): `rlim` is two
   * `rlim_t` (u64): soft, hard.
   */
  getrlimit: { parameters: ["i32", "buffer"], result: "i32" },
  /** `DIR *opendir(const char *name);` (dirent.h): NULL on failure. */
  opendir: { parameters: ["buffer"], result: "pointer" },
  /** `struct dirent *readdir(DIR *dirp);` (dirent.h): NULL at the end. */
  readdir: { parameters: ["pointer"], result: "pointer" },
  /** `int closedir(DIR *dirp);` (dirent.h) */
  closedir: { parameters: ["pointer"], result: "i32" },
} as const satisfies Deno.ForeignLibraryInterface;
