/**
 * The pod a CNI call is for, read from the runtime's CNI_ARGS
 * (`K8S_POD_NAMESPACE`, `K8S_POD_NAME`, `K8S_POD_INFRA_CONTAINER_ID`, `K8S_POD_UID`,
 * as kubelet/containerd/CRI-O send them), and its annotations.
 *
 * @module
 */

import { CniError, CniErrorCode } from "../../cni/errors.ts";
import { POD_ANNOTATIONS_CAPABILITY } from "../types.ts";

/** Identity of the pod behind a sandbox. `uid` is "" when the runtime did not send one. */
export interface PodRef {
  /** `K8S_POD_NAMESPACE`. */
  namespace: string;
  /** `K8S_POD_NAME`. */
  name: string;
  /** `K8S_POD_UID`, "" when the runtime sent none. */
  uid: string;
  /** `K8S_POD_INFRA_CONTAINER_ID`, else CNI_CONTAINERID. */
  infraContainerId: string;
}

/**
 * Extracts the pod identity from CNI_ARGS pairs.
 * @param pairs parsed CNI_ARGS (`[key, value]`, in the runtime's order).
 * @param containerId CNI_CONTAINERID, used when K8S_POD_INFRA_CONTAINER_ID is absent.
 * @returns the pod, or undefined when the runtime sent no K8S_POD_NAMESPACE/K8S_POD_NAME (a non-Kubernetes runtime).
 * @throws {CniError} code 4 when only one of namespace/name is present.
 * @example podRefFromArgs([["K8S_POD_NAMESPACE","ns"],["K8S_POD_NAME","p"]], "c1") // {namespace:"ns",name:"p",uid:"",infraContainerId:"c1"}
 */
export function podRefFromArgs(pairs: [string, string][], containerId: string): PodRef | undefined {
  const get = (k: string) => pairs.find(([key]) => key === k)?.[1] ?? "";
  const namespace = get("K8S_POD_NAMESPACE"), name = get("K8S_POD_NAME");
  if (!namespace && !name) return undefined;
  if (!namespace || !name) {
    throw new CniError(
      CniErrorCode.InvalidEnvironment,
      "CNI_ARGS has only one of K8S_POD_NAMESPACE and K8S_POD_NAME",
      `K8S_POD_NAMESPACE=${JSON.stringify(namespace)} K8S_POD_NAME=${JSON.stringify(name)}`,
    );
  }
  return {
    namespace,
    name,
    uid: get("K8S_POD_UID"),
    infraContainerId: get("K8S_POD_INFRA_CONTAINER_ID") || containerId,
  };
}

/**
 * The pod annotations the runtime passed in `runtimeConfig["io.kubernetes.cri.pod-annotations"]`,
 * when Manifold's config declares that capability (containerd and CRI-O send all annotations then).
 * @returns the annotation map, or undefined when the capability is not declared or nothing was sent.
 * @throws {CniError} code 6 when the value is not a map of strings.
 */
export function runtimePodAnnotations(
  capabilities: Record<string, boolean>,
  runtimeConfig: Record<string, unknown>,
): Record<string, string> | undefined {
  if (!capabilities[POD_ANNOTATIONS_CAPABILITY]) return undefined;
  const value = runtimeConfig[POD_ANNOTATIONS_CAPABILITY];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "object" || Array.isArray(value)) {
    throw new CniError(
      CniErrorCode.DecodingFailure,
      `runtimeConfig "${POD_ANNOTATIONS_CAPABILITY}" is not a map`,
    );
  }
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(value)) {
    if (typeof v !== "string") {
      throw new CniError(
        CniErrorCode.DecodingFailure,
        `runtimeConfig "${POD_ANNOTATIONS_CAPABILITY}" has a non-string value`,
        `key ${JSON.stringify(k)}`,
      );
    }
    out[k] = v;
  }
  return out;
}

/**
 * True when the pod is a static (mirror) pod, whose API UID differs from the UID the
 * runtime knows (Multus #773): the UID check is skipped for these.
 */
export function isStaticPod(annotations: Record<string, string>): boolean {
  const source = annotations["kubernetes.io/config.source"];
  return (source !== undefined && source !== "api") ||
    annotations["kubernetes.io/config.mirror"] !== undefined;
}

/**
 * `[ns/pod:network]`, the context prefix of errors and logs.
 * @example attachmentContext({namespace:"ns",name:"p",uid:"",infraContainerId:"c"}, "ns/net-a") // "[ns/p:ns/net-a]"
 */
export function attachmentContext(pod: PodRef | undefined, network: string): string {
  return `[${pod ? `${pod.namespace}/${pod.name}` : "-"}:${network}]`;
}

/**
 * The pod as planning and the cache record it: empty strings when the runtime sent no pod
 * (a non-Kubernetes runtime), `infraContainerId` falling back to CNI_CONTAINERID. ADD and a
 * DEL that rebuilds its attachments must use the same value, so delegates get the same CNI_ARGS.
 * @example planPodOf(undefined, "c1") // {namespace:"",name:"",uid:"",infraContainerId:"c1"}
 */
export function planPodOf(pod: PodRef | undefined, containerId: string): PodRef {
  return {
    namespace: pod?.namespace ?? "",
    name: pod?.name ?? "",
    uid: pod?.uid ?? "",
    infraContainerId: pod?.infraContainerId ?? containerId,
  };
}
