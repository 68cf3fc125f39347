/**
 * The report of `manifold inspect` ({@link buildInspectReport}): a sandbox's interfaces as the
 * kernel sees them and, for a pod, what each delegate claimed in its cached result
 * ({@link reconcileStatus}, NPWG v1.3 §5.3.2–§5.3.5), its device-info (§5.3.8), the default
 * routes of the main table and the recorded `default-route` change (§4.1.2.1.9). Pure.
 * Formatting is in inspect_format.ts, the command in inspect.ts.
 *
 * @module
 */

import { parseResult } from "../cni/result.ts";
import type { CniResult } from "../cni/types.ts";
import {
  buildNetworkStatus,
  type CacheRecord,
  claimsSandboxInterface,
  type DeviceInfo,
  isLinkLocal,
  type NetworkStatus,
  reconcileStatus,
} from "../multinet/mod.ts";
import {
  AF_INET6,
  type InterfaceSnapshot,
  isDefaultRoute,
  type NetnsSnapshot,
  type Route,
} from "../netlink/mod.ts";
import { errorText, oneLine } from "../util/text.ts";

/** Layout version of the `--json` output; bumped on incompatible changes. */
export const INSPECT_JSON_VERSION = 1;

/** One interface (`--netns`) or attachment (`--pod`) of an {@link InspectReport}. */
export interface InspectInterface {
  /** Status name of the attachment, `"ns/nad"` or the default network's name (`--pod` only). */
  network?: string;
  /** True for the cluster default network's attachment (`--pod` only). */
  isDefault?: boolean;
  /** The cached attachment state: `"added"`, or `"adding"` when ADD never finished (`--pod` only). */
  state?: "adding" | "added";
  /** Interface name in the sandbox (`IFLA_IFNAME`; with `--pod` the attachment's ifName). */
  ifName: string;
  /** False when the sandbox has no interface of that name. */
  present: boolean;
  /** ifindex, when present. */
  index?: number;
  /** `IFLA_INFO_KIND`, e.g. `"veth"`, `"macvlan"`; absent for physical devices. */
  kind?: string;
  /** `IFLA_ADDRESS` as `"xx:xx:…"`; absent when none or for IPoIB (see `infinibandGuid`). */
  mac?: string;
  /** IPoIB GUID, last 8 bytes of the 20-byte address (NPWG v1.3 §5.3.3.1 `infiniband-guid`). */
  infinibandGuid?: string;
  /** `IFLA_MTU` in bytes. */
  mtu?: number;
  /** `IFLA_OPERSTATE`: `"UP"`, `"DOWN"`, `"UNKNOWN"`, `"LOWERLAYERDOWN"`, … */
  operState?: string;
  /** Addresses other than link-local, kernel order (IPv4 first): `"a.b.c.d/nn"`, `"x::y/nn"`. */
  addresses: string[];
  /** Link-local addresses (`fe80::/10`, `169.254.0.0/16`), kernel order. */
  linkLocalAddresses: string[];
  /** What the delegate's cached result claimed for this interface (`--pod` only). */
  claimed?: { mac?: string; mtu?: number; ips?: string[] };
  /**
   * The attachment's device-info as ADD reported it in network-status (NPWG v1.3 §5.3.8;
   * Device Information Spec v1.1: `type` pci | vdpa | vhost-user | memif, `version`, the map
   * of that type); `--pod` only, absent when the attachment has none.
   */
  deviceInfo?: DeviceInfo;
  /** Disagreements between the delegate's claim and the kernel, sentence case; `[]` when none. */
  problems: string[];
}

/** One default route of the sandbox's main table (one per next hop for multipath routes). */
export interface InspectDefaultRoute {
  /** `"inet"` (IPv4) or `"inet6"`. */
  family: "inet" | "inet6";
  /** `"0.0.0.0/0"` or `"::/0"`. */
  dst: string;
  /** `RTA_GATEWAY`, absent for a device route. */
  gateway?: string;
  /** Name of the outgoing interface, absent when the route names none. */
  dev?: string;
  /** Outgoing ifindex (`RTA_OIF` or the next hop's). */
  ifindex?: number;
  /** `RTA_PRIORITY`. */
  metric: number;
}

