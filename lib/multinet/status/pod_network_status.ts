/**
 * The KEP-3698 per-network status (KEP "Status": `Pod.status.networks`, `NetworkStatus`), which
 * Manifold writes — until kubelet and CRI can — as the pod annotation
 * `multinetwork.manifold.dev/networks-status`, in the same `pods/status` PATCH as
 * `k8s.v1.cni.cncf.io/network-status`, for every pod that uses the KEP annotation (a pod
 * listing only `"default"` too).
 *
 * The KEP's shape exactly: `{name, interfaceName, ip?, isDefaultGW?}` with `ip` one bare
 * address and `ip`/`isDefaultGW` omitted when empty/false (`omitempty`). "Only 1 IP address per
 * family per PodNetwork": an attachment with an IPv4 and an IPv6 address gives two entries
 * (IPv4 first), one without addresses one entry without `ip`. Entries: the pod's first
 * attachment (CNI_IFNAME) under its PodNetwork's name (`"default"` for the cluster default
 * network), then each attachment that came from a PodNetwork, in attachment order;
 * `isDefaultGW` marks the attachment holding the default route (the one with `isDefaultGW`,
 * else the first unless another attachment asked for `default-route`).
 *
 * @module
 */

import type { AttachmentPlan, NetworkStatus } from "../types.ts";

/** The annotation Manifold writes with {@link buildPodNetworkStatus}'s entries. */
export const PODNETWORKS_STATUS_ANNOTATION = "multinetwork.manifold.dev/networks-status";

/** One entry (KEP-3698 `NetworkStatus`). */
export interface PodNetworkStatus {
  /** The PodNetwork's name; `"default"` for the cluster default network. */
  name: string;
  /** The interface in the pod, e.g. `"net1"`. */
  interfaceName: string;
  /** One bare address (`"10.0.0.20"`, `"2011::233"`); absent when the attachment has none. */
  ip?: string;
  /** Present (true) only on the attachment holding the pod's default route. */
  isDefaultGW?: true;
}

/**
 * The KEP status entries (module doc).
 * @param attachments the plan, `[0]` on CNI_IFNAME.
 * @param statuses the network-status entries, index-aligned with `attachments`.
 * @returns the entries.
 * @example
 * ```ts
 * // default network on eth0 (10.1.0.5/24), PodNetwork "dataplane" on dp0 with isDefaultGW,
 * // dual-stack (10.2.0.7/24, fd00::7/64):
 * buildPodNetworkStatus(plan.attachments, statuses);
 * // [{ name: "default", interfaceName: "eth0", ip: "10.1.0.5" },
 * //  { name: "dataplane", interfaceName: "dp0", ip: "10.2.0.7", isDefaultGW: true },
 * //  { name: "dataplane", interfaceName: "dp0", ip: "fd00::7", isDefaultGW: true }]
 * ```
 */
export function buildPodNetworkStatus(
  attachments: AttachmentPlan[],
  statuses: NetworkStatus[],
): PodNetworkStatus[] {
  const movesRoute = attachments.slice(1).some((a) =>
    a.selection?.podNetwork?.isDefaultGW || (a.selection?.["default-route"]?.length ?? 0) > 0
  );
  const out: PodNetworkStatus[] = [];
  attachments.forEach((a, i) => {
    const name = i === 0
      ? a.selection?.podNetwork?.name ?? "default"
      : a.selection?.podNetwork?.name;
    if (name === undefined) return;
    const gw = i === 0 ? !movesRoute : a.selection!.podNetwork!.isDefaultGW;
    const ips = statuses[i]?.ips?.map((ip) => ip.replace(/\/\d+$/, "")) ?? [];
    const perFamily = [ips.find((ip) => !ip.includes(":")), ips.find((ip) => ip.includes(":"))]
      .filter((ip): ip is string => ip !== undefined);
    for (const ip of perFamily.length > 0 ? perFamily : [undefined]) {
      const entry: PodNetworkStatus = { name, interfaceName: a.ifName };
      if (ip !== undefined) entry.ip = ip;
      if (gw) entry.isDefaultGW = true;
      out.push(entry);
    }
  });
  return out;
}

/**
 * {@link buildPodNetworkStatus} as the annotation to write.
 * @returns `{"multinetwork.manifold.dev/networks-status": "<JSON list>"}`.
 */
export function podNetworkStatusAnnotation(
  attachments: AttachmentPlan[],
  statuses: NetworkStatus[],
): Record<string, string> {
  return {
    [PODNETWORKS_STATUS_ANNOTATION]: JSON.stringify(buildPodNetworkStatus(attachments, statuses)),
  };
}
