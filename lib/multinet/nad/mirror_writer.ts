/**
 * `manifold mirror`'s side of the NAD mirror: applies list + watch results to the mirror
 * directory, every file replaced atomically (`lib/fs/atomic.ts`). Format: `nad/mirror.ts`.
 *
 * @module
 */

import { readTextIfExists, removeFileDurable, writeFileAtomic } from "../../fs/atomic.ts";
import type { NetworkAttachmentDefinition } from "../../k8s/types.ts";
import type { ListWatchHandler, WatchChange } from "../../k8s/watch.ts";
import type { Logger } from "../../log/mod.ts";
import {
  isMirrorName,
  MIRROR_STATE_FILE,
  mirrorPath,
  type NadMirrorState,
  toMirrorObject,
  trimMirrorDir,
} from "./mirror_format.ts";

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
   * Creates a writer for one directory; nothing is touched until the first list.
   * @param dir the mirror directory; created (0700) on the first list
   * @param options logger, clock, state write throttle
   */
  constructor(dir: string, options: NadMirrorWriterOptions = {}) {
    this.dir = trimMirrorDir(dir);
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
        if (onDisk?.has(name) && await readTextIfExists(path) === content) {
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
   * Records that the mirror is current as of `resourceVersion` (evidence from the server: the
   * watch opened, a BOOKMARK, events since the last report; lib/k8s/watch.ts): writes the state file with `syncedAt` = now. No-op before the first list.
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
