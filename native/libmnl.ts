/**
 * libmnl symbol table (netfilter's minimalistic netlink library, `libmnl/libmnl.h`):
 * only the socket calls — messages are built and parsed in TypeScript. Declarations only;
 * the library is opened on first use by {@link openLibmnl}.
 *
 * None of these symbols is `nonblocking`: the socket must be created on the thread that
 * `setns` switched, and all I/O stays on that thread.
 *
 * @module
 */

/** Default shared object name (Debian/Ubuntu package `libmnl0`). */
export const LIBMNL_PATH = "libmnl.so.0";

/** Environment variable overriding the libmnl path (tests point it at a missing file). */
export const LIBMNL_PATH_ENV = "MANIFOLD_LIBMNL_PATH";

/** The libmnl symbols Manifold calls, each with its C prototype. */
export const LIBMNL_SYMBOLS = {
  /** `struct mnl_socket *mnl_socket_open2(int bus, int flags);` (libmnl ≥ 1.0.4) */
  mnl_socket_open2: { parameters: ["i32", "i32"], result: "pointer" },
  /** `int mnl_socket_bind(struct mnl_socket *nl, unsigned int groups, pid_t pid);` */
  mnl_socket_bind: { parameters: ["pointer", "u32", "i32"], result: "i32" },
  /** `unsigned int mnl_socket_get_portid(const struct mnl_socket *nl);` */
  mnl_socket_get_portid: { parameters: ["pointer"], result: "u32" },
  /** `int mnl_socket_get_fd(const struct mnl_socket *nl);` */
  mnl_socket_get_fd: { parameters: ["pointer"], result: "i32" },
  /**
   * `int mnl_socket_setsockopt(const struct mnl_socket *nl, int type, void *buf,
   *                            socklen_t len);` (level `SOL_NETLINK`)
   */
  mnl_socket_setsockopt: { parameters: ["pointer", "i32", "buffer", "u32"], result: "i32" },
  /** `ssize_t mnl_socket_sendto(const struct mnl_socket *nl, const void *req, size_t siz);` */
  mnl_socket_sendto: { parameters: ["pointer", "buffer", "usize"], result: "isize" },
  /**
   * `ssize_t mnl_socket_recvfrom(const struct mnl_socket *nl, void *buf, size_t siz);`
   * (−1 with `errno = ENOSPC` when the datagram did not fit)
   */
  mnl_socket_recvfrom: { parameters: ["pointer", "buffer", "usize"], result: "isize" },
  /** `int mnl_socket_close(struct mnl_socket *nl);` */
  mnl_socket_close: { parameters: ["pointer"], result: "i32" },
} as const satisfies Deno.ForeignLibraryInterface;

/** The opened libmnl with {@link LIBMNL_SYMBOLS}. */
export type Libmnl = Deno.DynamicLibrary<typeof LIBMNL_SYMBOLS>;

const loaded = new Map<string, Libmnl>();

/**
 * Opens libmnl from `path` on first call and caches it per path.
 *
 * @param path shared object to load (default {@link LIBMNL_PATH})
 * @returns the loaded library
 * @throws {Error} when the library or a symbol is missing (the caller falls back to libc)
 */
export function openLibmnl(path: string = LIBMNL_PATH): Libmnl {
  let lib = loaded.get(path);
  if (!lib) {
    lib = Deno.dlopen(path, LIBMNL_SYMBOLS);
    loaded.set(path, lib);
  }
  return lib;
}
