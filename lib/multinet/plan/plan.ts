/**
 * Attachment planning: from the resolved delegates and the pod's selection to the ordered
 * list of attachments to perform, each with its ifName, runtimeConfig candidates
 * (capabilityArgs), CNI_ARGS pairs and `args.cni`-merged config. Pure: no I/O, inputs are
 * never mutated.
 *
 * Sources: NPWG v1.3 §4.1.2.1.3–11 (per-key delegate requirements), §4.2 (multiple
 * attachments to one network), §6.2 (default network first), §7.5 (runtimeConfig only to
 * the default network); CNI CONVENTIONS.md (capability names, `args.cni`); Multus
 * `delegateAdd` (CNI_ARGS `MAC=` / `IP=`).
 *
 * @module
 */

import { CniError, CniErrorCode } from "../../cni/errors.ts";
import type { AttachmentPlan, Delegate, NetworkSelectionElement } from "../types.ts";

/** Per-attachment inputs of {@link planAttachments}. */
export interface PlanInput {
  /** The pod (K8S_POD_* CNI_ARGS). */
  pod: { namespace: string; name: string; uid: string; infraContainerId: string };
  /** CNI_IFNAME from the runtime: the default network's interface (usually "eth0"). */
  runtimeIfName: string;
  /** The runtime's CNI_ARGS pairs, passed to every delegate (like Multus thin). */
  runtimeArgs: [string, string][];
  /** runtimeConfig from the runtime — given ONLY to the default network (NPWG v1.3 §7.5). */
  runtimeCapabilityArgs: Record<string, unknown>;
  /** The cluster default network (NPWG v1.3 §6). */
  defaultNetwork: Delegate;
  /**
   * The `v1.multus-cni.io/default-network` annotation's element, when the pod overrides the
   * default network: its keys (`interface`, `ips`, `mac`, `cni-args`, `default-route`, …) apply
   * to the default network as to any selection.
   */
  defaultSelection?: NetworkSelectionElement;
  /** Multus `defaultNetworks`: extra attachments for every pod, no selection element. */
  defaultNetworks: Delegate[];
  /** The selection elements, in annotation order, with their resolved delegates. */
  selections: { delegate: Delegate; selection: NetworkSelectionElement }[];
}

/**
 * Selection keys that become runtimeConfig (capability) arguments, with the capability
 * name a plugin must declare (NPWG v1.3 §4.1.2.1.3, .4, .7, .8, .10; CNI CONVENTIONS.md).
 */
export const SELECTION_CAPABILITIES = [
  { key: "ips", capability: "ips" },
  { key: "mac", capability: "mac" },
  { key: "infiniband-guid", capability: "infinibandGUID" },
  { key: "portMappings", capability: "portMappings" },
  { key: "bandwidth", capability: "bandwidth" },
] as const satisfies readonly { key: keyof NetworkSelectionElement; capability: string }[];

/**
 * True when at least one plugin of `conflist` declares `"capabilities": {<capability>: true}`
 * (NPWG v1.3 §4.1.2.1.3.2: "by inspecting each plugin's JSON configuration capabilities key").
 *
 * @param conflist a delegate's conflist object
 * @param capability e.g. `"ips"`, `"infinibandGUID"`
 * @returns whether some plugin declares it true
 * @example
 * ```ts
 * declaresCapability({ plugins: [{ type: "macvlan", capabilities: { ips: true } }] }, "ips"); // true
 * ```
 */
export function declaresCapability(conflist: Record<string, unknown>, capability: string): boolean {
  const plugins = conflist.plugins;
  if (!Array.isArray(plugins)) return false;
  return plugins.some((p) =>
    isObject(p) && isObject(p.capabilities) && p.capabilities[capability] === true
  );
}

