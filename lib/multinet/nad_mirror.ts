/**
 * The node-local NetworkAttachmentDefinition mirror: `manifold mirror` (the DaemonSet) keeps
 * a directory in step with the API through list + watch ({@link NadMirrorWriter}), and the
 * plugin reads NADs from it ({@link mirrorNadSource}) so that an ADD whose pod annotations
 * come from the runtime needs no API read at all.
 *
 * Layout of the directory (default {@link DEFAULT_NAD_MIRROR_DIR}, mode 0700, files 0600 —
 * NAD reads are RBAC-protected in the cluster, the mirror must not widen that):
 *
 * - `<dir>/<namespace>/<name>.json`: one NAD, compact JSON + `\n`: `apiVersion`, `kind`,
 *   `metadata` (`name`, `namespace`, `uid`, `resourceVersion`, `annotations` without
 *   `kubectl.kubernetes.io/last-applied-configuration`, which only repeats the spec) and
 *   `spec` (`config` when set). Annotations are kept because delegate resolution reads
 *   `k8s.v1.cni.cncf.io/resourceName` (device-plugin allocation, the Multus/SR-IOV convention).
 * - `<dir>/.mirror.json`: the mirror's state, {@link NadMirrorState}:
 *   `{"resourceVersion","syncedAt","listedAt"}`. Namespaces and names never start with a dot,
 *   so it cannot collide with a namespace directory.
 *
 * Every file is replaced atomically (temporary file in the same directory, fsync, rename,
 * directory fsync): a reader sees the old or the new NAD, never a partial one.
 *
 * **When the mirror counts as current.** `syncedAt` is the last moment the writer had
 * evidence from the API server that the mirror matched it: a complete list applied, the
 * watch (re)opened from the recorded resourceVersion, an event or a BOOKMARK received, or
 * the 30 s heartbeat of a healthy open watch (see `lib/k8s/watch.ts`: a stream quiet for
 * 150 s on a server that sends periodic bookmarks stops counting as healthy, and each
 * stream is bounded to about 5 minutes). When the API cannot be reached, the heartbeat
 * stops; when `manifold mirror` stops cleanly it removes the state file. The reader trusts
 * the mirror while `syncedAt` is at most {@link MIRROR_MAX_AGE_MS} (90 s = 3 heartbeats)
 * old — and not more than 30 s in the future (a clock step) — and otherwise asks its
 * fallback (the API GET). A missing entry is always confirmed with the fallback (the NAD
 * may have been created a moment ago), so the answers equal `apiNadSource`'s: the only
 * difference is a change younger than the watch's delivery delay (milliseconds), as with
 * any informer cache.
 *
 * The reader's module is part of the plugin's ADD: it imports no watch or API code, only
 * the NAD schema (`lib/k8s/types.ts`) and the atomic-write helpers (no imports of their own).
 *
 * @module
 */

import { z } from "zod";
import { CniError, CniErrorCode } from "../cni/errors.ts";
import { removeFileDurable, writeFileAtomic } from "../fs/atomic.ts";
import { KubeError } from "../k8s/errors.ts";
import {
  NAD_GROUP,
  NAD_VERSION,
  type NetworkAttachmentDefinition,
  parseNetworkAttachmentDefinition,
} from "../k8s/types.ts";
import type { ListWatchHandler, WatchChange } from "../k8s/watch.ts";
import type { Logger } from "../log/mod.ts";
import type { NadSource } from "./nad_source.ts";

/** Where the DaemonSet keeps the mirror on the host (`manifold mirror --dir`, config `nadMirrorDir`). */
export const DEFAULT_NAD_MIRROR_DIR = "/run/k8s.cni.cncf.io/nads";
/** Name of the state file in the mirror directory. */
export const MIRROR_STATE_FILE = ".mirror.json";
/** How old `syncedAt` may be for the reader to trust the mirror, ms (3 × the writer's 30 s heartbeat). */
export const MIRROR_MAX_AGE_MS = 90_000;
/** How far in the future `syncedAt` may be (clock steps), ms; beyond it the mirror is not trusted. */
export const MIRROR_MAX_CLOCK_SKEW_MS = 30_000;
/** Annotation left out of mirror files: a copy of the whole object, written by `kubectl apply`. */
const LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration";

