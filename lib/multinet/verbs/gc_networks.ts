/**
 * Which delegate networks GC runs on, and with which valid attachments (CNI SPEC 1.1 "GC").
 *
 * A network is identified by its whole resolved conflist (canonical JSON: keys sorted), not
 * by its `name`: two NetworkAttachmentDefinitions with one name in different namespaces, or
 * a NAD whose config changed since some pods attached, are different configs and each gets
 * its own GC call, once. Each call's `cni.dev/valid-attachments` lists the attachments
 * (CNI_CONTAINERID + the attachment's interface name) made with that config — and also those
 * of every other config with the same `name`: delegates key their state by network name
 * (host-local keeps leases in `<dataDir>/<name>/`), so GC of one config with only its own list
 * would release the leases of the other. A larger valid list only makes a delegate's GC keep
 * more; a smaller one destroys live state.
 *
 * @module
 */

import type { CachedAttachment } from "../cache/cache.ts";

/** A runtime attachment as GC names it (CNI SPEC 1.1 `cni.dev/valid-attachments`). */
export interface ValidAttachment {
  /** CNI_CONTAINERID. */
  containerID: string;
  /** The interface name of the attachment. */
  ifname: string;
}

/** One delegate network to GC with the attachments valid on it. */
export interface GcNetwork {
  /** The conflist as resolved or cached. */
  conflist: Record<string, unknown>;
  /** Valid attachments, in first-seen order, without duplicates. */
  valid: ValidAttachment[];
}

/**
 * JSON with object keys sorted at every level: equal for configs that differ only in key order.
 * @param value any JSON value.
 * @returns the canonical text.
 * @example
 * ```ts
 * canonicalJson({ b: 1, a: [{ d: 2, c: 3 }] }); // '{"a":[{"c":3,"d":2}],"b":1}'
 * ```
 */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v) => {
    if (v === null || typeof v !== "object" || Array.isArray(v)) return v;
    const sorted: Record<string, unknown> = {};
    for (const k of Object.keys(v).sort()) sorted[k] = (v as Record<string, unknown>)[k];
    return sorted;
  });
}

/**
 * Groups the networks GC must call (see the module doc).
 * @param networks conflists that get GC even with no valid attachment (the default networks,
 *   networks of attachments torn down or given up), in call order.
 * @param live the live attachments: each record's container ID and cached attachments.
 * @returns one entry per distinct conflist: `networks` first, then in order of appearance.
 * @example
 * ```ts
 * groupGcNetworks([], [{ containerId: "c1", attachments: [{ ifName: "eth0", conflist: { name: "n" } }] }]);
 * // [{ conflist: { name: "n" }, valid: [{ containerID: "c1", ifname: "eth0" }] }]
 * ```
 */
export function groupGcNetworks(
  networks: Record<string, unknown>[],
  live: { containerId: string; attachments: Pick<CachedAttachment, "ifName" | "conflist">[] }[],
): GcNetwork[] {
  const byConfig = new Map<string, GcNetwork>();
  const group = (conflist: Record<string, unknown>): GcNetwork => {
    const id = canonicalJson(conflist);
    let g = byConfig.get(id);
    if (!g) byConfig.set(id, g = { conflist, valid: [] });
    return g;
  };
  for (const conflist of networks) group(conflist);
  for (const r of live) {
    for (const a of r.attachments) {
      group(a.conflist).valid.push({ containerID: r.containerId, ifname: a.ifName });
    }
  }
  const byName = new Map<string, ValidAttachment[]>();
  for (const g of byConfig.values()) {
    const name = String(g.conflist.name ?? "");
    byName.set(name, [...(byName.get(name) ?? []), ...g.valid]);
  }
  return [...byConfig.values()].map((g) => ({
    conflist: g.conflist,
    valid: distinct(byName.get(String(g.conflist.name ?? ""))!),
  }));
}

function distinct(list: ValidAttachment[]): ValidAttachment[] {
  const seen = new Set<string>();
  return list.filter((a) => {
    const k = `${a.containerID}\0${a.ifname}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}
