/**
 * Hot-plug / hot-unplug of networks on running pods (issue 14 §1), in `manifold daemon`,
 * on with `"hotPlug": true` in the plugin config it reads. The node's pod informer
 * (pod_informer.ts) says which pods changed; a pod counts as running here when the cache holds
 * a sandbox record for it. Each such pod is brought in line with its
 * `k8s.v1.cni.cncf.io/networks` annotation by hotplug/apply.ts (a few pods at once, each pod's
 * changes one at a time).
 *
 * Level-triggered: every pod the informer reports (also at start, from the first list, so a
 * daemon restarted mid-change converges) and, every {@link HOTPLUG_RESYNC_MS}, every pod of
 * the node is compared with its cache; a missed watch event only delays the change. A pod being
 * deleted (`metadata.deletionTimestamp`) is left alone, as is one using the KEP-3698
 * annotation (its attachments come from PodNetwork objects). Warnings are sent once per
 * annotation value, not at every resync.
 *
 * A host-network pod (`spec.hostNetwork`) has no sandbox of its own: one asking for networks
 * gets one `InterfaceAddRejected` Warning per annotation value.
 *
 * A failed change is tried again with a back-off per (pod, change) — 1 s, 2 s, 4 s, 8 s, then
 * not until the annotation changes (hotplug/backoff.ts); a NAD change of a network it names
 * tries it again at once.
 * A network-status PATCH that failed after a change is tried again on the same back-off, and
 * after it by every pod event and resync (a PATCH runs no delegate); the change's events
 * are sent at once all the same.
 *
 * Events: `AddedInterface` / `RemovedInterface` and the Warnings are posted unless the
 * `events` setting is `"none"` — also with its default `"warnings"`, which silences a sandbox
 * ADD's `AddedInterface`: a running pod's networking changing is rare and the operator's only
 * sign of it (issue 14 §1). Metrics go to the daemon's observer (`hotPlugChange`,
 * `hotPlugDuration`).
 *
 * @module
 */

import type { Pod } from "../../k8s/mod.ts";
import type { Logger } from "../../log/mod.ts";
import { AttachmentCache, type CacheKey } from "../../multinet/cache/cache.ts";
import type { ManifoldConf } from "../../multinet/config.ts";
import type { EventSink } from "../../multinet/deps.ts";
import { NETWORKS_ANNOTATION, PODNETWORKS_ANNOTATION } from "../../multinet/types.ts";
import type { ApiDeps } from "../../multinet/wiring.ts";
import { errorText } from "../../util/text.ts";
import { type HotPlugOutcome, hotPlugPod } from "./apply.ts";
import { hotPlugDeps } from "./deps.ts";
import { type HotPlugEventPod, measureHotPlug, sendHotPlugEvents } from "./events.ts";
import { SandboxIndex } from "../sandbox_index.ts";
import { HotPlugRetries } from "./retries.ts";
import type { DaemonObserver } from "../observer.ts";
import type { PodStore } from "../pod_informer.ts";

/**
 * Pods changed at once (each pod's own change is one at a time, its attachments in order, NPWG
 * v1.3 §7.3): a slow delegate of one pod does not hold up the others.
 */
export const HOTPLUG_CONCURRENCY = 4;

/** Period of the full comparison of every pod of the node with its cache, ms. */
export const HOTPLUG_RESYNC_MS = 60_000;

