/**
 * The two forms of a `manifold inspect` report: a table for people
 * ({@link formatInspectTable}) and JSON for tools ({@link formatInspectJson}). Pure.
 *
 * @module
 */

import type { DeviceInfo } from "../multinet/mod.ts";
import {
  type InspectDefaultRoute,
  type InspectInterface,
  type InspectReport,
  via,
} from "./inspect_report.ts";
import { printable } from "../util/text.ts";

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
  const out = [
    ...sandboxLines(report),
    `Network namespace ${report.netns}`,
    "",
    ...interfaceTable(report),
    ...problemLines(report),
    "",
    ...defaultRouteLines(report.defaultRoutes),
    ...routeChangeLines(report.defaultRouteChange),
  ];
  return out.map((l) => printable(l).trimEnd()).join("\n") + "\n";
}

/** `--pod`: which pod and which of its sandboxes is shown. */
function sandboxLines(report: InspectReport): string[] {
  if (!report.pod || !report.sandbox) return [];
  const others = report.otherSandboxes ?? [];
  const pick = others.length
    ? `newest of ${others.length + 1} sandboxes, created ${report.sandbox.createdAt}; ` +
      `older: ${others.map((s) => s.containerId).join(", ")}`
    : `created ${report.sandbox.createdAt}`;
  return [
    `Pod ${report.pod.namespace}/${report.pod.name}` +
    (report.pod.uid ? ` (uid ${report.pod.uid})` : ""),
    `Sandbox ${report.sandbox.containerId} (${pick})`,
  ];
}

/** One row per interface; `--pod` adds NETWORK, DEFAULT, PROBLEMS (and DEVICE when any has one). */
function interfaceTable(report: InspectReport): string[] {
  const podMode = report.pod !== undefined;
  if (report.interfaces.length === 0) return [podMode ? "No attachments." : "No interfaces."];
  const withDevices = report.interfaces.some((i) => i.deviceInfo !== undefined);
  const kernelHeader = ["MAC/GUID", "MTU", "STATE", "KIND", "ADDRESSES"];
  const header = podMode
    ? [
      "NETWORK",
      "IFNAME",
      "DEFAULT",
      ...kernelHeader,
      ...(withDevices ? ["DEVICE"] : []),
      "PROBLEMS",
    ]
    : ["INDEX", "IFNAME", ...kernelHeader];
  const rows = report.interfaces.map((i) => {
    const kernel = kernelCells(i);
    if (!podMode) return [String(i.index ?? ""), i.ifName, ...kernel];
    return [
      i.network ?? "",
      i.ifName,
      i.isDefault ? "yes" : "no",
      ...kernel,
      ...(withDevices ? [i.deviceInfo ? describeDeviceInfo(i.deviceInfo) : ""] : []),
      i.problems.length ? String(i.problems.length) : "",
    ];
  });
  return alignColumns([header, ...rows]);
}

/** MAC/GUID, MTU, STATE, KIND, ADDRESSES of an interface, or `(missing)`. */
function kernelCells(i: InspectInterface): string[] {
  if (!i.present) return ["(missing)", "", "", "", ""];
  return [
    i.infinibandGuid ?? i.mac ?? "",
    i.mtu === undefined ? "" : String(i.mtu),
    i.operState ?? "",
    i.kind ?? "",
    i.addresses.join(","),
  ];
}

/** Every problem, per interface then sandbox-wide; nothing when there is none. */
function problemLines(report: InspectReport): string[] {
  const problems = [
    ...report.interfaces.flatMap((i) =>
      i.problems.map((p) => `${i.network ?? i.ifName} (${i.ifName}): ${p}`)
    ),
    ...report.problems,
  ];
  if (problems.length === 0) return [];
  return ["", "Problems (delegate claim vs kernel):", ...problems.map((p) => `  ${p}`)];
}

function defaultRouteLines(routes: InspectDefaultRoute[]): string[] {
  if (routes.length === 0) return ["Default routes: none"];
  const rows = routes.map((r) => [
    r.dst,
    r.gateway ?? "",
    r.dev ?? (r.ifindex !== undefined ? `if${r.ifindex}` : ""),
    String(r.metric),
  ]);
  return [
    "Default routes:",
    ...alignColumns([["DST", "GATEWAY", "DEV", "METRIC"], ...rows]).map((l) => `  ${l}`),
  ];
}

function routeChangeLines(change: InspectReport["defaultRouteChange"]): string[] {
  if (!change) return [];
  const out = ["", `Recorded default-route change (attachment ${change.ifName}):`];
  for (const r of change.added) {
    out.push(`  added   ${r.dst}${via(r.gateway)} dev ${change.ifName} metric ${r.metric}`);
  }
  for (const r of change.removed) out.push(`  removed ${r.dst}${via(r.gateway)} dev ${r.ifName}`);
  if (change.added.length === 0 && change.removed.length === 0) out.push("  none");
  return out;
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

/** Pads columns to the widest cell (two spaces apart); empty cells become `-`. */
function alignColumns(rows: string[][]): string[] {
  const cells = rows.map((r) => r.map((c) => printable(c) || "-"));
  const widths = cells[0].map((_, i) => Math.max(...cells.map((r) => r[i].length)));
  return cells.map((r) => r.map((c, i) => c.padEnd(widths[i])).join("  ").trimEnd());
}
