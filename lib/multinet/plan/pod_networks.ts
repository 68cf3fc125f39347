/**
 * KEP-3698 front end: the pod's `multinetwork.manifold.dev/networks` entries resolved, through
 * their PodNetwork (and PodNetworkAttachment), to NPWG selection elements naming a
 * NetworkAttachmentDefinition — so the plan treats them exactly as a NAD selection (same
 * delegate resolution, isolation, duplicate-interface check and default-route rule).
 *
 * Rules (docs/kep-3698.md):
 * - the PodNetwork must exist, name this installation as `spec.provider`
 *   (`podNetworkProvider`), be `enabled`, and have condition `Ready=True` (set by
 *   `manifold controller`); a PodNetworkAttachment must exist in the pod's namespace and be
 *   `Ready=True` too. Otherwise the ADD fails with code 7 naming the object and condition
 *   (the KEP keeps such pods pending);
 * - the parameters: the attachment's `parametersRefs` when it has any, else the PodNetwork's;
 *   exactly one ref, to `k8s.cni.cncf.io` `network-attachment-definitions`, which is the
 *   delegate's config. A second ref, or one of another kind, is refused (code 7) rather than
 *   guessed at; a ref without `namespace` means the attachment's namespace (a PodNetwork's ref
 *   must name one: the PodNetwork has none);
 * - the list is explicit (KEP "only the listed PodNetworks will be attached"): `"default"` is
 *   the cluster default network on CNI_IFNAME (its PodNetwork, which `manifold controller`
 *   creates, checked like any other; an `interfaceName` other than CNI_IFNAME is refused);
 *   a list without it puts its `isDefaultGW` entry (else the first) on CNI_IFNAME instead,
 *   through the default-network override path;
 * - a PodNetwork or PodNetworkAttachment being deleted accepts no new pods;
 * - a PodNetwork with `spec.allowedNamespaces` (Manifold's extension, a label selector)
 *   accepts pods of the namespaces it selects only (the namespace's labels are read then);
 * - a pod references a given PodNetwork once, "default" included (KEP "Active validations").
 *
 * @module
 */

import { CniError, CniErrorCode } from "../../cni/errors.ts";
import type { CniResult } from "../../cni/types.ts";
import {
  findCondition,
  type ParametersRef,
  type PodNetwork,
  type PodNetworkAttachment,
} from "../../k8s/multinetwork.ts";
import { NAD_GROUP, NAD_RESOURCE } from "../../k8s/types.ts";
import { matchesSelector } from "../../policy/selector.ts";
import { inOrder } from "./networks.ts";
import type { PodNetworkEntry } from "./pod_network_annotation.ts";
import { type NetworkSelectionElement, PODNETWORKS_ANNOTATION } from "../types.ts";

/** The KEP's name of the cluster default network (KEP-3698 "Default PodNetwork"). */
export const DEFAULT_PODNETWORK = "default";

/** Read access to PodNetworks and PodNetworkAttachments (the Kubernetes API). */
export interface PodNetworkSource {
  /**
   * One PodNetwork.
   * @returns the object, or undefined when it does not exist.
   * @throws {CniError} 11 when the API is unreachable after retries, 6 on a malformed object.
   */
  podNetwork(name: string): Promise<PodNetwork | undefined>;
  /**
   * One PodNetworkAttachment.
   * @returns the object, or undefined when it does not exist.
   * @throws {CniError} 11 when the API is unreachable after retries, 6 on a malformed object.
   */
  attachment(namespace: string, name: string): Promise<PodNetworkAttachment | undefined>;
  /**
   * The labels of a namespace, read only for a PodNetwork with `spec.allowedNamespaces`.
   * Absent (a source that cannot read namespaces): such networks are refused (fail closed).
   * @returns the labels (`{}` when none), or undefined when the namespace does not exist.
   * @throws {CniError} 11 when the API is unreachable after retries, 7 when forbidden.
   */
  namespaceLabels?(name: string): Promise<Record<string, string> | undefined>;
}

