/**
 * KEP-3698 front end: the pod's `multinetwork.manifold.dev/networks` entries resolved, through
 * their PodNetwork (and PodNetworkAttachment), to NPWG selection elements naming a
 * NetworkAttachmentDefinition — so the plan treats them exactly as a NAD selection (same
 * delegate resolution, isolation, duplicate-interface check and default-route rule).
 *
 * Rules (README "KEP-3698 PodNetwork (preview)"):
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
 * - `podNetworkName: "default"` is the cluster default network, always attached on CNI_IFNAME:
 *   the entry adds nothing (an `interfaceName` other than CNI_IFNAME is refused);
 * - a pod references a given PodNetwork once (KEP "Active validations").
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
import type { ManifoldConf } from "../config.ts";
import type { NadSource } from "../nad/source.ts";
import { inOrder, type ResolvedSelection, resolveSelection } from "./networks.ts";
import { parsePodNetworkAnnotation, type PodNetworkEntry } from "./pod_network_annotation.ts";
import type { PodRef } from "./pod.ts";
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
   * False for a rebuild (DEL without cache, GC): a network disabled or not Ready since the
   * ADD must still be torn down, so only the references are followed. Default true.
   */
  checkReady?: boolean;
}

/**
 * Resolves the entries to selection elements, concurrently (each object read once per entry).
 * `"default"` entries are left out (module doc).
 * @param entries the parsed annotation.
 * @param ctx the source, the provider, the pod's namespace and CNI_IFNAME.
 * @returns one element per non-default entry, in order, with `podNetwork` set.
 * @throws {CniError} code 7 for a missing, foreign, disabled or not-Ready object, bad refs,
 *   or a PodNetwork referenced twice; the source's errors (11, 6) as they are.
 */
export async function podNetworkSelections(
  entries: PodNetworkEntry[],
  ctx: PodNetworkContext,
): Promise<NetworkSelectionElement[]> {
  const resolved = await inOrder(entries.map((e, i) => resolveEntry(e, i, ctx)));
  const seen = new Map<string, number>();
  const out: NetworkSelectionElement[] = [];
  for (const [i, el] of resolved.entries()) {
    if (!el) continue;
    const first = seen.get(el.podNetwork!.name);
    if (first !== undefined) {
      throw new CniError(
        CniErrorCode.InvalidNetworkConfig,
        `${PODNETWORKS_ANNOTATION} [${i}]: PodNetwork "${el.podNetwork!.name}" is already ` +
          `referenced by [${first}] (KEP-3698: a pod references a PodNetwork once)`,
      );
    }
    seen.set(el.podNetwork!.name, i);
    out.push(el);
  }
  return out;
}

