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
 * allocated when the pod is created) is refused too. The cluster default network (the
 * record's first attachment) and Multus `defaultNetworks` attachments are never removed.
 *
 * @module
 */

import { isPlainObject } from "../cni/types.ts";
import type { CachedAttachment } from "../multinet/cache/cache.ts";
import { canonicalJson } from "../multinet/verbs/gc_networks.ts";
import { SELECTION_CAPABILITIES } from "../multinet/plan/plan.ts";
import type { AttachmentPlan, NetworkSelectionElement } from "../multinet/types.ts";

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
  /** `"add"`: a new element; `"change"`: keys of an attached element. */
  op: "add" | "change";
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
 * The selection with every element that has no `interface` pinned to the interface its
 * network already has in the pod (the first such attachment no element claims explicitly),
 * so that planning gives existing attachments their existing names and new ones free names.
 *
 * @param elements the parsed selection, in annotation order
 * @param cached the record's attachments (the first, the cluster default network, is skipped)
 * @returns new elements (the input is not changed)
 * @example
 * ```ts
 * pinSelection(
 *   [{ namespace: "ns", name: "a" }],
 *   [{ statusName: "cbr0", ifName: "eth0" }, { statusName: "ns/a", ifName: "net2" }] as CachedAttachment[],
 * ); // [{ namespace: "ns", name: "a", interface: "net2" }]
 * ```
 */
export function pinSelection(
  elements: NetworkSelectionElement[],
  cached: CachedAttachment[],
): NetworkSelectionElement[] {
  const explicit = new Set(
    elements.filter((e) => e.interface !== undefined).map((e) =>
      `${e.namespace}/${e.name}@${e.interface}`
    ),
  );
  const requested = new Set(
    elements.flatMap((e) => e.interface === undefined ? [] : [e.interface]),
  );
  const taken = new Set<CachedAttachment>();
  return elements.map((e) => {
    if (e.interface !== undefined) return { ...e };
    const a = cached.slice(1).find((c) =>
      !taken.has(c) && !c.isDefault && c.statusName === `${e.namespace}/${e.name}` &&
      !requested.has(c.ifName) && !explicit.has(`${c.statusName}@${c.ifName}`)
    );
    if (!a) return { ...e };
    taken.add(a);
    return { ...e, interface: a.ifName };
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
 * @param cached the record's attachments, in ADD order (`[0]` the cluster default network)
 * @param plan the pod's plan for the pinned selection (`[0]` the cluster default network)
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
): HotPlugDiff {
  const diff: HotPlugDiff = { add: [], remove: [], refused: [] };
  const id = (statusName: string, ifName: string) => `${statusName}@${ifName}`;
  const byId = new Map(cached.slice(1).map((c) => [id(c.statusName, c.ifName), c]));
  const wanted = new Set<CachedAttachment>();
  for (const p of plan.slice(1)) {
    const c = byId.get(id(p.delegate.statusName, p.ifName));
    const what = `network ${p.delegate.statusName} interface ${p.ifName}`;
    if (!p.selection || p.selection.podNetwork) { // defaultNetworks, KEP-3698: not ours
      if (c) wanted.add(c);
      continue;
    }
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
    if (p.delegate.resourceName !== undefined) {
      if (c) wanted.add(c);
      diff.refused.push({
        op: "add",
        message: `${what}: a device-backed network (resourceName ${p.delegate.resourceName}) ` +
          `cannot be hot-plugged (devices are allocated to the pod when it is created)`,
      });
      continue;
    }
    if (p.selection["default-route"] !== undefined) {
      if (c) wanted.add(c);
      diff.refused.push({
        op: "add",
        message: `${what}: "default-route" cannot be hot-plugged (it changes the sandbox's routes)`,
      });
      continue;
    }
    diff.add.push(p);
  }
  for (const c of cached.slice(1)) {
    if (c.isDefault) continue;
    if (!wanted.has(c)) diff.remove.push(c);
  }
  return diff;
}

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
