/**
 * Hot-plug's difference between what a running pod has and what its
 * `k8s.v1.cni.cncf.io/networks` annotation now selects (issue 14 §1). Pure: no I/O.
 *
 * Identity of a selection element is (namespace, name, interface) (NPWG v1.3 §4.1.2.1): an
 * element naming an `interface` is the cached attachment of that network on that interface;
 * an element without one keeps the interface its network already has in the pod
 * ({@link pinSelection}), so removing one element never renames the others' interfaces. A
 * renamed interface is therefore a removal plus an addition. Changing any other key of an
 * element the pod has ({@link ATTACHED_KEYS}: `ips`, `mac`, `infiniband-guid`, `portMappings`,
 * `bandwidth`, `default-route`, `cni-args`, `ipam-claim-reference`) is refused, naming the keys:
 * each is consumed by the delegate's ADD only, and CNI has no operation that changes an
 * attachment in place (CNI SPEC "Operations": ADD, DEL, CHECK, GC, STATUS, VERSION), so applying
 * one means a DEL and an ADD, i.e. a re-plug with a new lease and a link down/up, which the
 * annotation writer must ask for. A new element with `default-route` (it would rewrite the
 * sandbox's routes) or of a device-backed network (a NAD with a `resourceName`: devices are
 * allocated when the pod is created) is refused too. Only attachments the selection made
 * (origin `"selection"`, recorded in the plan and the cache) are ever removed: the cluster
 * default network, Multus `defaultNetworks` / inline `delegates[1..]` and KEP-3698
 * attachments stay, and a new element asking for an interface one of them holds is refused
 * (issue 21 §1).
 *
 * @module
 */

import { isPlainObject } from "../../cni/types.ts";
import type { CachedAttachment } from "../../multinet/cache/cache.ts";
import { canonicalJson } from "../../multinet/verbs/gc_networks.ts";
import { SELECTION_CAPABILITIES } from "../../multinet/plan/plan.ts";
import {
  ATTACHMENT_ORIGINS,
  type AttachmentOrigin,
  type AttachmentPlan,
  type NetworkSelectionElement,
} from "../../multinet/types.ts";

/**
 * The keys of a selection element that cannot change while its network is attached (NPWG
 * v1.3 §4.1.2.1.3, .4, .6–.11); a change is refused (module doc). `interface`, `name` and
 * `namespace` are the element's identity: changing them is a removal plus an addition.
 */
export const ATTACHED_KEYS = [
  "ips",
  "mac",
  "infiniband-guid",
  "portMappings",
  "bandwidth",
  "default-route",
  "cni-args",
  "ipam-claim-reference",
] as const satisfies readonly (keyof NetworkSelectionElement)[];

/** One refused change: what kind (for metrics) and the sentence of its Warning event. */
export interface HotPlugRefusal {
  /**
   * `"add"`: a new element; `"change"`: keys of an attached element; `"remove"`: an
   * attachment of unknown origin no element names any more.
   */
  op: "add" | "change" | "remove";
  /** One sentence, e.g. `network ns/a interface net1: changing "ips" of an attached …`. */
  message: string;
}

/** What hot-plug does to one pod. */
export interface HotPlugDiff {
  /** Attachments to ADD, in plan order. */
  add: AttachmentPlan[];
  /** Cached attachments to DEL. */
  remove: CachedAttachment[];
  /** Changes refused (a Warning event each); nothing is done for them. */
  refused: HotPlugRefusal[];
}

/**
 * An attachment's {@link AttachmentOrigin} as its record says, for a record's `index`-th
 * attachment. Records written before origins were kept (or by a newer build, with a value
 * this one does not know) say nothing: the first attachment (or one marked `isDefault`) is
 * the cluster default network; any other is `"unknown"`, which hot-plug never removes
 * (conservative: it may be a `defaultNetworks` attachment) unless a selection element names
 * it exactly (`name@ifName`).
 *
 * @param a the cached attachment
 * @param index its position in the record (`0`: the runtime's interface)
 * @returns its origin, or `"unknown"`
 * @example
 * ```ts
 * attachmentOrigin({ statusName: "ns/a", ifName: "net1", isDefault: false } as CachedAttachment, 1); // "unknown"
 * ```
 */