/** The mirror's state file, `<dir>/.mirror.json`. Times are RFC 3339 UTC with milliseconds. */
export interface NadMirrorState {
  /** resourceVersion the mirror is known to reflect (of the list, or the last event/bookmark). */
  resourceVersion: string;
  /** Last evidence from the API server that the mirror is current (see the module doc). */
  syncedAt: string;
  /** When the last complete list was applied. */
  listedAt: string;
}

/** Names the mirror stores: DNS-1123 (sub)domain characters, never `.`/`..`, never a `/`. */
const NAME = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;

/**
 * Whether `name` can be a namespace or NAD name in the mirror's paths (lowercase
 * alphanumerics, `-` and `.`, starting and ending alphanumeric, at most 253 characters).
 * @example isMirrorName("macvlan-conf") // true
 * @example isMirrorName("../etc") // false
 */
export function isMirrorName(name: string): boolean {
  return name.length <= 253 && NAME.test(name);
}

/**
 * The path of a NAD's mirror file.
 * @example mirrorPath("/run/k8s.cni.cncf.io/nads", "default", "macvlan-conf")
 * // "/run/k8s.cni.cncf.io/nads/default/macvlan-conf.json"
 */
export function mirrorPath(dir: string, namespace: string, name: string): string {
  return `${trimSlash(dir)}/${namespace}/${name}.json`;
}

/**
 * The object a mirror file holds for `nad` (see the module doc for the kept fields).
 *
 * @param nad a validated NetworkAttachmentDefinition
 * @returns `{apiVersion, kind, metadata, spec}`, ready for `JSON.stringify`
 * @example
 * ```ts
 * toMirrorObject({ metadata: { name: "a", namespace: "default", resourceVersion: "7" }, spec: {} })
 * // { apiVersion: "k8s.cni.cncf.io/v1", kind: "NetworkAttachmentDefinition",
 * //   metadata: { name: "a", namespace: "default", resourceVersion: "7" }, spec: {} }
 * ```
 */
export function toMirrorObject(nad: NetworkAttachmentDefinition): Record<string, unknown> {
  const m = nad.metadata;
  const metadata: Record<string, unknown> = { name: m.name, namespace: m.namespace };
  if (m.uid !== undefined) metadata.uid = m.uid;
  if (m.resourceVersion !== undefined) metadata.resourceVersion = m.resourceVersion;
  if (m.annotations) {
    const { [LAST_APPLIED]: _dropped, ...kept } = m.annotations;
    if (Object.keys(kept).length > 0) metadata.annotations = kept;
  }
  return {
    apiVersion: `${NAD_GROUP}/${NAD_VERSION}`,
    kind: "NetworkAttachmentDefinition",
    metadata,
    spec: nad.spec.config === undefined ? {} : { config: nad.spec.config },
  };
}

function buildStateSchema() {
  const time = z.iso.datetime({ offset: true });
  return z.looseObject({
    resourceVersion: z.string(),
    syncedAt: time,
    listedAt: time,
  });
}

let stateSchema: ReturnType<typeof buildStateSchema> | undefined;

/**
 * Validates the content of a state file.
 *
 * @param text the file's text
 * @returns the state
 * @throws {CniError} 6 when it is not JSON or lacks `resourceVersion`/`syncedAt`/`listedAt`
 *   (times must be RFC 3339); `details` is the prettified zod error
 * @example
 * ```ts
 * parseMirrorState('{"resourceVersion":"9","syncedAt":"2026-01-01T00:00:00.000Z","listedAt":"2026-01-01T00:00:00.000Z"}').resourceVersion // "9"
 * ```
 */
export function parseMirrorState(text: string): NadMirrorState {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new CniError(
      CniErrorCode.DecodingFailure,
      "Invalid NetworkAttachmentDefinition mirror state",
      (err as Error).message,
    );
  }
  const r = (stateSchema ??= buildStateSchema()).safeParse(raw);
  if (!r.success) {
    throw new CniError(
      CniErrorCode.DecodingFailure,
      "Invalid NetworkAttachmentDefinition mirror state",
      z.prettifyError(r.error),
    );
  }
  return {
    resourceVersion: r.data.resourceVersion,
    syncedAt: r.data.syncedAt,
    listedAt: r.data.listedAt,
  };
}

