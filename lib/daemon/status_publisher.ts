/**
 * `"statusPublish": "async"`: the daemon writes network-status (and KEP-3698 networks-status)
 * after ADD returned. ADD queues the status once its final cache record is durable
 * (lib/multinet/verbs/add.ts); the publisher:
 * - coalesces per pod: a newer status of the same pod replaces one not yet written (the
 *   newest sandbox wins), and one pod has at most one PATCH in flight;
 * - checks, just before writing, that the sandbox's record is still live (a sandbox DELeted
 *   meanwhile is not published);
 * - writes with the pod's UID as precondition: a pod deleted and recreated under the same name
 *   (409) or deleted (404) is dropped, never retried;
 * - writes the sandbox record's CURRENT status (whoever wrote it last: ADD, hot-plug, KEP),
 *   never the copy queued at ADD time, so a hot-plug during an outage is not overwritten;
 * - gives up after {@link PERMANENT_ATTEMPTS} attempts failing with a permanent 4xx (400, 403,
 *   a 422 other than the UID precondition), with a `StatusPublishFailed` Warning event on the
 *   pod and `manifold_status_publish_gave_up_total`;
 * - retries every other failure with exponential back-off (500 ms doubling, 30 s cap, ±20 %
 *   jitter), after the API client's own retries (which honour `Retry-After`); a `Retry-After`
 *   the client would not wait (longer than `apiDeadlineMs`) is waited here instead, exactly;
 * - sends the status's events (AddedInterface under `"events": "all"`) once it is written;
 * - after a restart, re-drives from the cache (level-triggered, {@link StatusPublisher.redrive}):
 *   every pod of this node whose newest live record's status differs from its annotation; a
 *   record without a pod UID is skipped (logged), never written with the API's current UID.
 *
 * @module
 */

import type { EventSink, QueuedStatus, StatusQueue, StatusSink } from "../multinet/deps.ts";
import type { AttachmentCache } from "../multinet/cache/cache.ts";
import type { CacheRecord } from "../multinet/cache/record.ts";
import { isStaticPod } from "../multinet/plan/pod.ts";
import { serializeNetworkStatus } from "../multinet/status/network_status.ts";
import { PodGoneError } from "../multinet/status/sinks.ts";
import { NETWORK_STATUS_ANNOTATION } from "../multinet/types.ts";
import type { Logger } from "../log/mod.ts";
import { startTimer, type Timer } from "../util/timer.ts";
import { errorText } from "../util/text.ts";

/** What the publisher reports (the metrics module implements it). */
export interface StatusPublishObserver {
  /** A status was written: seconds from its queueing (the oldest coalesced one) to the write. */
  published(lagSeconds: number): void;
  /** Statuses queued and not yet written (or dropped), after every change. */
  pending(count: number): void;
  /** A status was given up after {@link PERMANENT_ATTEMPTS} permanent failures. */
  gaveUp?(): void;
}

/** Attempts after which a status whose PATCH fails with a permanent 4xx is given up. */
export const PERMANENT_ATTEMPTS = 5;

/** The server's `Retry-After` (ms) a failed write carries (a KubeError's, through `cause`). */
function retryAfter(e: unknown): number | undefined {
  for (let x = e, depth = 0; x && depth < 4; depth++) {
    const ms = (x as { retryAfterMs?: unknown }).retryAfterMs;
    if (typeof ms === "number" && ms >= 0) return ms;
    x = (x as { cause?: unknown }).cause;
  }
  return undefined;
}

/** The HTTP status of a failed write (a KubeError, or a CniError made from one), else 0. */
function httpStatus(e: unknown): number {
  for (let x = e, depth = 0; x && depth < 4; depth++) {
    const s = (x as { status?: unknown }).status;
    if (typeof s === "number" && s > 0) return s;
    x = (x as { cause?: unknown }).cause;
  }
  return 0;
}

/** Options of {@link StatusPublisher}. */
export interface StatusPublisherOptions {
  /** Writes a status (the API sink: PATCH with the UID precondition). */
  sink: StatusSink;
  /** Where the statuses' events go (the `events` setting applied). */
  events: EventSink;
  /** The daemon's cache: a status is written only while its record is live. */
  cache: AttachmentCache;
  /** Metrics; absent: none. */
  observer?: StatusPublishObserver;
  /** The daemon's log. */
  logger: Logger;
  /** PATCHes in flight at most (distinct pods); default 16. */
  concurrency?: number;
  /** First retry delay, ms (doubled per failure); default 500. */
  backoffMs?: number;
  /** Cap on one retry delay, ms; default 30 000. */
  maxBackoffMs?: number;
}

