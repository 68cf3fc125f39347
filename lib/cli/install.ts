/**
 * `manifold install`: the node installer, entrypoint of the DaemonSet container
 * (deploy/40-daemonset.yaml). Puts the binary into the host's CNI bin directory, writes
 * the plugin's kubeconfig (token by file, refreshed on rotation) and, once the cluster
 * default network's config exists and parses, `00-manifold.conflist`; then watches until
 * SIGTERM/SIGINT (see lib/install/installer.ts).
 *
 * Exit codes: 0 stopped by a signal (or `--once` done), 1 failure (the primary config did
 * not appear in time, a file could not be written, the generated config would be invalid),
 * 2 usage error.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { outputs, stopSignal, type TextOutputs } from "./io.ts";
import { createLogger, type Logger } from "../log/mod.ts";
import {
  INSTALL_DEFAULTS,
  type InstallerOptions,
  MANIFOLD_CONFIG_NAME,
  parsePluginConf,
  pluginSource,
  runInstaller,
  type RunningProcess,
  runningProcess,
  serverFromEnv,
} from "../install/mod.ts";
import { errorText } from "../util/text.ts";

/** Usage text of `manifold install`. */
export const INSTALL_USAGE = `Usage: manifold install [options]

Installs Manifold on this node and keeps its CNI config in step with the cluster default
network's. Host paths are given as the host sees them and accessed below --host-root.

Binary:
  --binary PATH                 binary to copy into --cni-bin-dir (default: this executable;
                                run by deno from an image-built source tree: that tree, its
                                npm cache and deno as a bundle in --cni-bin-dir/.manifold/,
                                with --cni-bin-dir/manifold a launcher naming it)
  --skip-binary-copy            do not copy the binary
Paths:
  --host-root DIR               where the host's file system is mounted (default /)
  --cni-conf-dir DIR            host CNI config directory (default ${INSTALL_DEFAULTS.cniConfDir})
  --cni-bin-dir DIR             host CNI binary directory (default ${INSTALL_DEFAULTS.cniBinDir})
  --config-name NAME            generated file name (default ${MANIFOLD_CONFIG_NAME})
Primary (cluster default network):
  --primary-config NAME         pin the primary file name (default: first *.conf/*.conflist)
  --primary-timeout-ms MS       bound on the first wait, 0 = none (default ${INSTALL_DEFAULTS.primaryTimeoutMs})
  --readiness-indicator-file P  host path; no config while it is missing (also given to the plugin)
Kubernetes API:
  --kube-server URL             API server for the plugin (default: from KUBERNETES_SERVICE_HOST/PORT)
  --service-account-dir DIR     token and ca.crt to mirror (default ${INSTALL_DEFAULTS.serviceAccountDir})
  --no-kubeconfig               write no kubeconfig (standalone nodes, nadDir)
Plugin settings (keys of the generated config):
  --log-level LEVEL             logLevel: debug, verbose, error, panic
  --log-file PATH               logFile (host path)
  --cni-dir DIR                 cniDir, the plugin's cache (host path)
  --namespace-isolation         namespaceIsolation: true
  --global-namespaces LIST      globalNamespaces, comma separated
  --plugin-conf JSON            further keys as a JSON object, e.g. '{"defaultNetworks":["x"]}'
  --plugin-conf-file PATH       the same keys from a file (deploy/'s ConfigMap manifold-config,
                                key plugin-conf.json, mounted); --plugin-conf keys win over it
Daemon (manifold daemon, the DaemonSet's main container):
  --daemon-socket PATH          daemonSocket: the binary forwards each request to the daemon
                                listening there (host path, e.g. /run/manifold/manifold.sock);
                                with --cni-bin-dir also binDir (the daemon's delegates' dir)
  --no-daemon-fallback          daemonFallback: false: a request the daemon does not answer fails
                                instead of running in-process (needs --daemon-socket)
Lifecycle:
  --once                        exit once the config is written (no watching)
  --cleanup-config-on-exit      remove the generated config on SIGTERM/SIGINT
  --poll-interval-ms MS         watch period (default ${INSTALL_DEFAULTS.pollIntervalMs})
  -h, --help                    this text

Exit codes: 0 done or stopped by a signal, 1 failure, 2 usage error.
`;

/** Injected I/O of {@link runInstall}; defaults are the process's. */
export interface InstallIO extends TextOutputs {
  /** Environment (`KUBERNETES_SERVICE_HOST`/`PORT`). */
  env?: Record<string, string>;
  /** Stops the installer; default: SIGTERM and SIGINT of the process. */
  signal?: AbortSignal;
  /** The running executable, the default `--binary`; default `Deno.execPath()`. */
  execPath?: string;
  /**
   * What the process is (compiled or deno, its source tree); default {@link runningProcess}
   * with `execPath` applied.
   */
  process?: Partial<RunningProcess>;
  /** Receives the installer's log; default JSON lines on stderr. */
  logger?: Logger;
}

