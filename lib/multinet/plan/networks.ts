/**
 * Which networks a pod gets: the cluster default network (or the pod's
 * `v1.multus-cni.io/default-network` override), Multus `defaultNetworks`/extra `delegates`,
 * and the secondary networks of its `k8s.v1.cni.cncf.io/networks` annotation,
 * each resolved to a {@link Delegate}. NADs of one pod are fetched concurrently
 * (fetching is not attaching, NPWG v1.3 §7.3), each distinct NAD once.
 *
 * @module
 */

import { CniError, CniErrorCode } from "../../cni/errors.ts";
import type { ManifoldConf } from "../config.ts";
import type { NadSource } from "../nad/source.ts";
import type { PodRef } from "./pod.ts";
import {
  delegateFromInline,
  resolveClusterNetwork,
  resolveNetwork,
  type ResolveOptions,
} from "./resolve.ts";
import { parseNetworkReference, parseNetworkSelection } from "./selection_parse.ts";
import {
  DEFAULT_NETWORK_ANNOTATION,
  type Delegate,
  NETWORKS_ANNOTATION,
  type NetworkSelectionElement,
} from "../types.ts";

/** A selection element with its resolved delegate. */
export interface ResolvedSelection {
  /** The delegate the element resolved to. */
  delegate: Delegate;
  /** The selection element, as parsed. */
  selection: NetworkSelectionElement;
}

/**
 * Wraps a NAD source so that each (namespace, name) is fetched once per call,
 * and concurrent asks share one request.
 */
export function memoNadSource(src: NadSource): NadSource {
  const seen = new Map<string, ReturnType<NadSource["get"]>>();
  return {
    get(namespace, name) {
      const key = `${namespace}/${name}`;
      let p = seen.get(key);
      if (!p) {
        p = src.get(namespace, name);
        seen.set(key, p);
      }
      return p;
    },
  };
}

/**
 * Parses the `v1.multus-cni.io/default-network` annotation as Multus does: a plain reference
 * (`name`, `ns/name`, `ns/name@ifname`) or a one-element selection (JSON or comma form). Every
 * key of the element is kept (`interface`, `ips`, `mac`, `default-route`, `cni-args`, …): the
 * default network honours them as any selected network does.
 *
 * @param value the annotation's value.
 * @param defaultNamespace namespace when the value names none (Multus `multusNamespace`).
 * @returns the element (validated like a `k8s.v1.cni.cncf.io/networks` element).
 * @throws {CniError} 7 when invalid or when it names more than one network.
 * @example
 * ```ts
 * defaultNetworkSelection('[{"name":"blue","interface":"eth0","default-route":["10.1.0.1"]}]', "kube-system");
 * // {name: "blue", namespace: "kube-system", interface: "eth0", "default-route": ["10.1.0.1"]}
 * ```
 */
