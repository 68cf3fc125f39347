/**
 * NADs and pods read from the Kubernetes API, as the sources the multi-network logic takes
 * (a 404 is "does not exist", anything else is an error). Imported only when there is an API
 * connection, together with the client.
 *
 * @module
 */

import { lazyImport } from "../../util/lazy.ts";
import type { KubeClient } from "../../k8s/client.ts";
import type { Pod } from "../../k8s/types.ts";
import { isNotFound } from "../../k8s/errors.ts";
import type { PodNetworkSource } from "../plan/pod_networks.ts";
import type { PodInfo, PodSource } from "../deps.ts";
import type { DraSource } from "../../devices/dra.ts";
import type { NadSource } from "./source.ts";

/** `cniErrorFromKube`, loaded on the first failure only (the success path never needs it). */
async function cniError(e: unknown): Promise<unknown> {
  return (await lazyImport<typeof import("../api_errors.ts")>("../api_errors.ts", import.meta.url))
    .cniErrorFromKube(e);
}

/**
 * NetworkAttachmentDefinitions from the API (`GET …/network-attachment-definitions/{name}`).
 * @returns a source whose `get` resolves undefined on HTTP 404 and throws the client's
 *   a CniError otherwise (`cniErrorFromKube`: code 11 after retries for transient failures).
 */
export function apiNadSource(kube: KubeClient): NadSource {
  return {
    async get(namespace, name) {
      try {
        return await kube.getNetworkAttachmentDefinition(namespace, name);
      } catch (e) {
        if (isNotFound(e)) return undefined;
        throw await cniError(e);
      }
    },
  };
}

/**
 * Pods from the API (`GET /api/v1/namespaces/{ns}/pods/{name}`): UID and annotations, and the
 * Pod object itself when it has `spec.resourceClaims` (DRA).
 * @returns a source whose `get` resolves undefined on HTTP 404 and throws the client's
 *   a CniError otherwise (`cniErrorFromKube`).
 */
export function apiPodSource(kube: KubeClient): PodSource {
  return {
    async get(namespace, name) {
      try {
        return podInfoOf(await kube.getPod(namespace, name));
      } catch (e) {
        if (isNotFound(e)) return undefined;
        throw await cniError(e);
      }
    },
  };
}

/**
 * What the multi-network logic reads of a Pod: UID, annotations and, when it has
 * `spec.resourceClaims`, the Pod object itself (DRA, lib/devices/dra.ts).
 * @param pod a Pod as the API returned it (a GET, or a list/watch of the daemon's informer)
 * @returns its {@link PodInfo}
 */
export function podInfoOf(pod: Pod): PodInfo {
  const info: PodInfo = {
    uid: pod.metadata.uid ?? "",
    annotations: pod.metadata.annotations ?? {},
  };
  const claims = (pod.raw.spec as { resourceClaims?: unknown } | undefined)?.resourceClaims;
  if (Array.isArray(claims) && claims.length > 0) info.withResourceClaims = pod.raw;
  return info;
}

/**
 * KEP-3698 objects from the API: `GET …/podnetworks/{name}` and
 * `GET …/namespaces/{ns}/podnetworkattachments/{name}` (group `multinetwork.manifold.dev`),
 * and `GET /api/v1/namespaces/{ns}` for the labels a PodNetwork's `spec.allowedNamespaces`
 * selects on (only for such networks).
 * @returns a source whose methods resolve undefined on HTTP 404 (also when the CRD is not
 *   installed) and throw a CniError otherwise (`cniErrorFromKube`).
 */
export function apiPodNetworkSource(kube: KubeClient): PodNetworkSource {
  // Loaded on the first read: pods without the KEP annotation never load it.
  const m = () =>
    lazyImport<typeof import("../../k8s/multinetwork.ts")>(
      "../../k8s/multinetwork.ts",
      import.meta.url,
    );
  const get = async <T>(path: string, parse: (raw: unknown) => T): Promise<T | undefined> => {
    try {
      return parse(await kube.send("GET", path));
    } catch (e) {
      if (isNotFound(e)) return undefined;
      throw await cniError(e);
    }
  };
  return {
    podNetwork: async (name) => {
      const { podNetworkPath, parsePodNetwork } = await m();
      return get(podNetworkPath(name), parsePodNetwork);
    },
    attachment: async (namespace, name) => {
      const { podNetworkAttachmentPath, parsePodNetworkAttachment } = await m();
      return get(podNetworkAttachmentPath(namespace, name), parsePodNetworkAttachment);
    },
    namespaceLabels: (name) =>
      get(`/api/v1/namespaces/${encodeURIComponent(name)}`, (raw) => {
        const labels = (raw as { metadata?: { labels?: unknown } })?.metadata?.labels;
        const out: Record<string, string> = {};
        if (labels && typeof labels === "object") {
          for (const [k, v] of Object.entries(labels)) if (typeof v === "string") out[k] = v;
        }
        return out;
      }),
  };
}

/**
 * DRA objects from the API: `GET …/resourceclaims/{name}` and `LIST …/resourceslices` of group
 * `resource.k8s.io`, `v1` first and `v1beta1` where `v1` is not served (lib/k8s/resource.ts,
 * loaded on the first read: only pods with `spec.resourceClaims` and a device-backed NAD).
 * @returns a source whose `claim` resolves undefined on HTTP 404 and whose methods throw a
 *   CniError otherwise (`cniErrorFromKube`: 7 for 403/404, 11 when the API stays unreachable)
 */
export function apiDraSource(kube: KubeClient): DraSource {
  const m = () =>
    lazyImport<typeof import("../../k8s/resource.ts")>("../../k8s/resource.ts", import.meta.url);
  return {
    async claim(namespace, name) {
      try {
        return await (await m()).getResourceClaim(kube, namespace, name);
      } catch (e) {
        throw await cniError(e);
      }
    },
    async slices(filter) {
      try {
        return await (await m()).listResourceSlices(kube, filter);
      } catch (e) {
        throw await cniError(e);
      }
    },
  };
}
