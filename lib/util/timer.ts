/**
 * Timers for the per-pod hot path. In Deno 2.9 the first `setTimeout` of a process loads the
 * Node-compatible timers module (≈ 5–9 ms, measured after fetch/spawn had run), while
 * `AbortSignal.timeout` uses the runtime's own timer (≈ 0.4 ms). Every ADD and DEL needs a
 * timer (delegate and API time bounds), so these helpers build on `AbortSignal.timeout`.
 *
 * A pending timer keeps the event loop alive until it fires, even after {@link Timer.cancel}
 * (its callback is then not called), and holds ≈ 1 KiB of heap until then: fine for the plugin,
 * which ends with `Deno.exit`. A long-running process calls {@link useClearableTimers} once:
 * the same helpers then use `setTimeout`/`clearTimeout`, and a cancelled timer is gone at once.
 *
 * @module
 */

/** Whether {@link startTimer} uses `setTimeout` (see {@link useClearableTimers}). */
let clearable = false;

/**
 * Makes {@link startTimer} (and {@link sleep}) use `setTimeout`/`clearTimeout` for the rest of
 * the process, so that a cancelled timer frees what it holds at once instead of when its delay
 * ends. For `manifold daemon`, where every request starts timers of up to the delegate timeout
 * (60 s) and cancels them: measured ≈ 1 KiB of heap per such timer, i.e. ≈ 6 MiB held under a
 * sustained 30 requests/s. Idempotent.
 */
export function useClearableTimers(): void {
  clearable = true;
}

/** A started one-shot timer. */
export interface Timer {
  /** Prevents the callback (idempotent). */
  cancel(): void;
}

/**
 * Calls `fn` once after `ms` milliseconds (0 or less: on the next timer tick).
 * @returns a handle whose `cancel()` prevents the call.
 */
export function startTimer(ms: number, fn: () => void): Timer {
  if (clearable) {
    const id = setTimeout(fn, Math.max(0, Math.ceil(ms)));
    return { cancel: () => clearTimeout(id) };
  }
  const signal = AbortSignal.timeout(Math.max(0, Math.ceil(ms)));
  // Dropped on cancel: the pending signal lives until `ms` ends, and must not keep `fn` (and
  // what it holds, e.g. a delegate's child process and its pipe buffers) that long — in
  // `manifold daemon` that kept ≈ 128 KiB per delegate for `delegateTimeoutMs`.
  let callback: (() => void) | undefined = fn;
  signal.addEventListener("abort", () => {
    const f = callback;
    callback = undefined;
    f?.();
  }, { once: true });
  return {
    cancel() {
      callback = undefined;
    },
  };
}

/** Resolves after `ms` milliseconds. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => startTimer(ms, resolve));
}

/**
 * Waits `ms` milliseconds, or less when `signal` aborts; never rejects. Built on `setTimeout`
 * (cleared on abort), so nothing stays pending: for long-running loops (`manifold mirror`,
 * `manifold install`), not for the per-pod hot path.
 */
export function sleepUnlessAborted(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}
