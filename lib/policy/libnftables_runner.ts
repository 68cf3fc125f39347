/**
 * The libnftables {@link NftRunner}: batches go through `nft_run_cmd_from_buffer` on the main
 * thread, switched into the pod's network namespace with `setns` (`withNetns`).
 *
 * One context (with its netlink socket) is kept open per namespace, identified by the
 * namespace file's device and inode so a reused path never reaches a stale namespace.
 * Why: closing an nftables socket after a commit makes the kernel flush its deferred
 * destruction work (an RCU grace period, ≈ 10–15 ms) while holding the namespace's commit
 * mutex (`nft_rcv_nl_event`, net/netfilter/nf_tables_api.c), so a context per batch costs
 * that on every change. Released contexts are freed on a worker thread.
 *
 * @module
 */

import {
  type Libnftables,
  LIBNFTABLES_PATH,
  NFT_CTX_DEFAULT,
  NFT_CTX_OUTPUT_JSON,
  openLibnftables,
} from "../../native/libnftables.ts";
import type { Logger } from "../log/mod.ts";
import { resolveNetnsPath, withNetns } from "../netlink/mod.ts";
import { NftablesError, type NftRunner } from "./runner.ts";

interface OpenContext {
  dev: number;
  ino: number;
  ctx: Deno.PointerObject;
}

function readCString(p: Deno.PointerValue): string {
  return p === null ? "" : Deno.UnsafePointerView.getCString(p);
}

/** The libnftables runner; create it with {@link libnftablesRunner}. */
export class LibnftablesRunner implements NftRunner {
  /** Always `"libnftables"`. */
  readonly name = "libnftables";
  readonly #path: string;
  readonly #logger: Logger | undefined;
  #lib: Libnftables | undefined;
  readonly #open = new Map<string, OpenContext>();
  readonly #pending = new Set<Promise<void>>();

  /**
   * A runner with no open context yet (the library loads on the first batch).
   *
   * @param path the shared object (default `libnftables.so.1`)
   * @param logger where a fatal "cannot switch back to the original netns" goes
   */
  constructor(path: string = LIBNFTABLES_PATH, logger?: Logger) {
    this.#path = path;
    this.#logger = logger;
  }

  /**
   * Runs `batch` in `netns` (one transaction).
   *
   * @param netns netns path or name under `/var/run/netns`
   * @param batch the `{"nftables": [...]}` document
   * @returns libnftables' JSON output ("" for changes)
   * @throws {NftablesError} when refused (nothing applied)
   * @throws {NetnsError} when the namespace cannot be opened or entered
   * @throws {Error} when libnftables cannot be loaded
   */
  run(netns: string, batch: string): Promise<string> {
    try {
      return Promise.resolve(this.#run(resolveNetnsPath(netns), batch));
    } catch (e) {
      return Promise.reject(e);
    }
  }

  #run(path: string, batch: string): string {
    const lib = this.#lib ??= openLibnftables(this.#path);
    const buf = new TextEncoder().encode(`${batch}\0`);
    let id: { dev: number; ino: number };
    try {
      const st = Deno.statSync(path);
      id = { dev: st.dev, ino: st.ino ?? 0 };
    } catch {
      id = { dev: -1, ino: -1 }; // let withNetns report the real error
    }
    const cached = this.#open.get(path);
    if (cached && (cached.dev !== id.dev || cached.ino !== id.ino)) this.release(path);
    return withNetns(path, () => {
      let open = this.#open.get(path);
      if (!open) {
        const ctx = lib.symbols.nft_ctx_new(NFT_CTX_DEFAULT);
        if (ctx === null) throw new NftablesError("nft_ctx_new failed", "");
        lib.symbols.nft_ctx_output_set_flags(ctx, NFT_CTX_OUTPUT_JSON);
        lib.symbols.nft_ctx_buffer_output(ctx);
        lib.symbols.nft_ctx_buffer_error(ctx);
        open = { ...id, ctx };
        this.#open.set(path, open);
      }
      const rc = lib.symbols.nft_run_cmd_from_buffer(open.ctx, buf);
      const out = readCString(lib.symbols.nft_ctx_get_output_buffer(open.ctx));
      if (rc !== 0) {
        throw new NftablesError(
          "nft_run_cmd_from_buffer failed",
          readCString(lib.symbols.nft_ctx_get_error_buffer(open.ctx)),
        );
      }
      return out;
    }, this.#logger);
  }

  /**
   * Frees the namespace's context (in the background); the next batch opens a new one.
   *
   * @param netns netns path or name
   */
  release(netns: string): void {
    const path = resolveNetnsPath(netns);
    const open = this.#open.get(path);
    if (!open || !this.#lib) return;
    this.#open.delete(path);
    const freed = this.#lib.symbols.nft_ctx_free_deferred(open.ctx).finally(() =>
      this.#pending.delete(freed)
    );
    this.#pending.add(freed);
  }

  /** Number of namespaces with an open context. */
  get openContexts(): number {
    return this.#open.size;
  }

  /** Frees every context and resolves when all are freed (shutdown, tests). */
  async close(): Promise<void> {
    for (const path of [...this.#open.keys()]) this.release(path);
    while (this.#pending.size) await Promise.all(this.#pending);
  }
}

/**
 * Creates a {@link LibnftablesRunner}. Needs `--allow-ffi` and `--allow-read` (the namespace
 * file's inode).
 *
 * @param path the shared object (default `libnftables.so.1`, package `libnftables1`)
 * @param logger where a fatal "cannot switch back to the original netns" goes
 * @returns the runner; `close()` it when done
 */
export function libnftablesRunner(
  path: string = LIBNFTABLES_PATH,
  logger?: Logger,
): LibnftablesRunner {
  return new LibnftablesRunner(path, logger);
}
