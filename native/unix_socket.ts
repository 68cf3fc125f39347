/**
 * libc calls of the daemon's unix socket server (lib/daemon/unix_listener.ts): a listening
 * `AF_UNIX` stream socket whose accepted connections' peer credentials (`SO_PEERCRED`) can be
 * read — Deno's own `Deno.UnixConn` exposes no descriptor to ask. Sockets are non-blocking;
 * only `poll` is `nonblocking` (it waits on another thread), so every call whose `errno`
 * matters runs on the main thread and reads it there. Declarations only; the library is
 * opened by the caller on first use, so importing this module needs no `--allow-ffi`.
 *
 * @module
 */

/** glibc's shared object name (`man 7 libc`). */
export const UNIX_SOCKET_LIBC_PATH = "libc.so.6";

/** Constants of linux/x86-64 and arm64 (sys/socket.h, poll.h, errno.h, sys/eventfd.h). */
export const SOCK = {
  AF_UNIX: 1,
  SOCK_STREAM: 1,
  SOCK_NONBLOCK: 0o4000,
  SOCK_CLOEXEC: 0o2000000,
  SOL_SOCKET: 1,
  SO_PEERCRED: 17,
  SHUT_RDWR: 2,
  POLLIN: 0x001,
  POLLOUT: 0x004,
  EAGAIN: 11,
  EINTR: 4,
  ENFILE: 23,
  EMFILE: 24,
  ECONNABORTED: 103,
  O_RDONLY: 0,
  O_CLOEXEC: 0o2000000,
  EFD_NONBLOCK: 0o4000,
  EFD_CLOEXEC: 0o2000000,
  /** `sizeof(struct sockaddr_un)`: `sa_family_t` + `char sun_path[108]`. */
  SOCKADDR_UN_SIZE: 110,
  /** `sizeof(struct ucred)`: `pid_t pid; uid_t uid; gid_t gid;`. */
  UCRED_SIZE: 12,
} as const;

/** The libc symbols of the socket server, each with its C prototype. */
export const UNIX_SOCKET_SYMBOLS = {
  /** `int socket(int domain, int type, int protocol);` */
  socket: { parameters: ["i32", "i32", "i32"], result: "i32" },
  /** `int bind(int sockfd, const struct sockaddr *addr, socklen_t addrlen);` */
  bind: { parameters: ["i32", "buffer", "u32"], result: "i32" },
  /** `int listen(int sockfd, int backlog);` */
  listen: { parameters: ["i32", "i32"], result: "i32" },
  /** `int accept4(int sockfd, struct sockaddr *addr, socklen_t *addrlen, int flags);` */
  accept4: { parameters: ["i32", "pointer", "pointer", "i32"], result: "i32" },
  /**
   * `int getsockopt(int sockfd, int level, int optname, void *optval, socklen_t *optlen);`
   */
  getsockopt: { parameters: ["i32", "i32", "i32", "buffer", "buffer"], result: "i32" },
  /** `ssize_t read(int fd, void *buf, size_t count);` (non-blocking descriptor) */
  read: { parameters: ["i32", "buffer", "usize"], result: "isize" },
  /** `ssize_t write(int fd, const void *buf, size_t count);` (non-blocking descriptor) */
  write: { parameters: ["i32", "buffer", "usize"], result: "isize" },
  /** `int shutdown(int sockfd, int how);` */
  shutdown: { parameters: ["i32", "i32"], result: "i32" },
  /** `int close(int fd);` */
  close: { parameters: ["i32"], result: "i32" },
  /** `int open(const char *pathname, int flags);` (fcntl.h; called without `mode`) */
  open: { parameters: ["buffer", "i32"], result: "i32" },
  /** `int eventfd(unsigned int initval, int flags);` (sys/eventfd.h) */
  eventfd: { parameters: ["u32", "i32"], result: "i32" },
  /**
   * `int poll(struct pollfd *fds, nfds_t nfds, int timeout);` — waits on a thread of Deno's
   * blocking pool (`nonblocking`); `struct pollfd` is `{int fd; short events; short revents;}`.
   */
  poll: { parameters: ["buffer", "u64", "i32"], result: "i32", nonblocking: true },
  /** `int *__errno_location(void);` (glibc's `errno` of the calling thread) */
  __errno_location: { parameters: [], result: "pointer" },
} as const satisfies Deno.ForeignLibraryInterface;
