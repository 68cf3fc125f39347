/**
 * The collections MultiNetworkPolicy enforcement lists and watches (cluster-wide, RBAC `list`
 * and `watch` each), as {@link ListWatchResource}s of raw objects: the policy engine
 * (lib/policy/types.ts) validates their content; here only identity and `resourceVersion`.
 *
 * - `/apis/k8s.cni.cncf.io/v1beta1/multi-networkpolicies`
 * - `/api/v1/pods` (peers may run on any node; their addresses come from network-status)
 * - `/api/v1/namespaces` (labels, for `namespaceSelector`)
 *
 * @module
 */

import { z } from "zod";
import { KubeError, type ListWatchResource } from "../k8s/mod.ts";

/** A Kubernetes object as received: identity checked, content left to the engine. */
export interface KubeObject {
  /** `metadata`: name, namespace (absent for Namespaces), uid, resourceVersion. */
  metadata: { name: string; namespace?: string; uid?: string; resourceVersion?: string };
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

function resource(path: string, namespaced: boolean): ListWatchResource<KubeObject> {
  return {
    path,
    parse(raw: unknown): KubeObject {
      const r = objectSchema.safeParse(raw);
      if (!r.success || (namespaced && !r.data.metadata.namespace)) {
        throw new KubeError("decoding", `Invalid object from ${path}`, {
          details: r.success ? "metadata.namespace is missing" : z.prettifyError(r.error),
        });
      }
      return r.data as KubeObject;
    },
    resourceVersion: (o) => o.metadata.resourceVersion,
  };
}

/** MultiNetworkPolicies of all namespaces (`k8s.cni.cncf.io/v1beta1`). */
export const MNP_LIST_WATCH: ListWatchResource<KubeObject> = resource(
  "/apis/k8s.cni.cncf.io/v1beta1/multi-networkpolicies",
  true,
);
/** Pods of all namespaces. */
export const POD_LIST_WATCH: ListWatchResource<KubeObject> = resource("/api/v1/pods", true);
/** Namespaces. */
export const NAMESPACE_LIST_WATCH: ListWatchResource<KubeObject> = resource(
  "/api/v1/namespaces",
  false,
);
