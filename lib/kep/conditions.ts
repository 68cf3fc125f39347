/**
 * The KEP-3698 life cycle as pure functions of what the controller has listed: for each
 * PodNetwork and PodNetworkAttachment of Manifold's provider, the `ParamsReady` and `Ready`
 * conditions it should carry and whether it is in use (the InUse finalizer).
 *
 * Reasons (KEP-3698 "Status Conditions"; ParamsReady's are implementation-specific):
 * - PodNetwork `Ready`: `True`/`Ready`; `False`/`AdministrativelyDisabled` (`enabled: false`,
 *   checked first); `False`/`ParamsNotReady`.
 * - PodNetworkAttachment `Ready`: `True`/`Ready`; `False`/`NamespaceNotAllowed` (Manifold's
 *   extension: its namespace is outside the PodNetwork's `spec.allowedNamespaces`);
 *   `False`/`PodNetworkNotReady` (its PodNetwork is missing or not Ready); `False`/`ParamsNotReady`.
 * - `ParamsReady`: `True`/`ParamsReady` (the one NAD exists, its `spec.config` parses, and
 *   namespace isolation lets the user reach it), `True`/`PodNetworkParameters` (an attachment
 *   without refs of its own), else `False` with `InvalidParametersRefs`,
 *   `NetworkAttachmentDefinitionNotFound`, `NamespaceIsolation` or `InvalidConfig`.
 *   Manifold needs exactly one NAD, so a PodNetwork without refs is `InvalidParametersRefs`
 *   (the KEP's generic controller would call it Ready; Manifold could not attach it) — but
 *   for "default", which is the cluster default network configured on the nodes:
 *   `True`/`ClusterDefaultNetwork` without refs, `False`/`InvalidParametersRefs` with some.
 *
 * In use (KEP-3698 "InUse state"): a PodNetwork referenced by a PodNetworkAttachment or by a
 * pod (directly or through an attachment in its namespace), an attachment referenced by a
 * pod; pods in phase Succeeded or Failed do not count.
 *
 * @module
 */

import { toCniError } from "../cni/errors.ts";
import { type Condition, type PodNetwork, type PodNetworkAttachment } from "../k8s/multinetwork.ts";
import type { NetworkAttachmentDefinition } from "../k8s/types.ts";
import { resolveNetwork } from "../multinet/plan/resolve.ts";
import type { PodNetworkEntry } from "../multinet/plan/pod_network_annotation.ts";
import { DEFAULT_PODNETWORK, nadOfRefs } from "../multinet/plan/pod_networks.ts";
import { matchesSelector } from "../policy/selector.ts";

/** A pod as the controller keeps it: only what references networks. */
export interface PodReferences {
  /** The pod's namespace. */
  namespace: string;
  /** The pod's name. */
  name: string;
  /** `status.phase`; Succeeded and Failed pods reference nothing. */
  phase: string;
  /** The parsed `multinetwork.manifold.dev/networks` entries (`[]` when absent or invalid). */
  entries: PodNetworkEntry[];
}

/** Everything the controller has listed, by key (`name` or `namespace/name`). */
export interface Snapshot {
  /** PodNetworks by name. */
  podNetworks: Map<string, PodNetwork>;
  /** PodNetworkAttachments by `namespace/name`. */
  attachments: Map<string, PodNetworkAttachment>;
  /** NetworkAttachmentDefinitions by `namespace/name`. */
  nads: Map<string, NetworkAttachmentDefinition>;
  /** Pods by `namespace/name`. */
  pods: Map<string, PodReferences>;
  /** Namespace labels by name (for PodNetwork `spec.allowedNamespaces`). */
  namespaces?: Map<string, Record<string, string>>;
}

/** The controller's settings (`manifold controller` flags). */
export interface LifecyclePolicy {
  /** Manifold's provider: other PodNetworks are left alone. */
  provider: string;
  /** Namespace isolation as the plugins are configured (NPWG v1.3 §7.4). */
  namespaceIsolation: boolean;
  /** Namespaces whose NADs any pod may use under isolation. */
  globalNamespaces: string[];
  /** Create the "default" PodNetwork when missing (default true; `--no-default-podnetwork`). */
  createDefault?: boolean;
}

/** What one object should carry. */
export interface Desired {
  /** `ParamsReady` then `Ready`, without `lastTransitionTime` (set when written). */
  conditions: Omit<Condition, "lastTransitionTime">[];
  /** Referenced: the InUse finalizer must be present. */
  inUse: boolean;
}

function cond(type: string, ok: boolean, reason: string, message: string) {
  return { type, status: ok ? "True" : "False", reason, message };
}