/** A sandbox of the pod in the cache: `containerId`, `createdAt` (ISO-8601) and netns path. */
export interface InspectSandbox {
  /** CNI_CONTAINERID. */
  containerId: string;
  /** When the record was first written, ISO-8601. */
  createdAt: string;
  /** CNI_NETNS recorded at ADD. */
  netns: string;
}

/** What `manifold inspect` shows; the `--json` output. */
export interface InspectReport {
  /** {@link INSPECT_JSON_VERSION}. */
  version: number;
  /** The network namespace inspected (path). */
  netns: string;
  /** The pod (`--pod` only). */
  pod?: { namespace: string; name: string; uid: string };
  /** The sandbox shown: the newest live cache record of the pod (`--pod` only). */
  sandbox?: InspectSandbox;
  /** The pod's other live sandboxes in the cache, newest first (`--pod` only). */
  otherSandboxes?: InspectSandbox[];
  /** Attachments in ADD order (`--pod`) or every interface by ifindex (`--netns`). */
  interfaces: InspectInterface[];
  /** Default routes of the main table: IPv4 first, then by metric, interface, gateway. */
  defaultRoutes: InspectDefaultRoute[];
  /** The `default-route` change ADD recorded (NPWG v1.3 §4.1.2.1.9), `--pod` only. */
  defaultRouteChange?: NonNullable<CacheRecord["defaultRouteChange"]>;
  /** Sandbox-wide problems, e.g. a recorded default route the kernel no longer holds. */
  problems: string[];
}

/** Input of {@link buildInspectReport}. */
export interface BuildInspectReportOptions {
  /** The pod's cache record; absent for `--netns` (every interface is shown then). */
  record?: CacheRecord;
  /** The pod's other live sandboxes, any order (sorted newest first in the report). */
  otherSandboxes?: InspectSandbox[];
  /** The namespace path to show; default `snapshot.netns`, then `record.netns`. */
  netns?: string;
}

/**
 * Builds the report from a kernel snapshot and, for `--pod`, the cache record. Pure.
 *
 * With a record: one entry per cached attachment in ADD order; the delegate's cached result
 * is turned into its network-status entry ({@link buildNetworkStatus}) and reconciled with
 * the snapshot ({@link reconcileStatus}); an undecodable result or an unfinished ADD is a
 * problem too. The recorded default-route change is checked against the kernel's default
 * routes. Without a record: every interface of the snapshot by ifindex, no problems.
 *
 * @param snapshot the sandbox as the kernel sees it ({@link inspectNetns})
 * @param options record, other sandboxes, netns path
 * @returns the report; deterministic for the same input
 * @example
 * ```ts
 * const report = buildInspectReport({
 *   netns: "/var/run/netns/x",
 *   interfaces: [{ name: "lo", index: 1, mac: "00:00:00:00:00:00", mtu: 65536,
 *     operState: "UNKNOWN", flags: 9, type: 772, addresses: ["127.0.0.1/8"] }],
 *   routes: [],
 * });
 * report.interfaces[0].ifName; // "lo"
 * ```
 */
