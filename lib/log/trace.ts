/**
 * Start-up and phase timeline of one plugin process: {@link mark} records a named instant
 * (ms since the runtime started, `performance.now()`), {@link timeline} returns them. The
 * plugin logs the timeline at debug level once per command, so an operator (and
 * `scripts/bench.ts`) can see where an ADD's time goes. Import-free; costs one array push.
 *
 * @module
 */

const marks: [string, number][] = [];
let enabled = true;

/** Records `name` at the current time (ms since the runtime started, sub-ms precision). */
export function mark(name: string): void {
  if (enabled) marks.push([name, performance.now()]);
}

/**
 * Turns marks off for the rest of the process and forgets those recorded: the timeline is
 * one process's, so a process serving many requests at once (`manifold daemon`) records none
 * (they would mix requests and grow without bound).
 */
export function disableMarks(): void {
  enabled = false;
  marks.length = 0;
}

/**
 * The marks so far, in order, as `{name: ms}` rounded to 0.1 ms (a name marked twice keeps
 * its last time), plus `epochMs`: the wall-clock time (ms since the Unix epoch) at which the
 * runtime started, so another process can relate the marks to its own clock.
 */
export function timeline(): Record<string, number> {
  const out: Record<string, number> = { epochMs: performance.timeOrigin };
  for (const [name, t] of marks) out[name] = Math.round(t * 10) / 10;
  return out;
}
