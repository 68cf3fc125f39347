/**
 * The pod's attachment plan, built once: from Manifold's configuration, the runtime's CNI_ARGS
 * (parsed once by the caller), the pod's annotations and the NAD source to the ordered list
 * of attachments, each with its resolved delegate (the parsed conflist), ifName,
 * runtimeConfig (capabilityArgs), CNI_ARGS and `default-route` choice.
 *
 * Every check that can fail the pod runs here, before any delegate: the selection annotation
 * (NPWG v1.3 §4.1.2.1), the default-network override, namespace isolation (§7.4), the NADs
 * and their configs (§3.4), duplicate interface names (§4.1.2.1.5), the capability MUSTs
 * (§4.1.2.1.3 …), and the one-`default-route` rule (§4.1.2.1.9). ADD, the DEL that rebuilds
 * a missing cache, GC and STATUS (the default networks) and `manifold explain` all call
 * {@link buildPodPlan}; nothing else composes attachments.
 *
 * NADs are fetched concurrently, each distinct NAD once (fetching is not attaching, §7.3).
 *
 * @module
 */

import { lazyImport } from "../../util/lazy.ts";
import { CniError, CniErrorCode, toCniError } from "../../cni/errors.ts";
import type { ManifoldConf } from "../config.ts";
import { withSelectionSchema } from "./selection_parse.ts";
import type { ManifoldDeps } from "../deps.ts";
import type { NadSource } from "../nad/source.ts";
import {
  defaultNetworkOverride,
  inOrder,
  memoNadSource,
  podSelections,
  resolveDefaultNetwork,
  type ResolvedSelection,
  resolveExtraDefaults,
  resolveSelection,
} from "./networks.ts";
import { planAttachments, type PlanInput } from "./plan.ts";
import type { PodNetworkPlan } from "./pod_network_plan.ts";
import type { PodNetworkSource } from "./pod_networks.ts";
import { planPodOf, type PodRef } from "./pod.ts";
import {
  type AttachmentPlan,
  type Delegate,
  NETWORKS_ANNOTATION,
  type NetworkSelectionElement,
  PODNETWORKS_ANNOTATION,
} from "../types.ts";

/** Inputs of {@link buildPodPlan}. */
export interface PodPlanInput {
  /** Manifold's configuration; its `runtimeConfig` goes to the default network only (§7.5). */
  conf: ManifoldConf;
  /** The pod (K8S_POD_* CNI_ARGS); undefined for a non-Kubernetes runtime. */
  pod: PodRef | undefined;
  /** CNI_CONTAINERID (the infra container ID when the runtime sends none). */
  containerId: string;
  /** CNI_IFNAME: the default network's interface unless the override names one. */
  ifName: string;
  /** The runtime's CNI_ARGS pairs, parsed once (`parseCniArgs`). */
  runtimeArgs: [string, string][];
  /**
   * The pod's annotations (runtime-passed or from the API); `{}` when there are none. A
   * promise (ADD's pod GET in flight) lets the cluster default network resolve meanwhile; its
   * rejection rejects the plan.
   */
  annotations: Record<string, string> | Promise<Record<string, string>>;
  /** NADs by reference; undefined without API and `nadDir`. Memoized here. */
  nads?: NadSource;
  /**
   * KEP-3698 PodNetworks and PodNetworkAttachments (the API); read only when the pod has the
   * `multinetwork.manifold.dev/networks` annotation. Undefined without an API.
   */
  podNetworks?: PodNetworkSource;
  /**
   * `"add"` (default; ADD and explain): the first problem throws. `"rebuild"` (a DEL without
   * cache, GC and STATUS): a network that cannot be resolved is left out and noted in
   * {@link PodPlan.missing}; a plan that fails its checks falls back to the default network
   * alone (no ADD attached anything else for it). The default network itself must always
   * resolve.
   */
  mode?: "add" | "rebuild";
}

/**
 * The plan input of a CNI call from its dependencies: Manifold's configuration, the call's
 * container ID and ifName, and the NAD source.
 * @param deps the command's dependencies.
 * @param call the pod, the parsed CNI_ARGS and the pod's annotations.
 * @returns the input for {@link buildPodPlan} (mode `"add"`).
 */