/** Options of {@link startHotPlug}. */
export interface HotPlugOptions {
  /** The daemon's plugin configuration (`hotPlug: true`) at start-up. */
  conf: ManifoldConf;
  /**
   * The daemon's configuration now (lib/daemon/daemon_conf.ts: `--config` re-read when it
   * changed), asked at each pass, so a pass and a request never disagree about
   * `clusterNetwork`/`defaultNetworks`; default `conf`.
   */
  currentConf?: () => Promise<ManifoldConf>;
  /** The node's pods. */
  pods: PodStore;
  /**
   * The node's pod → sandbox index (lib/daemon/sandbox_index.ts), shared with the policy agent;
   * default: one of its own over `conf.cniDir`.
   */
  sandboxes?: SandboxIndex;
  /** The API-backed sources the daemon shares (NADs from memory, status PATCH). */
  api: () => Promise<ApiDeps>;
  /**
   * Where events go, unfiltered (e.g. a `KubeEventSink`): hot-plug applies its own policy
   * (module doc), not the `events` filter of `api().events`.
   */
  events: EventSink;
  /** Receives hot-plug's metrics; default none. */
  observer?: DaemonObserver;
  /**
   * The daemon's environment (delegates inherit it; `CNI_PATH` is searched after `binDir`, and
   * is `binDir` when unset).
   */
  env: Record<string, string>;
  /** The daemon's log. */
  logger: Logger;
  /** Resync period, ms; default {@link HOTPLUG_RESYNC_MS}. */
  resyncMs?: number;
  /**
   * Subscribes to NADs created or changed (the daemon's NAD store, `NadStore.onChange`):
   * pods whose selection names such a NAD are looked at again at once, so a change refused
   * because its NAD did not exist yet is applied when the NAD appears, not at the resync.
   */
  nadChanges?: (listener: (namespace: string, name: string) => void) => () => void;
  /** Told of every pass that did something (tests, metrics). */
  onOutcome?: (pod: string, outcome: HotPlugOutcome) => void;
}

/** A running hot-plug controller. */
export interface HotPlug {
  /** Stops taking work and waits for the pass in progress. Idempotent. */
  stop(): Promise<void>;
  /** Pods whose last pass hot-plug remembers (at most the node's pods; tests, leaks). */
  readonly tracked: number;
}

/**
 * Starts the hot-plug controller (module doc).
 * @param opts configuration, pod store, API sources, environment, logger
 * @returns the controller
 */
export function startHotPlug(opts: HotPlugOptions): HotPlug {
  return new Controller(opts);
}

/** What hot-plug remembers of a pod's last pass (see `Controller.#seen`). */
interface Seen {
  uid: string;
  text: string;
  ok: boolean;
  warned: Set<string>;
}

class Controller implements HotPlug {
  #opts: HotPlugOptions;
  #cache: AttachmentCache;
  #log: Logger;
  /** Pods to look at (`ns/name`), in order; `true` = even when their annotation is as applied. */
  #queue = new Map<string, boolean>();
  /**
   * Per pod (`ns/name`): its UID, the selection annotation last looked at, whether it was
   * brought in line (or refused: `ok`; a failed change is retried as {@link HotPlugBackoff}
   * says) and the warnings already sent for it. Forgotten when the pod leaves.
   */
  #seen = new Map<string, Seen>();
  /** The pods' sandboxes (lib/daemon/sandbox_index.ts). */
  #index: SandboxIndex;
  /** Failed changes, when to try them again and their timers (hotplug/retries.ts). */
  #retries: HotPlugRetries;
  /** Pods being changed now (never two passes for one pod at once). */
  #active = new Set<string>();
  /** The running workers. */
  #workers = new Set<Promise<void>>();
  #stopped = false;
  #timer: ReturnType<typeof setInterval>;
  #unsubscribe: () => void;
  #unsubscribeNads: () => void;

