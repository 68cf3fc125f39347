/**
 * FFI symbol tables (libc, libmnl), loaded lazily. Only `lib/netlink/socket.ts` imports
 * this folder, and `lib/fs/procfs.ts` its libc table (procfs reads Deno refuses).
 *
 * @module
 */
export * from "./libc.ts";
export * from "./libmnl.ts";