/**
 * Validates the content of a NAD mirror file for `namespace`/`name`.
 *
 * @param text the file's text
 * @param namespace the namespace its path names
 * @param name the name its path names
 * @returns the NetworkAttachmentDefinition (`raw` is the file's object)
 * @throws {CniError} 6 when it is not JSON, not a `k8s.cni.cncf.io/v1`
 *   NetworkAttachmentDefinition, fails the NAD schema, or names another namespace/name
 */
export function parseMirrorFile(
  text: string,
  namespace: string,
  name: string,
): NetworkAttachmentDefinition {
  const fail = (details: string): never => {
    throw new CniError(
      CniErrorCode.DecodingFailure,
      `Invalid NetworkAttachmentDefinition mirror file for ${namespace}/${name}`,
      details,
    );
  };
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    fail((err as Error).message);
  }
  const obj = raw as Record<string, unknown> | null;
  if (
    typeof obj !== "object" || obj === null || obj.kind !== "NetworkAttachmentDefinition" ||
    obj.apiVersion !== `${NAD_GROUP}/${NAD_VERSION}`
  ) {
    fail(`not a ${NAD_GROUP}/${NAD_VERSION} NetworkAttachmentDefinition`);
  }
  let nad: NetworkAttachmentDefinition;
  try {
    nad = parseNetworkAttachmentDefinition(raw);
  } catch (err) {
    return fail(err instanceof KubeError ? err.details : String(err));
  }
  if (nad.metadata.namespace !== namespace || nad.metadata.name !== name) {
    fail(`the file holds ${nad.metadata.namespace}/${nad.metadata.name}`);
  }
  return nad;
}

/** Options of {@link mirrorNadSource}. */
export interface MirrorNadSourceOptions {
  /** How old `syncedAt` may be, ms; default {@link MIRROR_MAX_AGE_MS}. */
  maxAgeMs?: number;
  /** Clock, ms since the epoch (tests); default `Date.now`. */
  now?: () => number;
}

/** Whether the mirror may answer, and why not. */
type Freshness = { synced: true } | { synced: false; why: string; neverSynced?: boolean };

/**
 * A {@link NadSource} reading the node-local mirror, with `fallback` (the API GET,
 * `apiNadSource(kube)`) for what the mirror cannot answer:
 *
 * - the mirror is not synced (no or invalid `<dir>/.mirror.json`, `syncedAt` older than
 *   `maxAgeMs` or more than 30 s in the future) → `fallback`;
 * - the entry is missing → `fallback` (a NAD created a moment ago; "not found" is only
 *   what the fallback says);
 * - the entry is unreadable or invalid (bad JSON, wrong kind, another namespace/name in it)
 *   → logged as a warning, `fallback`;
 * - a namespace or name that cannot be a file name (`..`, `/`, upper case…) → `fallback`
 *   (which rejects it as the API path would).
 *
 * The state file is read once per source (one per CNI call), its age checked at each `get`.
 * Without a fallback the mirror answers alone: not synced → warning and the files are still
 * used (a missing entry is then `undefined`), never synced (no state file) → {@link CniError} 11.
 *
 * @param dir the mirror directory (config `nadMirrorDir`)
 * @param fallback the source behind the mirror, normally `apiNadSource(kube)`
 * @param logger receives why the mirror was bypassed
 * @param options `maxAgeMs`, `now`
 * @returns the source; its `get` resolves the same objects/`undefined` as `fallback` would
 *   (the object's `raw` is the mirror file's object, see {@link toMirrorObject})
 * @throws (from `get`) whatever `fallback` throws; without a fallback {@link CniError} 11 when
 *   the mirror has never synced, 5 when a file cannot be read, 6 when it is invalid
 * @example
 * ```ts
 * const nads = mirrorNadSource(conf.nadMirrorDir, apiNadSource(kube), logger);
 * await nads.get("default", "macvlan-conf"); // from the mirror when synced, else a GET
 * ```
 */