export function buildInspectReport(
  snapshot: NetnsSnapshot,
  options: BuildInspectReportOptions = {},
): InspectReport {
  const { record } = options;
  const defaultRoutes = defaultRouteViews(snapshot);
  const report: InspectReport = {
    version: INSPECT_JSON_VERSION,
    netns: options.netns ?? snapshot.netns ?? record?.netns ?? "",
    interfaces: [],
    defaultRoutes,
    problems: [],
  };
  if (!record) {
    report.interfaces = [...snapshot.interfaces]
      .sort((a, b) => a.index - b.index)
      .map((i) => ({ ...kernelView(i.name, i), problems: [] }));
    return report;
  }
  report.pod = { namespace: record.pod.namespace, name: record.pod.name, uid: record.pod.uid };
  report.sandbox = {
    containerId: record.containerId,
    createdAt: record.createdAt,
    netns: record.netns,
  };
  report.otherSandboxes = sortSandboxes(options.otherSandboxes ?? []);
  report.interfaces = record.attachments.map((a, index) =>
    attachmentView(a, record.networkStatus?.[index], snapshot)
  );
  if (record.defaultRouteChange) {
    report.defaultRouteChange = structuredClone(record.defaultRouteChange);
    report.problems = defaultRouteChangeProblems(record.defaultRouteChange, defaultRoutes);
  }
  return report;
}

/**
 * One cached attachment against the kernel: its network-status entry from the delegate's
 * cached result, reconciled with the snapshot; `status` is ADD's network-status entry of it
 * (for device-info recorded there only).
 */
function attachmentView(
  a: CacheRecord["attachments"][number],
  status: NetworkStatus | undefined,
  snapshot: NetnsSnapshot,
): InspectInterface {
  const problems: string[] = [];
  let claim: NetworkStatus;
  let result: CniResult | undefined;
  try {
    result = a.result === undefined ? undefined : parseResult(a.result);
    claim = buildNetworkStatus({
      statusName: a.statusName,
      ifName: a.ifName,
      isDefault: a.isDefault,
      result,
    });
  } catch (e) {
    problems.push(`cached delegate result cannot be decoded: ${oneLine(errorText(e))}`);
    claim = { name: a.statusName, interface: a.ifName, default: a.isDefault };
  }
  if (a.state === "adding") problems.push("ADD of this attachment did not finish");
  const ifName = claim.interface ?? a.ifName;
  const reconciled = reconcileStatus(
    { ...claim, interface: ifName },
    snapshot,
    claimsSandboxInterface(result, ifName),
  );
  problems.push(...reconciled.problems);
  const iface = snapshot.interfaces.find((i) => i.name === ifName);
  const deviceInfo = a.deviceInfo ?? status?.["device-info"];
  return {
    network: a.statusName,
    isDefault: a.isDefault,
    state: a.state,
    ...kernelView(ifName, iface),
    claimed: claimOf(claim),
    ...(deviceInfo ? { deviceInfo: structuredClone(deviceInfo) } : {}),
    problems,
  };
}

/**
 * Orders sandboxes newest `createdAt` first, ties by `containerId` (ascending).
 *
 * @param a a sandbox (or cache record)
 * @param b another
 * @returns negative when `a` goes first, positive when `b` does, 0 when equal
 * @example
 * ```ts
 * [older, newer].sort(newestFirst); // [newer, older]
 * ```
 */
export function newestFirst(a: InspectSandbox, b: InspectSandbox): number {
  const ta = Date.parse(a.createdAt);
  const tb = Date.parse(b.createdAt);
  if (ta !== tb) return tb - ta;
  return a.containerId < b.containerId ? -1 : a.containerId > b.containerId ? 1 : 0;
}

function sortSandboxes(list: InspectSandbox[]): InspectSandbox[] {
  return list.map(sandboxOf).sort(newestFirst);
}

/**
 * The {@link InspectSandbox} fields of a sandbox or cache record (nothing else).
 *
 * @param s a sandbox or a cache record
 * @returns `{containerId, createdAt, netns}`
 */
export function sandboxOf(s: InspectSandbox): InspectSandbox {
  return { containerId: s.containerId, createdAt: s.createdAt, netns: s.netns };
}

