/**
 * Building and serialising the `k8s.v1.cni.cncf.io/network-status` annotation (NPWG v1.3 §5),
 * without zod: what an ADD runs (issue 30: the per-call path loads no zod). Parsing the
 * annotation (zod) is lib/multinet/status/network_status.ts, which re-exports this module. One
 * {@link NetworkStatus} entry per attachment, taken from the delegate's CNI result in any
 * version (0.1.0 … 1.1.0).
 *
 * Differences from Multus (NAD client `CreateNetworkStatuses`), all deliberate:
 * - `ips` keep the result's CIDR form (`"10.1.2.3/24"`), as the spec examples do.
 * - An attachment always yields exactly one entry, even when no interface has a `sandbox`
 *   (Calico) or IPs carry no interface index (NAD client issues #74/#75).
 * - `dns` is written only when it holds something; Multus always writes `{}`.
 * - `default-route` (spec key) and `gateway` (the key Multus consumers read) are both written.
 *
 * @module
 */

import type { CniResult } from "../../cni/result_types.ts";
import type { DeviceInfo, NetworkStatus } from "../types.ts";

/** Input of {@link buildNetworkStatus}: one attachment and what its delegate returned. */
export interface StatusInput {
  /** Status name: "ns/nad", or the default network's conf `name` (NPWG v1.3 §5.3.1). */
  statusName: string;
  /**
   * CNI_IFNAME used for this attachment. Becomes `interface` when the result has no sandbox
   * interface or is older than 0.3.0 (NPWG v1.3 §5.3.2.1).
   */
  ifName: string;
  /** True for the cluster-wide default network (NPWG v1.3 §5.2, §5.3.6). */
  isDefault: boolean;
  /**
   * The delegate's result, decoded once (`decodeResult` of lib/cni/result.ts: any CNI version
   * normalized to the 1.x shape), or undefined when it returned none (a minimal map is built
   * then, NPWG v1.3 §5.1.1).
   */
  result?: CniResult;
  /** Device information read from the `CNIDeviceInfoFile` (NPWG v1.3 §5.3.8). */
  deviceInfo?: DeviceInfo;
  /** Gateways, when the selection had `"default-route"` (NPWG v1.3 §5.3.7.4); `[]` is kept. */
  defaultRoute?: string[];
}

/** Key order of an entry, as Multus writes it (spec keys first, then `gateway`). */
const KEY_ORDER = [
  "name",
  "interface",
  "ips",
  "mac",
  "infiniband-guid",
  "mtu",
  "default",
  "dns",
  "device-info",
  "default-route",
  "gateway",
] as const;

/**
 * Builds the network-status entry of one attachment from its delegate's result
 * (NPWG v1.3 §5.1.1, §5.3.2–§5.3.8).
 *
 * - 0.3.0+ results: `interface`, `mac` and `mtu` come from the first interface with a
 *   non-empty `sandbox`; `ips` are the addresses whose `interface` index points at it
 *   (§5.3.3.1 rule 1). Without a sandbox interface: addresses without an index or with an
 *   index < 0 (rule 2). Addresses whose index is out of range count as "without an index".
 *   Going further than the spec so that no address is lost: when rule 1 finds nothing, the
 *   unindexed addresses are used; when no interface has a sandbox and rule 2 finds nothing,
 *   all addresses are used (Calico returns only a host-side interface).
 * - 0.1.0/0.2.0 results (`ip4`/`ip6`, normalized to unindexed `ips`): `ips` from both,
 *   `interface` = `ifName`.
 * - No sandbox interface, or no result at all: `interface` = `ifName` (§5.3.2.1), never `mac`.
 * - `dns` only when some field is non-empty; `default-route` and `gateway` only when
 *   `defaultRoute` is given.
 *
 * Keys are in Multus's order: name, interface, ips, mac, mtu, default, dns, device-info,
 * default-route, gateway. Arrays are copies; the input is not modified.
 *
 * @param input the attachment and its delegate's decoded result.
 * @returns one status entry; `ips` in CIDR form ("a.b.c.d/nn", "2001:db8::2/64").
 *
 * @example
 * ```ts
 * buildNetworkStatus({
 *   statusName: "ns1/net-a", ifName: "net1", isDefault: false,
 *   result: {
 *     cniVersion: "1.0.0",
 *     interfaces: [{ name: "veth1" }, { name: "net1", mac: "0a:58:0a:01:02:03", sandbox: "/var/run/netns/x" }],
 *     ips: [{ address: "10.1.2.3/24", interface: 1 }],
 *   },
 * });
 * // {name:"ns1/net-a",interface:"net1",ips:["10.1.2.3/24"],mac:"0a:58:0a:01:02:03",default:false}
 * ```
 */
