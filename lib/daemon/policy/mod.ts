/**
 * The daemon's MultiNetworkPolicy agent: list+watch of policies, the node's pods and namespaces,
 * the pod → sandbox index, peers, problem reports, and the sync that hands lib/policy's
 * nftables translation to its applier. Loaded lazily by daemon.ts, only when policy is on.
 *
 * @module
 */

export * from "./agent.ts";
export { type KubeObject, MNP_LIST_WATCH, NAMESPACE_LIST_WATCH, POD_LIST_WATCH } from "./watch.ts";
