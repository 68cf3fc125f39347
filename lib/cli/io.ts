/**
 * What the `manifold` subcommands share at the process edge: their text outputs (injectable
 * for tests), the stop signal of the long-running ones (SIGTERM/SIGINT), and one-line error
 * messages.
 *
 * @module
 */

/** Where a subcommand writes text; defaults are the process's stdout and stderr. */
export interface TextOutputs {
  /** Receives normal output (e.g. `--help`, reports). */
  stdout?: (s: string) => void;
  /** Receives usage errors and failures. */
  stderr?: (s: string) => void;
}

/** `io`'s writers, falling back to synchronous writes to the process's stdout/stderr. */
export function outputs(io: TextOutputs): Required<TextOutputs> {
  const enc = new TextEncoder();
  return {
    stdout: io.stdout ?? ((s) => void Deno.stdout.writeSync(enc.encode(s))),
    stderr: io.stderr ?? ((s) => void Deno.stderr.writeSync(enc.encode(s))),
  };
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
