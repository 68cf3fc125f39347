/**
 * The KEP-3698 PodNetwork controller (`manifold controller`): five list + watch loops
 * (lib/k8s/watch.ts) keep PodNetworks, PodNetworkAttachments, NADs, pods (only their
 * network references) and namespaces (only their labels) in memory; any change schedules one level-triggered pass
 * (reconcile.ts) over everything, at most one pass at a time, debounced. No pass runs before
 * every collection has been listed once (a finalizer must never be removed because the pods
 * were not listed yet), and a pass also runs every `resyncMs` to retry failed writes.
 *
 * @module
 */

import type { KubeClient } from "../k8s/client.ts";
import {
  parsePodNetwork,
  parsePodNetworkAttachment,
  type PodNetwork,
  type PodNetworkAttachment,
  podNetworkAttachmentPath,
  podNetworkPath,
} from "../k8s/multinetwork.ts";
import type { NetworkAttachmentDefinition } from "../k8s/types.ts";
import {
  listWatch,
  type ListWatchHandler,
  type ListWatchOptions,
  type ListWatchResource,
  NAD_LIST_WATCH,
} from "../k8s/watch.ts";
import type { Logger } from "../log/mod.ts";
import { parsePodNetworkAnnotation } from "../multinet/plan/pod_network_annotation.ts";
import { PODNETWORKS_ANNOTATION } from "../multinet/types.ts";
import { errorText } from "../util/text.ts";
import type { LifecyclePolicy, PodReferences, Snapshot } from "./conditions.ts";
import { type PassReport, reconcileAll } from "./reconcile.ts";

/** Options of {@link runController}. */
export interface ControllerOptions {
  /** Stops the controller; {@link runController} then resolves. */
  signal: AbortSignal;
  /** Receives the passes' writes and the loops' failures. */
  logger: Logger;
  /** Provider and isolation. */
  policy: LifecyclePolicy;
  /** Wait after a change before a pass, ms (batches bursts); default 100. */
  debounceMs?: number;
  /** Period of passes without changes, ms; default 60 000. */
  resyncMs?: number;
  /** Called after each pass (tests, metrics). */
  onPass?: (report: PassReport) => void;
  /** Timing of the list/watch loops (tests). */
  timing?: Omit<ListWatchOptions, "signal" | "logger" | "once">;
}

/** A pod with its `metadata.resourceVersion`, for the list/watch loop. */
interface PodItem extends PodReferences {
  resourceVersion?: string;
}

/** Pods of all namespaces, reduced to their KEP-3698 references (none for hostNetwork pods). */
const POD_LIST_WATCH: ListWatchResource<PodItem> = {
  path: "/api/v1/pods",
  parse(raw) {
    const o = raw as {
      metadata?: {
        name?: string;
        namespace?: string;
        resourceVersion?: string;
        annotations?: Record<string, string>;
      };
      spec?: { hostNetwork?: boolean };
      status?: { phase?: string };
    };
    const text = o.metadata?.annotations?.[PODNETWORKS_ANNOTATION];
    let entries: PodReferences["entries"] = [];
    // A hostNetwork pod never gets an ADD: it uses no network (KEP: no networks with hostNetwork).
    if (typeof text === "string" && text.trim() !== "" && o.spec?.hostNetwork !== true) {
      try {
        entries = parsePodNetworkAnnotation(text);
      } catch { /* an invalid list references nothing (its ADD fails anyway) */ }
    }
    return {
      namespace: String(o.metadata?.namespace ?? ""),
      name: String(o.metadata?.name ?? ""),
      phase: String(o.status?.phase ?? ""),
      entries,
      resourceVersion: o.metadata?.resourceVersion,
    };
  },
  resourceVersion: (p) => p.resourceVersion,
};

/** A namespace's labels (PodNetwork `spec.allowedNamespaces` selects on them). */
interface NamespaceItem {
  name: string;
  labels: Record<string, string>;
  resourceVersion?: string;
}

const NAMESPACE_LIST_WATCH: ListWatchResource<NamespaceItem> = {
  path: "/api/v1/namespaces",
  parse(raw) {
    const m = (raw as { metadata?: { name?: string; labels?: unknown; resourceVersion?: string } })
      .metadata;
    const labels: Record<string, string> = {};
    if (m?.labels && typeof m.labels === "object") {
      for (const [k, v] of Object.entries(m.labels)) if (typeof v === "string") labels[k] = v;
    }
    return { name: String(m?.name ?? ""), labels, resourceVersion: m?.resourceVersion };
  },
  resourceVersion: (n) => n.resourceVersion,
};

