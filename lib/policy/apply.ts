/**
 * Programs a pod's network namespace: one libnftables JSON batch per change, which the
 * kernel applies as one transaction (all or nothing), carried by an {@link NftRunner}
 * (default: libnftables through FFI). {@link PolicyApplier} remembers what it applied per
 * namespace so a peer change only refills sets.
 *
 * @module
 */

import { resolveNetnsPath } from "../netlink/mod.ts";
import { libnftablesRunner } from "./libnftables_runner.ts";
import { NftablesError, type NftRunner } from "./runner.ts";
import {
  type NftCommand,
  renderList,
  renderRemove,
  renderRuleset,
  renderSetUpdate,
} from "./nft.ts";
import type { PodRuleset } from "./ruleset.ts";

const text = (doc: { nftables: NftCommand[] }) => JSON.stringify(doc);

/** Options of the one-shot functions. */
export interface ApplyOptions {
  /** Default: a libnftables runner for this call only (its context freed afterwards). */
  runner?: NftRunner;
}

async function once<T>(options: ApplyOptions, fn: (r: NftRunner) => Promise<T>): Promise<T> {
  if (options.runner) return await fn(options.runner);
  const runner = libnftablesRunner();
  try {
    return await fn(runner);
  } finally {
    void runner.close(); // freeing waits for the kernel's cleanup: not our latency
  }
}

/**
 * Replaces the pod's table with `ruleset`, atomically.
 *
 * @param netns the pod's netns path (or a name under `/var/run/netns`)
 * @param ruleset the desired state (from the engine)
 * @param options the runner
 * @throws {NftablesError} when refused (the previous table stays in force)
 * @throws {NetnsError} when the namespace cannot be entered
 */
export async function applyPolicy(
  netns: string,
  ruleset: PodRuleset,
  options: ApplyOptions = {},
): Promise<void> {
  await once(options, (r) => r.run(netns, text(renderRuleset(ruleset))));
}

/**
 * Removes the pod's table; succeeds when there is none.
 *
 * @param netns the pod's netns path
 * @param options the runner
 * @throws {NftablesError} when refused
 * @throws {NetnsError} when the namespace cannot be entered (e.g. the pod is gone)
 */
export async function removePolicy(netns: string, options: ApplyOptions = {}): Promise<void> {
  await once(options, async (r) => {
    try {
      await r.run(netns, text(renderRemove()));
    } finally {
      r.release?.(netns);
    }
  });
}

/**
 * Reads the table in force (for `manifold inspect`): the libnftables JSON objects of the
 * table, its sets (with elements), chains and rules (with counters).
 *
 * @param netns the pod's netns path
 * @param options the runner
 * @returns the `nftables` array without the `metainfo` entry, or `null` when there is no table
 * @throws {NetnsError} when the namespace cannot be entered
 */
export async function readRules(
  netns: string,
  options: ApplyOptions = {},
): Promise<Record<string, unknown>[] | null> {
  let out: string;
  try {
    out = await once(options, (r) => r.run(netns, text(renderList())));
  } catch (e) {
    if (e instanceof NftablesError && /No such file or directory/.test(e.output)) return null;
    throw e;
  }
  const doc = JSON.parse(out) as { nftables?: Record<string, unknown>[] };
  return (doc.nftables ?? []).filter((o) => !("metainfo" in o));
}

/** What {@link PolicyApplier.apply} did. */
export type ApplyMode = "full" | "sets" | "unchanged";

/**
 * Applies rulesets level-triggered, remembering the last one applied per namespace: equal
 * → nothing; only set elements differ → a set-only batch; otherwise (or when the remembered
 * state is gone from the kernel) a full table replacement. A new applier (daemon restart)
 * starts with a full replacement.
 */
export class PolicyApplier {
  readonly #runner: NftRunner;
  /** Per netns path: the ruleset applied and the identity (`dev:ino`) of the namespace then. */
  readonly #applied = new Map<string, { ruleset: PodRuleset; id: string }>();

  /**
   * An applier with nothing applied yet.
   *
   * @param runner how batches reach the kernel (default libnftables)
   */
  constructor(runner: NftRunner = libnftablesRunner()) {
    this.#runner = runner;
  }

  /**
   * Brings the namespace to `ruleset`.
   *
   * @param netns the pod's netns path
   * @param ruleset the desired state
   * @returns what was done
   * @throws {NftablesError} when refused (the previous state stays in force and is forgotten,
   *   so the next call replaces the table)
   * @throws {NetnsError} when the namespace cannot be entered
   */
  async apply(netns: string, ruleset: PodRuleset): Promise<ApplyMode> {
    // A path can name a new namespace (a reused `/proc/<pid>/ns/net`): what was applied to the
    // old one says nothing about it, and "unchanged" would leave the new one unpoliced.
    const id = identity(netns);
    const held = this.#applied.get(netns);
    const prev = held?.id === id ? held.ruleset : undefined;
    const update = prev ? renderSetUpdate(prev, ruleset) : null;
    if (update && !update.nftables.length) return "unchanged";
    this.#applied.delete(netns);
    if (update) {
      try {
        await this.#runner.run(netns, text(update));
        this.#applied.set(netns, { ruleset, id });
        return "sets";
      } catch (e) {
        if (!(e instanceof NftablesError)) throw e; // e.g. table removed behind our back
      }
    }
    await this.#runner.run(netns, text(renderRuleset(ruleset)));
    this.#applied.set(netns, { ruleset, id });
    return "full";
  }

  /**
   * Removes the namespace's table and forgets it.
   *
   * @param netns the pod's netns path
   * @throws {NftablesError} when refused
   * @throws {NetnsError} when the namespace cannot be entered
   */
  async remove(netns: string): Promise<void> {
    this.#applied.delete(netns);
    try {
      await this.#runner.run(netns, text(renderRemove()));
    } finally {
      this.#runner.release?.(netns);
    }
  }

  /**
   * Forgets a namespace without touching it (the pod and its netns are gone).
   *
   * @param netns the pod's netns path
   */
  forget(netns: string): void {
    this.#applied.delete(netns);
    this.#runner.release?.(netns);
  }

  /**
   * Forgets every namespace and frees what the runner keeps (its open libnftables contexts,
   * each holding a netlink socket that keeps a pod's netns alive); the rules stay in force.
   */
  async close(): Promise<void> {
    this.#applied.clear();
    await this.#runner.close?.();
  }
}

/** The namespace file's identity, `dev:ino` (nsfs inode), or "" when it cannot be read. */
function identity(netns: string): string {
  try {
    const st = Deno.statSync(resolveNetnsPath(netns));
    return `${st.dev}:${st.ino}`;
  } catch {
    return "";
  }
}
