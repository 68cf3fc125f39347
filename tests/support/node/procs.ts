/**
 * Processes of the node harness: one-shot commands ({@link run}) and long-running
 * components ({@link Proc}) whose output is appended to a log file, stopped with SIGTERM then
 * SIGKILL, each in its own process group so nothing it forked outlives it.
 *
 * @module
 */

/** Output of a finished command. */
export interface RunResult {
  stdout: string;
  stderr: string;
}

/**
 * Runs `cmd args` to completion.
 *
 * @returns its stdout and stderr
 * @throws Error naming the command, its exit code and stderr when it exits non-zero
 */
export async function run(
  cmd: string,
  args: string[],
  opts: { env?: Record<string, string> } = {},
): Promise<RunResult> {
  const out = await new Deno.Command(cmd, { args, stdin: "null", env: opts.env }).output();
  const dec = new TextDecoder();
  const res = { stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
  if (!out.success) {
    throw new Error(
      `${cmd} ${args.join(" ")}: exit ${out.code}: ${res.stderr.trim() || res.stdout.trim()}`,
    );
  }
  return res;
}

/** A long-running component (kubelet, containerd, …); output appended to `log`. */
export class Proc {
  #child: Deno.ChildProcess;
  /** Resolves when the process exits. */
  readonly status: Promise<Deno.CommandStatus>;
  #exited = false;

  /**
   * Starts `cmd args` in a new session (`setsid`), output appended to `log`.
   *
   * @param name short name for messages (`kubelet`)
   */
  constructor(
    readonly name: string,
    cmd: string,
    args: string[],
    readonly log: string,
    env?: Record<string, string>,
  ) {
    this.#child = new Deno.Command("setsid", {
      args: ["bash", "-c", `exec "$0" "$@" >>'${log}' 2>&1`, cmd, ...args],
      stdin: "null",
      stdout: "null",
      stderr: "null",
      env,
    }).spawn();
    this.status = this.#child.status.finally(() => this.#exited = true);
  }

  /** Process id (also the process group id). */
  get pid(): number {
    return this.#child.pid;
  }

  /** Whether the process has exited. */
  get exited(): boolean {
    return this.#exited;
  }

  /** SIGTERM (or `sig`), then SIGKILL to the group after `graceMs`; resolves once it is gone. */
  async stop(graceMs = 10_000, sig: Deno.Signal = "SIGTERM"): Promise<void> {
    if (this.#exited) return;
    this.#signal(sig);
    const timer = setTimeout(() => this.#signal("SIGKILL", true), graceMs);
    try {
      await this.status;
    } finally {
      clearTimeout(timer);
    }
  }

  /** SIGKILL now (no grace), and wait until it is gone. */
  async kill(): Promise<void> {
    this.#signal("SIGKILL", true);
    await this.status;
  }

  /** The last `lines` lines of the log (for error messages). */
  async tail(lines = 20): Promise<string> {
    const text = await Deno.readTextFile(this.log).catch(() => "");
    return text.trimEnd().split("\n").slice(-lines).join("\n");
  }

  #signal(sig: Deno.Signal, group = false) {
    if (this.#exited) return;
    try {
      if (group) Deno.kill(-this.pid, sig);
      else Deno.kill(this.pid, sig);
    } catch { /* already gone */ }
  }
}
