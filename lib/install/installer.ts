/**
 * The node installer's lifecycle (`manifold install`, the DaemonSet container's
 * entrypoint): install the binary, mirror the service-account credentials and write the
 * plugin's kubeconfig, wait (bounded) for the primary CNI config, write
 * `00-manifold.conflist`, then watch: regenerate when the primary or the settings change
 * or when the file was removed or altered by someone else (Multus #972, #1110); remove it
 * when the primary disappears or the readiness indicator file is removed (NPWG v1.3 §6.1:
 * no Manifold config while the default network is not ready), and on exit when asked.
 *
 * Every host path is given as the host sees it (`/etc/cni/net.d`) and accessed below
 * `hostRoot` (the DaemonSet mounts the host's directories under `/host`); generated files
 * name host paths. Watching is polling (every `pollIntervalMs`), which survives atomic
 * renames, symlink swaps and host-path mounts alike.
 *
 * @module
 */

import { type Logger, nullLogger } from "../log/mod.ts";
import { readTextIfExists, removeFileDurable, sameContent, writeFileAtomic } from "../fs/atomic.ts";
import { installBinary } from "./binary.ts";
import {
  generateManifoldConflist,
  isManifoldConfig,
  MANIFOLD_CONFIG_NAME,
  renderConfig,
} from "./conflist.ts";
import {
  buildPluginKubeconfig,
  KUBECONFIG_NAME,
  MANIFOLD_CONF_SUBDIR,
  SERVICE_ACCOUNT_FILES,
} from "./kubeconfig.ts";
import { findPrimaryConfig } from "./primary.ts";
import { sleepUnlessAborted } from "../util/timer.ts";

/** Defaults of {@link InstallerOptions}. */
export const INSTALL_DEFAULTS = {
  hostRoot: "/",
  cniConfDir: "/etc/cni/net.d",
  cniBinDir: "/opt/cni/bin",
  binaryName: "manifold",
  primaryTimeoutMs: 120_000,
  pollIntervalMs: 1_000,
  progressIntervalMs: 10_000,
  serviceAccountDir: "/var/run/secrets/kubernetes.io/serviceaccount",
} as const;

/** Options of {@link runInstaller}. Paths named "host path" are as the host sees them. */
export interface InstallerOptions {
  /** Where the host's file system is mounted in the installer's view; default `"/"`. */
  hostRoot?: string;
  /** Host path of the CNI configuration directory; default `/etc/cni/net.d`. */
  cniConfDir?: string;
  /** Host path of the CNI binary directory; default `/opt/cni/bin`. */
  cniBinDir?: string;
  /** File name of the generated config; default {@link MANIFOLD_CONFIG_NAME}. */
  configName?: string;
  /** The binary to install (installer view); absent: no copy. */
  binary?: string;
  /** Name of the binary in `cniBinDir` (the plugin `type`); default `"manifold"`. */
  binaryName?: string;
  /** Pinned primary file name in `cniConfDir` (Multus `multusMasterCNI`). */
  primaryConfig?: string;
  /** Bound on the first wait for the primary (and readiness file), ms; 0 = no bound. Default 120 000. */
  primaryTimeoutMs?: number;
  /** Polling period, ms; default 1000. */
  pollIntervalMs?: number;
  /** Period of the "still waiting" log line, ms; default 10 000. */
  progressIntervalMs?: number;
  /** Host path of the readiness indicator file; also written into the plugin config. */
  readinessIndicatorFile?: string;
  /**
   * Write a kubeconfig for the plugin: API server URL and the service-account directory
   * (installer view) whose `token` and `ca.crt` are mirrored to the host. Absent: none.
   */
  kubeconfig?: { server: string; serviceAccountDir?: string };
  /** Further keys of the plugin entry (validated with the generated config). */
  pluginConf?: Record<string, unknown>;
  /** Return once the config is written instead of watching. */
  once?: boolean;
  /** Remove the generated config when stopped through `signal` (Multus `--cleanup-config-on-exit`). */
  cleanupConfigOnExit?: boolean;
  /** Progress and changes (info), problems (warn). */
  logger?: Logger;
  /** Stops the watch loop (SIGTERM); the installer then cleans up as asked and returns. */
  signal?: AbortSignal;
}

/** What {@link runInstaller} did when it returned. */
export interface InstallerResult {
  /** Why it returned: `"once"` (config written with `once`) or `"stopped"` (signal). */
  reason: "once" | "stopped";
  /** Times the config was written (first write and regenerations). */
  writes: number;
  /** Whether the generated config was removed on exit. */
  cleanedUp: boolean;
}

