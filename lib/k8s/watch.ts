/**
 * List + watch of a collection (client-go's reflector, reduced to what `manifold mirror`
 * needs), with NetworkAttachmentDefinitions of every namespace as the resource
 * ({@link watchNetworkAttachmentDefinitions}):
 *
 * 1. `GET <collection>?limit=500[&continue=…]` until the last page: the handler's
 *    `replace(items, resourceVersion)`.
 * 2. `GET <collection>?watch=1&resourceVersion=<rv>&allowWatchBookmarks=true&timeoutSeconds=<t>`:
 *    each line is a `metav1.WatchEvent`; ADDED/MODIFIED/DELETED go to `apply`, a BOOKMARK
 *    (and the watch being opened, and a heartbeat while it stays healthy) to `progress`.
 *    The resourceVersion of the last event or bookmark is kept.
 * 3. A stream the server ends (its `timeoutSeconds`), or that breaks, is reopened from the
 *    kept resourceVersion: no event is lost and nothing is re-listed.
 * 4. `410 Gone`/`Expired` — as the HTTP answer (older servers, etcd-direct watches) or as an
 *    `ERROR` event with `code: 410` (the watch cache: `too old resource version`) — means the
 *    kept resourceVersion fell out of the server's history: list again (step 1).
 * 5. Other failures (API unreachable, 5xx, 403, an undecodable event, a handler error) wait
 *    an exponential backoff (0.5 s doubling to 30 s, jittered) and retry; failures that
 *    may have lost an event (ERROR events, undecodable lines, handler errors) re-list.
 *
 * Every watch is bounded twice: `timeoutSeconds` (jittered 80–100 % of 300 s) asks the
 * server to end it, and the client aborts it 30 s after that in case the connection died
 * silently. A stream that delivers nothing — no event, not even a bookmark (kube-apiserver's
 * watch cache sends one about a minute) — for 60 s is considered dead too (a black-holed
 * connection, a half-open TCP stream): it is aborted and reopened from the kept
 * resourceVersion, nothing re-listed. `progress` advances only on something the server sent —
 * the watch being opened, a bookmark, or the heartbeat after events arrived — never on the
 * passing of time alone, so a reader of `progress` (the NAD mirror's `syncedAt`) stops
 * claiming freshness while the stream is silent (issue 28 §4; client-go's reflector relies on
 * the server's timeout and TCP keepalive instead).
 *
 * @module
 */

import { type Logger, nullLogger } from "../log/mod.ts";
import type { KubeClient } from "./client.ts";
import { KubeError } from "./errors.ts";
import {
  DEFAULT_PAGE_SIZE,
  listAll,
  type ListWatchResource,
  NAD_LIST_WATCH,
  parseWatchLine,
} from "./list.ts";
import type { NetworkAttachmentDefinition } from "./types.ts";

export * from "./list.ts";
import { sleepUnlessAborted } from "../util/timer.ts";
import { errorText } from "../util/text.ts";

/** One change from a watch (`metav1.WatchEvent` of type ADDED, MODIFIED or DELETED). */
export interface WatchChange<T> {
  /** The event's type. */
  type: "ADDED" | "MODIFIED" | "DELETED";
  /** The object after the change; for DELETED its last state. */
  object: T;
  /** The object's resourceVersion (the collection's resourceVersion after this change). */
  resourceVersion: string;
}

/** What {@link listWatch} drives; calls never overlap (each is awaited before the next). */
export interface ListWatchHandler<T> {
  /**
   * A complete list: what the handler holds must become exactly `items`.
   * @param items every object, in the server's order
   * @param resourceVersion the list's `metadata.resourceVersion`
   * @returns anything (ignored), e.g. counts for the caller's own use
   */
  replace(items: T[], resourceVersion: string): Promise<unknown>;
  /** One change, in resourceVersion order, after the last `replace`. */
  apply(change: WatchChange<T>): Promise<void>;
  /**
   * Evidence from the server that the handler's copy is current as of `resourceVersion`: the
   * watch was opened (the server accepted the resourceVersion), a BOOKMARK arrived, or the
   * heartbeat (every `heartbeatMs`) found that events arrived since the last report. Never
   * called for time passing alone.
   */
  progress(resourceVersion: string): Promise<void>;
}