  constructor(opts: HotPlugOptions) {
    this.#opts = opts;
    this.#cache = new AttachmentCache(opts.conf.cniDir);
    this.#index = opts.sandboxes ?? new SandboxIndex(this.#cache);
    this.#log = opts.logger.with({ component: "hotplug" });
    this.#retries = new HotPlugRetries({ log: this.#log, retry: (k) => this.#enqueue(k, true) });
    this.#unsubscribe = opts.pods.onChange((c) => {
      if (c.pod) this.#enqueue(`${c.namespace}/${c.name}`, false);
      else this.#forget(c.namespace, c.name);
    });
    this.#unsubscribeNads = opts.nadChanges?.((_namespace, name) => {
      for (const p of opts.pods.pods()) {
        // A cheap filter (the name appears in the selection text); the pass itself decides.
        if ((p.metadata.annotations?.[NETWORKS_ANNOTATION] ?? "").includes(name)) {
          // A changed NAD may be the fix of a failed change: try it again now.
          this.#unschedule(podKey(p));
          this.#enqueue(podKey(p), true);
        }
      }
    }) ?? (() => {});
    for (const p of opts.pods.pods()) this.#enqueue(podKey(p), true);
    this.#timer = setInterval(() => {
      for (const p of opts.pods.pods()) this.#enqueue(podKey(p), true);
    }, opts.resyncMs ?? HOTPLUG_RESYNC_MS);
  }

  get tracked(): number {
    return this.#seen.size;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#timer);
    this.#unsubscribe();
    this.#unsubscribeNads();
    this.#retries.clear();
    this.#queue.clear();
    await Promise.all(this.#workers);
  }

  #enqueue(key: string, force: boolean): void {
    if (this.#stopped) return;
    this.#queue.set(key, force || (this.#queue.get(key) ?? false));
    this.#spawn();
  }

  /** Starts workers (at most {@link HOTPLUG_CONCURRENCY}) while there is work for them. */
  #spawn(): void {
    while (
      !this.#stopped && this.#workers.size < HOTPLUG_CONCURRENCY && this.#next() !== undefined
    ) {
      const worker: Promise<void> = this.#work().finally(() => {
        this.#workers.delete(worker);
        this.#spawn();
      });
      this.#workers.add(worker);
    }
  }

  /** The first queued pod not being changed now. */
  #next(): string | undefined {
    for (const key of this.#queue.keys()) if (!this.#active.has(key)) return key;
    return undefined;
  }

  #forget(namespace: string, name: string): void {
    this.#seen.delete(`${namespace}/${name}`);
    this.#unschedule(`${namespace}/${name}`);
  }

  /** Forgets the pod's failed change and its retry timer. */
  #unschedule(k: string): void {
    this.#retries.forget(k);
  }

  /** Records a failed pass of the pod's change and sets the timer of its retry (if any). */
  #retryLater(k: string, change: string): void {
    if (this.#stopped) return;
    this.#retries.failed(k, change);
  }

  async #work(): Promise<void> {
    for (let key = this.#next(); key !== undefined && !this.#stopped; key = this.#next()) {
      const force = this.#queue.get(key)!;
      this.#queue.delete(key);
      this.#active.add(key);
      try {
        const slash = key.indexOf("/");
        const pod = this.#opts.pods.get(key.slice(0, slash), key.slice(slash + 1));
        if (pod) await this.#reconcile(pod, force);
      } catch (e) {
        this.#log.error("hot-plug pass failed", { pod: key, error: errorText(e) });
      } finally {
        this.#active.delete(key);
      }
    }
  }

  async #reconcile(pod: Pod, force: boolean): Promise<void> {
    const meta = pod.metadata;
    const uid = meta.uid ?? "";
    const annotations = meta.annotations ?? {};
    const text = annotations[NETWORKS_ANNOTATION] ?? "";
    const raw = pod.raw.metadata as Record<string, unknown> | undefined;
    if (raw?.deletionTimestamp) return; // being deleted: left alone
    if (annotations[PODNETWORKS_ANNOTATION]) return; // KEP-3698 pods: not hot-plugged
    const k = `${meta.namespace}/${meta.name}`;
    if ((pod.raw.spec as Record<string, unknown> | undefined)?.hostNetwork === true) {
      if (text.trim() !== "") await this.#rejectHostNetwork(pod);
      return;
    }
    const change = `${uid}\0${text}`;
    // A failed change waits for its retry time (or for good after too many failures).
    if (this.#retries.waiting(k, change, Date.now())) return;
    const seen = this.#seen.get(k);
    if (!force && seen?.uid === uid && seen.text === text && seen.ok) return;
    try {
      await this.#pass(pod, seen);
    } catch (e) {
      this.#log.error("hot-plug pass failed", { pod: k, error: errorText(e) });
      this.#retryLater(k, change);
    }
  }

  /** One pass of the pod (see {@link Controller.#reconcile}); throws on cache or API errors. */
  async #pass(pod: Pod, seen: Seen | undefined): Promise<void> {
    const meta = pod.metadata;
    const uid = meta.uid ?? "";
    const annotations = meta.annotations ?? {};
    const text = annotations[NETWORKS_ANNOTATION] ?? "";
    const k = `${meta.namespace}/${meta.name}`;
    const query = { namespace: meta.namespace, name: meta.name, uid };
    let key = (await this.#index.lookup(query))?.key;
    if (!key) return; // not running on this node (yet): its ADD reads the annotation itself
    const started = performance.now();
    const conf = await this.#opts.currentConf?.() ?? this.#opts.conf;
    const pass = (key: CacheKey) =>
      hotPlugPod({
        conf,
        cache: this.#cache,
        key,
        pod: { namespace: meta.namespace, name: meta.name, uid, annotations },
        makeDeps: (record) =>
          hotPlugDeps(record, conf, {
            env: this.#opts.env,
            api: this.#opts.api,
            logger: this.#log,
          }),
        logger: this.#log,
      });
    let outcome = await pass(key);
    if (outcome.kind === "gone") {
      // The indexed record is a tombstone (or another pod's, or its netns is gone): the
      // sandbox may have been restarted. Follow the pod's newest live record at once.
      const again = (await this.#index.lookup(query, true))?.key;
      if (!again || (again.containerId === key.containerId && again.ifName === key.ifName)) {
        return;
      }
      key = again;
      outcome = await pass(key);
      if (outcome.kind === "gone") return;
    }
    if (seen?.uid !== uid || seen.text !== text) {
      seen = { uid, text, ok: false, warned: new Set() };
      // A pod deleted while its pass ran was forgotten then: do not remember it again.
      if (this.#opts.pods.get(meta.namespace, meta.name)) this.#seen.set(k, seen);
    }
    const failed = outcome.kind === "failed" || outcome.changes.some((c) => c.result === "error");
    seen.ok = !failed && outcome.statusError === undefined;
    if (failed) this.#retryLater(k, `${uid}\0${text}`);
    else if (outcome.statusError !== undefined) {
      // Only the PATCH failed: no delegate runs again, so its retries never hold back a pass
      // (another back-off key), and once given up the pod's events and the resync still try.
      this.#log.warn("network-status not published", { pod: k, error: outcome.statusError });
      this.#retryLater(k, `status\0${uid}\0${text}`);
    } else this.#unschedule(k);
    measureHotPlug(this.#opts.observer, outcome, (performance.now() - started) / 1000);
    await this.#send({ namespace: meta.namespace, name: meta.name, uid }, outcome, seen.warned);
    if (outcome.kind !== "unchanged") {
      this.#log.info("hot-plug done", {
        pod: `${meta.namespace}/${meta.name}`,
        kind: outcome.kind,
        added: outcome.added,
        removed: outcome.removed,
        ms: Math.round(performance.now() - started),
      });
    }
    this.#opts.onOutcome?.(`${meta.namespace}/${meta.name}`, outcome);
  }

  /** Sends the pass's events ({@link sendHotPlugEvents}). */
  #send(pod: HotPlugEventPod, outcome: HotPlugOutcome, warned: Set<string>): Promise<void> {
    const { events, observer, conf } = this.#opts;
    const setting = conf.events;
    return sendHotPlugEvents(outcome, { pod, warned, log: this.#log, observer, events, setting });
  }

  /**
   * A host-network pod asking for networks: one `InterfaceAddRejected` Warning per annotation
   * value (multus-dynamic-networks-controller's reason and message), nothing else.
   */
  async #rejectHostNetwork(pod: Pod): Promise<void> {
    const { namespace, name } = pod.metadata;
    const uid = pod.metadata.uid ?? "";
    const text = pod.metadata.annotations?.[NETWORKS_ANNOTATION] ?? "";
    const k = `${namespace}/${name}`;
    const seen = this.#seen.get(k);
    if (seen?.uid === uid && seen.text === text) return;
    const fresh: Seen = { uid, text, ok: true, warned: new Set() };
    this.#seen.set(k, fresh);
    const message = `pod [${k}]: will not add interface to host networked pod`;
    const events = [{ reason: "InterfaceAddRejected", message, type: "Warning" as const }];
    await this.#send({ namespace, name, uid }, { ...NOTHING, events }, fresh.warned);
  }
}

/** A pass that did nothing. */
const NOTHING: HotPlugOutcome = {
  kind: "unchanged",
  events: [],
  added: [],
  removed: [],
  changes: [],
};

function podKey(p: Pod): string {
  return `${p.metadata.namespace}/${p.metadata.name}`;
}