/** The kernel's fields of an interface, or `present: false` when it is missing. */
function kernelView(
  ifName: string,
  iface: InterfaceSnapshot | undefined,
): Omit<InspectInterface, "problems"> {
  if (!iface) return { ifName, present: false, addresses: [], linkLocalAddresses: [] };
  return {
    ifName,
    present: true,
    index: iface.index,
    ...(iface.kind !== undefined ? { kind: iface.kind } : {}),
    ...(iface.infinibandGuid !== undefined
      ? { infinibandGuid: iface.infinibandGuid }
      : iface.mac
      ? { mac: iface.mac }
      : {}),
    mtu: iface.mtu,
    operState: iface.operState,
    addresses: iface.addresses.filter((a) => !isLinkLocal(a)),
    linkLocalAddresses: iface.addresses.filter(isLinkLocal),
  };
}

function claimOf(status: NetworkStatus): NonNullable<InspectInterface["claimed"]> {
  return {
    ...(status.mac !== undefined ? { mac: status.mac } : {}),
    ...(status.mtu !== undefined ? { mtu: status.mtu } : {}),
    ...(status.ips !== undefined ? { ips: [...status.ips] } : {}),
  };
}

function defaultRouteViews(snapshot: NetnsSnapshot): InspectDefaultRoute[] {
  const names = new Map(snapshot.interfaces.map((i) => [i.index, i.name]));
  const views: InspectDefaultRoute[] = [];
  const add = (r: Route, gateway: string | undefined, ifindex: number | undefined) => {
    const dev = ifindex !== undefined ? names.get(ifindex) : undefined;
    views.push({
      family: r.family === AF_INET6 ? "inet6" : "inet",
      dst: r.dst,
      ...(gateway !== undefined ? { gateway } : {}),
      ...(dev !== undefined ? { dev } : {}),
      ...(ifindex !== undefined ? { ifindex } : {}),
      metric: r.priority,
    });
  };
  for (const r of snapshot.routes) {
    if (!isDefaultRoute(r)) continue;
    if (r.nexthops?.length) { for (const h of r.nexthops) add(r, h.gateway ?? r.gateway, h.oif); }
    else add(r, r.gateway, r.oif);
  }
  const key = (v: InspectDefaultRoute): [number, number, string, string] => [
    v.family === "inet" ? 0 : 1,
    v.metric,
    v.dev ?? `\uffff${v.ifindex ?? ""}`,
    v.gateway ?? "",
  ];
  return views.sort((a, b) => {
    const ka = key(a);
    const kb = key(b);
    for (let i = 0; i < ka.length; i++) {
      if (ka[i] < kb[i]) return -1;
      if (ka[i] > kb[i]) return 1;
    }
    return 0;
  });
}

function defaultRouteChangeProblems(
  change: NonNullable<CacheRecord["defaultRouteChange"]>,
  routes: InspectDefaultRoute[],
): string[] {
  const problems: string[] = [];
  const same = (a?: string, b?: string) => (a ?? "").toLowerCase() === (b ?? "").toLowerCase();
  for (const r of change.added) {
    const held = routes.some((k) =>
      k.dst === r.dst && same(k.gateway, r.gateway) && k.dev === change.ifName &&
      k.metric === r.metric
    );
    if (!held) {
      problems.push(
        `default route ${r.dst}${via(r.gateway)} dev ${change.ifName} metric ${r.metric} ` +
          "added by ADD is missing",
      );
    }
  }
  for (const r of change.removed) {
    if (routes.some((k) => k.dst === r.dst && same(k.gateway, r.gateway) && k.dev === r.ifName)) {
      problems.push(
        `default route ${r.dst}${via(r.gateway)} dev ${r.ifName} removed by ADD is back`,
      );
    }
  }
  return problems;
}

/**
 * A route's gateway as words for a sentence or a table line.
 *
 * @param gateway the gateway address, if any
 * @returns `" via <gateway>"`, or `""` without one
 * @example
 * ```ts
 * `0.0.0.0/0${via("10.0.0.1")} dev eth0`; // "0.0.0.0/0 via 10.0.0.1 dev eth0"
 * ```
 */
export function via(gateway: string | undefined): string {
  return gateway ? ` via ${gateway}` : "";
}