/** `ParamsReady` for a ref list (empty for an attachment: it uses its PodNetwork's). */
async function paramsReady(
  snap: Snapshot,
  policy: LifecyclePolicy,
  refs: PodNetwork["spec"]["parametersRefs"],
  owner: string,
  namespace: string | undefined,
): Promise<ReturnType<typeof cond>> {
  let ref: { namespace: string; name: string };
  try {
    ref = nadOfRefs(refs, owner, namespace);
  } catch (e) {
    return cond("ParamsReady", false, "InvalidParametersRefs", toCniError(e).msg);
  }
  const id = `${ref.namespace}/${ref.name}`;
  const nad = snap.nads.get(id);
  if (!nad) {
    return cond(
      "ParamsReady",
      false,
      "NetworkAttachmentDefinitionNotFound",
      `network attachment definition "${id}" not found`,
    );
  }
  try {
    await resolveNetwork(ref, {
      nads: { get: (ns, name) => Promise.resolve(snap.nads.get(`${ns}/${name}`)) },
      // A NAD without spec.config names a file on the nodes: not the controller's to check.
      confDir: "/nonexistent",
      namespaceIsolation: policy.namespaceIsolation,
      globalNamespaces: policy.globalNamespaces,
      // A cluster-scoped PodNetwork serves every namespace: only global ones pass isolation.
      podNamespace: namespace ?? "",
      selfTypes: ["manifold"],
    });
  } catch (e) {
    const err = toCniError(e);
    if (err.msg.startsWith("namespace isolation")) {
      return cond("ParamsReady", false, "NamespaceIsolation", err.msg);
    }
    if (!nad.spec.config?.trim()) {
      return cond("ParamsReady", true, "ParamsReady", `uses "${id}" (config file on the nodes)`);
    }
    return cond("ParamsReady", false, "InvalidConfig", err.msg);
  }
  return cond("ParamsReady", true, "ParamsReady", `network attachment definition "${id}" is valid`);
}

/** True when the PodNetwork exists and its Ready condition is True. */
function podNetworkReady(pn: PodNetwork | undefined): boolean {
  return pn?.status.conditions.some((c) => c.type === "Ready" && c.status === "True") ?? false;
}

function livePods(snap: Snapshot): PodReferences[] {
  return [...snap.pods.values()].filter((p) => p.phase !== "Succeeded" && p.phase !== "Failed");
}

/**
 * Whether a live pod (directly, or through an attachment in its namespace) or a
 * PodNetworkAttachment references the PodNetwork (KEP-3698 "InUse state").
 * @param snap the listed objects.
 * @param name the PodNetwork's name.
 * @returns true when in use.
 */
export function podNetworkInUse(snap: Snapshot, name: string): boolean {
  const byAttachment = [...snap.attachments.values()].some((a) => a.spec.podNetworkName === name);
  return byAttachment ||
    livePods(snap).some((p) =>
      p.entries.some((e) =>
        e.podNetworkName === name ||
        (e.podNetworkAttachmentName !== undefined &&
          snap.attachments.get(`${p.namespace}/${e.podNetworkAttachmentName}`)?.spec
              .podNetworkName === name)
      )
    );
}

/**
 * What a PodNetwork should carry.
 * @param snap the listed objects.
 * @param policy provider and isolation.
 * @param pn a PodNetwork whose provider is `policy.provider`.
 * @returns its conditions and whether it is in use.
 */
export async function desiredPodNetwork(
  snap: Snapshot,
  policy: LifecyclePolicy,
  pn: PodNetwork,
): Promise<Desired> {
  const name = pn.metadata.name;
  const params = name !== DEFAULT_PODNETWORK
    ? await paramsReady(snap, policy, pn.spec.parametersRefs, `PodNetwork "${name}"`, undefined)
    : pn.spec.parametersRefs.length === 0
    ? cond(
      "ParamsReady",
      true,
      "ClusterDefaultNetwork",
      "the cluster default network configured on the nodes",
    )
    : cond(
      "ParamsReady",
      false,
      "InvalidParametersRefs",
      'the "default" PodNetwork is the cluster default network configured on the nodes; ' +
        "Manifold takes no parametersRefs for it",
    );
  const ready = !pn.spec.enabled
    ? cond("Ready", false, "AdministrativelyDisabled", "spec.enabled is false")
    : params.status !== "True"
    ? cond("Ready", false, "ParamsNotReady", params.message)
    : cond("Ready", true, "Ready", "the network accepts pods");
  return { conditions: [params, ready], inUse: podNetworkInUse(snap, name) };
}

/**
 * What a PodNetworkAttachment should carry.
 * @param snap the listed objects.
 * @param policy provider and isolation.
 * @param pna an attachment whose PodNetwork is Manifold's (or missing).
 * @returns its conditions and whether a pod uses it.
 */
export async function desiredAttachment(
  snap: Snapshot,
  policy: LifecyclePolicy,
  pna: PodNetworkAttachment,
): Promise<Desired> {
  const { namespace, name } = pna.metadata;
  const params = pna.spec.parametersRefs.length === 0
    ? cond("ParamsReady", true, "PodNetworkParameters", "uses its PodNetwork's parametersRefs")
    : await paramsReady(
      snap,
      policy,
      pna.spec.parametersRefs,
      `PodNetworkAttachment "${namespace}/${name}"`,
      namespace,
    );
  const pn = snap.podNetworks.get(pna.spec.podNetworkName);
  const sel = pn?.spec.allowedNamespaces;
  const labels = snap.namespaces?.get(namespace);
  const allowed = !sel || (labels !== undefined && matchesSelector(sel, labels));
  const ready = !allowed
    ? cond(
      "Ready",
      false,
      "NamespaceNotAllowed",
      `namespace "${namespace}" is not allowed by PodNetwork "${pna.spec.podNetworkName}" ` +
        "(spec.allowedNamespaces)",
    )
    : !podNetworkReady(pn)
    ? cond(
      "Ready",
      false,
      "PodNetworkNotReady",
      pn
        ? `PodNetwork "${pna.spec.podNetworkName}" is not Ready`
        : `PodNetwork "${pna.spec.podNetworkName}" does not exist`,
    )
    : params.status !== "True"
    ? cond("Ready", false, "ParamsNotReady", params.message)
    : cond("Ready", true, "Ready", "the attachment accepts pods");
  const inUse = livePods(snap).some((p) =>
    p.namespace === namespace && p.entries.some((e) => e.podNetworkAttachmentName === name)
  );
  return { conditions: [params, ready], inUse };
}
