/**
 * The collections MultiNetworkPolicy enforcement lists and watches (cluster-wide, RBAC `list`
 * and `watch` each), as {@link ListWatchResource}s of raw objects: the policy engine
 * (lib/policy/types.ts) validates their content; here only identity and `resourceVersion`.
 *
 * - `/apis/k8s.cni.cncf.io/v1beta1/multi-networkpolicies`
 * - `/api/v1/pods` (peers may run on any node; their addresses come from network-status):
 *   {@link trimPod} cuts a pod down to what the engine reads; the agent itself decodes pods
 *   straight into compact records (lib/daemon/policy/pods.ts), {@link POD_LIST_WATCH} keeps
 *   the trimmed object (scripts/mem_policy_pods.ts)
 * - `/api/v1/namespaces` (labels, for `namespaceSelector`)
 *
 * @module
 */

import { z } from "zod";
import { KubeError, type ListWatchResource } from "../../k8s/mod.ts";
import { NETWORK_STATUS_ANNOTATION } from "../../multinet/types.ts";
import { isPlainObject } from "../../cni/types.ts";

/** A Kubernetes object as received: identity checked, content left to the engine. */
export interface KubeObject {
  /** `metadata`: name, namespace (absent for Namespaces), uid, resourceVersion. */
  metadata: { name: string; namespace?: string; uid?: string; resourceVersion?: string };
  /** Every other field, as the API sent it (validated by whoever reads it). */
  [k: string]: unknown;
}

const objectSchema = z.looseObject({
  metadata: z.looseObject({
    name: z.string().min(1),
    namespace: z.string().min(1).optional(),
    uid: z.string().optional(),
    resourceVersion: z.string().optional(),
  }),
});

/**
 * The fields of a Pod the policy engine reads (lib/policy/types.ts `parsePod`), everything
 * else dropped: `metadata` `name`, `namespace`, `uid`, `resourceVersion`, `labels`,
 * `deletionTimestamp` and, of the annotations, only `k8s.v1.cni.cncf.io/network-status`;
 * `spec.nodeName`; `spec.containers[].ports` (named ports); `status.phase`. Values are kept
 * as received (not validated here: the engine does); a `spec.containers` that is not a list is
 * kept whole so the engine still refuses it. A real pod (≈ 4–5 KiB of JSON: env, volumes,
 * probes, conditions, `last-applied-configuration`) keeps a few hundred bytes.
 *
 * @param o a pod whose identity {@link POD_LIST_WATCH} checked
 * @returns a new object; `o` is not changed
 * @example
 * ```ts
 * trimPod({ metadata: { name: "p", namespace: "a", annotations: { x: "y" } }, spec: { nodeName: "n" } });
 * // { metadata: { name: "p", namespace: "a" }, spec: { nodeName: "n" } }
 * ```
 */
export function trimPod(o: KubeObject): KubeObject {
  const m = o.metadata as KubeObject["metadata"] & Record<string, unknown>;
  const metadata: Record<string, unknown> = { name: m.name, namespace: m.namespace };
  for (const k of ["uid", "resourceVersion", "labels", "deletionTimestamp"]) {
    if (m[k] !== undefined) metadata[k] = m[k];
  }
  const status = isPlainObject(m.annotations)
    ? m.annotations[NETWORK_STATUS_ANNOTATION]
    : undefined;
  if (status !== undefined) metadata.annotations = { [NETWORK_STATUS_ANNOTATION]: status };
  const out: KubeObject = { metadata: metadata as KubeObject["metadata"] };
  if (isPlainObject(o.spec)) {
    const spec: Record<string, unknown> = {};
    if (o.spec.nodeName !== undefined) spec.nodeName = o.spec.nodeName;
    const containers = o.spec.containers;
    if (Array.isArray(containers)) {
      spec.containers = containers.map((c) =>
        isPlainObject(c) && c.ports !== undefined ? { ports: c.ports } : {}
      );
    } else if (containers !== undefined) spec.containers = containers;
    out.spec = spec;
  }
  if (isPlainObject(o.status) && o.status.phase !== undefined) {
    out.status = { phase: o.status.phase };
  }
  return out;
}

function resource(
  path: string,
  namespaced: boolean,
  trim: (o: KubeObject) => KubeObject = (o) => o,
): ListWatchResource<KubeObject> {
  return {
    path,
    parse(raw: unknown): KubeObject {
      const r = objectSchema.safeParse(raw);
      if (!r.success || (namespaced && !r.data.metadata.namespace)) {
        throw new KubeError("decoding", `Invalid object from ${path}`, {
          details: r.success ? "metadata.namespace is missing" : z.prettifyError(r.error),
        });
      }
      return trim(r.data as KubeObject);
    },
    resourceVersion: (o) => o.metadata.resourceVersion,
  };
}

/** MultiNetworkPolicies of all namespaces (`k8s.cni.cncf.io/v1beta1`). */
export const MNP_LIST_WATCH: ListWatchResource<KubeObject> = resource(
  "/apis/k8s.cni.cncf.io/v1beta1/multi-networkpolicies",
  true,
);
/** Pods of all namespaces, each cut down by {@link trimPod}. */
export const POD_LIST_WATCH: ListWatchResource<KubeObject> = resource(
  "/api/v1/pods",
  true,
  trimPod,
);
/** Namespaces. */
export const NAMESPACE_LIST_WATCH: ListWatchResource<KubeObject> = resource(
  "/api/v1/namespaces",
  false,
);