export function mirrorNadSource(
  dir: string,
  fallback: NadSource | undefined,
  logger: Logger,
  options: MirrorNadSourceOptions = {},
): NadSource {
  const maxAgeMs = options.maxAgeMs ?? MIRROR_MAX_AGE_MS;
  const now = options.now ?? Date.now;
  const base = trimSlash(dir);
  let state: Promise<NadMirrorState | string> | undefined;

  const readState = async (): Promise<NadMirrorState | string> => {
    let text: string;
    try {
      text = await Deno.readTextFile(`${base}/${MIRROR_STATE_FILE}`);
    } catch (err) {
      return err instanceof Deno.errors.NotFound
        ? "no state file"
        : `cannot read the state file: ${(err as Error).message}`;
    }
    try {
      return parseMirrorState(text);
    } catch (err) {
      logger.warn("NAD mirror state file is invalid", { dir, error: (err as Error).message });
      return "invalid state file";
    }
  };

  const freshness = async (): Promise<Freshness> => {
    const s = await (state ??= readState());
    if (typeof s === "string") return { synced: false, why: s, neverSynced: true };
    const age = now() - Date.parse(s.syncedAt);
    if (age > maxAgeMs) return { synced: false, why: `synced ${Math.round(age / 1000)} s ago` };
    if (age < -MIRROR_MAX_CLOCK_SKEW_MS) {
      return { synced: false, why: `syncedAt ${s.syncedAt} is in the future` };
    }
    return { synced: true };
  };

  const fromFallback = (namespace: string, name: string, why: string) => {
    logger.debug("NAD not taken from the mirror", { namespace, name, why });
    return fallback!.get(namespace, name);
  };

  return {
    async get(namespace, name) {
      if (!isMirrorName(namespace) || !isMirrorName(name)) {
        if (fallback) return await fromFallback(namespace, name, "not a mirror file name");
        return undefined;
      }
      const fresh = await freshness();
      if (!fresh.synced) {
        if (fallback) return await fromFallback(namespace, name, `mirror ${fresh.why}`);
        if (fresh.neverSynced) {
          throw new CniError(
            CniErrorCode.TryAgainLater,
            `NetworkAttachmentDefinition mirror ${dir} is not synced (${fresh.why})`,
          );
        }
        logger.warn("NAD mirror is stale and there is no API to ask", { dir, why: fresh.why });
      }
      const path = mirrorPath(base, namespace, name);
      let text: string;
      try {
        text = await Deno.readTextFile(path);
      } catch (err) {
        if (err instanceof Deno.errors.NotFound) {
          return fallback ? await fromFallback(namespace, name, "not in the mirror") : undefined;
        }
        if (!fallback) {
          throw new CniError(
            CniErrorCode.IoFailure,
            `Cannot read NetworkAttachmentDefinition mirror file ${path}`,
            (err as Error).message,
          );
        }
        logger.warn("cannot read NAD mirror file", { path, error: (err as Error).message });
        return await fromFallback(namespace, name, "unreadable mirror file");
      }
      try {
        return parseMirrorFile(text, namespace, name);
      } catch (err) {
        if (!fallback) throw err;
        logger.warn("invalid NAD mirror file", { path, error: (err as Error).message });
        return await fromFallback(namespace, name, "invalid mirror file");
      }
    },
  };
}

/** Options of {@link NadMirrorWriter}. */
export interface NadMirrorWriterOptions {
  /** Receives what was written and removed. */
  logger?: Logger;
  /** Clock, ms since the epoch (tests); default `Date.now`. */
  now?: () => number;
  /**
   * Minimum time between state-file writes caused by events, ms (a list, a watch being
   * opened, a bookmark and the heartbeat always write it); default 10 000.
   */
  eventStateIntervalMs?: number;
}

/** What one {@link NadMirrorWriter.replace} did. */
export interface MirrorReplaceResult {
  /** Files written (new or changed). */
  written: number;
  /** Files already holding the same content. */
  unchanged: number;
  /** Files (and leftover temporary files) removed. */
  removed: number;
  /** NADs skipped because their namespace or name cannot be a file name. */
  skipped: number;
}

