/**
 * The pod's KEP-3698 list as one part of the pod's plan (`buildPodPlan` loads this module
 * only for a pod with the `multinetwork.manifold.dev/networks` annotation): the one-default-
 * route check against the NPWG elements, the explicit-list rule (KEP "only the listed
 * PodNetworks will be attached": without "default", the `isDefaultGW` entry, else the first,
 * takes CNI_IFNAME through the default-network override path), and the entries resolved
 * (pod_networks.ts) to delegates.
 *
 * @module
 */

import { CniError, CniErrorCode } from "../../cni/errors.ts";
import type { ManifoldConf } from "../config.ts";
import type { NadSource } from "../nad/source.ts";
import { inOrder, type ResolvedSelection, resolveSelection } from "./networks.ts";
import { parsePodNetworkAnnotation } from "./pod_network_annotation.ts";
import { DEFAULT_PODNETWORK, podNetworkSelections, type PodNetworkSource } from "./pod_networks.ts";
import type { PodRef } from "./pod.ts";
import {
  DEFAULT_NETWORK_ANNOTATION,
  type NetworkSelectionElement,
  PODNETWORKS_ANNOTATION,
} from "../types.ts";

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
  /** The pod has a `v1.multus-cni.io/default-network` override. */
  defaultOverride: boolean;
}

/** The pod's KEP-3698 list as the plan takes it. */
export interface PodNetworkPlan {
  /**
   * The list omits "default" (KEP: "only the listed PodNetworks will be attached"): the entry
   * that takes the cluster default network's place on CNI_IFNAME, through the default-network
   * override path — the `isDefaultGW` one, else the first. Its element has no `interface`
   * and `podNetwork.isDefaultGW` false (it holds the default route by being the default).
   */
  primary?: ResolvedSelection;
  /** The other entries, resolved, in list order. */
  selections: ResolvedSelection[];
}

/**
 * The pod's KEP-3698 entries resolved through their PodNetworks to delegates, after the
 * one-default-route check against the NPWG elements (`buildPodPlan` calls this only for a
 * pod with the annotation). A list naming "default" keeps the cluster default network on
 * CNI_IFNAME (its PodNetwork checked like any other); a list without it puts its
 * `isDefaultGW` entry (else the first) there instead ({@link PodNetworkPlan.primary}).
 * @param text the annotation's value.
 * @param input configuration, NADs, pod, source, CNI_IFNAME, NPWG elements.
 * @returns the primary (when the list omits "default") and the other selections.
 * @throws {CniError} code 7 (invalid annotation, unusable PodNetwork, no API, `isDefaultGW`
 *   with a `default-route` elsewhere, a list without "default" beside a default-network
 *   override, or its primary entry asking for an `interfaceName` other than CNI_IFNAME); the
 *   sources' errors as they are.
 */
export async function podNetworkPlan(
  text: string,
  input: PodNetworkPlanInput,
): Promise<PodNetworkPlan> {
  const entries = parsePodNetworkAnnotation(text);
  if (entries.length === 0) return { selections: [] };
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
      `${PODNETWORKS_ANNOTATION} [${gw}].isDefaultGW: the default route may be set on only one ` +
        `attachment, and "${other.namespace}/${other.name}" sets "default-route" (NPWG v1.3 §4.1.2.1.9)`,
    );
  }
  const resolved = await podNetworkSelections(entries, {
    source: input.source,
    provider: input.conf.podNetworkProvider,
    podNamespace: input.pod.namespace,
    ifName: input.ifName,
    checkReady: input.checkReady,
  });
  const elements = resolved.flatMap((r) => r.element ? [r.element] : []);
  // "default" named directly or through an attachment keeps the cluster default network.
  const explicit = resolved.some((r) => r.podNetwork === DEFAULT_PODNETWORK);
  const primaryAt = explicit ? -1 : Math.max(gw, 0);
  const primaryEl = primaryAt >= 0 ? resolved[primaryAt].element : undefined;
  if (primaryEl) {
    const p = entries[primaryAt];
    const what = p.podNetworkName !== undefined
      ? `PodNetwork "${p.podNetworkName}"`
      : `PodNetworkAttachment "${p.podNetworkAttachmentName}"`;
    if (input.defaultOverride) {
      throw new CniError(
        CniErrorCode.InvalidNetworkConfig,
        `${PODNETWORKS_ANNOTATION} [${primaryAt}]: the list does not name "default", so ` +
          `${what} is the pod's default network, and ` +
          `${DEFAULT_NETWORK_ANNOTATION} names another; remove one`,
      );
    }
    if (p.interfaceName !== undefined && p.interfaceName !== input.ifName) {
      throw new CniError(
        CniErrorCode.InvalidNetworkConfig,
        `${PODNETWORKS_ANNOTATION} [${primaryAt}].interfaceName: the list does not name ` +
          `"default", so ${what} is the pod's default network on ` +
          `"${input.ifName}" (CNI_IFNAME), not "${p.interfaceName}"`,
        'the runtime reads the pod IP from CNI_IFNAME; list {"name":"default"} to keep the ' +
          "cluster default network there",
      );
    }
  }
  if (primaryEl) {
    const { interface: _ifName, ...rest } = primaryEl;
    const el: NetworkSelectionElement = {
      ...rest,
      podNetwork: { ...primaryEl.podNetwork!, isDefaultGW: false },
    };
    const others = elements.filter((e) => e !== primaryEl);
    const [primary, ...selections] = await inOrder(
      [el, ...others].map((e) => resolveSelection(input.conf, input.nads, input.pod, e)),
    );
    return { primary, selections };
  }
  return {
    selections: await inOrder(
      elements.map((e) => resolveSelection(input.conf, input.nads, input.pod, e)),
    ),
  };
}
