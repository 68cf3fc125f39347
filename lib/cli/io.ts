/**
 * What the `manifold` subcommands share at the process edge: their text outputs (injectable
 * for tests), the process environment, a logger that passes warnings on, and the stop signal
 * of the long-running ones (SIGTERM/SIGINT).
 *
 * @module
 */

import type { LogFields, Logger } from "../log/mod.ts";

/** Where a subcommand writes text; defaults are the process's stdout and stderr. */
export interface TextOutputs {
  /** Receives normal output (e.g. `--help`, reports). */
  stdout?: (s: string) => void;
  /** Receives usage errors and failures. */
  stderr?: (s: string) => void;
}

/**
 * `io`'s writers, falling back to synchronous writes of the whole text to the process's
 * stdout/stderr (a pipe may take a large report in several writes).
 *
 * @param io the injected writers, if any
 * @returns both writers
 */
export function outputs(io: TextOutputs): Required<TextOutputs> {
  return {
    stdout: io.stdout ?? writeTo(Deno.stdout),
    stderr: io.stderr ?? writeTo(Deno.stderr),
  };
}

function writeTo(file: { writeSync(p: Uint8Array): number }): (s: string) => void {
  const enc = new TextEncoder();
  return (s) => {
    const data = enc.encode(s);
    for (let off = 0; off < data.length;) off += file.writeSync(data.subarray(off));
  };
}

/**
 * The process environment, or `{}` without `--allow-env` (the defaults apply then).
 *
 * @returns a copy of the environment
 */
export function processEnv(): Record<string, string> {
  try {
    return Deno.env.toObject();
  } catch {
    return {};
  }
}

/**
 * A {@link Logger} for a subcommand that calls library code which logs: warnings and errors
 * go to `onWarning` (e.g. a line on stderr, or into a report), debug and info are dropped.
 *
 * @param onWarning receives each warning or error message and its fields
 * @returns the logger (`with` returns the same one)
 */
export function warningLogger(onWarning: (msg: string, fields?: LogFields) => void): Logger {
  const logger: Logger = {
    debug: () => {},
    info: () => {},
    warn: onWarning,
    error: onWarning,
    with: () => logger,
  };
  return logger;
}

/**
 * The signal that stops a long-running subcommand: `given` when there is one (tests), else one
 * aborted by the process's SIGTERM or SIGINT. Call `release()` when done (removes the signal
 * listeners).
 */
export function stopSignal(given?: AbortSignal): { signal: AbortSignal; release(): void } {
  if (given) return { signal: given, release() {} };
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  Deno.addSignalListener("SIGTERM", onSignal);
  Deno.addSignalListener("SIGINT", onSignal);
  return {
    signal: stop.signal,
    release() {
      Deno.removeSignalListener("SIGTERM", onSignal);
      Deno.removeSignalListener("SIGINT", onSignal);
    },
  };
}
