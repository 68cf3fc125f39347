/**
 * Hot-plug's difference between what a running pod has and what its
 * `k8s.v1.cni.cncf.io/networks` annotation now selects (issue 14 §1). Pure: no I/O.
 *
 * Identity of a selection element is (namespace, name, interface) (NPWG v1.3 §4.1.2.1): an
 * element naming an `interface` is the cached attachment of that network on that interface;
 * an element without one keeps the interface its network already has in the pod
 * ({@link pinSelection}), so removing one element never renames the others' interfaces. A
 * renamed interface is therefore a removal plus an addition. Changing `ips` or `mac` of an
 * element the pod has is refused (it would need a re-plug), as is a new element with
 * `default-route` (it would rewrite the sandbox's routes) or of a device-backed network (a NAD
 * with a `resourceName`: devices are allocated when the pod is created). The cluster default network (the
 * record's first attachment) and Multus `defaultNetworks` attachments are never removed.
 *
 * @module
 */

import type { CachedAttachment } from "../multinet/cache.ts";
import type { AttachmentPlan, NetworkSelectionElement } from "../multinet/types.ts";

/** What hot-plug does to one pod. */
export interface HotPlugDiff {
  /** Attachments to ADD, in plan order. */
  add: AttachmentPlan[];
  /** Cached attachments to DEL. */
  remove: CachedAttachment[];
  /** Changes refused, one sentence each (a Warning event each); nothing is done for them. */
  refused: string[];
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
 * @returns what to add, what to remove, what is refused (see the module doc); an attachment
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
      for (const key of ["ips", "mac"] as const) {
        if (JSON.stringify(c.capabilityArgs[key]) !== JSON.stringify(p.capabilityArgs[key])) {
          diff.refused.push(
            `${what}: changing "${key}" of an attached network needs a re-plug and was refused; ` +
              `remove the element, then add it again`,
          );
        }
      }
      continue;
    }
    if (p.delegate.resourceName !== undefined) {
      if (c) wanted.add(c);
      diff.refused.push(
        `${what}: a device-backed network (resourceName ${p.delegate.resourceName}) cannot be ` +
          `hot-plugged (devices are allocated to the pod when it is created)`,
      );
      continue;
    }
    if (p.selection["default-route"] !== undefined) {
      if (c) wanted.add(c);
      diff.refused.push(
        `${what}: "default-route" cannot be hot-plugged (it changes the sandbox's routes)`,
      );
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