/**
 * Applies list + watch results to the mirror directory (see the module doc for the layout):
 * the {@link ListWatchHandler} that `manifold mirror` gives to
 * `watchNetworkAttachmentDefinitions`. Calls must not overlap (the list/watch loop awaits
 * each); one writer per directory.
 *
 * @example
 * ```ts
 * const writer = new NadMirrorWriter("/run/k8s.cni.cncf.io/nads", { logger });
 * await watchNetworkAttachmentDefinitions(kube, writer, { signal });
 * await writer.clear(); // stopped: the mirror is no longer kept current
 * ```
 */
export class NadMirrorWriter implements ListWatchHandler<NetworkAttachmentDefinition> {
  /** The mirror directory. */
  readonly dir: string;
  #logger: Logger | undefined;
  #now: () => number;
  #eventStateIntervalMs: number;
  #resourceVersion: string | undefined;
  #listedAt: string | undefined;
  #stateWrittenAt = 0;

  /**
   * @param dir the mirror directory; created (0700) on the first list
   * @param options logger, clock, state write throttle
   */
  constructor(dir: string, options: NadMirrorWriterOptions = {}) {
    this.dir = trimSlash(dir);
    this.#logger = options.logger;
    this.#now = options.now ?? Date.now;
    this.#eventStateIntervalMs = options.eventStateIntervalMs ?? 10_000;
  }

  /** The resourceVersion last recorded (list, event or bookmark); undefined before a list. */
  get resourceVersion(): string | undefined {
    return this.#resourceVersion;
  }