export function attachmentOrigin(
  a: CachedAttachment,
  index: number,
): AttachmentOrigin | "unknown" {
  const known = (ATTACHMENT_ORIGINS as readonly string[]).includes(a.origin ?? "");
  if (known) return a.origin!;
  return index === 0 || a.isDefault ? "clusterDefault" : "unknown";
}

/**
 * The selection with an `interface` on every element, so that planning gives existing
 * attachments their existing names and new ones names nobody holds:
 * - an element without `interface` keeps the interface its network already has in the pod
 *   (the first selection-made attachment of that network no element claims explicitly;
 *   an attachment of unknown origin counts as selection-made here);
 * - any other element without `interface` gets the first free `netN`: not held by an
 *   attachment hot-plug never removes (cluster default, `defaultNetworks`, KEP-3698, unknown
 *   origin), not requested by an element, not pinned. (The planner alone would number
 *   after the `defaultNetworks` it plans, whose names depend on what the selection requests,
 *   not on what the pod has.)
 *
 * @param elements the parsed selection, in annotation order
 * @param cached the record's attachments (`[0]` the cluster default network)
 * @returns new elements (the input is not changed)
 * @example
 * ```ts
 * pinSelection(
 *   [{ namespace: "ns", name: "a" }, { namespace: "ns", name: "b" }],
 *   [{ statusName: "cbr0", ifName: "eth0", isDefault: true }, { statusName: "ns/a", ifName: "net2", origin: "selection" }] as CachedAttachment[],
 * ); // [{ namespace: "ns", name: "a", interface: "net2" }, { namespace: "ns", name: "b", interface: "net1" }]
 * ```
 */
export function pinSelection(
  elements: NetworkSelectionElement[],
  cached: CachedAttachment[],
): NetworkSelectionElement[] {
  const origins = cached.map(attachmentOrigin);
  const explicit = new Set(
    elements.filter((e) => e.interface !== undefined).map((e) =>
      `${e.namespace}/${e.name}@${e.interface}`
    ),
  );
  const taken = new Set<string>(elements.flatMap((e) => e.interface ?? []));
  cached.forEach((c, i) => {
    if (origins[i] !== "selection" && origins[i] !== "unknown") taken.add(c.ifName);
  });
  const claimed = new Set<CachedAttachment>();
  const pinned = elements.map((e) => {
    if (e.interface !== undefined) return { ...e };
    const a = cached.find((c, i) =>
      (origins[i] === "selection" || origins[i] === "unknown") && !claimed.has(c) &&
      c.statusName === `${e.namespace}/${e.name}` && !taken.has(c.ifName) &&
      !explicit.has(`${c.statusName}@${c.ifName}`)
    );
    if (!a) return { ...e };
    claimed.add(a);
    taken.add(a.ifName);
    return { ...e, interface: a.ifName };
  });
  // Unknown-origin attachments nobody claimed stay (never removed): their names are held.
  cached.forEach((c, i) => {
    if (origins[i] === "unknown" && !claimed.has(c)) taken.add(c.ifName);
  });
  let n = 1;
  return pinned.map((e) => {
    if (e.interface !== undefined) return e;
    while (taken.has(`net${n}`)) n++;
    taken.add(`net${n}`);
    return { ...e, interface: `net${n}` };
  });
}

/**
 * The annotation text of a selection, as {@link pinSelection} returns it: JSON, each element's
 * reverse-DNS extensions (`extra`) put back at the top level.
 * @param elements the elements
 * @returns the JSON list form of `k8s.v1.cni.cncf.io/networks` (NPWG v1.3 §4.1.2.1)
 */