export function buildNetworkStatus(input: StatusInput): NetworkStatus {
  const status: NetworkStatus = { name: input.statusName, default: input.isDefault };
  let ifaceName: string | undefined = input.ifName || undefined;
  let ips: string[] = [];
  let mac: string | undefined;
  let mtu: number | undefined;
  let dns: NetworkStatus["dns"];

  if (input.result !== undefined) {
    const result = input.result;
    const picked = pickSandboxInterface(result);
    if (picked) {
      if (picked.name) ifaceName = picked.name;
      mac = picked.mac || undefined;
      mtu = picked.mtu ? picked.mtu : undefined;
    }
    ips = selectIps(result, picked?.index);
    dns = copyDns(result.dns);
  }

  // Rebuild in the fixed key order so JSON.stringify writes Multus's order.
  const fields: Partial<NetworkStatus> = {
    interface: ifaceName,
    ips: ips.length > 0 ? ips : undefined,
    mac: ifaceName ? mac : undefined, // §5.3.4: "mac" requires "interface"
    mtu,
    dns,
    "device-info": input.deviceInfo ? structuredClone(input.deviceInfo) : undefined,
    "default-route": input.defaultRoute ? [...input.defaultRoute] : undefined,
    gateway: input.defaultRoute ? [...input.defaultRoute] : undefined,
  };
  return orderNetworkStatusKeys({ ...status, ...fields });
}

/**
 * Serialises network-status entries into the annotation value (NPWG v1.3 §5): a JSON list with
 * the default network's entry first, because multi-networkpolicy-iptables reads `[1:]` as the
 * secondary networks. The order of the other entries is kept. Each entry is written with
 * 4-space indentation and keys in Multus's order, joined as `[a,b]` like Multus; unknown
 * (reverse-DNS) keys follow the known ones. `undefined` fields are left out.
 *
 * Only one entry may be default (§5.3.6); if several are, they all go first, in their order.
 *
 * @param entries status entries, e.g. from {@link buildNetworkStatus}.
 * @returns the annotation value; `"[]"` for no entries.
 *
 * @example
 * ```ts
 * serializeNetworkStatus([
 *   { name: "ns1/net-a", interface: "net1", default: false },
 *   { name: "cbr0", interface: "eth0", default: true },
 * ]); // '[{\n    "name": "cbr0", …},{\n    "name": "ns1/net-a", …}]'
 * ```
 */
export function serializeNetworkStatus(entries: NetworkStatus[]): string {
  const ordered = [...entries.filter((e) => e.default), ...entries.filter((e) => !e.default)];
  return `[${ordered.map((e) => JSON.stringify(orderNetworkStatusKeys(e), null, 4)).join(",")}]`;
}

interface PickedInterface {
  index: number;
  name: string;
  mac?: string | null;
  mtu?: number | null;
}

/** The first interface with a non-empty `sandbox` (§5.3.2.1, §5.3.4.1), with its index. */
function pickSandboxInterface(result: CniResult): PickedInterface | undefined {
  const interfaces = result.interfaces ?? [];
  const index = interfaces.findIndex((i) => typeof i.sandbox === "string" && i.sandbox !== "");
  if (index < 0) return undefined;
  const { name, mac, mtu } = interfaces[index];
  return { index, name, mac, mtu };
}

/**
 * The addresses for the status (§5.3.3.1), in result order. See {@link buildNetworkStatus}
 * for the rules; a 0.1.0/0.2.0 result was normalized with `ip4` then `ip6` as unindexed `ips`
 * and no interfaces (§5.3.3.1 last paragraph), so rule 2 gives both.
 */
function selectIps(result: CniResult, sandboxIndex: number | undefined): string[] {
  const ips = result.ips ?? [];
  if (ips.length === 0) return [];
  const count = result.interfaces?.length ?? 0;
  const unindexed = (ip: { interface?: number | null }) =>
    ip.interface === undefined || ip.interface === null || ip.interface < 0 ||
    ip.interface >= count;

  if (sandboxIndex !== undefined) {
    const own = ips.filter((ip) => ip.interface === sandboxIndex); // rule 1
    return (own.length > 0 ? own : ips.filter(unindexed)).map((ip) => ip.address);
  }
  const loose = ips.filter(unindexed); // rule 2
  return (loose.length > 0 ? loose : ips).map((ip) => ip.address);
}

/** A copy of the non-empty DNS fields (§5.3.7), or undefined when there are none. */
function copyDns(dns: CniResult["dns"]): NetworkStatus["dns"] {
  if (!dns) return undefined;
  const out: NonNullable<NetworkStatus["dns"]> = {};
  if (dns.nameservers?.length) out.nameservers = [...dns.nameservers];
  if (dns.domain) out.domain = dns.domain;
  if (dns.search?.length) out.search = [...dns.search];
  if (dns.options?.length) out.options = [...dns.options];
  return Object.keys(out).length > 0 ? out : undefined;
}

/**
 * An entry with its keys in Multus's order (name, interface, ips, mac, infiniband-guid, mtu,
 * default, dns, device-info, default-route, gateway), extension keys after, `undefined`
 * values dropped.
 * @param entry a network-status entry.
 * @returns a new object with the same values.
 * @example
 * ```ts
 * Object.keys(orderNetworkStatusKeys({ default: true, name: "n" })); // ["name", "default"]
 * ```
 */
export function orderNetworkStatusKeys(entry: NetworkStatus): NetworkStatus {
  const src = entry as unknown as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const key of KEY_ORDER) {
    if (src[key] !== undefined) out[key] = src[key];
  }
  for (const [key, value] of Object.entries(src)) {
    if (!(key in out) && value !== undefined) out[key] = value;
  }
  return out as unknown as NetworkStatus;
}
