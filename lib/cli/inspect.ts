/**
 * `manifold inspect`: the attachments of a sandbox as the kernel sees them — a table for
 * people, JSON (`--json`) for tools.
 *
 * - `--netns <path|name>`: every interface of the network namespace, by ifindex (no cache).
 * - `--pod ns/name [--cni-dir DIR]`: the newest live (non-tombstone) cache record of the pod
 *   gives the sandbox's netns and its attachments, in ADD order; each shows the kernel's
 *   MAC/GUID, MTU, oper state, kind and addresses, and what the delegate claimed but the
 *   kernel does not hold ({@link reconcileStatus}, NPWG v1.3 §5.3.2–§5.3.5), and the
 *   device-info ADD reported for it (NPWG v1.3 §5.3.8: a DEVICE column when some attachment
 *   has one; JSON `deviceInfo`).
 *
 * Both show the main table's default routes (`0.0.0.0/0`, `::/0`) and, with `--pod`, the
 * recorded `default-route` change (NPWG v1.3 §4.1.2.1.9). Link-local addresses
 * (`fe80::/10`, `169.254.0.0/16`) are left out of `addresses` and of the table, as in
 * network-status; JSON lists them apart in `linkLocalAddresses`.
 *
 * Exit codes: 0 shown (even with problems), 1 pod or netns not found or not enterable,
 * 2 usage error.
 *
 * @module
 */

import { parseArgs } from "node:util";
import {
  KUBE_FLAG_OPTIONS,
  type KubeFlags,
  kubeFlags,
  kubeFlagsHelp,
  livePod,
} from "./kube_flags.ts";
import type { LogFields, Logger } from "../log/mod.ts";
import {
  AttachmentCache,
  buildNetworkStatus,
  type CacheRecord,
  claimsSandboxInterface,
  DEFAULT_CNI_DIR,
  type DeviceInfo,
  isLinkLocal,
  type NetworkStatus,
  reconcileStatus,
} from "../multinet/mod.ts";
import {
  AF_INET6,
  inspectNetns,
  type InterfaceSnapshot,
  isDefaultRoute,
  type NetnsSnapshot,
  resolveNetnsPath,
  type Route,
} from "../netlink/mod.ts";
import { errorText, oneLine, printable } from "../util/text.ts";

/** Layout version of the `--json` output; bumped on incompatible changes. */
export const INSPECT_JSON_VERSION = 1;

/** Usage text of `manifold inspect` (printed by `--help` and after a usage error hint). */
export const INSPECT_USAGE = `Usage:
  manifold inspect --netns <path|name> [--json]
  manifold inspect --pod <namespace/name> [--cni-dir DIR] [--kubeconfig PATH] [--context NAME]
                   [--json]

Prints the attachments of a sandbox as the kernel sees them.

Options:
  --netns <path|name>  a network namespace: a path (/proc/<pid>/ns/net, /var/run/netns/x)
                       or a name under /var/run/netns; shows every interface
  --pod <ns/name>      the pod's newest sandbox in the cache; shows its attachments and
                       what each delegate claimed but the kernel does not hold
  --cni-dir DIR        the cache directory (default: $MANIFOLD_CNI_DIR, else ${DEFAULT_CNI_DIR})
${
  kubeFlagsHelp("no API", 23)
}                       with a kubeconfig, --pod shows the sandbox of the live pod (its UID)
  --json               JSON for tools instead of a table
  -h, --help           this text

Link-local addresses are left out of the table (JSON: "linkLocalAddresses").
Exit codes: 0 shown, 1 pod or netns not found or not enterable, 2 usage error.
`;

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
  report.interfaces = record.attachments.map((a, index) => {
    const problems: string[] = [];
    let status: NetworkStatus;
    try {
      status = buildNetworkStatus({
        statusName: a.statusName,
        ifName: a.ifName,
        isDefault: a.isDefault,
        result: a.result,
      });
    } catch (e) {
      problems.push(`cached delegate result cannot be decoded: ${oneLine(errorText(e))}`);
      status = { name: a.statusName, interface: a.ifName, default: a.isDefault };
    }
    if (a.state === "adding") problems.push("ADD of this attachment did not finish");
    const claimed = claimOf(status);
    const ifName = status.interface ?? a.ifName;
    const reconciled = reconcileStatus(
      { ...status, interface: ifName },
      snapshot,
      claimsSandboxInterface(a.result, ifName),
    );
    problems.push(...reconciled.problems);
    const iface = snapshot.interfaces.find((i) => i.name === ifName);
    const deviceInfo = a.deviceInfo ?? record.networkStatus?.[index]?.["device-info"];
    return {
      network: a.statusName,
      isDefault: a.isDefault,
      state: a.state,
      ...kernelView(ifName, iface),
      claimed,
      ...(deviceInfo ? { deviceInfo: structuredClone(deviceInfo) } : {}),
      problems,
    };
  });
  if (record.defaultRouteChange) {
    report.defaultRouteChange = structuredClone(record.defaultRouteChange);
    report.problems = defaultRouteChangeProblems(record.defaultRouteChange, defaultRoutes);
  }
  return report;
}

