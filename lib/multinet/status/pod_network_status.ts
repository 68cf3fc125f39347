/**
 * The KEP-3698 per-network status (KEP "Status": `Pod.status.networks`, `NetworkStatus`), which
 * Manifold writes — until kubelet and CRI can — as the pod annotation
 * `multinetwork.manifold.dev/networks-status`, in the same `pods/status` PATCH as
 * `k8s.v1.cni.cncf.io/network-status`, and only for pods that use the KEP annotation.
 *
 * Entries: the cluster default network as `"default"` (the KEP's name for it), then each
 * attachment that came from a PodNetwork, in attachment order; `name` is the PodNetwork,
 * `interfaceName` the pod interface, `ips` at most one bare address per family (IPv4 first:
 * "only 1 IP address per family per PodNetwork"), `isDefaultGW` on the attachment holding the
 * default route (the one with `isDefaultGW`, else the default network unless another
 * attachment asked for `default-route`).
 *
 * @module
 */

import type { AttachmentPlan, NetworkStatus } from "../types.ts";

/** The annotation Manifold writes with {@link buildPodNetworkStatus}'s entries. */
export const PODNETWORKS_STATUS_ANNOTATION = "multinetwork.manifold.dev/networks-status";

/** One entry (KEP-3698 `NetworkStatus`, with the IPs per family as a list). */
export interface PodNetworkStatus {
  /** The PodNetwork's name; `"default"` for the cluster default network. */
  name: string;
  /** The interface in the pod, e.g. `"net1"`. */
  interfaceName: string;
  /** Bare addresses, at most one IPv4 then one IPv6. */
  ips: string[];
  /** This attachment holds the pod's default route. */
  isDefaultGW: boolean;
}

/**
 * The KEP status entries, or undefined when no attachment came from a PodNetwork.
 * @param attachments the plan, default network first.
 * @param statuses the network-status entries, index-aligned with `attachments`.
 * @returns the entries (module doc).
 * @example
 * ```ts
 * // default network on eth0 (10.1.0.5/24), PodNetwork "dataplane" on dp0 with isDefaultGW:
 * buildPodNetworkStatus(plan.attachments, statuses);
 * // [{ name: "default", interfaceName: "eth0", ips: ["10.1.0.5"], isDefaultGW: false },
 * //  { name: "dataplane", interfaceName: "dp0", ips: ["10.2.0.7"], isDefaultGW: true }]
 * ```
 */
export function buildPodNetworkStatus(
  attachments: AttachmentPlan[],
  statuses: NetworkStatus[],
): PodNetworkStatus[] | undefined {
  if (!attachments.some((a) => a.selection?.podNetwork)) return undefined;
  const movesRoute = attachments.slice(1).some((a) =>
    a.selection?.podNetwork?.isDefaultGW || (a.selection?.["default-route"]?.length ?? 0) > 0
  );
  const out: PodNetworkStatus[] = [];
  attachments.forEach((a, i) => {
    const name = i === 0 ? "default" : a.selection?.podNetwork?.name;
    if (name === undefined) return;
    const ips = statuses[i]?.ips?.map((ip) => ip.replace(/\/\d+$/, "")) ?? [];
    out.push({
      name,
      interfaceName: a.ifName,
      ips: [ips.find((ip) => !ip.includes(":")), ips.find((ip) => ip.includes(":"))]
        .filter((ip): ip is string => ip !== undefined),
      isDefaultGW: i === 0 ? !movesRoute : a.selection!.podNetwork!.isDefaultGW,
    });
  });
  return out;
}

/**
 * {@link buildPodNetworkStatus} as the annotation to write, or undefined when the pod uses no
 * PodNetwork.
 * @returns `{"multinetwork.manifold.dev/networks-status": "<JSON list>"}`.
 */
export function podNetworkStatusAnnotation(
  attachments: AttachmentPlan[],
  statuses: NetworkStatus[],
): Record<string, string> | undefined {
  const entries = buildPodNetworkStatus(attachments, statuses);
  return entries ? { [PODNETWORKS_STATUS_ANNOTATION]: JSON.stringify(entries) } : undefined;
}
