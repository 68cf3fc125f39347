/**
 * The resident node agent (`manifold daemon`): the socket server (its ownership and peer
 * check), the trusted configuration, the request service, the
 * NAD store, the node's pod informer, hot-plug of running pods, the wire protocol and the
 * forwarder the plugin binary uses.
 *
 * @module
 */

export * from "./attachments.ts";
export * from "./daemon.ts";
export * from "./daemon_conf.ts";
export * from "./forward.ts";
export * from "./hotplug/mod.ts";
export * from "./log_pool.ts";
export * from "./nad_store.ts";
export * from "./observer.ts";
export * from "./pod_informer.ts";
export type { PolicyAgent } from "./policy/mod.ts";
export * from "./protocol.ts";
export * from "./sandbox_index.ts";
export * from "./server.ts";
export * from "./service.ts";
export * from "./socket_owner.ts";