/**
 * True when `ref` points at a NetworkAttachmentDefinition (`k8s.cni.cncf.io`,
 * `network-attachment-definitions`, or its kind `NetworkAttachmentDefinition`).
 * @example
 * ```ts
 * isNadRef({ group: "k8s.cni.cncf.io", kind: "network-attachment-definitions", name: "a" }); // true
 * ```
 */
export function isNadRef(ref: ParametersRef): boolean {
  return ref.group === NAD_GROUP &&
    (ref.kind === NAD_RESOURCE || ref.kind === "NetworkAttachmentDefinition");
}

/**
 * The one NAD the refs designate (see the module doc), as `{namespace, name}`.
 * @param refs `parametersRefs` of the attachment (when non-empty) or the PodNetwork.
 * @param owner `PodNetwork "x"` / `PodNetworkAttachment "ns/x"`, for messages.
 * @param defaultNamespace the attachment's namespace; undefined for a PodNetwork.
 * @returns the NAD reference.
 * @throws {CniError} code 7 with no ref, several refs, a ref of another kind, or no namespace.
 * @example
 * ```ts
 * nadOfRefs([{ group: "k8s.cni.cncf.io", kind: "network-attachment-definitions", name: "a", namespace: "n" }], 'PodNetwork "p"');
 * // { namespace: "n", name: "a" }
 * ```
 */
export function nadOfRefs(
  refs: ParametersRef[],
  owner: string,
  defaultNamespace?: string,
): { namespace: string; name: string } {
  const fail = (why: string) => new CniError(CniErrorCode.InvalidNetworkConfig, `${owner}: ${why}`);
  if (refs.length === 0) {
    throw fail(`has no parametersRefs: Manifold needs one ${NAD_GROUP} ${NAD_RESOURCE} ref`);
  }
  const other = refs.find((r) => !isNadRef(r));
  if (other) {
    throw fail(
      `parametersRefs names ${other.group}/${other.kind} "${other.name}": Manifold reads only ` +
        `${NAD_GROUP} ${NAD_RESOURCE}`,
    );
  }
  if (refs.length > 1) {
    throw fail(
      `parametersRefs has ${refs.length} refs: Manifold supports exactly one ` +
        `NetworkAttachmentDefinition per network`,
    );
  }
  const namespace = refs[0].namespace || defaultNamespace;
  if (!namespace) throw fail(`parametersRefs[0] ("${refs[0].name}") names no namespace`);
  return { namespace, name: refs[0].name };
}

/**
 * Why the PodNetwork cannot take pods, or undefined when it can: provider, `enabled` and
 * condition `Ready` (KEP-3698 "Lifecycle": pods attach only to a Ready PodNetwork).
 * @param pn the PodNetwork.
 * @param provider this installation's provider string.
 * @returns the reason, worded for an error message.
 */
export function podNetworkUnusable(pn: PodNetwork, provider: string): string | undefined {
  const name = `PodNetwork "${pn.metadata.name}"`;
  if (pn.spec.provider !== provider) {
    return `${name} has provider "${pn.spec.provider}", not this installation's "${provider}"`;
  }
  if (!pn.spec.enabled) {
    return `${name} is disabled (spec.enabled: false; Ready=False, reason AdministrativelyDisabled)`;
  }
  return notReady(name, pn.status.conditions);
}

function notReady(
  name: string,
  conditions: PodNetwork["status"]["conditions"],
): string | undefined {
  const ready = findCondition(conditions, "Ready");
  if (ready?.status === "True") return undefined;
  if (!ready) return `${name} is not Ready (no Ready condition yet)`;
  const why = [ready.reason, ready.message].filter(Boolean).join(": ");
  return `${name} is not Ready (Ready=${ready.status}${why ? `, reason ${why}` : ""})`;
}

