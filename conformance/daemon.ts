/**
 * Daemon mode of the conformance suite: the plugin's resident node daemon (Manifold's
 * `manifold daemon`, Multus thick's `multus-daemon`) run for the length of the suite, so every
 * check's CNI call goes through the thin binary and the daemon's socket rather than running
 * in-process.
 *
 * The daemon is started from a command line with placeholders, is ready once its unix socket
 * accepts a connection, has its stdout and stderr appended to one log file, and is stopped with
 * SIGTERM (SIGKILL after {@link STOP_GRACE_MS}). Nothing here knows any plugin.
 *
 * @module
 */

/** Time the daemon has to make its socket answer, ms. */
export const READY_TIMEOUT_MS = 30_000;
/** Time the daemon has to exit after SIGTERM before it gets SIGKILL, ms. */
export const STOP_GRACE_MS = 15_000;

/** How the daemon ended. */
export interface DaemonExit {
  /** Exit code. */
  code: number;
  /** The signal that ended it, if one did. */
  signal: Deno.Signal | null;
  /** True when SIGTERM was not enough and it got SIGKILL. */
  killed: boolean;
}

/**
 * Splits a command line into words as a shell would for a simple command (blanks separate;
 * `'…'` and `"…"` quote; `\` escapes outside single quotes; no expansion, no operators) and
 * replaces `{{name}}` placeholders in each word with `values[name]` (unknown names are kept).
 * @param command e.g. `manifold daemon --conf {{conf}} --socket {{socket}}`
 * @param values placeholder values
 * @returns argv, at least one word
 * @throws Error on an unterminated quote or an empty command
 * @example
 * ```ts
 * fillCommand("d --socket '{{socket}}' -v", { socket: "/run/d.sock" });
 * // ["d", "--socket", "/run/d.sock", "-v"]
 * ```
 */
export function fillCommand(command: string, values: Record<string, string>): string[] {
  const words: string[] = [];
  let word: string | undefined;
  let quote: "'" | '"' | undefined;
  for (let i = 0; i < command.length; i++) {
    const c = command[i];
    if (quote) {
      if (c === quote) quote = undefined;
      else if (c === "\\" && quote === '"' && i + 1 < command.length) word += command[++i];
      else word += c;
    } else if (/\s/.test(c)) {
      if (word !== undefined) words.push(word);
      word = undefined;
    } else if (c === "'" || c === '"') {
      quote = c;
      word ??= "";
    } else if (c === "\\" && i + 1 < command.length) {
      word = (word ?? "") + command[++i];
    } else {
      word = (word ?? "") + c;
    }
  }
  if (quote) throw new Error(`unterminated ${quote} in the daemon command`);
  if (word !== undefined) words.push(word);
  if (words.length === 0) throw new Error("the daemon command is empty");
  return words.map((w) => w.replace(/\{\{(\w+)\}\}/g, (m, k: string) => values[k] ?? m));
}

/** A running node daemon. */
export class NodeDaemon {
  #child: Deno.ChildProcess;
  #exited: Promise<Deno.CommandStatus>;
  #logging: Promise<unknown>;
  #exit: DaemonExit | undefined;

  private constructor(child: Deno.ChildProcess, logging: Promise<unknown>) {
    this.#child = child;
    this.#exited = child.status;
    this.#logging = logging;
  }

  /**
   * Starts `argv` and waits until `socket` accepts a connection.
   * @param argv the daemon's command ({@link fillCommand})
   * @param opts `socket` to wait for, `log` file (appended), `timeoutMs` (default
   *   {@link READY_TIMEOUT_MS}), `env`: variables over the suite's own (the node's `CNI_PATH`:
   *   a node daemon finds delegates with its own, not the request's)
   * @returns the running daemon
   * @throws Error when it exits first or its socket does not answer in time (it is stopped;
   *   the message ends with the log's last lines)
   */
  static async start(
    argv: string[],
    opts: { socket: string; log: string; timeoutMs?: number; env?: Record<string, string> },
  ): Promise<NodeDaemon> {
    const [cmd, ...args] = argv;
    const child = new Deno.Command(cmd, {
      args,
      env: opts.env,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const sink = (stream: ReadableStream<Uint8Array>) =>
      Deno.open(opts.log, { create: true, append: true })
        .then((f) => stream.pipeTo(f.writable))
        .catch(() => {});
    const d = new NodeDaemon(child, Promise.all([sink(child.stdout), sink(child.stderr)]));
    const deadline = Date.now() + (opts.timeoutMs ?? READY_TIMEOUT_MS);
    let exited: Deno.CommandStatus | undefined;
    d.#exited.then((s) => exited = s);
    for (;;) {
      if (exited) {
        await d.#logging;
        throw new Error(
          `the daemon exited (code ${exited.code}) before its socket answered` +
            await tail(opts.log),
        );
      }
      try {
        (await Deno.connect({ transport: "unix", path: opts.socket })).close();
        return d;
      } catch { /* not yet */ }
      if (Date.now() > deadline) {
        await d.stop();
        throw new Error(
          `the daemon's socket ${opts.socket} did not answer within ` +
            `${opts.timeoutMs ?? READY_TIMEOUT_MS} ms` + await tail(opts.log),
        );
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /**
   * SIGTERM, then SIGKILL after {@link STOP_GRACE_MS}; waits for the exit and the log.
   * Idempotent; never throws.
   * @returns how it ended
   */
  async stop(): Promise<DaemonExit> {
    if (this.#exit) return this.#exit;
    let killed = false;
    try {
      this.#child.kill("SIGTERM");
    } catch { /* already gone */ }
    let timer: ReturnType<typeof setTimeout> | undefined;
    const grace = new Promise<void>((r) => timer = setTimeout(r, STOP_GRACE_MS));
    const first = await Promise.race([this.#exited, grace]);
    clearTimeout(timer);
    if (!first) {
      killed = true;
      try {
        this.#child.kill("SIGKILL");
      } catch { /* gone meanwhile */ }
    }
    const status = await this.#exited;
    await this.#logging;
    this.#exit = { code: status.code, signal: status.signal, killed };
    return this.#exit;
  }
}

/** The log's last lines, as a message suffix. */
async function tail(log: string): Promise<string> {
  const text = await Deno.readTextFile(log).catch(() => "");
  const lines = text.trimEnd().split("\n").slice(-15).join("\n");
  return lines ? `; its output ends:\n${lines}` : "; it wrote nothing";
}