export function podPlanInput(
  deps: Pick<ManifoldDeps, "conf" | "env" | "nads" | "podNetworks">,
  call: Pick<PodPlanInput, "pod" | "runtimeArgs" | "annotations">,
): PodPlanInput {
  return {
    conf: deps.conf,
    containerId: deps.env.containerId,
    ifName: deps.env.ifName,
    nads: deps.nads,
    podNetworks: deps.podNetworks,
    ...call,
  };
}

/** The pod's attachments, in the order ADD performs them (default network first). */
export interface PodPlan {
  /** The pod as planned and cached (empty strings without a Kubernetes pod). */
  pod: PodRef;
  /** The attachments; `[0]` is the cluster default network. */
  attachments: AttachmentPlan[];
  /**
   * The `k8s.v1.cni.cncf.io/networks` annotation was invalid and ignored
   * (`invalidNetworkSelection: "ignore"`): the reason, for the Warning event and the log.
   */
  ignoredSelection?: CniError;
  /** `"rebuild"` mode: what could not be planned, `"<what>: <error>"` each. */
  missing: string[];
  /** `"rebuild"` mode: true when something is missing because the API was unreachable. */
  transient: boolean;
  /**
   * The pod has the KEP-3698 `multinetwork.manifold.dev/networks` list: ADD writes its
   * `networks-status` (even when the list names only "default").
   */
  podNetworks?: boolean;
  /** The index of "default" in that list, when it names it (its networks-status order). */
  podNetworkDefaultIndex?: number;
}

/**
 * Builds the pod's attachment plan (see the module doc for the checks and their order).
 *
 * @param input configuration, pod, CNI call, annotations, NAD source and mode.
 * @returns the plan; `attachments[0]` is the default network.
 * @throws {CniError} (mode `"add"`) code 7 for an invalid annotation (unless
 *   `invalidNetworkSelection` is `"ignore"`), a missing NAD or config, an isolation violation,
 *   a duplicate interface, a capability no plugin declares, or `default-route` on more than one
 *   attachment; code 11 when the API is unreachable; NAD source errors as is. In every mode the
 *   default network's resolution error is thrown.
 * @example
 * ```ts
 * const plan = await buildPodPlan({ conf, pod, containerId, ifName: "eth0", runtimeArgs, annotations, nads });
 * plan.attachments.map((a) => a.ifName); // ["eth0", "net1", …]
 * ```
 */
