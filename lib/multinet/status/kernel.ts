/**
 * Kernel truth for the delegating plugin: what the sandbox's network namespace really
 * holds, read over rtnetlink (lib/netlink, FFI to libmnl), reconciled with what each
 * delegate claimed, and the NPWG `default-route` applied with netlink (§4.1.2.1.9).
 * The netlink module is loaded on first use, so calls that never touch the kernel
 * (DEL, VERSION) pay nothing for it.
 *
 * @module
 */

import { lazyImport } from "../../util/lazy.ts";
import { CniError, CniErrorCode } from "../../cni/errors.ts";
import type { Logger } from "../../log/mod.ts";
import type {
  DefaultRouteChange,
  DefaultRouteRequest,
  NetnsSnapshot,
} from "../../netlink/inspect.ts";
import type { DecodedResult } from "../../cni/result.ts";
import type { CniResult } from "../../cni/types.ts";
import type { CacheRecord } from "../cache/cache.ts";
import type { NetworkStatus } from "../types.ts";
import { errorText } from "../../util/text.ts";

/** Kernel access the commands need (injected; tests may pass a fake). */
export interface KernelAccess {
  /**
   * Snapshot of a network namespace (links, addresses, main-table routes).
   * @throws {NetnsError} (CNI code 8) when the namespace cannot be entered; NetlinkError.
   */
  inspect(netnsPath: string): Promise<NetnsSnapshot>;
  /**
   * Applies a default-route request inside the namespace.
   * @throws {LinkNotFoundError} when the interface is missing; NetlinkError when the kernel refuses.
   */
  setDefaultRoute(netnsPath: string, request: DefaultRouteRequest): Promise<DefaultRouteChange>;
  /** Starts loading what `inspect` needs (while delegates run); never throws. */
  prefetch?(): void;
}

/**
 * The real kernel access over lib/netlink (imported lazily). Errors become CNI errors:
 * a namespace that cannot be entered is code 8 (libcni `types.ErrInvalidNetNS`); anything
 * else keeps its message with code 999.
 */
export function netlinkKernel(logger: Logger): KernelAccess {
  let loading: Promise<typeof import("../../netlink/mod.ts")> | undefined;
  const mod = () =>
    loading ??= lazyImport<typeof import("../../netlink/mod.ts")>(
      "../../netlink/mod.ts",
      import.meta.url,
    );
  const wrap = async <T>(netnsPath: string, fn: () => Promise<T>): Promise<T> => {
    try {
      return await fn();
    } catch (e) {
      if (e instanceof CniError) throw e;
      const name = e instanceof Error ? e.name : "";
      const msg = errorText(e);
      if (name === "NetnsError") {
        throw new CniError(
          CniErrorCode.InvalidNetns,
          `cannot enter network namespace ${netnsPath}`,
          msg,
        );
      }
      throw new CniError(CniErrorCode.Internal, msg, `netlink in ${netnsPath}`);
    }
  };
  return {
    prefetch: () => void mod().then((m) => m.preloadNetlink({ logger }), () => {}),
    inspect: (netnsPath) =>
      wrap(netnsPath, async () => (await mod()).inspectNetns(netnsPath, { logger })),
    setDefaultRoute: (netnsPath, request) =>
      wrap(netnsPath, async () => (await mod()).setDefaultRoute(netnsPath, request, { logger })),
  };
}

/**
 * True when the delegate's result names `ifName` as an interface inside the sandbox
 * (CNI SPEC "Result" `interfaces[].sandbox`).
 * @param result the delegate's result, decoded once (undefined: it returned none).
 * @param ifName the attachment's CNI_IFNAME.
 * @returns whether some interface with a non-empty `sandbox` is called `ifName`.
 * @example
 * ```ts
 * claimsSandboxInterface({ cniVersion: "1.0.0", interfaces: [{ name: "net1", sandbox: "/x" }] }, "net1"); // true
 * ```
 */
export function claimsSandboxInterface(result: CniResult | undefined, ifName: string): boolean {
  return (result?.interfaces ?? []).some((i) => !!i.sandbox && i.name === ifName);
}