/**
 * `manifold install …`: parses the flags, runs the installer until a signal (or `--once`),
 * and returns the exit code. Never throws. Logs are JSON lines on stderr.
 *
 * @param args the words after `install`
 * @param io stdout, stderr, env, stop signal (default: the process's)
 * @returns 0 done or stopped, 1 failure, 2 usage error
 */
export async function runInstall(args: string[], io: InstallIO = {}): Promise<number> {
  const { stdout, stderr } = outputs(io);
  let options: InstallerOptions;
  try {
    const parsed = parseInstallArgs(
      args,
      io.env ?? Deno.env.toObject(),
      () => ({
        ...runningProcess(),
        ...(io.execPath !== undefined ? { execPath: io.execPath } : {}),
        ...io.process,
      }),
    );
    if (parsed === "help") {
      stdout(INSTALL_USAGE);
      return 0;
    }
    options = parsed;
  } catch (e) {
    stderr(`manifold install: ${errorText(e)}\nTry 'manifold install --help'.\n`);
    return 2;
  }
  const logger = io.logger ??
    createLogger({ level: "verbose", toStderr: true }).with({ cmd: "install" });
  const { signal, release } = stopSignal(io.signal);
  try {
    const result = await runInstaller({ ...options, logger, signal });
    logger.info("installer finished", { ...result });
    return 0;
  } catch (e) {
    logger.error("install failed", { error: errorText(e) });
    stderr(`manifold install: ${errorText(e)}\n`);
    return 1;
  } finally {
    release();
  }
}

/** The flags of `manifold install` (node:util `parseArgs` options). */
const INSTALL_FLAGS = {
  binary: { type: "string" },
  "skip-binary-copy": { type: "boolean" },
  "host-root": { type: "string" },
  "cni-conf-dir": { type: "string" },
  "cni-bin-dir": { type: "string" },
  "config-name": { type: "string" },
  "primary-config": { type: "string" },
  "primary-timeout-ms": { type: "string" },
  "readiness-indicator-file": { type: "string" },
  "kube-server": { type: "string" },
  "service-account-dir": { type: "string" },
  "no-kubeconfig": { type: "boolean" },
  "log-level": { type: "string" },
  "log-file": { type: "string" },
  "cni-dir": { type: "string" },
  "namespace-isolation": { type: "boolean" },
  "global-namespaces": { type: "string" },
  "plugin-conf": { type: "string" },
  "plugin-conf-file": { type: "string" },
  "daemon-socket": { type: "string" },
  "no-daemon-fallback": { type: "boolean" },
  once: { type: "boolean" },
  "cleanup-config-on-exit": { type: "boolean" },
  "poll-interval-ms": { type: "string" },
  help: { type: "boolean", short: "h" },
} as const;

/** The parsed flags. */
type InstallFlags = ReturnType<typeof parseInstallFlags>;

function parseInstallFlags(args: string[]) {
  return parseArgs({ args, options: INSTALL_FLAGS, strict: true, allowPositionals: false })
    .values;
}

/**
 * Turns the flags into installer options; `"help"` for `--help`.
 * @throws Error whose message is the usage problem
 */
function parseInstallArgs(
  args: string[],
  env: Record<string, string>,
  proc: () => RunningProcess,
): InstallerOptions | "help" {
  const values = parseInstallFlags(args);
  if (values.help) return "help";
  const configName = fileName("config-name", values["config-name"]);
  if (configName !== undefined && !configName.endsWith(".conflist")) {
    throw new Error("--config-name must end in .conflist");
  }
  return {
    hostRoot: absolute("host-root", values["host-root"]),
    cniConfDir: absolute("cni-conf-dir", values["cni-conf-dir"]),
    cniBinDir: absolute("cni-bin-dir", values["cni-bin-dir"]),
    configName,
    ...pluginToInstall(values, proc),
    primaryConfig: fileName("primary-config", values["primary-config"]),
    primaryTimeoutMs: ms("primary-timeout-ms", values["primary-timeout-ms"], 0),
    pollIntervalMs: ms("poll-interval-ms", values["poll-interval-ms"], 10),
    readinessIndicatorFile: absolute(
      "readiness-indicator-file",
      values["readiness-indicator-file"],
    ),
    kubeconfig: kubeconfigFromFlags(values, env),
    pluginConf: pluginConfFromFlags(values),
    once: values.once === true,
    cleanupConfigOnExit: values["cleanup-config-on-exit"] === true,
  };
}

