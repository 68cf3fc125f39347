/**
 * Programs a pod's network namespace: one libnftables JSON batch per change, which the
 * kernel applies as one transaction (all or nothing). Two runners carry the batch:
 * {@link libnftablesRunner} (FFI to `libnftables.so.1` on the main thread after `setns`,
 * the default) and {@link nftProcessRunner} (`nsenter --net=… nft -j -f -`, for comparison
 * and for hosts without the library). {@link PolicyApplier} remembers what it applied per
 * namespace so a peer change only refills sets.
 *
 * @module
 */

import {
  LIBNFTABLES_PATH,
  NFT_CTX_DEFAULT,
  NFT_CTX_OUTPUT_JSON,
  openLibnftables,
} from "../../native/libnftables.ts";
import { resolveNetnsPath, withNetns } from "../netlink/mod.ts";
import {
  type NftCommand,
  renderList,
  renderRemove,
  renderRuleset,
  renderSetUpdate,
} from "./nft.ts";
import type { PodRuleset } from "./ruleset.ts";

/** A batch libnftables or `nft` refused; nothing of it was applied. */
export class NftablesError extends Error {
  /**
   * @param message what failed, e.g. `"nft_run_cmd_from_buffer failed"`
   * @param output libnftables' error text (which command, why)
   */
  constructor(message: string, readonly output: string) {
    super(output ? `${message}: ${output.trim()}` : message);
    this.name = "NftablesError";
  }
}

/** Runs a JSON batch inside a network namespace and returns the JSON output (may be ""). */
export interface NftRunner {
  /** `"libnftables"` or `"nft"`. */
  readonly name: string;
  /**
   * @param netns a netns path or a name under `/var/run/netns`
   * @param batch the `{"nftables": [...]}` document as text
   * @returns libnftables' output (JSON text for `list`, else usually "")
   * @throws {NftablesError} when the batch is refused
   */
  run(netns: string, batch: string): Promise<string>;
}

function readCString(p: Deno.PointerValue): string {
  return p === null ? "" : Deno.UnsafePointerView.getCString(p);
}

/**
 * The libnftables runner: `setns` into the namespace, `nft_ctx_new`, JSON output (which
 * makes libnftables ≤ 1.0.6 parse the input as JSON), buffered output and errors,
 * `nft_run_cmd_from_buffer`, `nft_ctx_free`, `setns` back — synchronously on the main
 * thread. Needs `--allow-ffi`.
 *
 * @param path the shared object (default `libnftables.so.1`)
 * @returns the runner
 * @throws {Error} (from `run`) when the library cannot be loaded
 */
export function libnftablesRunner(path: string = LIBNFTABLES_PATH): NftRunner {
  return {
    name: "libnftables",
    run(netns: string, batch: string): Promise<string> {
      try {
        return Promise.resolve(runLibnftables(path, netns, batch));
      } catch (e) {
        return Promise.reject(e);
      }
    },
  };
}

function runLibnftables(path: string, netns: string, batch: string): string {
  const lib = openLibnftables(path);
  const buf = new TextEncoder().encode(`${batch}\0`);
  return withNetns(netns, () => {
    const ctx = lib.symbols.nft_ctx_new(NFT_CTX_DEFAULT);
    if (ctx === null) throw new NftablesError("nft_ctx_new failed", "");
    try {
      lib.symbols.nft_ctx_output_set_flags(ctx, NFT_CTX_OUTPUT_JSON);
      lib.symbols.nft_ctx_buffer_output(ctx);
      lib.symbols.nft_ctx_buffer_error(ctx);
      const rc = lib.symbols.nft_run_cmd_from_buffer(ctx, buf);
      const out = readCString(lib.symbols.nft_ctx_get_output_buffer(ctx));
      if (rc !== 0) {
        const err = readCString(lib.symbols.nft_ctx_get_error_buffer(ctx));
        throw new NftablesError("nft_run_cmd_from_buffer failed", err);
      }
      return out;
    } finally {
      lib.symbols.nft_ctx_free(ctx);
    }
  });
}

/**
 * The `nft` process runner: `nsenter --net=<path> nft -j -f -` with the batch on stdin.
 * Needs `--allow-run`.
 *
 * @param nft the `nft` binary (default `"nft"` on `PATH`)
 * @returns the runner
 */
export function nftProcessRunner(nft = "nft"): NftRunner {
  return {
    name: "nft",
    async run(netns: string, batch: string): Promise<string> {
      const child = new Deno.Command("nsenter", {
        args: [`--net=${resolveNetnsPath(netns)}`, nft, "-j", "-f", "-"],
        stdin: "piped",
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      const w = child.stdin.getWriter();
      await w.write(new TextEncoder().encode(batch));
      await w.close();
      const r = await child.output();
      const dec = new TextDecoder();
      if (r.code !== 0) throw new NftablesError(`nft exited with ${r.code}`, dec.decode(r.stderr));
      return dec.decode(r.stdout);
    },
  };
}

const text = (doc: { nftables: NftCommand[] }) => JSON.stringify(doc);

/** Options of the one-shot functions; default runner: libnftables. */
export interface ApplyOptions {
  runner?: NftRunner;
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
  await (options.runner ?? libnftablesRunner()).run(netns, text(renderRuleset(ruleset)));
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
  await (options.runner ?? libnftablesRunner()).run(netns, text(renderRemove()));
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
    out = await (options.runner ?? libnftablesRunner()).run(netns, text(renderList()));
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
  readonly #applied = new Map<string, PodRuleset>();

  /** @param runner how batches reach the kernel (default libnftables) */
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
    const prev = this.#applied.get(netns);
    const update = prev ? renderSetUpdate(prev, ruleset) : null;
    if (update && !update.nftables.length) return "unchanged";
    this.#applied.delete(netns);
    if (update) {
      try {
        await this.#runner.run(netns, text(update));
        this.#applied.set(netns, ruleset);
        return "sets";
      } catch (e) {
        if (!(e instanceof NftablesError)) throw e; // e.g. table removed behind our back
      }
    }
    await this.#runner.run(netns, text(renderRuleset(ruleset)));
    this.#applied.set(netns, ruleset);
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
    await this.#runner.run(netns, text(renderRemove()));
  }

  /**
   * Forgets a namespace without touching it (the pod and its netns are gone).
   *
   * @param netns the pod's netns path
   */
  forget(netns: string): void {
    this.#applied.delete(netns);
  }
}
