/**
 * glibc's `posix_spawn(3)` and what a child's pipes need, for lib/cni/spawn/native.ts: a
 * delegate started in a session of its own (`POSIX_SPAWN_SETSID`, glibc ≥ 2.26) by a
 * `CLONE_VFORK` clone, where `Deno.Command` offers either an exec of setsid(1) in front of every
 * delegate (≈ 0.5 ms each) or a fork of the whole plugin process (`detached`: ≈ 1-1.5 ms a
 * spawn in a plugin process, measured). Declarations only; the caller opens libc on first use,
 * so importing this module needs no `--allow-ffi`.
 *
 * Every call but `poll` and `waitid` runs on the calling (main) thread, so `errno` is read
 * there; those two wait on a thread of Deno's blocking pool (`nonblocking`), and neither
 * reaps a child. Types follow glibc on LP64 Linux (x86-64, arm64): `pid_t` and `int` i32,
 * `short` i16, `size_t` u64.
 *
 * @module
 */

/** glibc's shared object name (`man 7 libc`). */
export const SPAWN_LIBC_PATH = "libc.so.6";

/** Constants of glibc (spawn.h, fcntl.h, poll.h, sys/wait.h, errno.h) on Linux x86-64/arm64. */
export const SPAWN = {
  /** spawn.h: reset the signals of `setsigdefault` to their default action in the child. */
  POSIX_SPAWN_SETSIGDEF: 0x04,
  /** spawn.h: the child's signal mask is `setsigmask`'s. */
  POSIX_SPAWN_SETSIGMASK: 0x08,
  /** spawn.h (glibc ≥ 2.26): the child calls setsid(2) before its exec. */
  POSIX_SPAWN_SETSID: 0x80,
  /** `sizeof(posix_spawnattr_t)` is 336 on glibc LP64; the buffer is larger on purpose. */
  ATTR_BYTES: 512,
  /** `sizeof(posix_spawn_file_actions_t)` is 80 on glibc LP64; the buffer is larger. */
  FILE_ACTIONS_BYTES: 256,
  /** `sizeof(sigset_t)` on glibc: 1024 bits. */
  SIGSET_BYTES: 128,
  O_CLOEXEC: 0o2000000,
  O_NONBLOCK: 0o4000,
  F_SETFL: 4,
  POLLIN: 0x1,
  POLLOUT: 0x4,
  WNOHANG: 1,
  /** sys/wait.h: `waitid`'s `idtype` for one PID. */
  P_PID: 1,
  /** sys/wait.h: wait for children that exited. */
  WEXITED: 4,
  /** sys/wait.h: leave the child waitable (not reaped). */
  WNOWAIT: 0x01000000,
  /** `sizeof(siginfo_t)` on Linux. */
  SIGINFO_BYTES: 128,
  EINTR: 4,
  EAGAIN: 11,
} as const;

/** Linux signal names by number (x86-64 and arm64 share 1-31), for `CommandStatus.signal`. */
export const SIGNAL_NAMES: Record<number, Deno.Signal> = {
  1: "SIGHUP",
  2: "SIGINT",
  3: "SIGQUIT",
  4: "SIGILL",
  5: "SIGTRAP",
  6: "SIGABRT",
  7: "SIGBUS",
  8: "SIGFPE",
  9: "SIGKILL",
  10: "SIGUSR1",
  11: "SIGSEGV",
  12: "SIGUSR2",
  13: "SIGPIPE",
  14: "SIGALRM",
  15: "SIGTERM",
  16: "SIGSTKFLT",
  17: "SIGCHLD",
  18: "SIGCONT",
  19: "SIGSTOP",
  20: "SIGTSTP",
  21: "SIGTTIN",
  22: "SIGTTOU",
  23: "SIGURG",
  24: "SIGXCPU",
  25: "SIGXFSZ",
  26: "SIGVTALRM",
  27: "SIGPROF",
  28: "SIGWINCH",
  29: "SIGIO",
  30: "SIGPWR",
  31: "SIGSYS",
};

/** strerror(3) texts of the errors a spawn can meet (glibc's wording), by errno. */
export const SPAWN_ERRNO_TEXT: Record<number, string> = {
  1: "Operation not permitted",
  2: "No such file or directory",
  7: "Argument list too long",
  8: "Exec format error",
  10: "No child processes",
  11: "Resource temporarily unavailable",
  12: "Cannot allocate memory",
  13: "Permission denied",
  20: "Not a directory",
  21: "Is a directory",
  22: "Invalid argument",
  23: "Too many open files in system",
  24: "Too many open files",
  26: "Text file busy",
  32: "Broken pipe",
  36: "File name too long",
  40: "Too many levels of symbolic links",
};

