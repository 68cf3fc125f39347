/**
 * The resident node agent (`manifold daemon`): the socket server, the request service, the
 * NAD store, the wire protocol and the forwarder the plugin binary uses.
 *
 * @module
 */

export * from "./attachments.ts";
export * from "./daemon.ts";
export * from "./forward.ts";
export * from "./nad_store.ts";
export * from "./observer.ts";
export * from "./protocol.ts";
export * from "./server.ts";
export * from "./service.ts";
