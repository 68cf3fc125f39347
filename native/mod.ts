/**
 * FFI symbol tables, each declared in a file of its own and loaded lazily by its one user:
 * libc and libmnl (re-exported here) by `lib/netlink/socket.ts`, and libc's file table by
 * `lib/fs/procfs.ts` (procfs reads Deno refuses); the others are imported directly — libssl
 * (`lib/k8s/http1/`), posix_spawn (`lib/cni/spawn/native.ts`), libnftables (`lib/policy/`),
 * the daemon's process, memory and socket calls (`lib/daemon/`), the page cache
 * (`lib/install/`).
 *
 * @module
 */
export * from "./libc.ts";
export * from "./libmnl.ts";
