/**
 * Hot-plug's index of the node's running sandboxes: per pod (`ns/name`), the key of its newest
 * live cache record (`createdAt`, as `PodNetnsIndex` picks the policy side's sandbox; a
 * tombstone, a damaged record or a record of an older pod of the same name — another UID —
 * is not a sandbox). After a sandbox restart the old record may stay live for a while (its
 * DEL not run yet, or lost with a node reboot); the newest is the pod's. Built by scanning the
 * cache directory, again only when the directory changed since the last scan (a pod without
 * a sandbox here, e.g. host network, must not cost a scan at each of its events) or when a
 * pass found its indexed record gone (`rescan`).
 *
 * @module
 */

import type { AttachmentCache, CacheKey, CacheRecord } from "../../multinet/cache/cache.ts";
import type { PodStore } from "../pod_informer.ts";

/** The pods' sandbox records (module doc). */
export class SandboxIndex {
  readonly #cache: AttachmentCache;
  readonly #pods: Pick<PodStore, "get">;
  /** Sandbox record by `ns/name`, from the last cache scan. */
  #index = new Map<string, CacheKey>();
  /** When the last cache scan started (`Date.now()`); 0: never. */
  #scannedAt = 0;
  /** Cache scans started, and the number of the one {@link SandboxIndex.#index} comes from. */
  #scans = 0;
  #indexScan = 0;

  /**
   * An empty index.
   * @param cache the attachment cache (`cniDir`)
   * @param pods the node's pods (a record whose UID differs from the pod's is skipped)
   */
  constructor(cache: AttachmentCache, pods: Pick<PodStore, "get">) {
    this.#cache = cache;
    this.#pods = pods;
  }

  /**
   * Forgets a pod's entry (its record was found gone, or the pod left).
   * @param k `ns/name`
   */
  delete(k: string): void {
    this.#index.delete(k);
  }

  /**
   * The pod's sandbox record key: from the index, else from a scan of the cache.
   * @param namespace the pod's namespace
   * @param name the pod's name
   * @param rescan scan even when the cache directory did not change since the last scan
   * @returns the key of the pod's newest live record, or undefined when it has none here
   * @throws {CniError} code 5 when the cache directory cannot be listed
   */
  async sandboxOf(
    namespace: string,
    name: string,
    rescan = false,
  ): Promise<CacheKey | undefined> {
    const k = `${namespace}/${name}`;
    const known = this.#index.get(k);
    if (known && !rescan) return known;
    // A pod without a sandbox here (host network, not started yet) must not cost a scan at
    // each of its events: scan again only when the cache directory changed since the last
    // scan (mtime, compared with a 1 s margin for its ms precision).
    const mtime = (await Deno.stat(this.#cache.dir).catch(() => undefined))?.mtime?.getTime();
    if (mtime === undefined) return undefined;
    if (!rescan && mtime < this.#scannedAt - 1000) return undefined;
    this.#scannedAt = Date.now();
    const scan = ++this.#scans;
    const index = new Map<string, CacheKey>(); // filled, then swapped in (workers scan concurrently)
    const createdAt = new Map<string, string>();
    for (const key of await this.#cache.list()) {
      let record: CacheRecord | undefined;
      try {
        record = await this.#cache.read(key.containerId, key.ifName);
      } catch { /* damaged: not a running sandbox */ }
      if (!record || record.deletedAt || !record.pod.name) continue;
      const rk = `${record.pod.namespace}/${record.pod.name}`;
      const held = this.#pods.get(record.pod.namespace, record.pod.name);
      // A record of an older pod of the same name is not this pod's sandbox.
      if (held && record.pod.uid && held.metadata.uid && held.metadata.uid !== record.pod.uid) {
        continue;
      }
      const newest = createdAt.get(rk);
      if (newest !== undefined && newest > record.createdAt) continue;
      index.set(rk, key);
      createdAt.set(rk, record.createdAt);
    }
    // Only over an older scan's: a slow scan that listed before a newer one must not hide what
    // that one found (the mtime gate above would then never scan for it again).
    if (scan > this.#indexScan) {
      this.#index = index;
      this.#indexScan = scan;
    }
    return index.get(k);
  }
}
