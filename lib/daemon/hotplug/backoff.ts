/**
 * When hot-plug tries a failed change again (issue 21 §1): a pass that failed (a delegate ADD
 * rolled back, a DEL that failed, a pass that threw) is retried after an exponential back-off
 * per (pod, change) — 1 s, 2 s, 4 s, … capped at 10 min — and a change that failed
 * {@link HOTPLUG_MAX_FAILURES} times is not tried again until the change itself changes (the
 * pod's selection annotation, or the pod's UID). Every retry of a failed ADD is a delegate ADD
 * plus its rollback (IPAM churn), so retries are bounded (back-off with a cap, never an
 * unbounded loop driven by a stranger's input). Pure: the caller passes the clock and sets its own timers.
 *
 * @module
 */

/** The first retry's delay, ms. */
export const HOTPLUG_BACKOFF_FIRST_MS = 1000;
/** The longest delay between two tries of one change, ms (10 min). */
export const HOTPLUG_BACKOFF_MAX_MS = 600_000;
/** Failed tries of one change after which it waits for the next change of the annotation. */
export const HOTPLUG_MAX_FAILURES = 5;

/** Options of {@link HotPlugBackoff}. */
export interface HotPlugBackoffOptions {
  /** First delay, ms; default {@link HOTPLUG_BACKOFF_FIRST_MS}. */
  firstMs?: number;
  /** Delay cap, ms; default {@link HOTPLUG_BACKOFF_MAX_MS}. */
  maxMs?: number;
  /** Failures after which a change is given up; default {@link HOTPLUG_MAX_FAILURES}. */
  maxFailures?: number;
}

/** What {@link HotPlugBackoff.failed} decided. */
export type HotPlugRetry =
  /** Try again at `at` (`Date.now()` ms), after `delayMs`; `failures` so far. */
  | { kind: "retry"; at: number; delayMs: number; failures: number }
  /** Given up: the change waits for the next change of the annotation. */
  | { kind: "given-up"; failures: number };

interface Entry {
  change: string;
  failures: number;
  /** When the next try may run, ms; `Infinity` once given up. */
  retryAt: number;
}

/**
 * The failed changes of the node's pods, one per pod (a pod has one current change: its
 * annotation value).
 *
 * @example
 * ```ts
 * const b = new HotPlugBackoff();
 * b.failed("ns/p", "uid\0a,b", 0); // { kind: "retry", at: 1000, delayMs: 1000, failures: 1 }
 * b.waiting("ns/p", "uid\0a,b", 500); // true: not before 1000
 * b.waiting("ns/p", "uid\0a", 500); // false: another change is tried at once
 * ```
 */
export class HotPlugBackoff {
  readonly #firstMs: number;
  readonly #maxMs: number;
  readonly #maxFailures: number;
  #entries = new Map<string, Entry>();

  /**
   * An empty back-off table.
   * @param opts delays (ms) and the number of failures before giving up
   */
  constructor(opts: HotPlugBackoffOptions = {}) {
    this.#firstMs = opts.firstMs ?? HOTPLUG_BACKOFF_FIRST_MS;
    this.#maxMs = opts.maxMs ?? HOTPLUG_BACKOFF_MAX_MS;
    this.#maxFailures = opts.maxFailures ?? HOTPLUG_MAX_FAILURES;
  }

  /** Pods with a failed change remembered (at most the node's pods). */
  get size(): number {
    return this.#entries.size;
  }

  /**
   * Whether a pass for this change must not run now: it failed and its retry time has not
   * come, or it was given up. A different change of the pod is never held back.
   * @param pod `ns/name`
   * @param change the change's identity (e.g. the pod's UID and annotation value)
   * @param now `Date.now()`, ms
   * @returns true when the pass must be skipped
   */
  waiting(pod: string, change: string, now: number): boolean {
    const e = this.#entries.get(pod);
    return e !== undefined && e.change === change && now < e.retryAt;
  }

  /**
   * Records a failed pass of this change (a new change starts counting from 0).
   * @param pod `ns/name`
   * @param change the change's identity
   * @param now `Date.now()`, ms
   * @returns when to try again — delay `firstMs · 2^(failures−1)`, at most `maxMs` — or
   *   `given-up` at the `maxFailures`-th failure
   */
  failed(pod: string, change: string, now: number): HotPlugRetry {
    const old = this.#entries.get(pod);
    const failures = old?.change === change ? old.failures + 1 : 1;
    if (failures >= this.#maxFailures) {
      this.#entries.set(pod, { change, failures, retryAt: Infinity });
      return { kind: "given-up", failures };
    }
    const delayMs = Math.min(this.#maxMs, this.#firstMs * 2 ** (failures - 1));
    const at = now + delayMs;
    this.#entries.set(pod, { change, failures, retryAt: at });
    return { kind: "retry", at, delayMs, failures };
  }

  /**
   * Forgets the pod's failures (its change succeeded, or the pod left the node).
   * @param pod `ns/name`
   */
  forget(pod: string): void {
    this.#entries.delete(pod);
  }
}
