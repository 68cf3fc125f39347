/**
 * The `manifold_attachments` gauge's source: live attachments in the attachment cache, counted
 * once at start (every record file read) and then kept up to date per request by re-reading
 * only the record the request touched: one small file read and a `JSON.parse`, off the
 * request's answer path. Memory: one map entry per record with live attachments.
 *
 * A live attachment is one whose delegate ADD succeeded (`state: "added"`) in a record that is
 * not a tombstone. Requests run in-process by a forwarder while the daemon was unreachable are
 * seen at the daemon's next start (or the next request for the same attachment).
 *
 * @module
 */

import type { AttachmentCache } from "../multinet/cache/cache.ts";
import type { Logger } from "../log/mod.ts";
import { errorText } from "../util/text.ts";

/**
 * Live attachments of a record file's text: 0 for a tombstone or a text that is not a record,
 * else the attachments whose ADD completed. A plain `JSON.parse`, no schema: the count only
 * reads `deletedAt` and each attachment's `state` (the handlers validate what they use).
 *
 * @param text the record file's content
 * @returns the count
 * @example
 * ```ts
 * liveAttachments('{"attachments":[{"state":"added"},{"state":"adding"}]}'); // 1
 * liveAttachments('{"deletedAt":"2026-01-01T00:00:00Z","attachments":[]}'); // 0
 * ```
 */
export function liveAttachments(text: string): number {
  let record: unknown;
  try {
    record = JSON.parse(text);
  } catch {
    return 0;
  }
  const r = record as { deletedAt?: unknown; attachments?: unknown } | null;
  if (typeof r !== "object" || r === null || r.deletedAt !== undefined) return 0;
  if (!Array.isArray(r.attachments)) return 0;
  return r.attachments.filter((a) => (a as { state?: unknown } | null)?.state === "added").length;
}

/** Counts the cache's live attachments and reports the total after every change. */
export class AttachmentTally {
  readonly #cache: AttachmentCache;
  readonly #report: (count: number) => void;
  readonly #logger: Logger | undefined;
  /** Live attachments per record file path; records with none are left out. */
  readonly #counts = new Map<string, number>();
  #total = 0;
  /** Every scan and refresh runs after the previous one, in request completion order. */
  #queue: Promise<void> = Promise.resolve();

  /**
   * A tally reporting to `report`; counts nothing until its first scan.
   * @param cache the daemon's attachment cache (its `cniDir`)
   * @param report receives the total after each scan or refresh (the observer's `attachments`)
   * @param logger unreadable records and directories are logged here
   */
  constructor(
    cache: AttachmentCache,
    report: (count: number) => void,
    logger?: Logger,
  ) {
    this.#cache = cache;
    this.#report = report;
    this.#logger = logger;
  }

  /** The total as of the last completed scan or refresh. */
  get total(): number {
    return this.#total;
  }

  /**
   * Recounts every record of the cache (at start, after GC).
   *
   * @returns when done; never rejects (failures are logged, the old counts kept)
   */
  scan(): Promise<void> {
    return this.#enqueue(async () => {
      const next = new Map<string, number>();
      for (const file of await this.#cache.files()) {
        const n = await this.#read(file.path);
        if (n > 0) next.set(file.path, n);
      }
      this.#counts.clear();
      for (const [k, n] of next) this.#counts.set(k, n);
      this.#recount();
    });
  }

  /**
   * Re-reads one attachment's record after a request for it finished.
   *
   * @param containerId CNI_CONTAINERID of the request
   * @param ifName CNI_IFNAME of the request
   * @returns when done; never rejects (a bad key is logged)
   */
  refresh(containerId: string, ifName: string): Promise<void> {
    return this.#enqueue(async () => {
      const path = this.#cache.path(containerId, ifName);
      const n = await this.#read(path);
      if (n > 0) this.#counts.set(path, n);
      else this.#counts.delete(path);
      this.#recount();
    });
  }

  #enqueue(step: () => Promise<void>): Promise<void> {
    this.#queue = this.#queue.then(step).catch((e) => {
      this.#logger?.warn("cannot count the cached attachments", { error: errorText(e) });
    });
    return this.#queue;
  }

  /** The live attachments of one record file; 0 when it is missing or unreadable. */
  async #read(path: string): Promise<number> {
    try {
      return liveAttachments(await Deno.readTextFile(path));
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) {
        this.#logger?.warn("unreadable cache record not counted", { path, error: errorText(e) });
      }
      return 0;
    }
  }

  #recount(): void {
    let total = 0;
    for (const n of this.#counts.values()) total += n;
    this.#total = total;
    this.#report(total);
  }
}