/** `--binary`, else this executable or (source variant) its bundle; none with `--skip-binary-copy`. */
function pluginToInstall(
  values: InstallFlags,
  proc: () => RunningProcess,
): Pick<InstallerOptions, "binary" | "bundle"> {
  const src = pluginSource({ binary: values.binary, skip: values["skip-binary-copy"] }, proc());
  if (src === undefined) return {};
  return src.kind === "binary" ? { binary: src.path } : { bundle: src.bundle };
}

/** `--plugin-conf-file`, then `--plugin-conf` (JSON objects), then the keys the single flags set. */
function pluginConfFromFlags(values: InstallFlags): Record<string, unknown> {
  const pluginConf: Record<string, unknown> = {};
  if (values["plugin-conf-file"] !== undefined) {
    const path = absolute("plugin-conf-file", values["plugin-conf-file"])!;
    let text: string;
    try {
      text = Deno.readTextFileSync(path);
    } catch (e) {
      throw new Error(`--plugin-conf-file ${path}: ${errorText(e)}`);
    }
    Object.assign(pluginConf, parsePluginConf(text, `--plugin-conf-file ${path}`));
  }
  if (values["plugin-conf"] !== undefined) {
    Object.assign(pluginConf, parsePluginConf(values["plugin-conf"], "--plugin-conf"));
  }
  if (values["log-level"] !== undefined) pluginConf.logLevel = values["log-level"];
  if (values["log-file"] !== undefined) {
    pluginConf.logFile = absolute("log-file", values["log-file"]);
  }
  if (values["cni-dir"] !== undefined) pluginConf.cniDir = absolute("cni-dir", values["cni-dir"]);
  if (values["namespace-isolation"]) pluginConf.namespaceIsolation = true;
  if (values["global-namespaces"] !== undefined) {
    pluginConf.globalNamespaces = values["global-namespaces"];
  }
  if (values["daemon-socket"] !== undefined) {
    pluginConf.daemonSocket = absolute("daemon-socket", values["daemon-socket"]);
  }
  // `manifold daemon` runs delegates from the config's binDir only (never a request's
  // CNI_PATH): a non-default --cni-bin-dir must reach it, or it looks in /opt/cni/bin —
  // whether the daemon's socket came from --daemon-socket or from --plugin-conf(-file), as
  // deploy/'s ConfigMap gives it.
  if (
    pluginConf.daemonSocket !== undefined && values["cni-bin-dir"] !== undefined &&
    pluginConf.binDir === undefined
  ) {
    pluginConf.binDir = absolute("cni-bin-dir", values["cni-bin-dir"]);
  }
  if (values["no-daemon-fallback"]) {
    if (values["daemon-socket"] === undefined) {
      throw new Error("--no-daemon-fallback needs --daemon-socket");
    }
    pluginConf.daemonFallback = false;
  }
  return pluginConf;
}

/** The plugin's kubeconfig settings: the API server and service account, or none. */
function kubeconfigFromFlags(
  values: InstallFlags,
  env: Record<string, string>,
): InstallerOptions["kubeconfig"] {
  if (values["no-kubeconfig"]) {
    if (values["kube-server"] !== undefined || values["service-account-dir"] !== undefined) {
      throw new Error("--no-kubeconfig cannot be used with --kube-server or --service-account-dir");
    }
    return undefined;
  }
  const server = values["kube-server"] ?? serverFromEnv(env);
  if (server === undefined) {
    throw new Error(
      "no API server: set --kube-server (or KUBERNETES_SERVICE_HOST/PORT), or pass --no-kubeconfig",
    );
  }
  if (!/^https?:\/\/./.test(server)) throw new Error("--kube-server must be an http(s) URL");
  return {
    server,
    serviceAccountDir: absolute("service-account-dir", values["service-account-dir"]),
  };
}

function absolute(flag: string, v: string | undefined): string | undefined {
  if (v !== undefined && !v.startsWith("/")) throw new Error(`--${flag} must be an absolute path`);
  return v;
}

function fileName(flag: string, v: string | undefined): string | undefined {
  if (v !== undefined && (v === "" || v.includes("/") || v.startsWith("."))) {
    throw new Error(`--${flag} must be a plain file name, got ${JSON.stringify(v)}`);
  }
  return v;
}

function ms(flag: string, v: string | undefined, min: number): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!/^\d+$/.test(v.trim()) || !Number.isSafeInteger(n) || n < min) {
    throw new Error(`--${flag} must be an integer ≥ ${min}, got ${JSON.stringify(v)}`);
  }
  return n;
}
