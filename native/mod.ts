/**
 * FFI symbol tables (libc, libmnl), loaded lazily. Only `lib/netlink/socket.ts` imports
 * this folder.
 *
 * @module
 */
export * from "./libc.ts";
export * from "./libmnl.ts";