/** The primary (or readiness file) did not appear within `primaryTimeoutMs`. */
export class InstallTimeoutError extends Error {
  /**
   * @param waitedMs how long the installer waited, ms
   * @param reason why it was not ready, e.g. `no *.conf or *.conflist file in /host/etc/cni/net.d`
   */
  constructor(readonly waitedMs: number, readonly reason: string) {
    super(`the cluster default network was not ready within ${waitedMs} ms: ${reason}`);
    this.name = "InstallTimeoutError";
  }
}

/** The host path `p` in the installer's view: `hostRoot` + `p`. */
export function underRoot(hostRoot: string, p: string): string {
  const root = hostRoot.replace(/\/+$/, "");
  return root === "" ? p : `${root}${p.startsWith("/") ? "" : "/"}${p}`;
}

/**
 * Runs the installer until `signal` aborts it (or, with `once`, until the config is
 * written). See the module documentation for the steps.
 *
 * @param options see {@link InstallerOptions}
 * @returns what happened
 * @throws {InstallTimeoutError} when the primary config (and readiness file) did not become
 *   ready within `primaryTimeoutMs` of the start; nothing was written then
 * @throws {CniError} code 7 when `pluginConf` makes the generated config invalid
 * @throws Deno errors when the binary cannot be installed, the service-account token is
 *   missing at start, or a host directory cannot be written
 */