/**
 * Plans every attachment of a pod, in the order they must be performed:
 * 1. the default network (NPWG v1.3 §6.2) on `runtimeIfName`, with `runtimeCapabilityArgs`
 *    as its capabilityArgs — and only it gets them (§7.5). With `defaultSelection` (the
 *    `v1.multus-cni.io/default-network` element) its keys apply as to any selection: its
 *    `interface` replaces `runtimeIfName`, its capability keys are added over the runtime's
 *    (same MUSTs), `MAC=`/`IP=` CNI_ARGS, `cni-args`, and `selection` is set (`default-route`);
 * 2. `defaultNetworks`, with empty capabilityArgs;
 * 3. the selections in annotation order; the same NAD twice gives two attachments (§4.2).
 *
 * Each plan's `origin` says which of these it is (`"clusterDefault"`, `"defaultNetworks"`,
 * `"selection"`, or `"kep"` for a selection resolved from a KEP-3698 entry).
 *
 * ifNames: a selection's `interface`, else the next free `"net1"`, `"net2"`, … — a name is
 * skipped when it is already used or explicitly requested by any selection, so an automatic
 * name never collides with a later explicit one. An explicit `interface` equal to an
 * earlier attachment's (including `runtimeIfName`) fails (§4.1.2.1.5).
 *
 * capabilityArgs of a selection: `ips` → `"ips"`, `mac` → `"mac"`, `infiniband-guid` →
 * `"infinibandGUID"`, `portMappings` → `"portMappings"` (protocol lower-case),
 * `bandwidth` → `"bandwidth"`. Each requires some plugin of the delegate to declare that
 * capability true, or the whole request fails (the MUST of §4.1.2.1.3.2 etc.).
 *
 * `cni-args` (§4.1.2.1.6) are merged into EVERY plugin's `args.cni`, the annotation's values
 * winning over the config's; `ipam-claim-reference` (§4.1.2.1.11) is forwarded as
 * `args.cni["ipam-claim-reference"]` (winning over a `cni-args` key of that name), which
 * is where IPAM plugins such as OVN-Kubernetes and whereabouts look for it. The result
 * has a new Delegate/conflist; the input objects are never mutated.
 *
 * cniArgs: `IgnoreUnknown=1`, `K8S_POD_NAMESPACE`, `K8S_POD_NAME`,
 * `K8S_POD_INFRA_CONTAINER_ID`, `K8S_POD_UID` (a runtime pair with the same key wins and
 * takes that place), then the other runtime pairs; for a selection that requests them,
 * Multus's `MAC=<mac>` and `IP=<ip1,ip2>` are appended (replacing runtime `MAC`/`IP`
 * pairs, which were meant for the default network).
 *
 * @param input see {@link PlanInput}
 * @returns one {@link AttachmentPlan} per attachment, default network first
 * @throws {CniError} code 7 when an explicit interface name is already used
 *   (`network "ns/b": interface "net1" is already used by network "ns/a"`), when a
 *   capability key is requested but undeclared
 *   (`network "ns/name": "ips" was requested but no plugin declares capability "ips"`),
 *   or when a plugin's `args` / `args.cni` is not an object and cni-args must be merged
 * @example
 * ```ts
 * const delegate = (statusName: string, isDefault = false) => ({
 *   statusName, isDefault, source: "test", conflist: { name: statusName, plugins: [{ type: "x" }] },
 * });
 * const plans = planAttachments({
 *   pod: { namespace: "default", name: "p", uid: "u", infraContainerId: "c" },
 *   runtimeIfName: "eth0", runtimeArgs: [], runtimeCapabilityArgs: {},
 *   defaultNetwork: delegate("cbr0", true), defaultNetworks: [],
 *   selections: [{
 *     delegate: delegate("default/macvlan-conf"),
 *     selection: { name: "macvlan-conf", namespace: "default" },
 *   }],
 * });
 * plans.map((p) => p.ifName); // ["eth0", "net1"]
 * ```
 */
export function planAttachments(input: PlanInput): AttachmentPlan[] {
  const baseArgs = mergeArgs(podArgs(input.pod), input.runtimeArgs);
  const def = input.defaultSelection;
  const defaultIfName = def?.interface ?? input.runtimeIfName;
  const used = new Map<string, string>([[defaultIfName, input.defaultNetwork.statusName]]);
  const requested = new Set(
    input.selections.flatMap((s) =>
      s.selection.interface === undefined ? [] : [s.selection.interface]
    ),
  );
  let counter = 1;
  const nextFree = (): string => {
    while (used.has(`net${counter}`) || requested.has(`net${counter}`)) counter++;
    return `net${counter++}`;
  };

  const plans: AttachmentPlan[] = [
    def
      ? {
        delegate: withCniArgs(input.defaultNetwork, def),
        origin: "clusterDefault",
        ifName: defaultIfName,
        selection: def,
        capabilityArgs: {
          ...input.runtimeCapabilityArgs,
          ...capabilityArgsFor(input.defaultNetwork, def),
        },
        cniArgs: selectionArgs(baseArgs, def),
      }
      : {
        delegate: input.defaultNetwork,
        origin: "clusterDefault",
        ifName: defaultIfName,
        capabilityArgs: { ...input.runtimeCapabilityArgs },
        cniArgs: [...baseArgs],
      },
  ];
  for (const delegate of input.defaultNetworks) {
    const ifName = nextFree();
    used.set(ifName, delegate.statusName);
    plans.push({
      delegate,
      origin: "defaultNetworks",
      ifName,
      capabilityArgs: {},
      cniArgs: [...baseArgs],
    });
  }
  for (const { delegate, selection } of input.selections) {
    const network = delegate.statusName;
    let ifName: string;
    if (selection.interface !== undefined) {
      const owner = used.get(selection.interface);
      if (owner !== undefined) {
        throw new CniError(
          CniErrorCode.InvalidNetworkConfig,
          `network "${network}": interface "${selection.interface}" is already used by network "${owner}" (NPWG v1.3 §4.1.2.1.5)`,
        );
      }
      ifName = selection.interface;
    } else {
      ifName = nextFree();
    }
    used.set(ifName, network);
    plans.push({
      delegate: withCniArgs(delegate, selection),
      origin: selection.podNetwork ? "kep" : "selection",
      ifName,
      selection,
      capabilityArgs: capabilityArgsFor(delegate, selection),
      cniArgs: selectionArgs(baseArgs, selection),
    });
  }
  return plans;
}