const PODNETWORK_LIST_WATCH: ListWatchResource<PodNetwork> = {
  path: podNetworkPath(),
  parse: parsePodNetwork,
  resourceVersion: (o) => o.metadata.resourceVersion,
};

const ATTACHMENT_LIST_WATCH: ListWatchResource<PodNetworkAttachment> = {
  path: podNetworkAttachmentPath(),
  parse: parsePodNetworkAttachment,
  resourceVersion: (o) => o.metadata.resourceVersion,
};

/** A map kept equal to a collection by list + watch; `synced` after the first list. */
function store<T>(
  key: (item: T) => string,
  map: Map<string, T>,
  changed: () => void,
): ListWatchHandler<T> & { synced: boolean } {
  const h = {
    synced: false,
    replace(items: T[]) {
      map.clear();
      for (const item of items) map.set(key(item), item);
      h.synced = true;
      changed();
      return Promise.resolve();
    },
    apply(c: { type: string; object: T }) {
      if (c.type === "DELETED") map.delete(key(c.object));
      else map.set(key(c.object), c.object);
      changed();
      return Promise.resolve();
    },
    progress: () => Promise.resolve(),
  };
  return h;
}

/**
 * Runs the controller until `opts.signal` aborts. API failures never end it (the loops back
 * off and retry; failed writes are retried by the next pass).
 * @param kube the API client (list/watch of the four kinds; patch of PodNetworks and
 *   PodNetworkAttachments and their status).
 * @param opts stop signal, logger, policy, timing.
 * @returns when stopped.
 */
export async function runController(kube: KubeClient, opts: ControllerOptions): Promise<void> {
  const { signal, logger } = opts;
  const snap: Snapshot = {
    podNetworks: new Map(),
    attachments: new Map(),
    nads: new Map(),
    pods: new Map(),
    namespaces: new Map(),
  };
  const namespaceItems = new Map<string, NamespaceItem>();
  let dirty = true;
  let wake: () => void = () => {};
  const changed = () => {
    dirty = true;
    wake();
  };
  const stores = [
    store<PodNetwork>((o) => o.metadata.name, snap.podNetworks, changed),
    store<PodNetworkAttachment>(
      (o) => `${o.metadata.namespace}/${o.metadata.name}`,
      snap.attachments,
      changed,
    ),
    store<NetworkAttachmentDefinition>(
      (o) => `${o.metadata.namespace}/${o.metadata.name}`,
      snap.nads,
      changed,
    ),
    store<PodItem>((o) => `${o.namespace}/${o.name}`, snap.pods, changed),
    store<NamespaceItem>((o) => o.name, namespaceItems, () => {
      snap.namespaces = new Map([...namespaceItems].map(([k, v]) => [k, v.labels]));
      changed();
    }),
  ] as const;
  const common = { ...opts.timing, signal, logger };
  const loops = [
    listWatch(kube, stores[0], { ...common, resource: PODNETWORK_LIST_WATCH }),
    listWatch(kube, stores[1], { ...common, resource: ATTACHMENT_LIST_WATCH }),
    listWatch(kube, stores[2], { ...common, resource: NAD_LIST_WATCH }),
    listWatch(kube, stores[3], { ...common, resource: POD_LIST_WATCH }),
    listWatch(kube, stores[4], { ...common, resource: NAMESPACE_LIST_WATCH }),
  ];
  const debounceMs = opts.debounceMs ?? 100;
  const resyncMs = opts.resyncMs ?? 60_000;
  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const t = setTimeout(done, ms);
      function done() {
        clearTimeout(t);
        signal.removeEventListener("abort", done);
        wake = () => {};
        resolve();
      }
      wake = done;
      signal.addEventListener("abort", done, { once: true });
    });
  let synced = false;
  while (!signal.aborted) {
    if (!dirty) await sleep(resyncMs);
    if (signal.aborted) break;
    if (!stores.every((s) => s.synced)) {
      await sleep(resyncMs);
      continue;
    }
    if (!synced) {
      synced = true;
      logger.info("controller synced", {
        podNetworks: snap.podNetworks.size,
        attachments: snap.attachments.size,
        nads: snap.nads.size,
        pods: snap.pods.size,
      });
    }
    await new Promise((r) => setTimeout(r, debounceMs));
    dirty = false;
    try {
      const report = await reconcileAll(kube, snap, opts.policy, logger);
      opts.onPass?.(report);
    } catch (e) {
      logger.error("reconcile pass failed", { error: errorText(e) });
    }
  }
  await Promise.allSettled(loops);
}
