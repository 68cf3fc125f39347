/**
 * Hot-plug of running pods (the daemon's `hotPlug: true`): a change of a pod's
 * `k8s.v1.cni.cncf.io/networks` annotation attaches and detaches networks in its live sandbox,
 * as multus-dynamic-networks-controller does — the pass (`startHotPlug`), the diff of selection
 * against the cache (`diffAttachments`), one pod's change (`hotPlugPod`), retries with back-off,
 * events and metrics.
 *
 * @module
 */

export * from "./hotplug.ts";
export * from "./apply.ts";
export * from "./diff.ts";