/**
 * True for link-local addresses (`fe80::/10`, `169.254.0.0/16`).
 * @param cidr an address with or without prefix, e.g. `"fe80::1/64"`.
 * @returns whether it is link-local.
 * @example
 * ```ts
 * isLinkLocal("fe80::1/64"); // true
 * ```
 */
export function isLinkLocal(cidr: string): boolean {
  return /^fe[89ab][0-9a-f]:/i.test(cidr) || cidr.startsWith("169.254.");
}

/**
 * The address of `"addr[/len]"` in one canonical text form (IPv6 as the WHATWG URL parser
 * serializes it: lower case, zeros compressed), so that the delegate's spelling and the
 * kernel's compare equal. Built in: no netlink module on the hot path for this.
 */
function canonicalAddress(cidr: string): string {
  const addr = cidr.split("/")[0];
  if (!addr.includes(":")) return addr;
  try {
    return new URL(`http://[${addr}]/`).hostname;
  } catch {
    return addr.toLowerCase();
  }
}

/**
 * Checks a status entry against what the kernel holds (NPWG v1.3 §5.3.2–§5.3.5): MAC, MTU
 * and IPoIB GUID come from the kernel; `ips` are the delegate's addresses (§5.1, §5.3.3: the
 * status reports what the delegate returned) that the kernel really has on the interface, in
 * the delegate's order and the kernel's `addr/len` form. Addresses the kernel holds but no
 * delegate returned (IPv6 link-local, SLAAC, an address added by someone else) are not
 * reported; addresses the delegate returned that the interface does not hold are dropped and
 * listed as problems, as is any other disagreement.
 * @param entry the entry built from the delegate's result.
 * @param snapshot the sandbox as the kernel sees it.
 * @param claimed whether the delegate's result names the interface as a sandbox interface;
 *   a missing interface is a problem only then (userspace attachments have no netdev).
 * @returns the corrected entry and human-readable problems (empty when they agree).
 * @example
 * ```ts
 * reconcileStatus({ name: "n", interface: "eth0", ips: ["10.0.0.2/24"], default: true }, snapshot, true);
 * // {entry: {…, ips: ["10.0.0.2/24"], mac: <kernel>, mtu: <kernel>}, problems: []}
 * ```
 */
export function reconcileStatus(
  entry: NetworkStatus,
  snapshot: NetnsSnapshot,
  claimed: boolean,
): { entry: NetworkStatus; problems: string[] } {
  const problems: string[] = [];
  const iface = snapshot.interfaces.find((i) => i.name === entry.interface);
  if (!iface) {
    if (!claimed) return { entry, problems };
    problems.push(
      `interface ${entry.interface} reported by the delegate is missing from the sandbox`,
    );
    const { mac: _m, mtu: _t, ips: _i, ...rest } = entry;
    return { entry: rest, problems };
  }
  const out: NetworkStatus = { ...entry, mtu: iface.mtu };
  if (iface.infinibandGuid) {
    out["infiniband-guid"] = iface.infinibandGuid;
  } else if (iface.mac) {
    if (entry.mac && entry.mac.toLowerCase() !== iface.mac.toLowerCase()) {
      problems.push(`MAC of ${iface.name} is ${iface.mac}, the delegate reported ${entry.mac}`);
    }
    out.mac = iface.mac;
  }
  if (entry.ips) {
    const held = new Map<string, string>();
    for (const a of iface.addresses) {
      const key = canonicalAddress(a);
      if (!held.has(key)) held.set(key, a);
    }
    const ips: string[] = [];
    for (const ip of entry.ips) {
      const kernel = held.get(canonicalAddress(ip));
      if (kernel === undefined) {
        problems.push(`address ${ip} reported by the delegate is not on ${iface.name}`);
        continue;
      }
      if (ip.includes("/") && ip.split("/")[1] !== kernel.split("/")[1]) {
        problems.push(`address ${ip} reported by the delegate is ${kernel} on ${iface.name}`);
      }
      if (!ips.includes(kernel)) ips.push(kernel);
    }
    out.ips = ips;
  }
  return { entry: out, problems };
}

