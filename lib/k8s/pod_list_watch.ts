/**
 * The pods of one node as a list+watch resource: `GET /api/v1/pods?fieldSelector=spec.nodeName=N`
 * (every namespace; RBAC `list` and `watch` on pods, which RBAC cannot narrow by field — the
 * field selector does), for {@link listWatch} (`manifold daemon`'s pod informer).
 *
 * @module
 */

import type { ListWatchResource } from "./list.ts";
import { parsePod, type Pod } from "./types.ts";
import { listWatch, type ListWatchHandler, type ListWatchOptions } from "./watch.ts";

/**
 * The pods bound to `nodeName`, as a {@link ListWatchResource}.
 * @param nodeName the node (`spec.nodeName`), e.g. `"worker-1"`
 * @returns the resource; its path carries the field selector, so list pages and watches keep it;
 *   parsed pods keep their raw object without `metadata.managedFields`
 * @throws {Error} when `nodeName` is empty (every pod of the cluster would match)
 * @example
 * ```ts
 * nodePodsListWatch("worker-1").path; // "/api/v1/pods?fieldSelector=spec.nodeName%3Dworker-1"
 * ```
 */
export function nodePodsListWatch(nodeName: string): ListWatchResource<Pod> {
  if (nodeName === "") throw new Error("the node name must not be empty");
  const q = new URLSearchParams({ fieldSelector: `spec.nodeName=${nodeName}` });
  return {
    path: `/api/v1/pods?${q}`,
    parse: (raw) => {
      const pod = parsePod(raw);
      // client-go's informers drop them too: the largest part of a pod, never read here.
      const meta = pod.raw.metadata as Record<string, unknown> | undefined;
      if (meta && "managedFields" in meta) delete meta.managedFields;
      return pod;
    },
    resourceVersion: (pod) => pod.metadata.resourceVersion,
  };
}

/**
 * {@link listWatch} of the pods bound to `nodeName` (see {@link nodePodsListWatch}); a 410
 * (`Expired`/`Gone`) re-lists as for every resource.
 * @param kube the API client
 * @param nodeName the node
 * @param handler receives the list, each change and progress
 * @param opts see {@link ListWatchOptions}
 * @returns when `opts.signal` aborts, or after the first list with `once`
 * @throws with `once` only, as {@link listWatch}
 */
export function watchNodePods(
  kube: Parameters<typeof listWatch>[0],
  nodeName: string,
  handler: ListWatchHandler<Pod>,
  opts: ListWatchOptions,
): Promise<void> {
  return listWatch(kube, handler, { ...opts, resource: nodePodsListWatch(nodeName) });
}