/** The libc symbols of spawning a child and using its pipes, each with its C prototype. */
export const SPAWN_SYMBOLS = {
  /**
   * `int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
   *   const posix_spawnattr_t *attr, char *const argv[], char *const envp[]);` — returns an
   * errno value (glibc ≥ 2.24 also for a failed exec), 0 on success.
   */
  posix_spawn: {
    parameters: ["buffer", "buffer", "buffer", "buffer", "buffer", "buffer"],
    result: "i32",
  },
  /** `int posix_spawn_file_actions_init(posix_spawn_file_actions_t *fa);` */
  posix_spawn_file_actions_init: { parameters: ["buffer"], result: "i32" },
  /** `int posix_spawn_file_actions_adddup2(posix_spawn_file_actions_t *fa, int fd, int newfd);` */
  posix_spawn_file_actions_adddup2: { parameters: ["buffer", "i32", "i32"], result: "i32" },
  /** `int posix_spawn_file_actions_destroy(posix_spawn_file_actions_t *fa);` (frees its list) */
  posix_spawn_file_actions_destroy: { parameters: ["buffer"], result: "i32" },
  /**
   * `int posix_spawnattr_init(posix_spawnattr_t *attr);` — glibc's holds no allocation, and
   * its `posix_spawnattr_destroy` does nothing, so none is bound.
   */
  posix_spawnattr_init: { parameters: ["buffer"], result: "i32" },
  /** `int posix_spawnattr_setflags(posix_spawnattr_t *attr, short flags);` */
  posix_spawnattr_setflags: { parameters: ["buffer", "i16"], result: "i32" },
  /** `int posix_spawnattr_setsigdefault(posix_spawnattr_t *attr, const sigset_t *set);` */
  posix_spawnattr_setsigdefault: { parameters: ["buffer", "buffer"], result: "i32" },
  /** `int posix_spawnattr_setsigmask(posix_spawnattr_t *attr, const sigset_t *set);` */
  posix_spawnattr_setsigmask: { parameters: ["buffer", "buffer"], result: "i32" },
  /** `int pipe2(int pipefd[2], int flags);` (unistd.h) */
  pipe2: { parameters: ["buffer", "i32"], result: "i32" },
  /** `int fcntl(int fd, int cmd, ...);` (fcntl.h) — called with `F_SETFL` and an int. */
  fcntl: { parameters: ["i32", "i32", "i32"], result: "i32" },
  /** `ssize_t write(int fd, const void *buf, size_t count);` (unistd.h) */
  write: { parameters: ["i32", "buffer", "usize"], result: "isize" },
  /** `int poll(struct pollfd *fds, nfds_t nfds, int timeout);` — on a blocking-pool thread. */
  poll: { parameters: ["buffer", "u64", "i32"], result: "i32", nonblocking: true },
  /**
   * `int waitid(idtype_t idtype, id_t id, siginfo_t *infop, int options);` — on a blocking-pool
   * thread, for the whole of the child's life (only where `pidfd_open` is missing or refused),
   * with `WNOWAIT`: the child is reaped on the main thread, never behind its back.
   */
  waitid: { parameters: ["i32", "i32", "buffer", "i32"], result: "i32", nonblocking: true },
  /** `pid_t waitpid(pid_t pid, int *wstatus, int options);` on the calling thread (`WNOHANG`). */
  waitpidNow: { name: "waitpid", parameters: ["i32", "buffer", "i32"], result: "i32" },
  /** `int *__errno_location(void);` (glibc's `errno` of the calling thread) */
  __errno_location: { parameters: [], result: "pointer" },
  /**
   * `int pidfd_open(pid_t pid, unsigned int flags);` (sys/pidfd.h, glibc ≥ 2.36; Linux ≥ 5.3) —
   * a close-on-exec descriptor that polls readable once the process exited; null where glibc
   * lacks it.
   */
  pidfd_open: { parameters: ["i32", "u32"], result: "i32", optional: true },
} as const satisfies Deno.ForeignLibraryInterface;

/** libc opened with {@link SPAWN_SYMBOLS}. */
export type SpawnLibc = Deno.DynamicLibrary<typeof SPAWN_SYMBOLS>["symbols"];