/** The pod fields {@link StatusPublisher.redrive} reads (a Pod of the informer). */
export interface PodView {
  /** `metadata.uid` and `metadata.annotations`. */
  metadata: { uid?: string; annotations?: Record<string, string> };
}

interface Pending {
  item: QueuedStatus;
  /** performance.now() when the oldest status this one replaced was queued. */
  since: number;
  /** Failed attempts so far. */
  failures: number;
  /** performance.now() before which it is not tried. */
  due: number;
}

/** The background network-status writer of `"statusPublish": "async"` (see the module doc). */
export class StatusPublisher implements StatusQueue {
  #opts: StatusPublisherOptions;
  #byPod = new Map<string, Pending>();
  #inFlight = new Map<string, Promise<void>>();
  #timer: Timer | undefined;
  #timerDue = Infinity;
  #stopped = false;

  /**
   * Creates the publisher; it writes as soon as something is queued.
   * @param opts see {@link StatusPublisherOptions}
   */
  constructor(opts: StatusPublisherOptions) {
    this.#opts = opts;
  }

  /** Statuses queued and not yet written. */
  get pending(): number {
    return this.#byPod.size;
  }

  /**
   * Queues a sandbox's status (its final record must be durable); returns at once.
   * @param item the status, its pod (UID precondition) and its events
   */
  enqueue(item: QueuedStatus): void {
    if (this.#stopped) return;
    const key = `${item.pod.namespace}/${item.pod.name}`;
    const now = performance.now();
    const prev = this.#byPod.get(key);
    // The re-drive queues a sandbox's status without events: keep those ADD queued for it
    // (unless that write is in flight: it sends them).
    const same = prev && !this.#inFlight.has(key) && prev.item.containerId === item.containerId &&
      prev.item.ifName === item.ifName;
    if (same && item.events.length === 0) item = { ...item, events: prev.item.events };
    // A status waiting out a back-off or a server's Retry-After keeps waiting (the re-drive at
    // start may queue the same sandbox again); the same sandbox keeps its failure count.
    const waiting = prev && !this.#inFlight.has(key) ? prev : undefined;
    this.#byPod.set(key, {
      item,
      since: prev?.since ?? now,
      failures: same ? prev.failures : 0,
      due: Math.max(now, waiting?.due ?? now),
    });
    this.#opts.observer?.pending(this.#byPod.size);
    this.#pump();
  }

  /**
   * Level-triggered start: queues the newest live record of every pod whose network-status
   * annotation differs from the record (a daemon killed after ADD returned and before the
   * write), with the UID the API has as precondition. Records of pods the API no longer has,
   * or has with another UID (replaced; static pods excepted), are skipped.
   * @param lookup the pod of this node by namespace and name (the synced pod informer)
   * @returns how many statuses were queued
   * @throws {CniError} 5 when the cache directory cannot be listed
   */
  async redrive(lookup: (namespace: string, name: string) => PodView | undefined): Promise<number> {
    const { cache, logger } = this.#opts;
    const newest = new Map<string, CacheRecord>();
    for (const key of await cache.list()) {
      const record = await cache.read(key.containerId, key.ifName).catch(() => undefined);
      if (!record || record.deletedAt || !record.networkStatus || !record.pod.name) continue;
      if (!record.pod.uid) {
        logger.info("record without a pod UID not re-driven", {
          pod: `${record.pod.namespace}/${record.pod.name}`,
          containerId: record.containerId,
        });
        continue;
      }
      const podKey = `${record.pod.namespace}/${record.pod.name}`;
      const known = newest.get(podKey);
      if (!known || known.createdAt < record.createdAt) newest.set(podKey, record);
    }
    let queued = 0;
    for (const record of newest.values()) {
      const pod = lookup(record.pod.namespace, record.pod.name);
      if (!pod) continue;
      const annotations = pod.metadata.annotations ?? {};
      const uid = pod.metadata.uid ?? "";
      const static_ = isStaticPod(annotations);
      if (uid && record.pod.uid !== uid && !static_) continue;
      const extra = record.statusAnnotations ?? {};
      const text = serializeNetworkStatus(record.networkStatus!);
      const same = annotations[NETWORK_STATUS_ANNOTATION] === text &&
        Object.entries(extra).every(([k, v]) => annotations[k] === v);
      if (same) continue;
      this.enqueue({
        // The record's UID (a static pod's mirror has its own: the API's, as ADD wrote it).
        pod: {
          ...record.pod,
          uid: static_ && uid ? uid : record.pod.uid,
          infraContainerId: record.containerId,
        },
        containerId: record.containerId,
        ifName: record.ifName,
        entries: record.networkStatus!,
        extra: record.statusAnnotations,
        events: [],
      });
      queued++;
    }
    if (queued > 0) logger.info("network-status re-driven from the cache", { pods: queued });
    return queued;
  }

  /**
   * Stops writing: waits for the PATCHes in flight, at most `timeoutMs`, and forgets the rest
   * (the next start re-drives them from the cache). Idempotent.
   * @param timeoutMs bound on the wait, ms; default 2 000
   */
  async stop(timeoutMs = 2000): Promise<void> {
    this.#stopped = true;
    this.#timer?.cancel();
    let timer: Timer | undefined;
    await Promise.race([
      Promise.allSettled([...this.#inFlight.values()]),
      new Promise<void>((r) => timer = startTimer(timeoutMs, r)),
    ]);
    timer?.cancel();
    if (this.#byPod.size > 0) {
      this.#opts.logger.info("network-status left to the next start", {
        pods: this.#byPod.size,
      });
    }
  }

  /** Starts every due status of a pod without a PATCH in flight; arms the timer for the rest. */
  #pump(): void {
    if (this.#stopped) return;
    const max = this.#opts.concurrency ?? 16;
    const now = performance.now();
    let next = Infinity;
    for (const [key, p] of this.#byPod) {
      if (this.#inFlight.has(key)) continue;
      if (p.due > now) {
        next = Math.min(next, p.due);
        continue;
      }
      if (this.#inFlight.size >= max) break; // a finished PATCH pumps again
      const run = this.#write(key, p).finally(() => {
        this.#inFlight.delete(key);
        this.#pump();
      });
      this.#inFlight.set(key, run);
    }
    if (next < this.#timerDue) {
      this.#timer?.cancel();
      this.#timerDue = next;
      this.#timer = startTimer(Math.max(0, next - now), () => {
        this.#timerDue = Infinity;
        this.#timer = undefined;
        this.#pump();
      });
    }
  }

  async #write(key: string, p: Pending): Promise<void> {
    const { sink, cache, logger, observer } = this.#opts;
    const { item } = p;
    const log = logger.with({ pod: key, containerId: item.containerId });
    const settle = () => {
      if (this.#byPod.get(key) === p) this.#byPod.delete(key);
      observer?.pending(this.#byPod.size);
    };
    try {
      const record = await cache.read(item.containerId, item.ifName).catch(() => undefined);
      if (!record || record.deletedAt) {
        log.info("sandbox deleted before its network-status was written; dropped", {});
        settle();
        return;
      }
      // The record's current status: hot-plug and KEP rewrite it after ADD queued its copy.
      const entries = record.networkStatus ?? item.entries;
      const extra = record.networkStatus ? record.statusAnnotations : item.extra;
      await sink.publish(item.pod, item.containerId, entries, extra);
      observer?.published((performance.now() - p.since) / 1000);
      settle();
      for (const ev of item.events) this.#opts.events.emit(item.pod, ev);
    } catch (e) {
      if (e instanceof PodGoneError) {
        log.warn("pod gone before its network-status was written; dropped", {
          gone: e.gone,
          error: e.message,
        });
        settle();
        return;
      }
      p.failures++;
      const status = httpStatus(e);
      const permanent = status === 400 || status === 403 || status === 422;
      if (permanent && p.failures >= PERMANENT_ATTEMPTS) {
        log.error("network-status given up after permanent failures", {
          error: errorText(e),
          status,
          failures: p.failures,
        });
        settle();
        observer?.gaveUp?.();
        this.#opts.events.emit(item.pod, {
          reason: "StatusPublishFailed",
          message: `network-status not written after ${p.failures} attempts: HTTP ${status}`,
          type: "Warning",
        });
        return;
      }
      const base = Math.min(
        (this.#opts.backoffMs ?? 500) * 2 ** (p.failures - 1),
        this.#opts.maxBackoffMs ?? 30_000,
      );
      // A server's Retry-After is honoured even beyond the call's bound (apiDeadlineMs): the
      // API client failed the call rather than wait; this queue waits instead.
      const asked = retryAfter(e);
      const delay = asked ?? Math.round(base * (0.8 + 0.4 * Math.random()));
      p.due = performance.now() + delay;
      log.warn("network-status not written, retrying", {
        error: errorText(e),
        failures: p.failures,
        delayMs: delay,
      });
    }
  }
}