/**
 * Formats a report as a table for people: a header line, one row per interface, the
 * problems, the default routes and the recorded default-route change. Control characters
 * in names are escaped (`\xNN`); link-local addresses are left out; empty cells are `-`.
 * Lines carry no trailing spaces; the text ends with a newline. Pure.
 *
 * @param report from {@link buildInspectReport}
 * @returns the table text
 * @example
 * ```ts
 * formatInspectTable({ version: 1, netns: "/var/run/netns/x", interfaces: [],
 *   defaultRoutes: [], problems: [] });
 * // "Network namespace /var/run/netns/x\n\nNo interfaces.\n\nDefault routes: none\n"
 * ```
 */
export function formatInspectTable(report: InspectReport): string {
  const out: string[] = [];
  if (report.pod && report.sandbox) {
    const others = report.otherSandboxes ?? [];
    const pick = others.length
      ? `newest of ${others.length + 1} sandboxes, created ${report.sandbox.createdAt}; ` +
        `older: ${others.map((s) => s.containerId).join(", ")}`
      : `created ${report.sandbox.createdAt}`;
    out.push(
      `Pod ${report.pod.namespace}/${report.pod.name}` +
        (report.pod.uid ? ` (uid ${report.pod.uid})` : ""),
      `Sandbox ${report.sandbox.containerId} (${pick})`,
    );
  }
  out.push(`Network namespace ${report.netns}`, "");

  const podMode = report.pod !== undefined;
  // The DEVICE column appears only when some attachment has device-info.
  const withDevices = report.interfaces.some((i) => i.deviceInfo !== undefined);
  if (report.interfaces.length === 0) {
    out.push(podMode ? "No attachments." : "No interfaces.");
  } else {
    const header = podMode
      ? [
        "NETWORK",
        "IFNAME",
        "DEFAULT",
        "MAC/GUID",
        "MTU",
        "STATE",
        "KIND",
        "ADDRESSES",
        ...(withDevices ? ["DEVICE"] : []),
        "PROBLEMS",
      ]
      : ["INDEX", "IFNAME", "MAC/GUID", "MTU", "STATE", "KIND", "ADDRESSES"];
    const rows = report.interfaces.map((i) => {
      const kernel = i.present
        ? [
          i.infinibandGuid ?? i.mac ?? "",
          i.mtu === undefined ? "" : String(i.mtu),
          i.operState ?? "",
          i.kind ?? "",
          i.addresses.join(","),
        ]
        : ["(missing)", "", "", "", ""];
      return podMode
        ? [
          i.network ?? "",
          i.ifName,
          i.isDefault ? "yes" : "no",
          ...kernel,
          ...(withDevices ? [i.deviceInfo ? describeDeviceInfo(i.deviceInfo) : ""] : []),
          i.problems.length ? String(i.problems.length) : "",
        ]
        : [String(i.index ?? ""), i.ifName, ...kernel];
    });
    out.push(...alignColumns([header, ...rows]));
  }

  const problems = [
    ...report.interfaces.flatMap((i) =>
      i.problems.map((p) => `${i.network ?? i.ifName} (${i.ifName}): ${p}`)
    ),
    ...report.problems,
  ];
  if (problems.length) {
    out.push("", "Problems (delegate claim vs kernel):", ...problems.map((p) => `  ${p}`));
  }

  out.push("");
  if (report.defaultRoutes.length === 0) {
    out.push("Default routes: none");
  } else {
    out.push("Default routes:");
    const rows = report.defaultRoutes.map((r) => [
      r.dst,
      r.gateway ?? "",
      r.dev ?? (r.ifindex !== undefined ? `if${r.ifindex}` : ""),
      String(r.metric),
    ]);
    out.push(...alignColumns([["DST", "GATEWAY", "DEV", "METRIC"], ...rows]).map((l) => `  ${l}`));
  }

  const change = report.defaultRouteChange;
  if (change) {
    out.push("", `Recorded default-route change (attachment ${change.ifName}):`);
    for (const r of change.added) {
      out.push(`  added   ${r.dst}${via(r.gateway)} dev ${change.ifName} metric ${r.metric}`);
    }
    for (const r of change.removed) out.push(`  removed ${r.dst}${via(r.gateway)} dev ${r.ifName}`);
    if (change.added.length === 0 && change.removed.length === 0) out.push("  none");
  }
  return out.map((l) => printable(l).trimEnd()).join("\n") + "\n";
}