/** Options of {@link listWatch}. */
export interface ListWatchOptions {
  /** Stops the loop: {@link listWatch} then resolves. */
  signal: AbortSignal;
  /** Receives list, watch and backoff lines; default none. */
  logger?: Logger;
  /** List once, hand it to `replace`, and resolve (no watch); list failures are thrown. */
  once?: boolean;
  /** `limit` of each list page; default 500 (client-go's). */
  pageSize?: number;
  /** Called after each list page with the items taken so far (see `listAll`). */
  onPage?: (items: number) => void;
  /** First backoff after a failure, ms; default 500. */
  minBackoffMs?: number;
  /** Cap on one backoff, ms; default 30 000. */
  maxBackoffMs?: number;
  /** Upper bound of each watch's `timeoutSeconds` (jittered down to 80 %); default 300. */
  watchTimeoutSeconds?: number;
  /** How long after `timeoutSeconds` the client aborts a stream the server did not end, ms; default 30 000. */
  watchGraceMs?: number;
  /** Period of the heartbeat (progress after events; the idle check), ms; default 30 000. */
  heartbeatMs?: number;
  /** Silence (no line at all) after which a stream is dropped and reopened, ms; default 60 000. */
  idleTimeoutMs?: number;
  /** Random source in [0, 1) for jitter (tests); default `Math.random`. */
  random?: () => number;
}

/** Defaults of {@link ListWatchOptions}. */
export const LIST_WATCH_DEFAULTS = {
  pageSize: DEFAULT_PAGE_SIZE,
  minBackoffMs: 500,
  maxBackoffMs: 30_000,
  watchTimeoutSeconds: 300,
  watchGraceMs: 30_000,
  heartbeatMs: 30_000,
  idleTimeoutMs: 60_000,
} as const;

/** How one watch stream ended. */
type StreamEnd =
  | { kind: "stopped" }
  /** Ended by the server or by our own deadline/idle guard: reopen from the kept rv. */
  | { kind: "ended"; why: string }
  /** The kept resourceVersion is too old: list again. */
  | { kind: "expired"; message: string }
  /** A failure; `relist` when an event may have been lost. */
  | { kind: "failed"; error: unknown; relist: boolean };

/**
 * Runs list + watch until `opts.signal` aborts (see the module doc), feeding `handler`.
 *
 * @param kube the API client (needs `list` and `watch` on the resource)
 * @param handler receives the list, each change and progress; a throwing handler counts
 *   as a failure (logged, backoff, re-list)
 * @param opts `resource` (what to mirror, e.g. {@link NAD_LIST_WATCH}), stop signal, `once`,
 *   timing (see {@link ListWatchOptions})
 * @returns when stopped, or after the first list with `once`
 * @throws with `once` only: the list's {@link KubeError}, or the
 *   handler's error
 * @example
 * ```ts
 * const stop = new AbortController();
 * await listWatch(kube, {
 *   replace: async (items, rv) => console.log("list", items.length, rv),
 *   apply: async (c) => console.log(c.type, c.object.metadata.name),
 *   progress: async () => {},
 * }, { resource: NAD_LIST_WATCH, signal: stop.signal });
 * ```
 */
export async function listWatch<T>(
  kube: KubeClient,
  handler: ListWatchHandler<T>,
  opts: ListWatchOptions & { resource: ListWatchResource<T> },
): Promise<void> {
  const loop = new ListWatchLoop(kube, opts.resource, handler, opts);
  await loop.run();
}

/**
 * {@link listWatch} of NetworkAttachmentDefinitions in all namespaces
 * (`/apis/k8s.cni.cncf.io/v1/network-attachment-definitions`; RBAC `list` and `watch`).
 *
 * @param kube the API client
 * @param handler receives the list, each change and progress
 * @param opts see {@link ListWatchOptions}
 * @returns when `opts.signal` aborts, or after the first list with `once`
 * @throws with `once` only, as {@link listWatch}
 */