export async function buildPodPlan(input: PodPlanInput): Promise<PodPlan> {
  const { conf, pod } = input;
  const rebuild = input.mode === "rebuild";
  const plan: PodPlan = {
    pod: planPodOf(pod, input.containerId),
    attachments: [],
    missing: [],
    transient: false,
  };
  const note = (what: string, e: unknown) => {
    const err = toCniError(e);
    if (err.code === CniErrorCode.TryAgainLater) plan.transient = true;
    plan.missing.push(`${what}: ${err.message}`);
  };

  const nads = input.nads ? memoNadSource(input.nads) : undefined;
  let annotations: Record<string, string>;
  let cluster: Promise<Delegate> | undefined;
  if (input.annotations instanceof Promise) {
    // While the pod is read, resolve the configured default network (file read, first
    // config parse): used unless the pod overrides it.
    cluster = resolveDefaultNetwork(conf, nads, pod, undefined);
    cluster.catch(() => {}); // awaited below when used
    annotations = await input.annotations;
  } else {
    annotations = input.annotations;
  }
  const override = await withSelectionSchema(() => defaultNetworkOverride(conf, pod, annotations));
  let elements: NetworkSelectionElement[] = [];
  try {
    const parsed = await withSelectionSchema(() => podSelections(pod, annotations));
    checkOneDefaultRoute(override, parsed);
    elements = parsed;
  } catch (e) {
    const err = toCniError(e);
    if (conf.invalidNetworkSelection === "ignore") plan.ignoredSelection = err;
    else if (rebuild) note(NETWORKS_ANNOTATION, err);
    else throw err;
  }

  const clusterP = cluster && !override
    ? cluster
    : resolveDefaultNetwork(conf, nads, pod, override);
  const extraP = resolveExtraDefaults(conf, nads, pod);
  const selectionPs = pod ? elements.map((e) => resolveSelection(conf, nads, pod, e)) : [];
  // KEP-3698 entries after the NPWG ones: their objects are read only when the pod has them.
  const kepText = pod ? annotations[PODNETWORKS_ANNOTATION]?.trim() : undefined;
  // Loaded only for such pods: the others pay nothing for KEP-3698.
  const kepP: Promise<PodNetworkPlan> = pod && kepText
    ? lazyImport<typeof import("./pod_network_plan.ts")>("./pod_network_plan.ts", import.meta.url)
      .then((m) =>
        m.podNetworkPlan(kepText, {
          conf,
          nads,
          pod,
          source: input.podNetworks,
          ifName: input.ifName,
          checkReady: !rebuild,
          npwg: override ? [override, ...elements] : elements,
          defaultOverride: override !== undefined,
        })
      )
    : Promise.resolve({ selections: [] });
  // A KEP list without "default" puts its primary on CNI_IFNAME (the override path). When
  // the list fails, kepP reports it in its own (last) place; a rebuild then tears down the
  // cluster default network.
  const defaultP = kepP.then(
    (k) => k.primary ? { ...k.primary.delegate, isDefault: true } : clusterP,
    () => clusterP,
  );
  clusterP.catch(() => {}); // awaited through defaultP when used
  let defaultNetwork: Delegate;
  let defaultNetworks: Delegate[] = [];
  let selections: ResolvedSelection[] = [];
  let kep: PodNetworkPlan = { selections: [] };
  if (rebuild) {
    [extraP, kepP, ...selectionPs].forEach((p: Promise<unknown>) => p.catch(() => {})); // settled below
    defaultNetwork = await defaultP;
    try {
      defaultNetworks = await extraP;
    } catch (e) {
      note("defaultNetworks", e);
    }
    for (const [i, p] of selectionPs.entries()) {
      try {
        selections.push(await p);
      } catch (e) {
        note(`${elements[i].namespace}/${elements[i].name}`, e);
      }
    }
    try {
      kep = await kepP;
    } catch (e) {
      note(PODNETWORKS_ANNOTATION, e);
    }
  } else {
    // All concurrently; the first failure in attachment order (KEP entries last) is reported.
    const [d, extra, ...rest] = await inOrder<
      Delegate | Delegate[] | ResolvedSelection | PodNetworkPlan
    >([defaultP, extraP, ...selectionPs, kepP]);
    defaultNetwork = d as Delegate;
    defaultNetworks = extra as Delegate[];
    kep = rest.pop() as PodNetworkPlan;
    selections = rest as ResolvedSelection[];
  }
  selections.push(...kep.selections);
  plan.podNetworks = kepText !== undefined && kepText !== "";
  if (kep.defaultIndex !== undefined) plan.podNetworkDefaultIndex = kep.defaultIndex;

  const base: Omit<PlanInput, "defaultNetworks" | "selections"> = {
    pod: plan.pod,
    runtimeIfName: input.ifName,
    runtimeArgs: input.runtimeArgs,
    runtimeCapabilityArgs: conf.runtimeConfig,
    defaultNetwork,
    defaultSelection: kep.primary?.selection ?? override,
  };
  try {
    plan.attachments = planAttachments({ ...base, defaultNetworks, selections });
  } catch (e) {
    if (!rebuild) throw e;
    // ADD fails such a plan before any delegate runs; a Manifold before the planning module
    // attached the default network first. Its DEL is what may be left to do (idempotent).
    note("plan", e);
    plan.attachments = planAttachments({ ...base, defaultNetworks: [], selections: [] });
  }
  return plan;
}

/**
 * NPWG v1.3 §4.1.2.1.9, across the two annotations: when the default-network override sets
 * `default-route`, no selection element may (the selection annotation is then invalid).
 * @throws {CniError} code 7 naming the element.
 */
function checkOneDefaultRoute(
  override: NetworkSelectionElement | undefined,
  elements: NetworkSelectionElement[],
): void {
  if (override?.["default-route"] === undefined) return;
  const i = elements.findIndex((e) => e["default-route"] !== undefined);
  if (i < 0) return;
  throw new CniError(
    CniErrorCode.InvalidNetworkConfig,
    `invalid network selection element [${i}] ("${elements[i].name}"): "default-route": ` +
      `may be set on only one attachment, and the default-network annotation sets it ` +
      `(NPWG v1.3 §4.1.2.1.9)`,
  );
}
