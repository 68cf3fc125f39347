/**
 * The daemon's node-scoped pod informer: a list+watch of the pods bound to this node
 * (`fieldSelector=spec.nodeName=NODE`, lib/k8s/pod_list_watch.ts, with the list/watch loop's
 * 410 re-list) kept in memory. It is the daemon's pod source — an ADD whose runtime passes no
 * pod annotations reads the pod here, with no GET — and it tells hot-plug (hotplug.ts) which
 * pods changed.
 *
 * A pod not held yet (the sandbox is created right after the pod binds, and the watch may lag
 * behind kubelet), or held with another UID than the runtime's (a pod recreated under the same
 * name), is read from the API instead.
 *
 * @module
 */

import type { KubeClient, ListWatchHandler, Pod, WatchChange } from "../k8s/mod.ts";
import { watchNodePods } from "../k8s/mod.ts";
import type { Logger } from "../log/mod.ts";
import { podInfoOf } from "../multinet/nad/api_sources.ts";
import type { PodSource } from "../multinet/deps.ts";

/** What a listener of {@link PodStore.onChange} is told: the pod's key and its new state. */
export interface PodChange {
  /** `metadata.namespace`. */
  namespace: string;
  /** `metadata.name`. */
  name: string;
  /** The pod as now held; undefined when it left the node (deleted). */
  pod: Pod | undefined;
}

/**
 * The pods of this node as the watch last reported them. Listeners hear of every pod that
 * was added, changed (a new resourceVersion) or removed, by a watch event or a re-list.
 */
export class PodStore implements ListWatchHandler<Pod> {
  #byKey = new Map<string, Pod>();
  #synced = false;
  #listeners = new Set<(change: PodChange) => void>();

  /** True once a complete list was received (part of the daemon's readiness). */
  get synced(): boolean {
    return this.#synced;
  }

  /** Number of pods held. */
  get size(): number {
    return this.#byKey.size;
  }

  /**
   * A pod held, by namespace and name.
   * @returns the pod, or undefined when not held
   */
  get(namespace: string, name: string): Pod | undefined {
    return this.#byKey.get(key(namespace, name));
  }

  /** Every pod held, in no particular order. */
  pods(): Pod[] {
    return [...this.#byKey.values()];
  }

  /**
   * Calls `fn` for every later change (never for the pods held now: read {@link pods}).
   * A throwing listener is ignored.
   * @returns a function that unsubscribes
   */
  onChange(fn: (change: PodChange) => void): () => void {
    this.#listeners.add(fn);
    return () => this.#listeners.delete(fn);
  }

  /** See {@link ListWatchHandler.replace}: the map becomes `items`; differences are told. */
  replace(items: Pod[], _resourceVersion: string): Promise<void> {
    const next = new Map<string, Pod>();
    for (const pod of items) next.set(key(pod.metadata.namespace, pod.metadata.name), pod);
    const old = this.#byKey;
    this.#byKey = next;
    this.#synced = true;
    for (const [k, pod] of next) {
      if (old.get(k)?.metadata.resourceVersion !== pod.metadata.resourceVersion) {
        this.#tell({ namespace: pod.metadata.namespace, name: pod.metadata.name, pod });
      }
    }
    for (const [k, pod] of old) {
      if (!next.has(k)) {
        this.#tell({ namespace: pod.metadata.namespace, name: pod.metadata.name, pod: undefined });
      }
    }
    return Promise.resolve();
  }

  /** See {@link ListWatchHandler.apply}. */
  apply(change: WatchChange<Pod>): Promise<void> {
    const { namespace, name } = change.object.metadata;
    const k = key(namespace, name);
    if (change.type === "DELETED") {
      if (this.#byKey.delete(k)) this.#tell({ namespace, name, pod: undefined });
    } else {
      this.#byKey.set(k, change.object);
      this.#tell({ namespace, name, pod: change.object });
    }
    return Promise.resolve();
  }

  /** See {@link ListWatchHandler.progress}: nothing to do. */
  progress(_resourceVersion: string): Promise<void> {
    return Promise.resolve();
  }

  /**
   * A pod source reading this store: a pod held (with the UID the caller expects, when it
   * names one) is answered from memory; otherwise `fallback` (the API) is asked.
   * @param fallback the API source
   * @returns the PodSource the daemon's requests use
   */
  source(fallback: PodSource): PodSource {
    return {
      get: async (namespace, name, uid) => {
        const pod = this.#byKey.get(key(namespace, name));
        if (pod && (!uid || !pod.metadata.uid || pod.metadata.uid === uid)) {
          return podInfoOf(pod); // with the Pod itself when it has DRA claims
        }
        return await fallback.get(namespace, name, uid);
      },
    };
  }

  #tell(change: PodChange): void {
    for (const fn of this.#listeners) {
      try {
        fn(change);
      } catch { /* a listener's problem */ }
    }
  }
}

/** A running pod informer. */
export interface PodInformer {
  /** The pods of the node. */
  store: PodStore;
  /** Settles when the list+watch loop ends (its `signal` aborted); never rejects. */
  done: Promise<void>;
}

/**
 * Starts the list+watch of the pods bound to `nodeName` into a new {@link PodStore}.
 * @param kube the API client (RBAC: pods `list`, `watch`)
 * @param nodeName this node (`--node-name`, `$NODE_NAME`)
 * @param opts `signal` stops it; `logger` gets the loop's lines
 * @returns the store (filled once the first list arrives) and the loop's end
 */
export function startPodInformer(
  kube: KubeClient,
  nodeName: string,
  opts: { signal: AbortSignal; logger: Logger },
): PodInformer {
  const store = new PodStore();
  const done = watchNodePods(kube, nodeName, store, opts)
    .catch((e) => opts.logger.error("pod watch ended", { error: String(e) }));
  return { store, done };
}

function key(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}