  /**
   * Makes the directory hold exactly `items`: writes new and changed files, removes files of
   * NADs no longer present, leftover temporary files and emptied namespace directories, then
   * writes the state file (`listedAt` = `syncedAt` = now).
   *
   * @param items the complete list
   * @param resourceVersion the list's resourceVersion
   * @returns counts of what was done
   * @throws Deno file-system errors (the loop logs them, backs off and lists again)
   */
  async replace(
    items: NetworkAttachmentDefinition[],
    resourceVersion: string,
  ): Promise<MirrorReplaceResult> {
    const result: MirrorReplaceResult = { written: 0, unchanged: 0, removed: 0, skipped: 0 };
    await Deno.mkdir(this.dir, { recursive: true, mode: 0o700 });
    const wanted = new Map<string, Map<string, string>>();
    for (const nad of items) {
      const { namespace, name } = nad.metadata;
      if (!isMirrorName(namespace) || !isMirrorName(name)) {
        result.skipped++;
        this.#logger?.warn("NAD name cannot be mirrored", { namespace, name });
        continue;
      }
      let names = wanted.get(namespace);
      if (!names) wanted.set(namespace, names = new Map());
      names.set(name, serialize(nad));
    }
    // What is on disk now.
    const present = new Map<string, Set<string>>();
    for await (const e of Deno.readDir(this.dir)) {
      if (e.isDirectory && isMirrorName(e.name)) {
        const files = new Set<string>();
        for await (const f of Deno.readDir(`${this.dir}/${e.name}`)) {
          if (!f.isFile) continue;
          if (f.name.startsWith(".") && f.name.includes(".tmp-")) {
            if (await removeFileDurable(`${this.dir}/${e.name}/${f.name}`)) result.removed++;
          } else if (f.name.endsWith(".json")) {
            files.add(f.name.slice(0, -".json".length));
          }
        }
        present.set(e.name, files);
      } else if (e.isFile && e.name.startsWith(`.${MIRROR_STATE_FILE}.tmp-`)) {
        if (await removeFileDurable(`${this.dir}/${e.name}`)) result.removed++;
      }
    }
    for (const [namespace, names] of wanted) {
      const onDisk = present.get(namespace);
      if (!onDisk) await Deno.mkdir(`${this.dir}/${namespace}`, { mode: 0o700 });
      for (const [name, content] of names) {
        const path = mirrorPath(this.dir, namespace, name);
        if (onDisk?.has(name) && await readIfExists(path) === content) {
          result.unchanged++;
          continue;
        }
        await writeFileAtomic(path, content, { mode: 0o600 });
        result.written++;
      }
    }
    for (const [namespace, files] of present) {
      const keep = wanted.get(namespace);
      for (const name of files) {
        if (keep?.has(name)) continue;
        if (await removeFileDurable(mirrorPath(this.dir, namespace, name))) result.removed++;
      }
      if (!keep) await Deno.remove(`${this.dir}/${namespace}`).catch(() => {});
    }
    const now = new Date(this.#now()).toISOString();
    this.#resourceVersion = resourceVersion;
    this.#listedAt = now;
    await this.#writeState(now);
    this.#logger?.info("NAD mirror replaced", { ...result, resourceVersion });
    return result;
  }

  /**
   * Applies one watch change: ADDED/MODIFIED write `<ns>/<name>.json`, DELETED removes it.
   * The state file follows at most every `eventStateIntervalMs`.
   *
   * @param change the change, in resourceVersion order
   * @throws Deno file-system errors
   */
  async apply(change: WatchChange<NetworkAttachmentDefinition>): Promise<void> {
    const { namespace, name } = change.object.metadata;
    if (!isMirrorName(namespace) || !isMirrorName(name)) {
      this.#logger?.warn("NAD name cannot be mirrored", { namespace, name, type: change.type });
    } else if (change.type === "DELETED") {
      await removeFileDurable(mirrorPath(this.dir, namespace, name));
      this.#logger?.info("NAD removed from the mirror", { namespace, name });
    } else {
      await Deno.mkdir(`${this.dir}/${namespace}`, { recursive: true, mode: 0o700 });
      await writeFileAtomic(mirrorPath(this.dir, namespace, name), serialize(change.object), {
        mode: 0o600,
      });
      this.#logger?.info("NAD mirrored", {
        namespace,
        name,
        type: change.type,
        resourceVersion: change.resourceVersion,
      });
    }
    if (change.resourceVersion) this.#resourceVersion = change.resourceVersion;
    if (this.#now() - this.#stateWrittenAt >= this.#eventStateIntervalMs) {
      await this.#writeState(new Date(this.#now()).toISOString());
    }
  }

  /**
   * Records that the mirror is current as of `resourceVersion` (watch opened, BOOKMARK,
   * heartbeat): writes the state file with `syncedAt` = now. No-op before the first list.
   *
   * @param resourceVersion the newest resourceVersion known
   * @throws Deno file-system errors
   */
  async progress(resourceVersion: string): Promise<void> {
    if (this.#listedAt === undefined) return;
    this.#resourceVersion = resourceVersion;
    await this.#writeState(new Date(this.#now()).toISOString());
  }

  /**
   * Marks the mirror as no longer kept current (the writer is stopping): removes the state
   * file, so readers go to the API at once instead of after {@link MIRROR_MAX_AGE_MS}. The
   * NAD files stay for the next writer to reconcile.
   *
   * @returns true when a state file was removed
   * @throws Deno file-system errors other than `NotFound`
   */
  async clear(): Promise<boolean> {
    return await removeFileDurable(`${this.dir}/${MIRROR_STATE_FILE}`);
  }

  async #writeState(syncedAt: string): Promise<void> {
    const state: NadMirrorState = {
      resourceVersion: this.#resourceVersion ?? "",
      syncedAt,
      listedAt: this.#listedAt ?? syncedAt,
    };
    await writeFileAtomic(`${this.dir}/${MIRROR_STATE_FILE}`, JSON.stringify(state) + "\n", {
      mode: 0o600,
    });
    this.#stateWrittenAt = this.#now();
  }
}

function serialize(nad: NetworkAttachmentDefinition): string {
  return JSON.stringify(toMirrorObject(nad)) + "\n";
}

async function readIfExists(path: string): Promise<string | undefined> {
  try {
    return await Deno.readTextFile(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return undefined;
    throw err;
  }
}

function trimSlash(dir: string): string {
  return dir.length > 1 ? dir.replace(/\/+$/, "") : dir;
}
