/**
 * Shared shapes of the NPWG multi-network logic: what a pod asks for
 * (NetworkSelectionElement), what Manifold resolves it to (Delegate), what it runs
 * (AttachmentPlan) and what it reports (NetworkStatus).
 * Wire keys keep the spec's spelling (`"default-route"`, `"infiniband-guid"`).
 *
 * @module
 */

import type { NetworkConfigList } from "../cni/types.ts";

/** Annotation holding the pod's secondary network selection (NPWG v1.3 §4.1). */
export const NETWORKS_ANNOTATION = "k8s.v1.cni.cncf.io/networks";
/** The pod's KEP-3698 `networks` list (a JSON array), until `Pod.spec.networks` exists. */
export const PODNETWORKS_ANNOTATION = "multinetwork.manifold.dev/networks";
/** Annotation Manifold writes with the attachment results (NPWG v1.3 §5). */
export const NETWORK_STATUS_ANNOTATION = "k8s.v1.cni.cncf.io/network-status";
/** Multus's per-pod override of the cluster default network (a NAD reference). */
export const DEFAULT_NETWORK_ANNOTATION = "v1.multus-cni.io/default-network";
/** NAD annotation naming the device-plugin resource backing the network. */
export const RESOURCE_NAME_ANNOTATION = "k8s.v1.cni.cncf.io/resourceName";
/** CRI capability whose runtimeConfig value is the map of all pod annotations. */
export const POD_ANNOTATIONS_CAPABILITY = "io.kubernetes.cri.pod-annotations";

/** A port mapping (CNI CONVENTIONS.md `portMappings`, NPWG v1.3 §4.1.2.1.7); ports 1–65535. */
export interface PortMapping {
  /** Port on the node, 1–65535. */
  hostPort: number;
  /** Port in the pod, 1–65535. */
  containerPort: number;
  /** "tcp" | "udp" | "sctp", lower-case on the wire to delegates. */
  protocol?: string;
  /** Node address to bind, "" or absent for all. */
  hostIP?: string;
}

/** Bandwidth limits (CNI CONVENTIONS.md `bandwidth`, NPWG v1.3 §4.1.2.1.8); rates in bits/s, bursts in bits. */
export interface BandwidthEntry {
  /** Ingress rate, bits/s. */
  ingressRate?: number;
  /** Ingress burst, bits. */
  ingressBurst?: number;
  /** Egress rate, bits/s. */
  egressRate?: number;
  /** Egress burst, bits. */
  egressBurst?: number;
}

/**
 * One element of the `k8s.v1.cni.cncf.io/networks` annotation after validation
 * (NPWG v1.3 §4.1.2.1). `namespace` is always filled (pod namespace when absent).
 * Keys other than the spec's (reverse-DNS extensions) are kept in `extra`.
 */
export interface NetworkSelectionElement {
  /** NAD name (§4.1.2.1.1). */
  name: string;
  /** NAD namespace (§4.1.2.1.2); the pod's when the element names none. */
  namespace: string;
  /** Requested pod interface name (§4.1.2.1.5); kernel rules, ≤ 15 bytes. */
  interface?: string;
  /** "a.b.c.d[/nn]" or IPv6 with optional prefix (§4.1.2.1.3). */
  ips?: string[];
  /** "xx:xx:xx:xx:xx:xx" (§4.1.2.1.4). */
  mac?: string;
  /** Merged into the delegate's `args.cni`, annotation wins (§4.1.2.1.6). */
  "cni-args"?: Record<string, unknown>;
  /** Port mappings for the `portMappings` capability (§4.1.2.1.7). */
  portMappings?: PortMapping[];
  /** Bandwidth limits for the `bandwidth` capability (§4.1.2.1.8). */
  bandwidth?: BandwidthEntry;
  /** Gateways for the default route; `[]` = no default route on this attachment (§4.1.2.1.9). */
  "default-route"?: string[];
  /** 8-byte GUID "xx:…:xx" (§4.1.2.1.10). */
  "infiniband-guid"?: string;
  /** IPAMClaim name, forwarded to the delegate (§4.1.2.1.11). */
  "ipam-claim-reference"?: string;
  /** Reverse-DNS extension keys, kept verbatim. */
  extra?: Record<string, unknown>;
  /**
   * Set when the element comes from the KEP-3698 annotation (`multinetwork.manifold.dev/networks`):
   * the PodNetwork (and PodNetworkAttachment) it resolved through, and `isDefaultGW` (the
   * default route goes via this interface, gateways from the delegate's result), and `index`,
   * the entry's place in that list (the order of its networks-status).
   */
  podNetwork?: { name: string; attachment?: string; isDefaultGW: boolean; index?: number };
}

