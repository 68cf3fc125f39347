/**
 * Work that may wait for the main thread to be idle. A per-call plugin process is bound by its
 * main thread until its first delegate runs, and the only time that thread waits is for the
 * API server's answers; work the plugin needs later (Deno's process API, loaded on first use)
 * is queued here with {@link whenIdle} and run, one task per wait, by the layer that starts
 * such a wait ({@link idleNow}: the HTTP/1.1 transport, once a request is written and before
 * its response is read). A task that never finds a wait costs nothing: whoever needs its
 * result later does the work then. Import-free.
 *
 * @module
 */

const queue: (() => void)[] = [];

/**
 * Queues `task` for the next {@link idleNow}. Tasks run in the order queued, one per call; a
 * task's exception is swallowed (it prepares work that its user does again if it failed).
 * @param task synchronous work, e.g. touching a lazily loaded API
 * @example
 * ```ts
 * whenIdle(() => void Deno.Command); // loaded while the next API answer is awaited
 * ```
 */
export function whenIdle(task: () => void): void {
  queue.push(task);
}

/**
 * Runs the oldest queued task, if any: to be called right after a wait was started whose end
 * the main thread would otherwise sit out (a request written, its answer not yet read).
 * @returns true when a task ran
 */
export function idleNow(): boolean {
  const task = queue.shift();
  if (!task) return false;
  try {
    task();
  } catch { /* the task's user does the work again */ }
  return true;
}

/**
 * Runs every queued task now (for a path that reached the point where their results are
 * needed without having waited enough, and for tests).
 */
export function drainIdle(): void {
  while (idleNow()) { /* one at a time, in order */ }
}