function capabilityArgsFor(
  delegate: Delegate,
  selection: NetworkSelectionElement,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const { key, capability } of SELECTION_CAPABILITIES) {
    const value = selection[key];
    if (value === undefined) continue;
    if (!declaresCapability(delegate.conflist, capability)) {
      throw new CniError(
        CniErrorCode.InvalidNetworkConfig,
        `network "${delegate.statusName}": "${key}" was requested but no plugin declares capability "${capability}"`,
        `NPWG v1.3 §4.1.2.1 requires a plugin of the network's config to declare "capabilities": {"${capability}": true}; add it to the plugin that implements it (e.g. a plugin whose IPAM is "static" for "ips"/"mac", "portmap" for "portMappings", "bandwidth" for "bandwidth")`,
      );
    }
    out[capability] = copyValue(value);
  }
  return out;
}

function withCniArgs(delegate: Delegate, selection: NetworkSelectionElement): Delegate {
  const add: Record<string, unknown> = { ...selection["cni-args"] };
  if (selection["ipam-claim-reference"] !== undefined) {
    add["ipam-claim-reference"] = selection["ipam-claim-reference"];
  }
  if (Object.keys(add).length === 0) return delegate;
  const network = delegate.statusName;
  const plugins = delegate.conflist.plugins;
  if (!Array.isArray(plugins)) {
    throw new CniError(
      CniErrorCode.InvalidNetworkConfig,
      `network "${network}": config has no plugins list to merge "cni-args" into`,
    );
  }
  const merged = plugins.map((plugin: unknown, i: number) => {
    const notObject = (what: string): never => {
      throw new CniError(
        CniErrorCode.InvalidNetworkConfig,
        `network "${network}": plugins[${i}].${what} is not an object, cannot merge "cni-args" (NPWG v1.3 §4.1.2.1.6)`,
      );
    };
    if (!isObject(plugin)) return notObject("(plugin)");
    const args = plugin.args ?? {};
    if (!isObject(args)) return notObject("args");
    const cni = args.cni ?? {};
    if (!isObject(cni)) return notObject("args.cni");
    return { ...plugin, args: { ...args, cni: { ...cni, ...add } } };
  });
  const conflist = { ...delegate.conflist, plugins: merged };
  return {
    ...delegate,
    conflist,
    list: { ...delegate.list, plugins: merged as Record<string, unknown>[], raw: conflist },
  };
}

function podArgs(pod: PlanInput["pod"]): [string, string][] {
  return [
    ["IgnoreUnknown", "1"],
    ["K8S_POD_NAMESPACE", pod.namespace],
    ["K8S_POD_NAME", pod.name],
    ["K8S_POD_INFRA_CONTAINER_ID", pod.infraContainerId],
    ["K8S_POD_UID", pod.uid],
  ];
}

/** `ours` in order (a runtime value replaces ours), then the runtime's other pairs. */
function mergeArgs(ours: [string, string][], runtime: [string, string][]): [string, string][] {
  const runtimeValues = new Map(runtime);
  const ourKeys = new Set(ours.map(([k]) => k));
  return [
    ...ours.map(([k, v]): [string, string] => [k, runtimeValues.get(k) ?? v]),
    ...runtime.filter(([k]) => !ourKeys.has(k)).map(([k, v]): [string, string] => [k, v]),
  ];
}

function selectionArgs(
  base: [string, string][],
  selection: NetworkSelectionElement,
): [string, string][] {
  const extra: [string, string][] = [];
  if (selection.mac !== undefined) extra.push(["MAC", selection.mac]);
  if (selection.ips !== undefined) extra.push(["IP", selection.ips.join(",")]);
  if (extra.length === 0) return [...base];
  const replaced = new Set(extra.map(([k]) => k));
  return [...base.filter(([k]) => !replaced.has(k)), ...extra];
}

/** A copy of a selection value (string, array, or flat object) so plans share nothing with it. */
function copyValue(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(copyValue);
  if (isObject(value)) return { ...value };
  return value;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