export function watchNetworkAttachmentDefinitions(
  kube: KubeClient,
  handler: ListWatchHandler<NetworkAttachmentDefinition>,
  opts: ListWatchOptions,
): Promise<void> {
  return listWatch(kube, handler, { ...opts, resource: NAD_LIST_WATCH });
}

class ListWatchLoop<T> {
  #kube: KubeClient;
  #resource: ListWatchResource<T>;
  #handler: ListWatchHandler<T>;
  #opts: ListWatchOptions;
  #signal: AbortSignal;
  #log: Logger;
  #random: () => number;
  #rv: string | undefined;
  #failures = 0;
  /** No watch has delivered anything since the last list. */
  #freshList = false;
  /** Serialises handler calls (the heartbeat runs beside the stream). */
  #chain: Promise<unknown> = Promise.resolve();

  constructor(
    kube: KubeClient,
    resource: ListWatchResource<T>,
    handler: ListWatchHandler<T>,
    opts: ListWatchOptions,
  ) {
    this.#kube = kube;
    this.#resource = resource;
    this.#handler = handler;
    this.#opts = opts;
    this.#signal = opts.signal;
    this.#log = (opts.logger ?? nullLogger).with({ resource: resource.path });
    this.#random = opts.random ?? Math.random;
  }

  #serial<R>(fn: () => Promise<R>): Promise<R> {
    const next = this.#chain.then(fn);
    this.#chain = next.catch(() => {});
    return next;
  }

  async run(): Promise<void> {
    while (!this.#signal.aborted) {
      if (this.#rv === undefined) {
        try {
          await this.#list();
        } catch (err) {
          if (this.#signal.aborted) return;
          if (this.#opts.once) throw err;
          await this.#backoff("list failed", err);
          continue;
        }
        if (this.#opts.once) return;
      }
      const end = await this.#watch(this.#rv!);
      switch (end.kind) {
        case "stopped":
          return;
        case "ended":
          this.#log.debug("watch ended, reopening", { why: end.why, resourceVersion: this.#rv });
          break;
        case "expired":
          this.#log.info("resourceVersion expired, listing again", {
            resourceVersion: this.#rv,
            message: end.message,
          });
          this.#rv = undefined;
          // Expired right after a list (e.g. apiservers behind a balancer disagreeing):
          // do not list in a tight loop.
          if (this.#freshList) {
            await this.#backoff("resourceVersion of a new list expired", end.message);
          }
          break;
        case "failed":
          if (end.relist) this.#rv = undefined;
          await this.#backoff(
            end.relist ? "watch failed, will list again" : "watch failed",
            end.error,
          );
          break;
      }
    }
  }

  async #list(): Promise<void> {
    const started = performance.now();
    const list = await listAll(this.#kube, this.#resource, {
      pageSize: this.#opts.pageSize,
      onPage: this.#opts.onPage,
      logger: this.#log,
    });
    await this.#serial(() => this.#handler.replace(list.items, list.resourceVersion));
    this.#rv = list.resourceVersion;
    this.#failures = 0;
    this.#freshList = true;
    this.#log.info("listed", {
      items: list.items.length,
      resourceVersion: list.resourceVersion,
      ms: Math.round(performance.now() - started),
    });
  }

  async #backoff(what: string, err: unknown): Promise<void> {
    this.#failures++;
    const min = this.#opts.minBackoffMs ?? LIST_WATCH_DEFAULTS.minBackoffMs;
    const max = this.#opts.maxBackoffMs ?? LIST_WATCH_DEFAULTS.maxBackoffMs;
    const base = Math.min(max, min * 2 ** Math.min(this.#failures - 1, 30));
    const delayMs = Math.round(base * (0.5 + this.#random() / 2));
    this.#log.warn(what, { error: errorText(err), failures: this.#failures, delayMs });
    await sleepUnlessAborted(delayMs, this.#signal);
  }

  async #watch(rv: string): Promise<StreamEnd> {
    const o = this.#opts;
    const maxTimeout = o.watchTimeoutSeconds ?? LIST_WATCH_DEFAULTS.watchTimeoutSeconds;
    const timeoutSeconds = Math.max(1, Math.round(maxTimeout * (0.8 + 0.2 * this.#random())));
    const heartbeatMs = o.heartbeatMs ?? LIST_WATCH_DEFAULTS.heartbeatMs;
    const idleTimeoutMs = o.idleTimeoutMs ?? LIST_WATCH_DEFAULTS.idleTimeoutMs;
    const stream = new AbortController();
    const timers: ReturnType<typeof setTimeout>[] = [];
    let lastLineAt = Date.now();
    let delivered = false;
    const started = Date.now();

    timers.push(setTimeout(
      () => stream.abort("deadline"),
      timeoutSeconds * 1000 + (o.watchGraceMs ?? LIST_WATCH_DEFAULTS.watchGraceMs),
    ));
    // Lines since the last progress report: the heartbeat reports progress only for them.
    let unreported = false;
    const heartbeat = () => {
      const silentMs = Date.now() - lastLineAt;
      if (silentMs > idleTimeoutMs) {
        this.#log.warn("watch silent for too long, reopening", {
          silentMs,
          resourceVersion: this.#rv,
        });
        stream.abort("idle");
        return;
      }
      const at = this.#rv;
      if (at === undefined || !unreported) return;
      unreported = false;
      this.#serial(() => this.#handler.progress(at)).catch((err) =>
        this.#log.warn("progress failed", { error: errorText(err) })
      );
    };
    const onOpen = () => {
      this.#log.debug("watching", { resourceVersion: rv, timeoutSeconds });
      lastLineAt = Date.now();
      unreported = true; // the server's 2xx: it accepted the resourceVersion
      heartbeat();
      timers.push(setInterval(heartbeat, Math.min(heartbeatMs, idleTimeoutMs)));
    };

    try {
      const lines = this.#kube.watch(
        this.#resource.path,
        { resourceVersion: rv, allowWatchBookmarks: true, timeoutSeconds },
        AbortSignal.any([this.#signal, stream.signal]),
        onOpen,
      );
      for await (const raw of lines) {
        lastLineAt = Date.now();
        unreported = true;
        const line = parseWatchLine(raw, this.#resource);
        if (line.type === "ERROR") {
          if (line.code === 410) return { kind: "expired", message: line.message };
          return {
            kind: "failed",
            relist: true,
            error: `ERROR event ${line.code ?? ""} ${line.reason}: ${line.message}`,
          };
        }
        if (line.type === "BOOKMARK") {
          this.#rv = line.resourceVersion;
          const at = line.resourceVersion;
          unreported = false;
          await this.#serial(() => this.#handler.progress(at));
        } else {
          const change: WatchChange<T> = {
            type: line.type,
            object: line.object,
            resourceVersion: line.resourceVersion ?? this.#rv ?? "",
          };
          await this.#serial(() => this.#handler.apply(change));
          if (line.resourceVersion !== undefined) this.#rv = line.resourceVersion;
        }
        if (!delivered) {
          delivered = true;
          this.#failures = 0;
          this.#freshList = false;
        }
      }
      if (!delivered && Date.now() - started < 1000) {
        // A server (or proxy) that ends every watch at once must not make us spin.
        return { kind: "failed", relist: false, error: "the watch ended at once" };
      }
      this.#failures = 0;
      return { kind: "ended", why: "closed by the server" };
    } catch (err) {
      if (this.#signal.aborted) return { kind: "stopped" };
      if (stream.signal.aborted) {
        return { kind: "ended", why: String(stream.signal.reason) };
      }
      if (err instanceof KubeError && err.kind === "request") {
        if (err.status === 410) return { kind: "expired", message: err.details || err.msg };
        // The stream never opened or broke: the kept resourceVersion is still good.
        if (err.status === 0 && err.reason === "ConnectionFailed" && delivered) {
          return { kind: "ended", why: err.details || "the stream broke" };
        }
        return { kind: "failed", relist: false, error: err };
      }
      return { kind: "failed", relist: true, error: err };
    } finally {
      for (const t of timers) clearTimeout(t);
      await this.#chain;
    }
  }
}
