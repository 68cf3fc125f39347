/**
 * Netlink (rtnetlink) for Manifold: a pure-TypeScript codec, an iproute2-like API
 * ({@link NetlinkHandle}: `linkList`, `linkByName`, `addrList`, `routeList`, `routeReplace`,
 * `routeDel`) over a transport (libmnl or libc socket via FFI, or a fake), namespace entry
 * ({@link openNetlinkSocket} with `netns`), and the plugin's helpers {@link inspectNetns} and
 * {@link setDefaultRoute}.
 *
 * @example
 * ```ts
 * import { inspectNetns } from "./mod.ts";
 * const snap = inspectNetns("/var/run/netns/pod1");
 * console.log(snap.interfaces.map((i) => `${i.name} ${i.mac} ${i.addresses.join(",")}`));
 * ```
 *
 * @module
 */
export * from "./address.ts";
export * from "./attributes.ts";
export * from "./constants.ts";
export * from "./errors.ts";
export * from "./handle.ts";
export * from "./inspect.ts";
export * from "./ip.ts";
export * from "./link.ts";
export * from "./message.ts";
export * from "./route.ts";
export * from "./socket.ts";
export * from "./transport.ts";
