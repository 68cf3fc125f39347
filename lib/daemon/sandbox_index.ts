/**
 * The node's one answer to "which live sandbox, netns and interfaces does this pod have here?",
 * for hot-plug (which record to change) and the MultiNetworkPolicy agent (which netns to
 * police): an index over the attachment cache (`<cniDir>/<containerId>@<ifName>.json`,
 * lib/multinet/cache/cache.ts), whose records hold the pod, `netns` (CNI_NETNS at ADD), the
 * interface and `createdAt`.
 *
 * - Read-only: files are decoded in place (never migrated); tombstones (`deletedAt`), damaged
 *   files and records without a pod name are not sandboxes. A file is re-read only when its
 *   inode, modification time or size changed (atomic writes rename: a new inode).
 * - A pod's sandboxes are its live records grouped by container, newest (`createdAt`) first:
 *   after a sandbox restart the old record may stay live for a while (its DEL not run yet, or
 *   lost with a node reboot); the newest sandbox whose UID matches is the pod's. A record of
 *   an older pod of the same name (another UID) is never this pod's.
 * - Refreshes are shared: a refresh asked for while one runs waits for it and then runs once
 *   more for every caller that asked meanwhile (one read, and no caller gets a view older than
 *   its call).
 *
 * @module
 */

import type { AttachmentCache, CacheKey } from "../multinet/cache/cache.ts";
import { type CacheRecord, decodeRecord } from "../multinet/cache/record.ts";
import type { NetworkStatus } from "../multinet/types.ts";

/** A live sandbox of a pod, from its cache records. */
export interface PodSandbox {
  /** CNI_CONTAINERID. */
  containerId: string;
  /** CNI_NETNS at ADD, e.g. `"/var/run/netns/cni-…"`; `""` when the record has none. */
  netns: string;
  /** `metadata.uid` from K8S_POD_UID; `""` when the runtime did not pass it. */
  uid: string;
  /** When the sandbox's newest record was first written, ISO-8601. */
  createdAt: string;
  /** Every CNI_IFNAME the runtime attached in this sandbox (one record each), sorted. */
  ifNames: string[];
  /** The key of the sandbox's newest record (the one hot-plug changes). */
  key: CacheKey;
  /**
   * The network-status Manifold computed and verified against the kernel for the newest
   * record (its addresses are the pod's real ones, whatever the pod's annotation says);
   * `undefined` while that record has none (ADD not finished).
   */
  networkStatus?: NetworkStatus[];
}

/** A pod as the index is asked about it. */
export interface SandboxQuery {
  /** The pod's namespace. */
  namespace: string;
  /** The pod's name. */
  name: string;
  /** `metadata.uid`; absent or `""` matches a sandbox of any UID. */
  uid?: string;
}

interface Entry {
  stamp: string;
  record: CacheRecord | undefined;
}

/** The pods with a live sandbox in the cache (module doc). */
export class SandboxIndex {
  readonly #cache: AttachmentCache;
  #files = new Map<string, Entry>();
  #byPod = new Map<string, PodSandbox[]>();
  #running: Promise<number> | undefined;
  #next: Promise<number> | undefined;
  /** When the last refresh started (`Date.now()`); 0: never. */
  #refreshedAt = 0;
  #reads = 0;

  /**
   * An empty index over the attachment cache.
   *
   * @param cache the attachment cache (`cniDir`, default `/var/lib/cni/manifold`)
   */
  constructor(cache: AttachmentCache) {
    this.#cache = cache;
  }

  /** How many reads of the cache directory have started (shared refreshes count once). */
  get reads(): number {
    return this.#reads;
  }