export function selectionText(elements: NetworkSelectionElement[]): string {
  return JSON.stringify(elements.map((e) => {
    const { extra, podNetwork: _p, ...rest } = e;
    return { ...extra, ...rest };
  }));
}

/**
 * Compares a running pod's cached attachments with the plan of its current selection.
 *
 * Only `"selection"` attachments follow the annotation ({@link attachmentOrigin}): an
 * attachment of any other origin is kept whatever the plan says, and a new element whose
 * interface it holds is refused, naming it (`interface net1: … held by network ns/b
 * (defaultNetworks)`). An attachment of unknown origin (an older record) is the selection's
 * only when an element names it exactly (`name@ifName`); otherwise it is kept.
 *
 * @param cached the record's attachments, in ADD order (`[0]` the cluster default network)
 * @param plan the pod's plan for the pinned selection (`[0]` the cluster default network)
 * @param kept selection attachments whose element was left out of the plan because their NAD
 *   is gone (hotplug/apply.ts): kept, and their interface names held
 * @returns what to add, what to remove, what is refused (see the module doc: a changed key of
 *   an attached element is found in the cached capabilityArgs, `defaultRoute` and the
 *   `args.cni` every plugin of the cached conflist has); an attachment
 *   whose ADD never completed (state `"adding"`, e.g. the daemon died mid-change) is removed
 *   and, when still selected, added again
 * @example
 * ```ts
 * const d = diffAttachments(cached, plan);
 * d.remove.map((a) => a.ifName); // ["net1"]
 * ```
 */
export function diffAttachments(
  cached: CachedAttachment[],
  plan: AttachmentPlan[],
  kept: readonly CachedAttachment[] = [],
): HotPlugDiff {
  const diff: HotPlugDiff = { add: [], remove: [], refused: [] };
  const origins = cached.map(attachmentOrigin);
  const id = (statusName: string, ifName: string) => `${statusName}@${ifName}`;
  const byId = new Map<string, CachedAttachment>();
  const holders = new Map<string, { c: CachedAttachment; origin: string }>();
  cached.forEach((c, i) => {
    const origin = origins[i];
    if (origin === "selection" || origin === "unknown") {
      if (i > 0) byId.set(id(c.statusName, c.ifName), c);
    }
    if (origin !== "selection") holders.set(c.ifName, { c, origin });
    if (kept.includes(c)) holders.set(c.ifName, { c, origin: "lost" });
  });
  const wanted = new Set<CachedAttachment>(kept);
  const matched = new Set<CachedAttachment>();
  for (const p of plan.slice(1)) {
    if (p.origin !== "selection") continue; // defaultNetworks, KEP-3698: not hot-plug's
    const c = byId.get(id(p.delegate.statusName, p.ifName));
    if (c) matched.add(c);
    const what = `network ${p.delegate.statusName} interface ${p.ifName}`;
    if (c && c.state === "added") {
      wanted.add(c);
      const keys = changedKeys(c, p);
      if (keys.length > 0) {
        diff.refused.push({
          op: "change",
          message: `${what}: changing ${keys.map((k) => `"${k}"`).join(", ")} of an attached ` +
            `network needs a re-plug and was refused; remove the element, then add it again`,
        });
      }
      continue;
    }
    const holder = holders.get(p.ifName);
    if (holder && holder.c !== c) {
      if (c) wanted.add(c);
      diff.refused.push({
        op: "add",
        message: `${what}: the interface is held by network ${holder.c.statusName} ` +
          `(${ORIGIN_TEXT[holder.origin]}), which ${
            holder.origin === "lost" ? "stays while it is selected" : "hot-plug never removes"
          }; choose another interface name`,
      });
      continue;
    }
    if (p.delegate.resourceName !== undefined) {
      if (c) wanted.add(c);
      diff.refused.push({
        op: "add",
        message: `${what}: a device-backed network (resourceName ${p.delegate.resourceName}) ` +
          `cannot be hot-plugged (devices are allocated to the pod when it is created)`,
      });
      continue;
    }
    if (p.selection?.["default-route"] !== undefined) {
      if (c) wanted.add(c);
      diff.refused.push({
        op: "add",
        message: `${what}: "default-route" cannot be hot-plugged (it changes the sandbox's routes)`,
      });
      continue;
    }
    diff.add.push(p);
  }
  const configured = new Set(
    plan.filter((p) => p.origin === "defaultNetworks").map((p) => p.delegate.statusName),
  );
  cached.forEach((c, i) => {
    if (i === 0 || wanted.has(c)) return;
    if (origins[i] === "selection" || (origins[i] === "unknown" && matched.has(c))) {
      diff.remove.push(c);
    } else if (origins[i] === "unknown" && !configured.has(c.statusName)) {
      // Not a defaultNetworks attachment as configured now: most likely an element removed
      // from the selection. Kept (conservative), and said so.
      diff.refused.push({
        op: "remove",
        message: `network ${c.statusName} interface ${c.ifName}: ${ORIGIN_TEXT.unknown}, so ` +
          `hot-plug does not remove it; it goes with the pod's sandbox`,
      });
    }
  });
  return diff;
}