/**
 * Formats a report as JSON for tools: 2-space indentation, keys in {@link InspectReport}
 * order, C1 control characters escaped as well (`\u0080`…`\u009f`); ends with a newline. Pure.
 *
 * @param report from {@link buildInspectReport}
 * @returns the JSON text
 * @example
 * ```ts
 * JSON.parse(formatInspectJson(report)).interfaces[0].ifName;
 * ```
 */
export function formatInspectJson(report: InspectReport): string {
  const text = JSON.stringify(report, null, 2).replace(
    /[\u007f-\u009f]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
  return `${text}\n`;
}

/** Injected I/O of {@link runInspect}; defaults are the process's stdout, stderr and env. */
export interface InspectIO {
  /** Receives the report (table or JSON) and `--help`. */
  stdout?: (s: string) => void;
  /** Receives error messages and warnings. */
  stderr?: (s: string) => void;
  /** Environment; `MANIFOLD_CNI_DIR` is the default of `--cni-dir`. */
  env?: Record<string, string>;
}

/**
 * `manifold inspect …`: parses `args` (the words after `inspect`), reads the kernel (and the
 * cache for `--pod`), prints the report. Never throws and never prints a stack trace.
 *
 * @param args e.g. `["--netns", "pod1", "--json"]`, `["--pod", "default/web"]`
 * @param io stdout, stderr, env (default: the process's)
 * @returns the exit code: 0 shown (problems included), 1 pod or netns not found or cannot
 *   be entered (message on stderr), 2 usage error (`--help` prints usage and returns 0)
 */
export async function runInspect(args: string[], io: InspectIO = {}): Promise<number> {
  const stdout = io.stdout ?? writeTo(Deno.stdout);
  const stderr = io.stderr ?? writeTo(Deno.stderr);
  const fail = (msg: string) => {
    stderr(`manifold inspect: ${printable(msg)}\n`);
    return 1;
  };
  let opts: InspectOptions;
  try {
    opts = parseInspectArgs(args, io.env ?? processEnv());
  } catch (e) {
    stderr(`manifold inspect: ${printable(errorText(e))}\nTry 'manifold inspect --help'.\n`);
    return 2;
  }
  if (opts.help) {
    stdout(INSPECT_USAGE);
    return 0;
  }
  const logger = stderrLogger(stderr);
  try {
    let report: InspectReport;
    if (opts.netns !== undefined) {
      const path = resolveNetnsPath(opts.netns);
      let snapshot: NetnsSnapshot;
      try {
        snapshot = inspectNetns(path, { logger });
      } catch (e) {
        return fail(netnsFailure(e, path));
      }
      report = buildInspectReport(snapshot, { netns: path });
    } else {
      const { namespace, name } = opts.pod!;
      const found = await findPodSandboxes(opts.cniDir, namespace, name, logger);
      if (found.length === 0) {
        return fail(`no sandbox of pod ${namespace}/${name} in the cache at ${opts.cniDir}`);
      }
      const live = await livePod(opts.pod!, {
        flags: opts.kube ?? {},
        env: io.env ?? processEnv(),
        warn: (e) => logger.warn(`KUBECONFIG not used: ${errorText(e)}`),
      });
      const sandboxes = live ? found.filter((r) => r.pod.uid === live.uid) : found;
      if (sandboxes.length === 0) {
        return fail(
          `no sandbox of the live pod ${namespace}/${name} (uid ${live!.uid}` +
            `${
              live!.nodeName ? `, node ${live!.nodeName}` : ""
            }) in the cache at ${opts.cniDir}; ` +
            `${found.length} belong to an earlier pod of that name`,
        );
      }
      const [record, ...older] = sandboxes;
      if (record.netns === "") {
        return fail(
          `sandbox ${record.containerId} of pod ${namespace}/${name} has no network namespace recorded`,
        );
      }
      let snapshot: NetnsSnapshot;
      try {
        snapshot = inspectNetns(record.netns, { logger });
      } catch (e) {
        return fail(
          `${netnsFailure(e, record.netns)} (sandbox ${record.containerId} of pod ` +
            `${namespace}/${name})`,
        );
      }
      report = buildInspectReport(snapshot, {
        record,
        netns: record.netns,
        otherSandboxes: older.map(sandboxOf),
      });
    }
    stdout(opts.json ? formatInspectJson(report) : formatInspectTable(report));
    return 0;
  } catch (e) {
    return fail(errorText(e));
  }
}

interface InspectOptions {
  help: boolean;
  json: boolean;
  netns?: string;
  pod?: { namespace: string; name: string };
  cniDir: string;
  kube?: KubeFlags;
}

/** Parses and validates the flags; throws an Error whose message is the usage problem. */
function parseInspectArgs(args: string[], env: Record<string, string>): InspectOptions {
  const { values } = parseArgs({
    args,
    options: {
      netns: { type: "string" },
      pod: { type: "string" },
      "cni-dir": { type: "string" },
      ...KUBE_FLAG_OPTIONS,
      json: { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
    strict: true,
    allowPositionals: false,
  });
  const help = values.help === true;
  const json = values.json === true;
  const cniDir = values["cni-dir"] ?? (env.MANIFOLD_CNI_DIR || DEFAULT_CNI_DIR);
  if (help) return { help, json, cniDir };
  if (values.netns !== undefined && values.pod !== undefined) {
    throw new Error("--netns and --pod cannot be used together");
  }
  if (values.netns !== undefined) {
    if (values.netns.trim() === "") throw new Error("--netns needs a path or a name");
    if (values["cni-dir"] !== undefined) throw new Error("--cni-dir only goes with --pod");
    for (const k of ["kubeconfig", "context"] as const) {
      if (values[k] !== undefined) throw new Error(`--${k} only goes with --pod`);
    }
    return { help, json, cniDir, netns: values.netns };
  }
  if (values.pod !== undefined) {
    const parts = values.pod.split("/");
    if (parts.length !== 2 || parts[0] === "" || parts[1] === "") {
      throw new Error(`--pod must be namespace/name, got ${JSON.stringify(values.pod)}`);
    }
    if (cniDir === "") throw new Error("--cni-dir must not be empty");
    const kube = kubeFlags(values);
    return { help, json, cniDir, pod: { namespace: parts[0], name: parts[1] }, kube };
  }
  throw new Error("one of --netns or --pod is required");
}

/**
 * The pod's live (non-tombstone) cache records, newest `createdAt` first, ties by
 * containerId. Unreadable or damaged records are skipped with a warning.
 */
async function findPodSandboxes(
  cniDir: string,
  namespace: string,
  name: string,
  logger: Logger,
): Promise<CacheRecord[]> {
  const cache = new AttachmentCache(cniDir);
  const found: CacheRecord[] = [];
  for (const id of await cache.list()) {
    let record: CacheRecord | undefined;
    try {
      record = await cache.read(id);
    } catch (e) {
      logger.warn(`skipping cache record ${id}: ${errorText(e)}`);
      continue;
    }
    if (!record || record.deletedAt !== undefined) continue;
    if (record.pod.namespace === namespace && record.pod.name === name) found.push(record);
  }
  return found.sort(newestFirst);
}

function newestFirst(a: InspectSandbox, b: InspectSandbox): number {
  const ta = Date.parse(a.createdAt);
  const tb = Date.parse(b.createdAt);
  if (ta !== tb) return tb - ta;
  return a.containerId < b.containerId ? -1 : a.containerId > b.containerId ? 1 : 0;
}

function sortSandboxes(list: InspectSandbox[]): InspectSandbox[] {
  return list.map(sandboxOf).sort(newestFirst);
}

function sandboxOf(s: InspectSandbox): InspectSandbox {
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
 * One-cell summary of device-info for the table, e.g. `pci 0000:18:02.5 pf=0000:18:00.0
 * rdma=mlx5_3`, `vdpa vdpa2 vhost /dev/vhost-vdpa-0`, `vhost-user client /run/vu.sock`,
 * `memif master ethernet /run/memif.sock`; other types show `type` and `version`.
 */
function describeDeviceInfo(info: DeviceInfo): string {
  const map = (key: string): Record<string, unknown> => {
    const v = info[key];
    return typeof v === "object" && v !== null ? v as Record<string, unknown> : {};
  };
  const words = (...parts: unknown[]) =>
    parts.filter((p) => typeof p === "string" && p !== "").join(" ");
  const opt = (label: string, v: unknown) => typeof v === "string" && v ? `${label}=${v}` : "";
  switch (info.type) {
    case "pci": {
      const p = map("pci");
      return words(
        "pci",
        p["pci-address"],
        opt("pf", p["pf-pci-address"]),
        opt("rdma", p["rdma-device"]),
        opt("vhost-net", p["vhost-net"]),
        opt("representor", p["representor-device"]),
      );
    }
    case "vdpa": {
      const v = map("vdpa");
      return words(
        "vdpa",
        v["parent-device"],
        v.driver,
        v.path,
        opt("pci", v["pci-address"]),
        opt("pf", v["pf-pci-address"]),
      );
    }
    case "vhost-user": {
      const v = map("vhost-user");
      return words("vhost-user", v.mode, v.path);
    }
    case "memif": {
      const m = map("memif");
      return words("memif", m.role, m.mode, m.path);
    }
    default:
      return words(info.type, info.version);
  }
}

function via(gateway: string | undefined): string {
  return gateway ? ` via ${gateway}` : "";
}

/** Pads columns to the widest cell (two spaces apart); empty cells become `-`. */
function alignColumns(rows: string[][]): string[] {
  const cells = rows.map((r) => r.map((c) => printable(c) || "-"));
  const widths = cells[0].map((_, i) => Math.max(...cells.map((r) => r[i].length)));
  return cells.map((r) => r.map((c, i) => c.padEnd(widths[i])).join("  ").trimEnd());
}

/** NetnsError already says "Cannot open network namespace <path>: ENOENT"; others get context. */
function netnsFailure(e: unknown, path: string): string {
  if (e instanceof Error && e.name === "NetnsError") return e.message;
  return `Cannot inspect network namespace ${path}: ${errorText(e)}`;
}

function writeTo(file: { writeSync(p: Uint8Array): number }): (s: string) => void {
  return (s) => {
    const data = new TextEncoder().encode(s);
    for (let off = 0; off < data.length;) off += file.writeSync(data.subarray(off));
  };
}

function processEnv(): Record<string, string> {
  try {
    return Deno.env.toObject();
  } catch {
    return {}; // no --allow-env: defaults only
  }
}

/** Warnings (e.g. the libmnl fallback, a damaged cache record) as lines on stderr. */
function stderrLogger(stderr: (s: string) => void): Logger {
  const line = (msg: string, fields?: LogFields) => {
    const extra = fields && Object.keys(fields).length ? ` ${JSON.stringify(fields)}` : "";
    stderr(`manifold inspect: warning: ${printable(msg + extra)}\n`);
  };
  const logger: Logger = {
    debug: () => {},
    info: () => {},
    warn: line,
    error: line,
    with: () => logger,
  };
  return logger;
}