/**
 * A resolved network: the CNI configuration Manifold will run for one selection
 * (or for the cluster default network).
 */
export interface Delegate {
  /** Status name: "ns/nad" for NAD-based networks, the conf `name` for file/inline defaults (§5.3.1). */
  statusName: string;
  /** The config as a conflist object (single confs are wrapped: `{cniVersion,name,plugins:[conf]}`), original keys kept. */
  conflist: Record<string, unknown>;
  /** The same config parsed once (`parseNetworkConfig`); `list.raw === conflist`. */
  list: NetworkConfigList;
  /** True for the cluster default network (and Multus `delegates[0]`). */
  isDefault: boolean;
  /** Where the config came from, for logs/explain: "nad:ns/name", "file:/path", "inline:delegates[0]". */
  source: string;
  /** `k8s.v1.cni.cncf.io/resourceName` of the NAD, when set. */
  resourceName?: string;
}

/**
 * Why an attachment exists, i.e. who may take it away:
 * - `"clusterDefault"`: the cluster default network (NPWG v1.3 §6), also when the
 *   `v1.multus-cni.io/default-network` annotation overrides it;
 * - `"defaultNetworks"`: Multus `defaultNetworks`, or an inline `delegates[1..]` entry
 *   (configuration, every pod);
 * - `"selection"`: an element of the `k8s.v1.cni.cncf.io/networks` annotation (NPWG v1.3 §4.1);
 * - `"kep"`: an entry of the KEP-3698 annotation (`multinetwork.manifold.dev/networks`).
 *
 * Only `"selection"` attachments follow their annotation on a running pod (hot-plug).
 */
export type AttachmentOrigin = "clusterDefault" | "defaultNetworks" | "selection" | "kep";

/** Every {@link AttachmentOrigin}, in plan order. */
export const ATTACHMENT_ORIGINS = [
  "clusterDefault",
  "defaultNetworks",
  "selection",
  "kep",
] as const satisfies readonly AttachmentOrigin[];

/** One attachment to perform: [containerID, network name, ifName] (NPWG v1.3 §4.2.1) plus its inputs. */
export interface AttachmentPlan {
  /** The resolved network to attach. */
  delegate: Delegate;
  /** Why the pod has it (see {@link AttachmentOrigin}); cached with the attachment. */
  origin: AttachmentOrigin;
  /** CNI_IFNAME for this attachment. */
  ifName: string;
  /** The selection element that asked for it (absent for the default network and defaultNetworks). */
  selection?: NetworkSelectionElement;
  /**
   * runtimeConfig candidates (capability name → value). The CNI runtime passes each key only to
   * plugins declaring that capability (CNI CONVENTIONS.md).
   */
  capabilityArgs: Record<string, unknown>;
  /** Extra CNI_ARGS pairs for this attachment (e.g. K8S_POD_*, IgnoreUnknown). */
  cniArgs: [string, string][];
}

/** Device information (Device Information Specification v1.1; NPWG v1.3 §5.3.8). Shape validated elsewhere. */
export type DeviceInfo = Record<string, unknown> & { type: string; version: string };

/** One entry of `k8s.v1.cni.cncf.io/network-status` (NPWG v1.3 §5.3). Keys in Multus's order. */
export interface NetworkStatus {
  /** Status name: "ns/nad" or the default network's conf name (§5.3.1). */
  name: string;
  /** The pod interface name (§5.3.2). */
  interface?: string;
  /** CIDR form "a.b.c.d/nn" (spec examples); Multus writes bare addresses. */
  ips?: string[];
  /** Hardware address "xx:xx:xx:xx:xx:xx" (§5.3.4), from the kernel. */
  mac?: string;
  /** MTU in bytes, from the kernel (a Multus extension). */
  mtu?: number;
  /** True for the cluster-wide default network (§5.3.6). */
  default: boolean;
  /** DNS settings from the delegate's result (§5.3.7). */
  dns?: { nameservers?: string[]; domain?: string; search?: string[]; options?: string[] };
  /** Device information (§5.3.8, Device Information Spec v1.1). */
  "device-info"?: DeviceInfo;
  /** IPoIB GUID, the last 8 bytes of the 20-byte hardware address (§4.1.2.1.10), from the kernel. */
  "infiniband-guid"?: string;
  /** Gateways when the attachment had `default-route` (§5.3.7.4). */
  "default-route"?: string[];
  /** Same list under the key Multus consumers read. */
  gateway?: string[];
}
