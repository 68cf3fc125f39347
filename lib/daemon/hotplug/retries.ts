/**
 * The retry timers of hot-plug (lib/daemon/hotplug/hotplug.ts): a failed change of a pod is tried again
 * when {@link HotPlugBackoff} says (one timer per pod), or not until the change itself changes.
 *
 * @module
 */

import type { Logger } from "../../log/mod.ts";
import { HotPlugBackoff } from "./backoff.ts";

/** Options of {@link HotPlugRetries}. */
export interface HotPlugRetriesOptions {
  /** Hot-plug's log (a retry scheduled, a change given up). */
  log: Logger;
  /** Called when a pod's retry time has come (`ns/name`): look at the pod again. */
  retry: (k: string) => void;
}

/** Failed changes and when to try them again, with the timer of each pod's retry. */
export class HotPlugRetries {
  readonly #opts: HotPlugRetriesOptions;
  /** Failed changes and when to try them again (hotplug/backoff.ts). */
  #backoff = new HotPlugBackoff();
  /** The retry timer of each pod with a failed change. */
  #retries = new Map<string, ReturnType<typeof setTimeout>>();

  /** @param opts see {@link HotPlugRetriesOptions} */
  constructor(opts: HotPlugRetriesOptions) {
    this.#opts = opts;
  }

  /**
   * Whether the pod's change waits for its retry time (or for good after too many failures).
   *
   * @param k the pod, `ns/name`
   * @param change what the pod asks for now (e.g. `uid\0annotation`)
   * @param now the clock, ms since the epoch
   * @returns true when the change must not be tried now
   */
  waiting(k: string, change: string, now: number): boolean {
    return this.#backoff.waiting(k, change, now);
  }

  /**
   * Forgets the pod's failed change and its retry timer.
   * @param k the pod, `ns/name`
   */
  forget(k: string): void {
    clearTimeout(this.#retries.get(k));
    this.#retries.delete(k);
    this.#backoff.forget(k);
  }

  /**
   * Records a failed pass of the pod's change and sets the timer of its retry (if any).
   *
   * @param k the pod, `ns/name`
   * @param change the change that failed (as given to {@link HotPlugRetries.waiting})
   */
  failed(k: string, change: string): void {
    const retry = this.#backoff.failed(k, change, Date.now());
    clearTimeout(this.#retries.get(k));
    this.#retries.delete(k);
    if (retry.kind === "given-up") {
      this.#opts.log.warn(
        "hot-plug gave up this change; the next change of the annotation is tried",
        { pod: k, failures: retry.failures },
      );
      return;
    }
    this.#opts.log.info("hot-plug change failed; trying again later", {
      pod: k,
      failures: retry.failures,
      delayMs: retry.delayMs,
    });
    this.#retries.set(
      k,
      setTimeout(() => {
        this.#retries.delete(k);
        this.#opts.retry(k);
      }, retry.delayMs),
    );
  }

  /** Clears every retry timer (the back-off's memory stays); at stop. */
  clear(): void {
    for (const timer of this.#retries.values()) clearTimeout(timer);
    this.#retries.clear();
  }
}
