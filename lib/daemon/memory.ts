/**
 * Keeps `manifold daemon`'s resident memory near its idle level after bursts of requests.
 *
 * Measured on this machine kind (50 concurrent pod ADDs then DELs, twice): the daemon's RSS
 * rose from ≈ 80 to ≈ 130–140 MiB and stayed there. Two causes, two answers:
 * - glibc's main heap keeps what was freed (fragmented, and its mmap threshold adapts upwards
 *   after the first large free): {@link tuneAllocator} fixes the mmap threshold at 64 KiB, so
 *   buffers of that size and more are returned to the kernel when freed;
 * - V8 collects the old generation (and the ArrayBuffers it holds) only when its heap grows
 *   past its limit, and keeps emptied pages: {@link IdleReclaimer} runs a full collection that
 *   releases them, then `malloc_trim(0)`, once the daemon has been idle for a moment after
 *   serving a number of requests.
 * Under sustained load the heap's growth is bounded by `--heap-growing-percent=20` and
 * `--memory-saver-mode`, set for the daemon by scripts/manifold and the DaemonSet. The Deno executable's own pages (≈ 45–50
 * MiB of the RSS) are shared file pages.
 *
 * @module
 */

import { M_MMAP_THRESHOLD, MALLOC_LIBC_PATH, MALLOC_SYMBOLS } from "../../native/malloc.ts";

/**
 * Heap growth after which the daemon collects between the pages of the policy agent's pod
 * list, bytes: 0, after every page of 500 pods. Measured at 20,000 pods: peak RSS 122–141 MiB
 * over four runs; collecting only after 8 or 16 MiB of growth saved 1–2 s of a 10–13 s list
 * but gave 144 MiB (the goal is 150).
 */
export const POD_PAGE_COLLECT_BYTES = 0;

/** Default mmap threshold set by {@link tuneAllocator}, bytes (64 KiB). */
export const DEFAULT_MMAP_THRESHOLD = 64 * 1024;

/**
 * Fixes glibc's mmap threshold (`mallopt(M_MMAP_THRESHOLD, bytes)`) for the rest of the
 * process and returns `malloc_trim(0)`. Needs `--allow-ffi`.
 *
 * @param mmapThreshold bytes; default {@link DEFAULT_MMAP_THRESHOLD}
 * @returns a function releasing free heap memory to the kernel (true when some was), or
 *   undefined when libc cannot be loaded (not glibc, no FFI permission): nothing changed
 */
export function tuneAllocator(
  mmapThreshold = DEFAULT_MMAP_THRESHOLD,
): (() => boolean) | undefined {
  let lib: Deno.DynamicLibrary<typeof MALLOC_SYMBOLS>;
  try {
    lib = Deno.dlopen(MALLOC_LIBC_PATH, MALLOC_SYMBOLS);
  } catch {
    return undefined;
  }
  lib.symbols.mallopt(M_MMAP_THRESHOLD, mmapThreshold);
  return () => lib.symbols.malloc_trim(0n) === 1;
}

/** Options of {@link IdleReclaimer}. */
export interface IdleReclaimerOptions {
  /** A full garbage collection (`globalThis.gc` under `--expose-gc`); skipped when absent. */
  gc?: () => void;
  /** Returns free heap memory to the kernel (see {@link tuneAllocator}); skipped when absent. */
  trim?: () => unknown;
  /** A plain major collection, for {@link IdleReclaimer.collect}; skipped when absent. */
  collect?: () => void;
  /** V8 heap used, bytes (tests); default `Deno.memoryUsage().heapUsed`. */
  heapUsed?: () => number;
  /** Idle time before reclaiming, ms; default 1000. */
  idleMs?: number;
  /** Requests served since the last reclaim for an idle moment to reclaim; default 16. */
  minRequests?: number;
}

/**
 * Reclaims memory when the daemon goes idle after work: told of every served request and of
 * every moment nothing is in flight, it runs `gc` then `trim` once `idleMs` pass with no new
 * request, provided `minRequests` were served since it last did. A steady trickle of requests
 * (each resets the wait) or a quiet daemon costs nothing; a reclaim stops the daemon for ≈ 25 ms
 * on a ≈ 20 MiB live heap (54 ms measured for 46 MiB), only while idle: a request arriving
 * then waits that long.
 */
