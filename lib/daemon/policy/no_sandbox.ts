/**
 * The grace period of a selected pod without a sandbox (lib/daemon/policy/agent.ts): a local
 * pod a MultiNetworkPolicy selects on a network it is attached to, but whose sandbox is not in
 * the attachment cache, cannot be programmed. Right after a pod starts that is normal (its
 * network-status can be seen just before its ADD's cache record), so it becomes a problem only
 * once it lasted the grace period; then it is reported on every sync while it lasts (the agent
 * posts each distinct problem once) and counted once per pod and episode.
 *
 * @module
 */

import type { PolicyProblem } from "../../policy/ruleset.ts";

/** What one {@link NoSandboxTracker.observe} found. */
export interface NoSandboxVerdict {
  /** `NoSandbox` problems of the pods past the grace period, in input order. */
  problems: PolicyProblem[];
  /** How many pods passed the grace period in this call (each is counted once). */
  counted: number;
  /** When the next pod reaches the grace period (ms, the clock `observe` was given), if any. */
  wakeAt?: number;
}

/** Tracks since when each selected pod has had no sandbox. */
export class NoSandboxTracker {
  readonly #graceMs: number;
  readonly #cniDir: string;
  #missing = new Map<string, { since: number; counted: boolean }>();

  /**
   * @param opts `graceMs`: how long a pod may lack its sandbox before it is reported (ms);
   *   `cniDir`: the cache directory, named in the message
   */
  constructor(opts: { graceMs: number; cniDir: string }) {
    this.#graceMs = opts.graceMs;
    this.#cniDir = opts.cniDir;
  }

  /**
   * Takes the pods without a sandbox of one sync; pods not listed any more are forgotten (a
   * later episode is counted again).
   *
   * @param pods `ns/name` of the selected local pods with no netns (SyncReport `noSandbox`)
   * @param now the clock, ms (e.g. `Date.now()`)
   * @returns the problems to report, how many pods to count, when to look again
   * @example
   * ```ts
   * const t = new NoSandboxTracker({ graceMs: 10_000, cniDir: "/var/lib/cni/manifold" });
   * t.observe(["a/p"], 0).wakeAt // 10000
   * t.observe(["a/p"], 10_000).counted // 1
   * ```
   */
  observe(pods: readonly string[], now: number): NoSandboxVerdict {
    const next = new Map<string, { since: number; counted: boolean }>();
    const out: NoSandboxVerdict = { problems: [], counted: 0 };
    for (const pod of pods) {
      const m = this.#missing.get(pod) ?? { since: now, counted: false };
      next.set(pod, m);
      if (now - m.since < this.#graceMs) {
        out.wakeAt = Math.min(out.wakeAt ?? Infinity, m.since + this.#graceMs);
        continue;
      }
      if (!m.counted) out.counted++;
      m.counted = true;
      out.problems.push({
        reason: "NoSandbox",
        pod,
        message: `A MultiNetworkPolicy selects this pod on a network it is attached to, but ` +
          `no sandbox of it is in the attachment cache (${this.#cniDir}) after ${
            this.#graceMs / 1000
          } s: no rules can be programmed (a damaged cache record, or a cniDir that differs ` +
          `from the plugin's)`,
      });
    }
    this.#missing = next;
    return out;
  }
}
