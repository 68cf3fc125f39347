/**
 * The daemon's NetworkAttachmentDefinitions: the list+watch (lib/k8s/watch.ts) feeds an
 * in-memory map that ADDs read with no API request, and the on-disk mirror
 * (`NadMirrorWriter`) that in-process plugins (fallback, nodes without the daemon) read.
 *
 * @module
 */

import type { ListWatchHandler, NetworkAttachmentDefinition, WatchChange } from "../k8s/mod.ts";
import type { Logger } from "../log/mod.ts";
import type { NadMirrorWriter } from "../multinet/nad/mirror.ts";
import { slimNad } from "../multinet/nad/mirror_format.ts";
import type { NadSource } from "../multinet/nad/source.ts";
import { errorText } from "../util/text.ts";

/**
 * Holds every NAD of the cluster as the watch last reported it, reduced to what requests read
 * (`slimNad`: the fields a mirror file keeps, so the daemon and the in-process fallback see the
 * same NAD; not the API object, whose `managedFields` and `last-applied-configuration` copy
 * were ≈ 2–3 KiB per `kubectl apply`-ed NAD); also writes the on-disk mirror when given a writer
 * (its failures are logged, never stop the in-memory copy).
 */
export class NadStore implements ListWatchHandler<NetworkAttachmentDefinition> {
  #byKey = new Map<string, NetworkAttachmentDefinition>();
  #synced = false;
  #writer: NadMirrorWriter | undefined;
  #logger: Logger | undefined;
  #listeners = new Set<(namespace: string, name: string) => void>();

  /**
   * Creates an empty store.
   * @param opts `writer`: the on-disk mirror to keep too; `logger`: mirror write failures
   */
  constructor(opts: { writer?: NadMirrorWriter; logger?: Logger } = {}) {
    this.#writer = opts.writer;
    this.#logger = opts.logger;
  }

  /** True once a complete list was received (the readiness of the NAD watch). */
  get synced(): boolean {
    return this.#synced;
  }

  /** Number of NADs held. */
  get size(): number {
    return this.#byKey.size;
  }

  /** See {@link ListWatchHandler.replace}: the map becomes `items`, then the mirror. */
  async replace(items: NetworkAttachmentDefinition[], resourceVersion: string): Promise<void> {
    const next = new Map<string, NetworkAttachmentDefinition>();
    for (const nad of items) next.set(key(nad.metadata.namespace, nad.metadata.name), slimNad(nad));
    const changed = [...next.keys()].filter((k) =>
      this.#byKey.get(k)?.metadata.resourceVersion !== next.get(k)!.metadata.resourceVersion
    );
    this.#byKey = next;
    this.#synced = true;
    for (const k of changed) this.#tell(k);
    await this.#mirror(() => this.#writer?.replace(items, resourceVersion));
  }

  /** See {@link ListWatchHandler.apply}. */
  async apply(change: WatchChange<NetworkAttachmentDefinition>): Promise<void> {
    const k = key(change.object.metadata.namespace, change.object.metadata.name);
    if (change.type === "DELETED") this.#byKey.delete(k);
    else {
      this.#byKey.set(k, slimNad(change.object));
      this.#tell(k);
    }
    await this.#mirror(() => this.#writer?.apply(change));
  }

  /** See {@link ListWatchHandler.progress}. */
  async progress(resourceVersion: string): Promise<void> {
    await this.#mirror(() => this.#writer?.progress(resourceVersion));
  }

  /**
   * A source reading this store: a NAD held is answered from memory; before the first list,
   * or for a NAD not held (it may be newer than the watch), `fallback` (the API) is asked.
   * @param fallback the API source
   * @returns the NadSource the daemon's requests use
   */
  source(fallback: NadSource): NadSource {
    return {
      get: async (namespace, name) => {
        const nad = this.#byKey.get(key(namespace, name));
        return nad ?? await fallback.get(namespace, name);
      },
    };
  }

  /**
   * Calls `listener(namespace, name)` for every NAD created or changed from now on (watch
   * events and re-lists; deletions are not reported: nothing can attach to a deleted NAD).
   * Called synchronously from the watch loop: keep it short.
   * @param listener the callback
   * @returns a function removing it
   */
  onChange(listener: (namespace: string, name: string) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #tell(k: string): void {
    const slash = k.indexOf("/");
    for (const l of this.#listeners) {
      try {
        l(k.slice(0, slash), k.slice(slash + 1));
      } catch (e) {
        this.#logger?.warn("NAD change listener failed", { error: errorText(e) });
      }
    }
  }

  async #mirror(write: () => Promise<unknown> | undefined): Promise<void> {
    try {
      await write();
    } catch (e) {
      this.#logger?.warn("NAD mirror write failed", {
        error: errorText(e),
      });
    }
  }
}

function key(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}