/** What {@link podNetworkSelections} resolves against. */
export interface PodNetworkContext {
  /** PodNetworks and PodNetworkAttachments. */
  source: PodNetworkSource;
  /** This installation's provider (`podNetworkProvider`). */
  provider: string;
  /** The pod's namespace (PodNetworkAttachments are looked up there). */
  podNamespace: string;
  /** CNI_IFNAME, the cluster default network's interface. */
  ifName: string;
  /**
   * False for a rebuild (DEL without cache, GC): a network disabled, not Ready or being
   * deleted since the ADD must still be torn down, so only the references are followed (and
   * the "default" PodNetwork is not read). Default true.
   */
  checkReady?: boolean;
}

/** One resolved entry: a selection element, or the cluster default network. */
export interface ResolvedPodNetworkEntry {
  /** The entry's index in the list. */
  index: number;
  /** The PodNetwork it attaches (`"default"` for the cluster default network). */
  podNetwork: string;
  /** The element naming its NAD; undefined for the cluster default network. */
  element?: NetworkSelectionElement;
}

/**
 * Resolves the entries, concurrently (each object read once per entry), and refuses a
 * PodNetwork referenced twice (`"default"` included).
 * @param entries the parsed annotation.
 * @param ctx the source, the provider, the pod's namespace and CNI_IFNAME.
 * @returns one per entry, in order; `element` (with `podNetwork` set) unless it is "default".
 * @throws {CniError} code 7 for a missing, foreign, disabled, not-Ready or deleting object,
 *   bad refs, or a PodNetwork referenced twice; the source's errors (11, 6) as they are.
 */
export async function podNetworkSelections(
  entries: PodNetworkEntry[],
  ctx: PodNetworkContext,
): Promise<ResolvedPodNetworkEntry[]> {
  const resolved = await inOrder(entries.map((e, i) => resolveEntry(e, i, ctx)));
  const seen = new Map<string, number>();
  for (const r of resolved) {
    const first = seen.get(r.podNetwork);
    if (first !== undefined) {
      throw new CniError(
        CniErrorCode.InvalidNetworkConfig,
        `${PODNETWORKS_ANNOTATION} [${r.index}]: PodNetwork "${r.podNetwork}" is already ` +
          `referenced by [${first}] (KEP-3698: a pod references a PodNetwork once)`,
      );
    }
    seen.set(r.podNetwork, r.index);
  }
  return resolved;
}

/** Why an object being deleted takes no new pods, or undefined. */
function deleting(what: string, meta: { deletionTimestamp?: string }): string | undefined {
  return meta.deletionTimestamp
    ? `${what} is being deleted (deletionTimestamp ${meta.deletionTimestamp}): it accepts no new pods`
    : undefined;
}

