/**
 * Manifold: a Kubernetes multi-network CNI delegating plugin (NPWG v1.3).
 *
 * Called by a container runtime with CNI_* variables and a config on stdin, it is a CNI
 * plugin. With arguments it is a tool: `manifold --version`, `manifold --help`, or one of the
 * subcommands of {@link COMMANDS} (lib/cli/entry.ts dispatches them); run by hand on a terminal
 * without `CNI_COMMAND`, it prints its help. Installed as `kubectl-manifold` (a symlink to the same
 * binary; argv[0] decides) it is a kubectl plugin: `kubectl manifold explain|inspect|doctor …`.
 *
 * Wiring only. The process runs once per pod operation, so start-up is part of every ADD
 * and DEL: nothing is imported statically, and each mode loads only its own modules
 * (`--version` loads none; the plugin loads the dispatcher, then the command's module).
 *
 * @module
 */

/** Manifold's release version. */
export const VERSION = "0.1.0";

/**
 * The subcommands: `manifold <name> …` loads `module` (only then) and runs its `run` export with
 * the arguments after the name; `kubectl: true` ones are also `kubectl manifold <name>`.
 * lib/cli/help.ts describes each.
 */
export const COMMANDS = {
  inspect: { module: "./lib/cli/inspect.ts", run: "runInspect", kubectl: true },
  explain: { module: "./lib/cli/explain.ts", run: "runExplain", kubectl: true },
  doctor: { module: "./lib/cli/doctor.ts", run: "runDoctor", kubectl: true },
  install: { module: "./lib/cli/install.ts", run: "runInstall", kubectl: false },
  mirror: { module: "./lib/cli/mirror.ts", run: "runMirror", kubectl: false },
  daemon: { module: "./lib/cli/daemon.ts", run: "runDaemon", kubectl: false },
  controller: { module: "./lib/cli/controller.ts", run: "runControllerCli", kubectl: false },
} as const;

/**
 * Imports one of Manifold's modules, given relative to this file, when the mode needs it.
 * The specifier is computed on purpose: `deno run` loads (reads and parses) every module
 * reachable through string-literal imports, dynamic ones included, before the first line runs
 * — 147 modules, ≈ 12 ms of every forwarded call. The type argument keeps the module's types
 * (a type-only reference, not loaded at run time); `deno compile` embeds every module of lib/ with
 * `--include` (scripts/compile.sh); lib/util/lazy.ts does the same for lib's own branches.
 *
 * @param path the module's path relative to main.ts (`./lib/…`)
 * @returns the module namespace
 */
export function load<T>(path: string): Promise<T> {
  return import(new URL(path, import.meta.url).href);
}

/**
 * The CNI plugin (the runtime's call, the hot path): reads stdin once; a config naming a
 * `daemonSocket` is forwarded (lib/daemon/forward.ts, import-free) before any heavy module
 * loads; else the dispatcher runs the command in this process.
 *
 * @param command `CNI_COMMAND` (may be empty or unknown: the dispatcher answers code 4)
 * @returns the exit code
 */
async function plugin(command: string): Promise<number> {
  if (command === "VERSION") {
    // What lib/cni/skel.ts's dispatch answers to VERSION (stdin unread, a constant), without
    // its modules: they load zod (72 scripts, ≈ 460 KiB of source to compile, ≈ 12 ms).
    const { CURRENT_VERSION, SUPPORTED_VERSIONS } = await load<
      typeof import("./lib/cni/version.ts")
    >("./lib/cni/version.ts");
    const bytes = new TextEncoder().encode(
      JSON.stringify({ cniVersion: CURRENT_VERSION, supportedVersions: SUPPORTED_VERSIONS }),
    );
    try {
      for (let off = 0; off < bytes.length;) off += Deno.stdout.writeSync(bytes.subarray(off));
      return 0;
    } catch {
      return 1;
    }
  }
  let stdin: Uint8Array | undefined;
  if (/^(ADD|DEL|CHECK|GC|STATUS)$/.test(command)) {
    const { MAX_STDIN_BYTES, readStdinBytes } = await load<typeof import("./lib/cni/stdin.ts")>(
      "./lib/cni/stdin.ts",
    );
    stdin = await readStdinBytes(MAX_STDIN_BYTES).catch(() => undefined);
    const text = stdin && stdin.length <= MAX_STDIN_BYTES
      ? new TextDecoder().decode(stdin)
      : undefined;
    if (text?.includes('"daemonSocket"')) {
      const daemon = await load<typeof import("./lib/daemon/forward.ts")>(
        "./lib/daemon/forward.ts",
      );
      const code = await daemon.forwardOrFallback(stdin!, Deno.env.toObject());
      if (code !== undefined) return code;
    }
    if (text && command === "ADD") {
      // The one place an in-process ADD starts the TLS warm-up (lib/k8s/tls_warm.ts: ≈ 29 ms
      // on a blocking thread), as early as the config is known.
      let config: unknown;
      try {
        config = JSON.parse(text);
      } catch { /* the dispatcher reports it */ }
      const warm = await load<typeof import("./lib/k8s/tls_warm.ts")>("./lib/k8s/tls_warm.ts");
      warm.warmTlsForApi(config, Deno.env.toObject());
    }
  }
  const [{ denoSkelIO, dispatch }, { manifoldHandlers, realDeps }] = await Promise.all([
    load<typeof import("./lib/cni/skel.ts")>("./lib/cni/skel.ts"),
    load<typeof import("./lib/multinet/plugin.ts")>("./lib/multinet/plugin.ts"),
  ]);
  const env = Deno.env.toObject();
  return await dispatch(
    manifoldHandlers(realDeps(env), { processEnv: env }),
    denoSkelIO({ stdin }),
  );
}

if (import.meta.main) {
  const command = Deno.env.get("CNI_COMMAND") ?? "";
  if (Deno.args.length === 0 && command !== "") Deno.exit(await plugin(command));
  const cli = await load<typeof import("./lib/cli/entry.ts")>("./lib/cli/entry.ts");
  const options = { version: VERSION, commands: COMMANDS, load, plugin: () => plugin(command) };
  Deno.exit(await cli.runEntry(Deno.args, options));
}
