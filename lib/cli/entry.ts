/**
 * The front door for people (main.ts hands over every call that is not a runtime's plugin call):
 * `--version`, `--help`, the subcommands of main.ts's table, and the kubectl plugin
 * (`kubectl-manifold`, a symlink to the same binary; argv[0] decides). A runtime's call without
 * arguments never reaches this module (start-up is part of every pod operation); a call without
 * `CNI_COMMAND` and without a terminal is handed back to the plugin, which answers code 4 as a
 * runtime expects (CNI SPEC "Parameters").
 *
 * Exit codes: the subcommand's own; 0 for help and version; 2 for an unknown command.
 *
 * @module
 */

import { lazyImport } from "../util/lazy.ts";

/** One subcommand of main.ts's table. */
export interface CommandEntry {
  /** The module to load, relative to main.ts (`./lib/cli/….ts`). */
  readonly module: string;
  /** The name of its entry point: `(args: string[]) => Promise<number>`. */
  readonly run: string;
  /** Whether `kubectl manifold <name>` offers it. */
  readonly kubectl: boolean;
}

/** What main.ts gives the front door. */
export interface EntryOptions {
  /** Manifold's release version, e.g. `"0.1.0"`. */
  version: string;
  /** The subcommands by name. */
  commands: Readonly<Record<string, CommandEntry>>;
  /** main.ts's module loader (computed specifiers, relative to main.ts). */
  load: <T>(path: string) => Promise<T>;
  /** Runs the CNI plugin (stdin config, CNI_* environment); returns its exit code. */
  plugin: () => Promise<number>;
  /** The process environment; default `Deno.env.toObject()`. */
  env?: Record<string, string>;
  /** Whether stdin is a terminal; default `Deno.stdin.isTerminal()`. */
  stdinIsTerminal?: () => boolean;
  /** The name the process was started as; default {@link invokedAs}. */
  argv0?: string;
}

/**
 * The environment variable the subcommands read to behave as kubectl's plugin: set to `"1"`
 * when the process runs as `kubectl-manifold` (the default kubeconfig is then kubectl's:
 * `$KUBECONFIG`, else `~/.kube/config`).
 */
export const KUBECTL_PLUGIN_ENV = "MANIFOLD_KUBECTL_PLUGIN";

/**
 * Whether the process was started by a person asking for help rather than by a runtime:
 * `manifold --help`, `-h` or `help`, or `manifold` with no arguments and no `CNI_COMMAND`
 * on a terminal. Without a terminal (a runtime's pipes) a missing `CNI_COMMAND` stays the
 * plugin's code-4 error (CNI SPEC "Parameters").
 *
 * @param args the process arguments (`Deno.args`)
 * @param cniCommand `CNI_COMMAND` when set (empty counts as unset)
 * @param stdinIsTerminal reads whether stdin is a terminal; called only when needed
 * @returns true when the help text should be printed
 * @example
 * ```ts
 * wantsHelp([], undefined, () => true); // true
 * wantsHelp([], undefined, () => false); // false: plugin mode, code 4
 * ```
 */
export function wantsHelp(
  args: readonly string[],
  cniCommand: string | undefined,
  stdinIsTerminal: () => boolean,
): boolean {
  const [first] = args;
  if (first === "--help" || first === "-h" || first === "help") return true;
  return first === undefined && !cniCommand && stdinIsTerminal();
}

/**
 * The name the process was started as (argv[0]'s last path element): `MANIFOLD_ARGV0` when
 * scripts/manifold set it (it execs deno, so argv[0] is lost), else the first entry of
 * /proc/self/cmdline (the compiled binary, reached through a `kubectl-manifold` symlink).
 *
 * @param env the process environment
 * @returns e.g. `"manifold"`, `"kubectl-manifold"`; `""` when unreadable
 */
export function invokedAs(env: Record<string, string | undefined>): string {
  const named = env.MANIFOLD_ARGV0;
  if (named) return named;
  try {
    const argv0 = Deno.readTextFileSync("/proc/self/cmdline").split("\0")[0];
    return argv0.slice(argv0.lastIndexOf("/") + 1);
  } catch {
    return "";
  }
}

/**
 * Dispatches a call with arguments (or a person's call without them).
 *
 * @param args the process arguments
 * @param options the table, loader and plugin of main.ts
 * @returns the exit code: the subcommand's, 0 for help/version, 2 for an unknown command
 */
export async function runEntry(args: string[], options: EntryOptions): Promise<number> {
  const env = options.env ?? Deno.env.toObject();
  const kubectl = (options.argv0 ?? invokedAs(env)).startsWith("kubectl-");
  const [first] = args;
  if (first === "--version" || first === "-v" || first === "version") {
    console.log(`manifold ${options.version} (CNI 0.1.0 … 1.1.0)`);
    return 0;
  }
  const command = first !== undefined && Object.hasOwn(options.commands, first)
    ? options.commands[first]
    : undefined;
  if (command && (!kubectl || command.kubectl)) {
    if (kubectl) Deno.env.set(KUBECTL_PLUGIN_ENV, "1");
    const mod = await options.load<Record<string, (a: string[]) => Promise<number>>>(
      command.module,
    );
    return await mod[command.run](args.slice(1));
  }
  const terminal = options.stdinIsTerminal ?? (() => Deno.stdin.isTerminal());
  // Arguments without CNI_COMMAND come from a person: an unknown word is a usage error, not the
  // plugin's code-4 answer.
  const person = first !== undefined && !env.CNI_COMMAND;
  if (kubectl || person || wantsHelp(args, env.CNI_COMMAND, terminal)) {
    const { manifoldHelp } = await lazyImport<typeof import("./help.ts")>(
      "./help.ts",
      import.meta.url,
    );
    const help = manifoldHelp(options.version, { kubectl }).trimEnd();
    const asked = first === undefined || first === "--help" || first === "-h" || first === "help";
    if (asked) console.log(help);
    else {console.error(
        `${kubectl ? "kubectl manifold" : "manifold"}: unknown command ${
          JSON.stringify(first)
        }\n\n${help}`,
      );}
    return asked ? 0 : 2;
  }
  return await options.plugin();
}