export function defaultNetworkSelection(
  value: string,
  defaultNamespace: string,
): NetworkSelectionElement {
  if (/^[\[{]/.test(value) || value.includes(",")) {
    const elements = parseNetworkSelection(value, defaultNamespace);
    if (elements.length !== 1) {
      throw new CniError(
        CniErrorCode.InvalidNetworkConfig,
        `${DEFAULT_NETWORK_ANNOTATION} must name exactly one network`,
        value,
      );
    }
    return elements[0];
  }
  const ref = parseNetworkReference(value, defaultNamespace);
  const out: NetworkSelectionElement = { name: ref.name, namespace: ref.namespace };
  if (ref.interface !== undefined) out.interface = ref.interface;
  return out;
}

const emptyNads: NadSource = { get: () => Promise.resolve(undefined) };

/**
 * The pod's `v1.multus-cni.io/default-network` element, parsed ({@link defaultNetworkSelection}).
 * @param conf Manifold's configuration (`multusNamespace` is the namespace when none is named).
 * @param pod the pod; a non-Kubernetes runtime (undefined) has no override.
 * @param annotations the pod's annotations.
 * @returns the element, or undefined when the pod does not override the default network.
 * @throws {CniError} 7 when the annotation is invalid.
 */
export function defaultNetworkOverride(
  conf: ManifoldConf,
  pod: PodRef | undefined,
  annotations: Record<string, string>,
): NetworkSelectionElement | undefined {
  const override = annotations[DEFAULT_NETWORK_ANNOTATION]?.trim();
  if (!override || !pod) return undefined;
  return defaultNetworkSelection(override, conf.multusNamespace);
}

/**
 * Resolves the cluster default network for a pod (NPWG v1.3 §6): the pod's
 * `v1.multus-cni.io/default-network` element (see {@link defaultNetworkOverride}; a NAD
 * reference, namespace isolation applies), else `clusterNetwork`, else `delegates[0]`.
 * @param conf Manifold's configuration.
 * @param nads NADs (memoized by the caller); undefined without API and `nadDir`.
 * @param pod the pod, undefined for a non-Kubernetes runtime.
 * @param override the pod's default-network element, when it overrides the default.
 * @returns the delegate, marked `isDefault`.
 * @throws {CniError} code 7 when the network cannot be resolved or isolation forbids it.
 */
export async function resolveDefaultNetwork(
  conf: ManifoldConf,
  nads: NadSource | undefined,
  pod: PodRef | undefined,
  override: NetworkSelectionElement | undefined,
): Promise<Delegate> {
  if (override && pod) {
    const ref = { namespace: override.namespace, name: override.name };
    const d = await resolveNetwork(ref, resolveOptionsFor(conf, nads ?? emptyNads, pod.namespace));
    return { ...d, isDefault: true };
  }
  if (conf.clusterNetwork) {
    return await resolveClusterNetwork(conf.clusterNetwork, {
      nads: nads ?? emptyNads,
      confDir: conf.confDir,
      multusNamespace: conf.multusNamespace,
      isDefault: true,
      selfTypes: selfTypes(conf),
    });
  }
  return delegateFromInline(conf.delegates![0], 0, true, { selfTypes: selfTypes(conf) });
}

/**
 * Resolves the extra networks every pod gets: Multus `defaultNetworks` (skipped for pods in
 * `systemNamespaces`) and `delegates[1..]`.
 * @throws {CniError} code 7 when one cannot be resolved.
 */
export async function resolveExtraDefaults(
  conf: ManifoldConf,
  nads: NadSource | undefined,
  pod: PodRef | undefined,
): Promise<Delegate[]> {
  const out: Delegate[] = [];
  if (!conf.clusterNetwork && conf.delegates) {
    conf.delegates.slice(1).forEach((d, i) =>
      out.push(delegateFromInline(d, i + 1, false, { selfTypes: selfTypes(conf) }))
    );
  }
  if (pod && conf.systemNamespaces.includes(pod.namespace)) return out;
  const resolved = await inOrder(
    conf.defaultNetworks.map((name) =>
      resolveClusterNetwork(name, {
        nads: nads ?? emptyNads,
        confDir: conf.confDir,
        multusNamespace: conf.multusNamespace,
        isDefault: false,
        selfTypes: selfTypes(conf),
      })
    ),
  );
  return [...out, ...resolved];
}

/**
 * Reads and validates the pod's selection annotation (NPWG v1.3 §4.1). Done before any
 * delegate runs, so an invalid annotation fails the ADD with nothing attached.
 * @returns the elements, [] when the pod selects nothing.
 * @throws {CniError} code 7 naming the element and key (see `parseNetworkSelection`).
 */
export function podSelections(
  pod: PodRef | undefined,
  annotations: Record<string, string>,
): NetworkSelectionElement[] {
  const text = annotations[NETWORKS_ANNOTATION];
  if (!pod || !text || text.trim() === "") return [];
  return parseNetworkSelection(text, pod.namespace);
}

/**
 * The options of `resolveNetwork` for one pod's references, from Manifold's configuration:
 * `confDir` for on-disk configs (§3.4.1) and namespace isolation (§7.4).
 */
export function resolveOptionsFor(
  conf: ManifoldConf,
  nads: NadSource,
  podNamespace: string,
): ResolveOptions {
  return {
    nads,
    confDir: conf.confDir,
    namespaceIsolation: conf.namespaceIsolation,
    globalNamespaces: conf.globalNamespaces,
    podNamespace,
    selfTypes: selfTypes(conf),
  };
}

/**
 * Plugin types that are Manifold itself: `manifold` and the `type` Manifold was configured
 * under (a renamed install), refused as delegates — no recursive delegation.
 */
export function selfTypes(conf: ManifoldConf): string[] {
  return conf.type && conf.type !== "manifold" ? ["manifold", conf.type] : ["manifold"];
}

/**
 * Resolves one selection element of a pod to its delegate.
 * @throws {CniError} code 7 for a missing NAD or an isolation violation, or when Manifold has
 *   neither an API nor a `nadDir` to look NADs up in.
 */
export async function resolveSelection(
  conf: ManifoldConf,
  nads: NadSource | undefined,
  pod: PodRef,
  selection: NetworkSelectionElement,
): Promise<ResolvedSelection> {
  if (!nads) {
    throw new CniError(
      CniErrorCode.InvalidNetworkConfig,
      "the pod selects networks but Manifold has no Kubernetes API and no nadDir",
      `${selection.namespace}/${selection.name}`,
    );
  }
  const ref = { namespace: selection.namespace, name: selection.name };
  return {
    selection,
    delegate: await resolveNetwork(ref, resolveOptionsFor(conf, nads, pod.namespace)),
  };
}

/**
 * Resolves every selection element to its delegate (concurrently; attachments stay serial;
 * when several fail, the first in list order is reported, whatever finishes first).
 * @throws {CniError} code 7 for a missing NAD, an isolation violation, or when the pod
 *   selects networks but Manifold has neither an API nor a `nadDir`.
 */
export async function resolveSelections(
  conf: ManifoldConf,
  nads: NadSource | undefined,
  pod: PodRef | undefined,
  elements: NetworkSelectionElement[],
): Promise<ResolvedSelection[]> {
  if (!pod || elements.length === 0) return [];
  return await inOrder(elements.map((e) => resolveSelection(conf, nads, pod, e)));
}

/**
 * Awaits every promise (they run concurrently) and returns the values in order; when some
 * fail, throws the failure of the first in list order — the same error whatever finishes first.
 * @param promises started work, in the order errors take precedence.
 * @returns the values in list order.
 * @throws the rejection of the first failed promise in list order.
 */
export async function inOrder<T>(promises: Promise<T>[]): Promise<T[]> {
  const settled = await Promise.allSettled(promises);
  const failed = settled.find((s) => s.status === "rejected");
  if (failed) throw (failed as PromiseRejectedResult).reason;
  return settled.map((s) => (s as PromiseFulfilledResult<T>).value);
}