async function resolveEntry(
  entry: PodNetworkEntry,
  index: number,
  ctx: PodNetworkContext,
): Promise<ResolvedPodNetworkEntry> {
  const fail = (why: string) =>
    new CniError(
      CniErrorCode.InvalidNetworkConfig,
      `${PODNETWORKS_ANNOTATION} [${index}]: ${why}`,
      "KEP-3698: a pod attaches only to an existing, enabled, Ready PodNetwork of this " +
        "provider; `kubectl get podnetworks -o yaml` shows the conditions",
    );
  const check = ctx.checkReady !== false;
  let pna: PodNetworkAttachment | undefined;
  let networkName = entry.podNetworkName;
  let pnaName = "";
  if (entry.podNetworkAttachmentName !== undefined) {
    pna = await ctx.source.attachment(ctx.podNamespace, entry.podNetworkAttachmentName);
    if (!pna) {
      throw fail(
        `PodNetworkAttachment "${ctx.podNamespace}/${entry.podNetworkAttachmentName}" does not exist`,
      );
    }
    pnaName = `PodNetworkAttachment "${pna.metadata.namespace}/${pna.metadata.name}"`;
    const why = check
      ? deleting(pnaName, pna.metadata) ?? notReady(pnaName, pna.status.conditions)
      : undefined;
    if (why) throw fail(why);
    networkName = pna.spec.podNetworkName;
  }
  const isDefault = networkName === DEFAULT_PODNETWORK;
  if (isDefault) {
    if (entry.interfaceName !== undefined && entry.interfaceName !== ctx.ifName) {
      throw fail(
        `the "default" PodNetwork is the cluster default network on "${ctx.ifName}", ` +
          `not "${entry.interfaceName}"`,
      );
    }
    if (pna && pna.spec.parametersRefs.length > 0) {
      throw fail(
        `${pnaName}: the "default" PodNetwork is the cluster default network configured on ` +
          `the nodes; Manifold takes no parametersRefs for it`,
      );
    }
    if (!check) return { index, podNetwork: DEFAULT_PODNETWORK };
  }
  const pn = await ctx.source.podNetwork(networkName!);
  if (!pn) throw fail(`PodNetwork "${networkName}" does not exist`);
  const unusable = check
    ? deleting(`PodNetwork "${pn.metadata.name}"`, pn.metadata) ??
      podNetworkUnusable(pn, ctx.provider)
    : undefined;
  if (unusable) throw fail(unusable);
  const sel = pn.spec.allowedNamespaces;
  if (check && sel) {
    const labels = await ctx.source.namespaceLabels?.(ctx.podNamespace);
    if (!labels || !matchesSelector(sel, labels)) {
      throw fail(
        `namespace "${ctx.podNamespace}" is not allowed by PodNetwork "${pn.metadata.name}" ` +
          `(spec.allowedNamespaces${labels ? "" : "; the namespace's labels could not be read"})`,
      );
    }
  }
  if (isDefault) return { index, podNetwork: DEFAULT_PODNETWORK };
  const nad = pna && pna.spec.parametersRefs.length > 0
    ? nadOfRefs(pna.spec.parametersRefs, pnaName, pna.metadata.namespace)
    : nadOfRefs(pn.spec.parametersRefs, `PodNetwork "${pn.metadata.name}"`);
  const el: NetworkSelectionElement = {
    name: nad.name,
    namespace: nad.namespace,
    podNetwork: { name: pn.metadata.name, isDefaultGW: entry.isDefaultGW },
  };
  if (pna) el.podNetwork!.attachment = pna.metadata.name;
  if (entry.interfaceName !== undefined) el.interface = entry.interfaceName;
  return { index, podNetwork: pn.metadata.name, element: el };
}

/**
 * The gateways an `isDefaultGW` attachment's default route goes through, from its delegate's
 * result: for each family, the first `ips[].gateway`, else the `gw` of a default route
 * (`0.0.0.0/0`, `::/0`) in `routes`.
 * @param result the delegate's result (current CNI shape).
 * @param network the attachment's status name, for the error.
 * @returns one gateway per family present, IPv4 first.
 * @throws {CniError} code 7 when the result has no gateway (the ADD then rolls back).
 * @example
 * ```ts
 * defaultGatewaysOf({ cniVersion: "1.0.0", ips: [{ address: "10.1.0.5/24", gateway: "10.1.0.1" }] }, "n/a");
 * // ["10.1.0.1"]
 * ```
 */
export function defaultGatewaysOf(result: CniResult, network: string): string[] {
  const out: string[] = [];
  for (const v6 of [false, true]) {
    const fam = (ip: string | undefined) => ip !== undefined && ip.includes(":") === v6;
    const gw = result.ips?.find((i) => fam(i.gateway))?.gateway ??
      result.routes?.find((r) => r.dst === (v6 ? "::/0" : "0.0.0.0/0") && fam(r.gw))?.gw;
    if (gw) out.push(gw);
  }
  if (out.length === 0) {
    throw new CniError(
      CniErrorCode.InvalidNetworkConfig,
      `network "${network}": isDefaultGW is set but the delegate's result has no gateway`,
      "KEP-3698 isDefaultGW moves the pod's default route to this interface; give the " +
        'network\'s IPAM a gateway (host-local "gateway", or a default route with "gw")',
    );
  }
  return out;
}
