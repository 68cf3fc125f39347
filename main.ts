/**
 * Manifold: a Kubernetes multi-network CNI delegating plugin (NPWG v1.3).
 *
 * Called by a container runtime with CNI_* variables and a config on stdin, it is a CNI
 * plugin. With a first argument it is a tool: `manifold --version`, `manifold --help`,
 * `manifold inspect …`, `manifold install …`, `manifold doctor …`, `manifold explain …`,
 * `manifold mirror …`, `manifold controller …`, `manifold daemon …`; run by hand on a terminal
 * without `CNI_COMMAND`, it prints its help.
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
 * Imports one of Manifold's modules, given relative to this file, when the mode needs it.
 * The specifier is computed on purpose: `deno run` loads (reads and parses) every module
 * reachable through string-literal imports, dynamic ones included, before the first line runs
 * — 147 modules, ≈ 12 ms of every forwarded call. The type argument keeps the module's types
 * (a type-only reference, not loaded at run time); `deno compile` gets each path with
 * `--include` (scripts/compile.sh collects every `"./lib/…ts"` string of this file).
 *
 * @param path the module's path relative to main.ts (`./lib/…`)
 * @returns the module namespace
 */
function load<T>(path: string): Promise<T> {
  return import(new URL(path, import.meta.url).href);
}

if (import.meta.main) {
  const [first] = Deno.args;
  if (first === "--version" || first === "-v" || first === "version") {
    console.log(`manifold ${VERSION} (CNI 0.1.0 … 1.1.0)`);
    Deno.exit(0);
  }
  if (wantsHelp(Deno.args, Deno.env.get("CNI_COMMAND"), () => Deno.stdin.isTerminal())) {
    const { manifoldHelp } = await load<typeof import("./lib/cli/help.ts")>("./lib/cli/help.ts");
    console.log(manifoldHelp(VERSION).trimEnd());
    Deno.exit(0);
  }
  if (first === "inspect") {
    const { runInspect } = await load<typeof import("./lib/cli/inspect.ts")>(
      "./lib/cli/inspect.ts",
    );
    Deno.exit(await runInspect(Deno.args.slice(1)));
  }
  if (first === "install") {
    const { runInstall } = await load<typeof import("./lib/cli/install.ts")>(
      "./lib/cli/install.ts",
    );
    Deno.exit(await runInstall(Deno.args.slice(1)));
  }
  if (first === "doctor") {
    const { runDoctor } = await load<typeof import("./lib/cli/doctor.ts")>("./lib/cli/doctor.ts");
    Deno.exit(await runDoctor(Deno.args.slice(1)));
  }
  if (first === "explain") {
    const { runExplain } = await load<typeof import("./lib/cli/explain.ts")>(
      "./lib/cli/explain.ts",
    );
    Deno.exit(await runExplain(Deno.args.slice(1)));
  }
  if (first === "controller") {
    const { runControllerCli } = await load<typeof import("./lib/cli/controller.ts")>(
      "./lib/cli/controller.ts",
    );
    Deno.exit(await runControllerCli(Deno.args.slice(1)));
  }
  if (first === "mirror") {
    const { runMirror } = await load<typeof import("./lib/cli/mirror.ts")>("./lib/cli/mirror.ts");
    Deno.exit(await runMirror(Deno.args.slice(1)));
  }
  if (first === "daemon") {
    const { runDaemon } = await load<typeof import("./lib/cli/daemon.ts")>("./lib/cli/daemon.ts");
    Deno.exit(await runDaemon(Deno.args.slice(1)));
  }
  // Commands with a config: read stdin once; a config naming a daemonSocket is forwarded
  // (lib/daemon/forward.ts, import-free) before any heavy module loads.
  let stdin: Uint8Array | undefined;
  const command = Deno.env.get("CNI_COMMAND") ?? "";
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
      if (code !== undefined) Deno.exit(code);
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
  const io = denoSkelIO({ stdin });
  const code = await dispatch(manifoldHandlers(realDeps(env), { processEnv: env }), io);
  Deno.exit(code);
}