async function resolveEntry(
  entry: PodNetworkEntry,
  index: number,
  ctx: PodNetworkContext,
): Promise<NetworkSelectionElement | undefined> {
  const fail = (why: string) =>
    new CniError(
      CniErrorCode.InvalidNetworkConfig,
      `${PODNETWORKS_ANNOTATION} [${index}]: ${why}`,
      "KEP-3698: a pod attaches only to an existing, enabled, Ready PodNetwork of this " +
        "provider; `kubectl get podnetworks -o yaml` shows the conditions",
    );
  let pna: PodNetworkAttachment | undefined;
  let networkName = entry.podNetworkName;
  if (entry.podNetworkAttachmentName !== undefined) {
    pna = await ctx.source.attachment(ctx.podNamespace, entry.podNetworkAttachmentName);
    if (!pna) {
      throw fail(
        `PodNetworkAttachment "${ctx.podNamespace}/${entry.podNetworkAttachmentName}" does not exist`,
      );
    }
    networkName = pna.spec.podNetworkName;
  }
  if (networkName === DEFAULT_PODNETWORK && !pna) {
    if (entry.interfaceName !== undefined && entry.interfaceName !== ctx.ifName) {
      throw fail(
        `the "default" PodNetwork is the cluster default network on "${ctx.ifName}", ` +
          `not "${entry.interfaceName}"`,
      );
    }
    return undefined;
  }
  const pn = await ctx.source.podNetwork(networkName!);
  if (!pn) throw fail(`PodNetwork "${networkName}" does not exist`);
  const check = ctx.checkReady !== false;
  const unusable = check ? podNetworkUnusable(pn, ctx.provider) : undefined;
  if (unusable) throw fail(unusable);
  let nad: { namespace: string; name: string };
  if (pna) {
    const pnaName = `PodNetworkAttachment "${pna.metadata.namespace}/${pna.metadata.name}"`;
    const why = check ? notReady(pnaName, pna.status.conditions) : undefined;
    if (why) throw fail(why);
    nad = pna.spec.parametersRefs.length > 0
      ? nadOfRefs(pna.spec.parametersRefs, pnaName, pna.metadata.namespace)
      : nadOfRefs(pn.spec.parametersRefs, `PodNetwork "${pn.metadata.name}"`);
  } else {
    nad = nadOfRefs(pn.spec.parametersRefs, `PodNetwork "${pn.metadata.name}"`);
  }
  const el: NetworkSelectionElement = {
    name: nad.name,
    namespace: nad.namespace,
    podNetwork: { name: pn.metadata.name, isDefaultGW: entry.isDefaultGW },
  };
  if (pna) el.podNetwork!.attachment = pna.metadata.name;
  if (entry.interfaceName !== undefined) el.interface = entry.interfaceName;
  return el;
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

/** What {@link podNetworkPlan} needs from the plan's input. */
export interface PodNetworkPlanInput {
  /** Manifold's configuration (`podNetworkProvider`, isolation, …). */
  conf: ManifoldConf;
  /** NADs (memoized by the plan). */
  nads: NadSource | undefined;
  /** The pod. */
  pod: PodRef;
  /** PodNetworks and PodNetworkAttachments; undefined without an API. */
  source: PodNetworkSource | undefined;
  /** CNI_IFNAME. */
  ifName: string;
  /** False for a rebuild (see {@link PodNetworkContext.checkReady}). */
  checkReady: boolean;
  /** The NPWG elements of the same pod (default-network override first), for the one-default-route rule. */
  npwg: NetworkSelectionElement[];
}

/**
 * The pod's KEP-3698 entries resolved through their PodNetworks to delegates, after the
 * one-default-route check against the NPWG elements (`buildPodPlan` calls this only for a
 * pod with the annotation).
 * @param text the annotation's value.
 * @param input configuration, NADs, pod, source, CNI_IFNAME, NPWG elements.
 * @returns the resolved selections, in entry order.
 * @throws {CniError} code 7 (invalid annotation, unusable PodNetwork, no API, `isDefaultGW`
 *   with a `default-route` elsewhere); the sources' errors as they are.
 */
export async function podNetworkPlan(
  text: string,
  input: PodNetworkPlanInput,
): Promise<ResolvedSelection[]> {
  const entries = parsePodNetworkAnnotation(text);
  if (entries.length === 0) return [];
  if (!input.source) {
    throw new CniError(
      CniErrorCode.InvalidNetworkConfig,
      `the pod has ${PODNETWORKS_ANNOTATION} but Manifold has no Kubernetes API to read PodNetworks`,
    );
  }
  const gw = entries.findIndex((e) => e.isDefaultGW);
  const other = input.npwg.find((e) => e["default-route"] !== undefined);
  if (gw >= 0 && other) {
    throw new CniError(
      CniErrorCode.InvalidNetworkConfig,
      `${PODNETWORKS_ANNOTATION} [${gw}]: isDefaultGW: the default route may be set on only one ` +
        `attachment, and "${other.namespace}/${other.name}" sets "default-route" (NPWG v1.3 §4.1.2.1.9)`,
    );
  }
  const elements = await podNetworkSelections(entries, {
    source: input.source,
    provider: input.conf.podNetworkProvider,
    podNamespace: input.pod.namespace,
    ifName: input.ifName,
    checkReady: input.checkReady,
  });
  return await inOrder(elements.map((e) => resolveSelection(input.conf, input.nads, input.pod, e)));
}
