/**
 * Where a pod's network namespace is on this node, for MultiNetworkPolicy: an index over the
 * attachment cache (`<cniDir>/<containerId>@<ifName>.json`, lib/multinet/cache/cache.ts), whose
 * records hold the pod, `netns` (CNI_NETNS at ADD) and `createdAt`. Read-only: files are
 * decoded in place (never migrated), tombstones (`deletedAt`) and damaged files are skipped.
 * A file is re-read only when its inode, modification time or size changed.
 *
 * @module
 */

import { AttachmentCache } from "../../multinet/cache/cache.ts";
import { type CacheRecord, decodeRecord } from "../../multinet/cache/record.ts";

/** A live sandbox of a pod, from its cache record. */
export interface PodSandbox {
  /** CNI_CONTAINERID. */
  containerId: string;
  /** CNI_NETNS at ADD, e.g. `"/var/run/netns/cni-…"`. */
  netns: string;
  /** `metadata.uid` from K8S_POD_UID; `""` when the runtime did not pass it. */
  uid: string;
  /** When the record was first written, ISO-8601. */
  createdAt: string;
}

interface Entry {
  stamp: string;
  record: CacheRecord | undefined;
}

/** The pods with a sandbox in the cache, refreshed on demand. */
export class PodNetnsIndex {
  readonly #cache: AttachmentCache;
  #files = new Map<string, Entry>();
  #byPod = new Map<string, PodSandbox[]>();

  /**
   * An empty index over a cache directory.
   *
   * @param cniDir the cache directory (`cniDir`, default `/var/lib/cni/manifold`)
   */
  constructor(cniDir: string) {
    this.#cache = new AttachmentCache(cniDir);
  }

  /**
   * Re-reads the directory: new or changed files are decoded, removed ones forgotten.
   *
   * @returns how many pods have a live sandbox
   * @throws {CniError} code 5 when the directory cannot be listed
   */
  async refresh(): Promise<number> {
    const next = new Map<string, Entry>();
    for (const f of await this.#cache.files()) {
      let stamp: string;
      try {
        const st = await Deno.stat(f.path);
        stamp = `${st.ino}:${st.mtime?.getTime()}:${st.size}`; // atomic writes rename: new inode
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
        record = undefined; // gone or damaged: no sandbox to police
      }
      next.set(f.path, { stamp, record });
    }
    this.#files = next;
    const byPod = new Map<string, PodSandbox[]>();
    for (const { record: r } of next.values()) {
      if (!r || r.deletedAt || !r.netns || !r.pod.name) continue;
      const k = `${r.pod.namespace}/${r.pod.name}`;
      const list = byPod.get(k) ?? [];
      list.push({
        containerId: r.containerId,
        netns: r.netns,
        uid: r.pod.uid,
        createdAt: r.createdAt,
      });
      byPod.set(k, list);
    }
    for (const list of byPod.values()) list.sort((a, b) => b.createdAt.localeCompare(a.createdAt));
    this.#byPod = byPod;
    return byPod.size;
  }

  /**
   * The pod's newest live sandbox with a matching uid (a record without uid matches any).
   *
   * @param pod namespace, name and (optional) `metadata.uid`
   * @returns its sandbox, or `undefined` when it has none on this node
   */
  sandboxOf(pod: { namespace: string; name: string; uid?: string }): PodSandbox | undefined {
    const list = this.#byPod.get(`${pod.namespace}/${pod.name}`);
    return list?.find((s) => !pod.uid || !s.uid || s.uid === pod.uid);
  }
}
