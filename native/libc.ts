/**
 * libc symbol table: namespace switching (`setns`), file descriptors, `errno`, the
 * plain `AF_NETLINK` socket calls used when libmnl cannot be loaded, and the calls that read
 * procfs (Deno refuses `/proc/<pid>` paths without `--allow-all`; lib/fs/procfs.ts). Declarations only;
 * the library is opened on first use by {@link openLibc}, so importing this module needs
 * no `--allow-ffi`.
 *
 * None of these symbols is `nonblocking`: a nonblocking call runs on another thread, and
 * `setns` plus every socket call must run on the thread whose namespace was switched.
 *
 * @module
 */

/** glibc's shared object name (`man 7 libc`). */
export const LIBC_PATH = "libc.so.6";

/** `open(2)` flags `O_RDONLY | O_CLOEXEC` (asm-generic/fcntl.h). */
export const O_RDONLY_CLOEXEC = 0o2000000;

/** The libc symbols Manifold calls, each with its C prototype. */
export const LIBC_SYMBOLS = {
  /** `int setns(int fd, int nstype);` (sched.h, `man 2 setns`) */
  setns: { parameters: ["i32", "i32"], result: "i32" },
  /** `int open(const char *pathname, int flags, ...);` (fcntl.h) — called without `mode`. */
  open: { parameters: ["buffer", "i32"], result: "i32" },
  /** `int close(int fd);` (unistd.h) */
  close: { parameters: ["i32"], result: "i32" },
  /** `ssize_t read(int fd, void *buf, size_t count);` (unistd.h) */
  read: { parameters: ["i32", "buffer", "usize"], result: "isize" },
  /** `ssize_t readlink(const char *pathname, char *buf, size_t bufsiz);` (unistd.h) */
  readlink: { parameters: ["buffer", "buffer", "usize"], result: "isize" },
  /** `DIR *opendir(const char *name);` (dirent.h) */
  opendir: { parameters: ["buffer"], result: "pointer" },
  /**
   * `struct dirent *readdir(DIR *dirp);` (dirent.h; glibc LP64: `d_ino` u64, `d_off` i64,
   * `d_reclen` u16, `d_type` u8, then `d_name` at byte 19)
   */
  readdir: { parameters: ["pointer"], result: "pointer" },
  /** `int closedir(DIR *dirp);` (dirent.h) */
  closedir: { parameters: ["pointer"], result: "i32" },
  /** `int *__errno_location(void);` (glibc's `errno` of the calling thread) */
  __errno_location: { parameters: [], result: "pointer" },
  /** `int socket(int domain, int type, int protocol);` (sys/socket.h) */
  socket: { parameters: ["i32", "i32", "i32"], result: "i32" },
  /** `int bind(int sockfd, const struct sockaddr *addr, socklen_t addrlen);` */
  bind: { parameters: ["i32", "buffer", "u32"], result: "i32" },
  /** `int getsockname(int sockfd, struct sockaddr *addr, socklen_t *addrlen);` */
  getsockname: { parameters: ["i32", "buffer", "buffer"], result: "i32" },
  /** `int setsockopt(int sockfd, int level, int optname, const void *optval, socklen_t optlen);` */
  setsockopt: { parameters: ["i32", "i32", "i32", "buffer", "u32"], result: "i32" },
  /**
   * `ssize_t sendto(int sockfd, const void *buf, size_t len, int flags,
   *                 const struct sockaddr *dest_addr, socklen_t addrlen);`
   */
  sendto: { parameters: ["i32", "buffer", "usize", "i32", "buffer", "u32"], result: "isize" },
  /**
   * `ssize_t recvfrom(int sockfd, void *buf, size_t len, int flags,
   *                   struct sockaddr *src_addr, socklen_t *addrlen);`
   */
  recvfrom: {
    parameters: ["i32", "buffer", "usize", "i32", "buffer", "buffer"],
    result: "isize",
  },
} as const satisfies Deno.ForeignLibraryInterface;

/** The opened libc with {@link LIBC_SYMBOLS}. */
export type Libc = Deno.DynamicLibrary<typeof LIBC_SYMBOLS>;

let libc: Libc | undefined;

/**
 * Opens libc on first call and returns the same handle afterwards. libc stays loaded for
 * the life of the process (it is never worth unloading).
 *
 * @returns the loaded library
 * @throws {Deno.errors.NotCapable} without `--allow-ffi`
 */
export function openLibc(): Libc {
  libc ??= Deno.dlopen(LIBC_PATH, LIBC_SYMBOLS);
  return libc;
}

/**
 * The libc symbols that read one procfs file or link (lib/fs/procfs.ts), a subset of
 * {@link LIBC_SYMBOLS}: bound apart because Deno binds every symbol of a `dlopen` at once
 * (≈ 0.7 ms a library plus ≈ 0.12 ms a symbol, measured), and a per-call ADD reads procfs
 * before its first delegate runs (the delegate's process group), netlink only after it.
 */
export const LIBC_FILE_SYMBOLS = {
  open: LIBC_SYMBOLS.open,
  close: LIBC_SYMBOLS.close,
  read: LIBC_SYMBOLS.read,
  readlink: LIBC_SYMBOLS.readlink,
} as const satisfies Deno.ForeignLibraryInterface;

/** libc opened with {@link LIBC_FILE_SYMBOLS}. */
export type LibcFiles = Deno.DynamicLibrary<typeof LIBC_FILE_SYMBOLS>;

let libcFiles: LibcFiles | undefined;

/**
 * libc with {@link LIBC_FILE_SYMBOLS} only, opened on first call (≈ 1.2 ms instead of ≈ 2.4
 * for {@link openLibc}); the same handle afterwards. {@link openLibc}'s handle when that is
 * already open.
 *
 * @returns the loaded library
 * @throws {Deno.errors.NotCapable} without `--allow-ffi`
 */
export function openLibcFiles(): LibcFiles {
  libcFiles ??= libc ?? Deno.dlopen(LIBC_PATH, LIBC_FILE_SYMBOLS);
  return libcFiles;
}

/**
 * Reads `errno` of the calling thread; call it right after the failing libc/libmnl call.
 *
 * @param lib the library from {@link openLibc}
 * @returns the current `errno` (0 when unknown)
 */
export function readErrno(lib: Libc): number {
  return errnoAt(lib.symbols);
}

/**
 * Reads `errno` of the calling thread through any opened table that binds glibc's
 * `__errno_location` (libc's, the spawn table, libssl's); call it right after the failing call,
 * on the same thread.
 *
 * @param symbols the table's symbols
 * @returns the current `errno` (0 when unknown)
 */
export function errnoAt(symbols: { __errno_location(): Deno.PointerValue }): number {
  const p = symbols.__errno_location();
  return p === null ? 0 : new Deno.UnsafePointerView(p).getInt32();
}