export class IdleReclaimer {
  readonly #gc: (() => void) | undefined;
  readonly #trim: (() => unknown) | undefined;
  readonly #collect: (() => void) | undefined;
  readonly #idleMs: number;
  readonly #minRequests: number;
  #served = 0;
  /** Requests in flight at the last `settled`. */
  #inFlight = 0;
  /** V8 heap used after the last {@link collect}, bytes. */
  #afterCollect = 0;
  readonly #heapUsed: () => number;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #reclaims = 0;

  /** @param opts collectors and thresholds */
  constructor(opts: IdleReclaimerOptions) {
    this.#gc = opts.gc;
    this.#trim = opts.trim;
    this.#collect = opts.collect;
    this.#heapUsed = opts.heapUsed ?? (() => Deno.memoryUsage().heapUsed);
    this.#idleMs = opts.idleMs ?? 1000;
    this.#minRequests = opts.minRequests ?? 16;
  }

  /** Reclaims done so far. */
  get reclaims(): number {
    return this.#reclaims;
  }

  /** One request was served (call as it ends); a pending reclaim waits again. */
  served(): void {
    this.#served++;
    this.#cancel();
  }

  /** Nothing is in flight now: reclaim after `idleMs` unless a request comes first. */
  idle(): void {
    this.#cancel();
    if (this.#served < this.#minRequests || (!this.#gc && !this.#trim)) return;
    const timer = setTimeout(() => {
      this.#timer = undefined;
      this.reclaim();
    }, this.#idleMs);
    Deno.unrefTimer(timer); // never keeps a stopping daemon alive
    this.#timer = timer;
  }

  /** Collects and trims now. */
  reclaim(): void {
    this.#served = 0;
    this.#reclaims++;
    this.#gc?.();
    this.#trim?.();
  }

  /**
   * A request ended with `inFlight` others still running: {@link served}, then {@link idle}
   * when none is left (the server's `onSettled`).
   *
   * @param inFlight requests still in flight
   */
  settled(inFlight: number): void {
    this.#inFlight = inFlight;
    this.served();
    if (inFlight === 0) this.idle();
  }

  /**
   * Work done outside any request (e.g. a burst of watch events decoded): counted as a served
   * request, and the idle wait starts again unless a request is in flight (its end will).
   */
  background(): void {
    this.served();
    if (this.#inFlight === 0) this.idle();
  }

  /**
   * A major collection, without the reclaim's compaction and trim, when the V8 heap grew by
   * `growthBytes` or more since the last one this method ran (skipped without `collect`): e.g.
   * after each page of a large list, so its garbage does not pile up before V8 collects.
   *
   * @param growthBytes heap growth that calls for a collection; default 0 (always)
   * @returns whether it collected
   */
  collect(growthBytes = 0): boolean {
    if (!this.#collect) return false;
    const used = this.#heapUsed();
    if (used - this.#afterCollect < growthBytes) return false;
    this.#collect();
    this.#afterCollect = this.#heapUsed();
    return true;
  }

  /** Drops a pending reclaim (the daemon stops); idempotent. */
  close(): void {
    this.#cancel();
  }

  #cancel(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}

/**
 * The daemon's reclaimer: the allocator tuned (when libc loads) and V8's `gc` (exposed by
 * `--expose-gc` in scripts/runtime-flags; skipped without it) in its memory-releasing flavor.
 *
 * @returns the reclaimer to tell of served requests and idle moments
 */
export function daemonReclaimer(): IdleReclaimer {
  const gc = (globalThis as { gc?: (options?: Record<string, string>) => void }).gc;
  return new IdleReclaimer({
    // "last-resort": collect until nothing more is freed and release the emptied pages to the
    // kernel (a plain `gc()` keeps them pooled: measured 147 vs 38 MiB RSS after freeing
    // 100 MiB of objects).
    gc: typeof gc === "function"
      ? () => gc({ type: "major", execution: "sync", flavor: "last-resort" })
      : undefined,
    collect: typeof gc === "function" ? () => gc({ type: "major", execution: "sync" }) : undefined,
    trim: tuneAllocator(),
  });
}