const DEFAULT_DST = new Set(["0.0.0.0/0", "::/0"]);

/** True when a route is a default route of one of `families`. */
function isDefaultOf(dst: string, families: Set<4 | 6>): boolean {
  return DEFAULT_DST.has(dst) && families.has(dst.includes(":") ? 6 : 4);
}

/** Removes default routes of the given families (4 and/or 6) from a raw CNI result (any version). */
function stripDefaultRoutes(result: unknown, families: Set<4 | 6>): unknown {
  if (!result || typeof result !== "object") return result;
  const keep = (r: unknown) => !isDefaultOf((r as { dst?: string }).dst ?? "", families);
  const out = { ...(result as Record<string, unknown>) };
  if (Array.isArray(out.routes)) out.routes = out.routes.filter(keep);
  for (const k of ["ip4", "ip6"]) {
    const legacy = out[k] as { routes?: unknown[] } | undefined;
    if (legacy && Array.isArray(legacy.routes)) {
      out[k] = { ...legacy, routes: legacy.routes.filter(keep) };
    }
  }
  return out;
}

/**
 * Applies the pod's `default-route` request (at most one attachment carries it, §4.1.2.1.9):
 * default routes of the same family leave every other interface (the cluster default network's
 * too), the gateways go on the chosen interface with increasing metric; `[]` removes that
 * interface's default routes. The cached results of interfaces that lost default routes are
 * edited to match, so their delegates' CHECK does not expect routes Manifold removed; the change
 * is recorded in the cache record. `results` (the decoded results, index-aligned with
 * `record.attachments`) are edited the same way, so the raw and decoded values stay one result.
 * @param kernel netlink access.
 * @param netns the sandbox's CNI_NETNS.
 * @param record the ADD's record; attachments with `defaultRoute` choose the interface.
 * @param results the decoded results of the attachments, edited in place.
 * @returns the sandbox as the kernel holds it after the change (reused to verify the status), or
 *   undefined when no attachment asked for a default route.
 * @throws whatever {@link KernelAccess.setDefaultRoute} throws (the ADD then rolls back).
 */
export async function applyDefaultRoute(
  kernel: KernelAccess,
  netns: string,
  record: CacheRecord,
  results: (DecodedResult | undefined)[] = [],
): Promise<NetnsSnapshot | undefined> {
  const chosen = record.attachments.find((a) => a.defaultRoute !== undefined);
  if (!chosen || !netns) return undefined;
  const change = await kernel.setDefaultRoute(netns, {
    ifName: chosen.ifName,
    gateways: chosen.defaultRoute!,
  });
  const snapshot = await kernel.inspect(netns);
  const nameOf = (index?: number) => snapshot.interfaces.find((i) => i.index === index)?.name ?? "";
  const lost = new Map<string, Set<4 | 6>>();
  for (const r of change.removed) {
    const ifName = nameOf(r.oif);
    if (!lost.has(ifName)) lost.set(ifName, new Set());
    lost.get(ifName)!.add(r.dst.includes(":") ? 6 : 4);
  }
  record.attachments.forEach((a, i) => {
    const families = lost.get(a.ifName);
    if (!families) return;
    if (a.result !== undefined) a.result = stripDefaultRoutes(a.result, families);
    const decoded = results[i];
    if (decoded) {
      const routes = decoded.result.routes?.filter((r) => !isDefaultOf(r.dst, families));
      const result = { ...decoded.result, routes };
      if (!routes?.length) delete result.routes;
      results[i] = { raw: a.result as Record<string, unknown>, result };
    }
  });
  record.defaultRouteChange = {
    ifName: chosen.ifName,
    added: change.added.map((r) => ({ dst: r.dst, gateway: r.gateway, metric: r.priority })),
    removed: change.removed.map((r) => ({ dst: r.dst, gateway: r.gateway, ifName: nameOf(r.oif) })),
  };
  return snapshot;
}