  /**
   * Re-reads the cache directory: new or changed files are decoded, removed ones forgotten.
   * Shared between concurrent callers (module doc).
   *
   * @returns how many pods have a live sandbox
   * @throws {CniError} code 5 when the directory cannot be listed
   */
  refresh(): Promise<number> {
    if (!this.#running) {
      this.#running = this.#read().finally(() => this.#running = undefined);
      return this.#running;
    }
    this.#next ??= this.#running.catch(() => 0).then(() => {
      this.#next = undefined;
      return this.refresh();
    });
    return this.#next;
  }

  /**
   * The pod's newest live sandbox with a matching UID, as of the last refresh.
   *
   * @param pod namespace, name and (optional) `metadata.uid`
   * @returns its sandbox, or `undefined` when it has none on this node
   */
  sandboxOf(pod: SandboxQuery): PodSandbox | undefined {
    const list = this.#byPod.get(`${pod.namespace}/${pod.name}`);
    return list?.find((s) => !pod.uid || !s.uid || s.uid === pod.uid);
  }

  /**
   * The pod's sandbox, refreshing first when the index may not know it: when `rescan` is set,
   * or when the pod has none indexed and the cache directory changed since the last refresh
   * (a pod without a sandbox here — host network, not started yet — must not cost a read at
   * each of its events; mtime compared with a 1 s margin for its precision).
   *
   * @param pod namespace, name and (optional) `metadata.uid`
   * @param rescan refresh even when the pod is indexed (its indexed record was found gone)
   * @returns its sandbox, or `undefined` when it has none on this node
   * @throws {CniError} code 5 when the directory cannot be listed
   */
  async lookup(pod: SandboxQuery, rescan = false): Promise<PodSandbox | undefined> {
    if (!rescan) {
      const known = this.sandboxOf(pod);
      if (known) return known;
      const mtime = (await Deno.stat(this.#cache.dir).catch(() => undefined))?.mtime?.getTime();
      if (mtime === undefined || mtime < this.#refreshedAt - 1000) return undefined;
    }
    await this.refresh();
    return this.sandboxOf(pod);
  }

  async #read(): Promise<number> {
    this.#reads++;
    this.#refreshedAt = Date.now();
    const next = new Map<string, Entry>();
    for (const f of await this.#cache.files()) {
      let stamp: string;
      try {
        const st = await Deno.stat(f.path);
        stamp = `${st.ino}:${st.mtime?.getTime()}:${st.size}`;
      } catch {
        continue; // removed meanwhile
      }
      const old = this.#files.get(f.path);
      if (old && old.stamp === stamp) {
        next.set(f.path, old);
        continue;
      }
      let record: CacheRecord | undefined;
      try {
        record = decodeRecord(f.path, await Deno.readTextFile(f.path));
      } catch {
        record = undefined; // gone or damaged: not a sandbox
      }
      next.set(f.path, { stamp, record });
    }
    this.#files = next;
    this.#byPod = groupSandboxes([...next.values()].map((e) => e.record));
    return this.#byPod.size;
  }
}

/** Live records → per `ns/name`, the pod's sandboxes (grouped by container), newest first. */
function groupSandboxes(records: (CacheRecord | undefined)[]): Map<string, PodSandbox[]> {
  const byContainer = new Map<string, PodSandbox>();
  const podOf = new Map<string, string>();
  for (const r of records) {
    if (!r || r.deletedAt || !r.pod.name) continue;
    const s = byContainer.get(r.containerId);
    if (!s) {
      byContainer.set(r.containerId, {
        containerId: r.containerId,
        netns: r.netns ?? "",
        uid: r.pod.uid,
        createdAt: r.createdAt,
        ifNames: [r.ifName],
        key: { containerId: r.containerId, ifName: r.ifName },
        networkStatus: r.networkStatus,
      });
      podOf.set(r.containerId, `${r.pod.namespace}/${r.pod.name}`);
      continue;
    }
    s.ifNames.push(r.ifName);
    if (r.createdAt > s.createdAt) {
      s.createdAt = r.createdAt;
      s.key = { containerId: r.containerId, ifName: r.ifName };
      s.networkStatus = r.networkStatus;
      if (r.netns) s.netns = r.netns;
    }
  }
  const byPod = new Map<string, PodSandbox[]>();
  for (const [containerId, s] of byContainer) {
    s.ifNames.sort();
    const k = podOf.get(containerId)!;
    const list = byPod.get(k) ?? [];
    list.push(s);
    byPod.set(k, list);
  }
  for (const list of byPod.values()) list.sort((a, b) => b.createdAt.localeCompare(a.createdAt));
  return byPod;
}