export async function runInstaller(options: InstallerOptions = {}): Promise<InstallerResult> {
  const o = { ...INSTALL_DEFAULTS, configName: MANIFOLD_CONFIG_NAME, ...stripUndefined(options) };
  const log = options.logger ?? nullLogger;
  const signal = options.signal ?? new AbortController().signal;
  const host = (p: string) => underRoot(o.hostRoot, p);
  const confDirHost = o.cniConfDir.replace(/\/+$/, "");
  const confDir = host(confDirHost);
  const configPath = `${confDir}/${o.configName}`;
  const subdirHost = `${confDirHost}/${MANIFOLD_CONF_SUBDIR}`;

  if (options.binary) {
    const dest = host(`${o.cniBinDir.replace(/\/+$/, "")}/${o.binaryName}`);
    const outcome = await installBinary(options.binary, dest);
    log.info(outcome === "installed" ? "installed the plugin binary" : "plugin binary up to date", {
      path: dest,
    });
  }

  let kubeconfigHost: string | undefined;
  const syncCredentials = async (): Promise<void> => {
    const kc = options.kubeconfig;
    if (!kc) return;
    const saDir = (kc.serviceAccountDir ?? INSTALL_DEFAULTS.serviceAccountDir).replace(/\/+$/, "");
    const subdir = host(subdirHost);
    await Deno.mkdir(subdir, { recursive: true, mode: 0o700 });
    const token = `${saDir}/${SERVICE_ACCOUNT_FILES.token}`;
    const hostToken = `${subdir}/${SERVICE_ACCOUNT_FILES.token}`;
    if (!(await sameContent(token, hostToken))) {
      const text = await Deno.readFile(token); // NotFound: no service account mounted
      if (text.length === 0) throw new Error(`service-account token ${token} is empty`);
      await writeFileAtomic(hostToken, text, { mode: 0o600 });
      log.info("service-account token mirrored for the plugin", { path: hostToken });
    }
    const ca = `${saDir}/${SERVICE_ACCOUNT_FILES.ca}`;
    const hostCa = `${subdir}/${SERVICE_ACCOUNT_FILES.ca}`;
    let haveCa = true;
    if (!(await sameContent(ca, hostCa))) {
      const pem = await readTextIfExists(ca);
      if (pem === undefined) haveCa = false;
      else await writeFileAtomic(hostCa, pem, { mode: 0o600 });
    }
    const kubeconfig = renderConfig(buildPluginKubeconfig({
      server: kc.server,
      tokenFile: `${subdirHost}/${SERVICE_ACCOUNT_FILES.token}`,
      certificateAuthority: haveCa ? `${subdirHost}/${SERVICE_ACCOUNT_FILES.ca}` : undefined,
    }));
    const path = `${subdir}/${KUBECONFIG_NAME}`;
    if ((await readTextIfExists(path)) !== kubeconfig) {
      await writeFileAtomic(path, kubeconfig, { mode: 0o600 });
      log.info("wrote the plugin's kubeconfig", { path, server: kc.server });
    }
    kubeconfigHost = `${subdirHost}/${KUBECONFIG_NAME}`;
  };
  await syncCredentials(); // a missing token at start is an error, later only a warning

  type State =
    | { ready: true; text: string; primary: string }
    | { ready: false; reason: string; keep: boolean };
  const evaluate = async (): Promise<State> => {
    const lookup = await findPrimaryConfig(confDir, {
      pinned: o.primaryConfig,
      ownFileName: o.configName,
    });
    if (lookup.status === "missing") return { ready: false, reason: lookup.reason, keep: false };
    if (lookup.status === "invalid") {
      // Being rewritten in place, or broken: never switch to another file, and keep a config
      // already written (removing it would let the runtime bypass Manifold meanwhile).
      return {
        ready: false,
        reason: `primary config ${lookup.fileName} does not parse: ${lookup.reason}`,
        keep: true,
      };
    }
    if (o.readinessIndicatorFile && !(await exists(host(o.readinessIndicatorFile)))) {
      return {
        ready: false,
        reason: `readiness indicator file ${o.readinessIndicatorFile} does not exist`,
        keep: false,
      };
    }
    const conf = generateManifoldConflist(lookup.primary.list, {
      clusterNetwork: `${confDirHost}/${lookup.primary.fileName}`,
      kubeconfig: kubeconfigHost,
      readinessIndicatorFile: o.readinessIndicatorFile,
      extra: o.pluginConf,
    });
    return { ready: true, text: renderConfig(conf), primary: lookup.primary.fileName };
  };

  /** Removes the generated config if the file there is Manifold's; true when removed. */
  const removeOwnConfig = async (): Promise<boolean> => {
    const current = await readTextIfExists(configPath);
    if (current === undefined || !isManifoldConfig(current)) return false;
    return await removeFileDurable(configPath);
  };

  const started = Date.now();
  let everReady = false;
  let lastProgress = Number.NEGATIVE_INFINITY;
  let lastPrimary: string | undefined;
  let writes = 0;
  let credentialWarned = false;
  while (!signal.aborted) {
    try {
      await syncCredentials();
      credentialWarned = false;
    } catch (err) {
      if (!credentialWarned) {
        log.warn("cannot refresh the plugin's credentials", { error: message(err) });
        credentialWarned = true;
      }
    }
    const state = await evaluate();
    if (state.ready) {
      const current = await readTextIfExists(configPath);
      if (current !== state.text) {
        await writeFileAtomic(configPath, state.text, { mode: 0o600 });
        writes++;
        const why = writes === 1 && current === undefined
          ? "primary config ready"
          : current === undefined
          ? "config was missing"
          : lastPrimary !== undefined && lastPrimary !== state.primary
          ? "primary config changed to another file"
          : "primary config or settings changed";
        log.info(`wrote ${o.configName}`, { path: configPath, primary: state.primary, why });
      }
      everReady = true;
      lastPrimary = state.primary;
      if (o.once) return { reason: "once", writes, cleanedUp: false };
    } else {
      if (!state.keep && await removeOwnConfig()) {
        log.warn(`removed ${o.configName}: the cluster default network is not ready`, {
          path: configPath,
          reason: state.reason,
        });
      }
      const waited = Date.now() - started;
      if (!everReady && o.primaryTimeoutMs > 0 && waited >= o.primaryTimeoutMs) {
        throw new InstallTimeoutError(waited, state.reason);
      }
      if (Date.now() - lastProgress >= o.progressIntervalMs) {
        lastProgress = Date.now();
        log.info("waiting for the cluster default network's config", {
          reason: state.reason,
          waitedMs: waited,
          ...(!everReady && o.primaryTimeoutMs > 0 ? { timeoutMs: o.primaryTimeoutMs } : {}),
        });
      }
    }
    // Never sleep past the first wait's bound.
    const left = !everReady && o.primaryTimeoutMs > 0
      ? Math.max(1, o.primaryTimeoutMs - (Date.now() - started))
      : o.pollIntervalMs;
    await sleepUnlessAborted(Math.min(o.pollIntervalMs, left), signal);
  }
  let cleanedUp = false;
  if (o.cleanupConfigOnExit) {
    cleanedUp = await removeOwnConfig();
    if (cleanedUp) log.info(`removed ${o.configName} on exit`, { path: configPath });
  }
  return { reason: "stopped", writes, cleanedUp };
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return false;
    throw err;
  }
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