/** How a refusal names an origin. */
const ORIGIN_TEXT: Record<string, string> = {
  clusterDefault: "the cluster default network",
  defaultNetworks: "defaultNetworks",
  kep: "KEP-3698 networks annotation",
  unknown: "attached by a Manifold that did not record why",
  lost: "still selected, its NetworkAttachmentDefinition deleted",
};

/**
 * The {@link ATTACHED_KEYS} whose value in the plan differs from what the attachment was made
 * with: capability keys from the cached `capabilityArgs`, `default-route` from the cached
 * `defaultRoute`, `cni-args` / `ipam-claim-reference` from the `args.cni` entries every plugin
 * of the conflist carries (the planner merges them into every plugin; so an edit of the NAD's
 * own `args.cni` common to all its plugins reads as a `cni-args` change too).
 */
function changedKeys(c: CachedAttachment, p: AttachmentPlan): string[] {
  const out: string[] = [];
  for (const { key, capability } of SELECTION_CAPABILITIES) {
    if (!sameJson(c.capabilityArgs[capability], p.capabilityArgs[capability])) out.push(key);
  }
  if (!sameJson(c.defaultRoute, p.selection?.["default-route"])) out.push("default-route");
  const before = commonCniArgs(c.conflist);
  const after = commonCniArgs(p.delegate.conflist);
  let cniArgs = false;
  for (const k of new Set([...Object.keys(before), ...Object.keys(after)])) {
    if (sameJson(before[k], after[k])) continue;
    if (k === "ipam-claim-reference") out.push(k);
    else cniArgs = true;
  }
  if (cniArgs) out.push("cni-args");
  return ATTACHED_KEYS.filter((k) => out.includes(k));
}

/** The `args.cni` entries (key → value) that every plugin of a conflist carries, equal. */
function commonCniArgs(conflist: Record<string, unknown>): Record<string, unknown> {
  const plugins = Array.isArray(conflist.plugins) ? conflist.plugins : [];
  const cniOf = (p: unknown): Record<string, unknown> => {
    const args = isPlainObject(p) ? p.args : undefined;
    const cni = isPlainObject(args) ? args.cni : undefined;
    return isPlainObject(cni) ? cni : {};
  };
  if (plugins.length === 0) return {};
  const [first, ...rest] = plugins.map(cniOf);
  return Object.fromEntries(
    Object.entries(first).filter(([k, v]) => rest.every((o) => k in o && sameJson(o[k], v))),
  );
}

/**
 * Deep equality of JSON values as the cache stores them, object key order ignored
 * ({@link canonicalJson}: a key holding `undefined` is absent, as after the cache's round trip).
 */
function sameJson(a: unknown, b: unknown): boolean {
  return canonicalJson(a) === canonicalJson(b);
}
