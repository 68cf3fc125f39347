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
import { readTextIfExists, removeFileDurable, writeFileAtomic } from "../fs/atomic.ts";
import { PluginPlacer } from "./plugin_placer.ts";
import {
  generateManifoldConflist,
  isManifoldConfig,
  MANIFOLD_CONFIG_NAME,
  renderConfig,
} from "./conflist.ts";
import { CredentialKeeper } from "./credential_keeper.ts";
import { findPrimaryConfig, firstLoadedConfig } from "./primary.ts";
import { sleepUnlessAborted } from "../util/timer.ts";
import {
  INSTALL_DEFAULTS,
  type InstallerOptions,
  type InstallerResult,
  InstallTimeoutError,
  underRoot,
} from "./installer_options.ts";

export {
  INSTALL_DEFAULTS,
  type InstallerOptions,
  type InstallerResult,
  InstallTimeoutError,
  underRoot,
} from "./installer_options.ts";

/** The installer's resolved settings and what it learned so far (one per run). */
interface Installer {
  /** The options with defaults applied. */
  o: ReturnType<typeof withDefaults>;
  log: Logger;
  signal: AbortSignal;
  /** A host path in the installer's view. */
  host(p: string): string;
  /** Host path of the CNI configuration directory, no trailing `/`. */
  confDirHost: string;
  /** The generated config, installer view. */
  configPath: string;
  /** The plugin's token, CA and kubeconfig; undefined without `kubeconfig`. */
  credentials?: CredentialKeeper;
  /** Puts the plugin (binary or bundle + launcher) into the CNI bin dir, prunes old bundles. */
  plugin: PluginPlacer;
}

/** The watch loop's memory between polls. */
interface WatchState {
  started: number;
  everReady: boolean;
  lastProgress: number;
  lastPrimary?: string;
  writes: number;
  /** The file last warned about as loaded before Manifold's; undefined while ours is first. */
  shadowWarned?: string;
}

/** What one poll found: the config to write, or why the default network is not ready. */
type Readiness =
  | { ready: true; text: string; primary: string }
  | { ready: false; reason: string; keep: boolean };

/**
 * Runs the installer until `signal` aborts it (or, with `once`, until the config is
 * written): installs the binary, writes the plugin's credentials, then polls — writing,
 * regenerating or removing the config — until stopped, and cleans up as asked. See the
 * module documentation.
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
  const inst = resolveInstaller(options);
  if (options.binary && options.bundle) throw new Error("binary and bundle are exclusive");
  // Credentials first: the plugin already on the node (an upgrade) calls the API with the
  // mirrored token, and the previous installer's pod token died with its pod (bound service
  // account tokens), so every second spent copying the plugin first is a second of 401s for
  // pods starting meanwhile. A missing token at start is an error, later only a warning.
  await inst.credentials?.sync();
  if (options.binary) await inst.plugin.installBinary(options.binary);
  if (options.bundle) await inst.plugin.installBundle(options.bundle);
  const w: WatchState = {
    started: Date.now(),
    everReady: false,
    lastProgress: Number.NEGATIVE_INFINITY,
    writes: 0,
  };
  while (!inst.signal.aborted) {
    await inst.plugin.prune();
    await inst.credentials?.refresh();
    const state = await evaluatePrimary(inst);
    if (state.ready) {
      await writeConfig(inst, w, state);
      if (inst.o.once) return { reason: "once", writes: w.writes, cleanedUp: false };
    } else {
      await handleNotReady(inst, w, state);
    }
    await sleepUnlessAborted(nextPollMs(inst, w), inst.signal);
  }
  return { reason: "stopped", writes: w.writes, cleanedUp: await cleanupOnExit(inst) };
}

function withDefaults(options: InstallerOptions) {
  return { ...INSTALL_DEFAULTS, configName: MANIFOLD_CONFIG_NAME, ...stripUndefined(options) };
}

function resolveInstaller(options: InstallerOptions): Installer {
  const o = withDefaults(options);
  const host = (p: string) => underRoot(o.hostRoot, p);
  const confDirHost = o.cniConfDir.replace(/\/+$/, "");
  const log = options.logger ?? nullLogger;
  return {
    o,
    log,
    signal: options.signal ?? new AbortController().signal,
    host,
    confDirHost,
    configPath: `${host(confDirHost)}/${o.configName}`,
    plugin: new PluginPlacer({
      cniBinDirHost: o.cniBinDir.replace(/\/+$/, ""),
      binaryName: o.binaryName,
      pruneGraceMs: o.pruneGraceMs,
      host,
      logger: log,
    }),
    credentials: o.kubeconfig &&
      new CredentialKeeper({
        server: o.kubeconfig.server,
        serviceAccountDir: o.kubeconfig.serviceAccountDir ?? INSTALL_DEFAULTS.serviceAccountDir,
        confDirHost,
        host,
        logger: log,
      }),
  };
}

/** The primary config, the readiness file, and the config Manifold would write now. */
async function evaluatePrimary(inst: Installer): Promise<Readiness> {
  const { o, host, confDirHost } = inst;
  const lookup = await findPrimaryConfig(host(confDirHost), {
    pinned: o.primaryConfig,
    ownFileName: o.configName,
  });
  if (lookup.status === "missing") return { ready: false, reason: lookup.reason, keep: false };
  if (lookup.status === "invalid") {
    // Being rewritten in place, or broken: never switch to another file, and keep a config
    // already written (removing it would let the runtime bypass Manifold meanwhile).
    return {
      ready: false,
      reason: `primary config ${lookup.fileName} ${lookup.reason}`,
      keep: true,
    };
  }
  if (o.readinessIndicatorFile && !(await exists(host(o.readinessIndicatorFile)))) {
    return {
      ready: false,
      reason: await readinessMissing(inst, o.readinessIndicatorFile),
      keep: false,
    };
  }
  const conf = generateManifoldConflist(lookup.primary.list, {
    clusterNetwork: `${confDirHost}/${lookup.primary.fileName}`,
    kubeconfig: inst.credentials?.kubeconfigHost,
    readinessIndicatorFile: o.readinessIndicatorFile,
    extra: o.pluginConf,
  });
  return { ready: true, text: renderConfig(conf), primary: lookup.primary.fileName };
}

/**
 * Why the readiness file is not ready, with a hint when not even its directory is visible
 * below the host root: the DaemonSet mounts only the CNI directories there, so a file such as
 * flannel's `/run/flannel/subnet.env` needs its directory mounted into the install container.
 */
async function readinessMissing(inst: Installer, file: string): Promise<string> {
  const reason = `readiness indicator file ${file} does not exist`;
  const dir = file.slice(0, file.lastIndexOf("/")) || "/";
  if (inst.o.hostRoot.replace(/\/+$/, "") === "" || await exists(inst.host(dir))) return reason;
  return `${reason}, nor its directory at ${inst.host(dir)}: if the host has it, mount ${dir} ` +
    `into the install container at ${inst.host(dir)} (a hostPath volume)`;
}

/** Writes the config when it differs from the file there, and says why. */
async function writeConfig(
  inst: Installer,
  w: WatchState,
  state: Extract<Readiness, { ready: true }>,
): Promise<void> {
  const { o, configPath, log } = inst;
  const current = await readTextIfExists(configPath);
  if (current !== state.text) {
    await writeFileAtomic(configPath, state.text, { mode: 0o600 });
    w.writes++;
    const why = w.writes === 1 && current === undefined
      ? "primary config ready"
      : current === undefined
      ? "config was missing"
      : w.lastPrimary !== undefined && w.lastPrimary !== state.primary
      ? "primary config changed to another file"
      : "primary config or settings changed";
    log.info(`wrote ${o.configName}`, { path: configPath, primary: state.primary, why });
  }
  w.everReady = true;
  w.lastPrimary = state.primary;
  await warnIfShadowed(inst, w);
}

/**
 * Warns (once per file) when another file sorts before Manifold's config: the runtime loads
 * that one and pods bypass Manifold (`manifold doctor` reports the same as "config order").
 */
async function warnIfShadowed(inst: Installer, w: WatchState): Promise<void> {
  const { o, host, confDirHost, log } = inst;
  const first = await firstLoadedConfig(host(confDirHost)).catch(() => undefined);
  if (first === undefined || first === o.configName) {
    w.shadowWarned = undefined;
    return;
  }
  if (w.shadowWarned === first) return;
  w.shadowWarned = first;
  log.warn(
    `the container runtime loads ${first} first, not ${o.configName}: pods bypass Manifold; ` +
      "rename that file, or give Manifold's config a name that sorts first (--config-name)",
    { dir: confDirHost, first, config: o.configName },
  );
}

/**
 * Not ready: removes Manifold's config (unless the primary is only being rewritten), fails
 * the first wait after `primaryTimeoutMs`, and says it is waiting every `progressIntervalMs`.
 */
async function handleNotReady(
  inst: Installer,
  w: WatchState,
  state: Extract<Readiness, { ready: false }>,
): Promise<void> {
  const { o, log, configPath } = inst;
  if (!state.keep && await removeOwnConfig(inst)) {
    log.warn(`removed ${o.configName}: the cluster default network is not ready`, {
      path: configPath,
      reason: state.reason,
    });
  }
  const waited = Date.now() - w.started;
  const bounded = !w.everReady && o.primaryTimeoutMs > 0;
  if (bounded && waited >= o.primaryTimeoutMs) throw new InstallTimeoutError(waited, state.reason);
  if (Date.now() - w.lastProgress >= o.progressIntervalMs) {
    w.lastProgress = Date.now();
    log.info("waiting for the cluster default network's config", {
      reason: state.reason,
      waitedMs: waited,
      ...(bounded ? { timeoutMs: o.primaryTimeoutMs } : {}),
    });
  }
}

/** The polling period, never sleeping past the first wait's bound. */
function nextPollMs({ o }: Installer, w: WatchState): number {
  const left = !w.everReady && o.primaryTimeoutMs > 0
    ? Math.max(1, o.primaryTimeoutMs - (Date.now() - w.started))
    : o.pollIntervalMs;
  return Math.min(o.pollIntervalMs, left);
}

/** With `cleanupConfigOnExit`: removes Manifold's config; true when removed. */
async function cleanupOnExit(inst: Installer): Promise<boolean> {
  if (!inst.o.cleanupConfigOnExit) return false;
  const cleanedUp = await removeOwnConfig(inst);
  if (cleanedUp) {
    inst.log.info(`removed ${inst.o.configName} on exit`, { path: inst.configPath });
  }
  return cleanedUp;
}

/** Removes the generated config if the file there is Manifold's; true when removed. */
async function removeOwnConfig({ configPath }: Installer): Promise<boolean> {
  const current = await readTextIfExists(configPath);
  if (current === undefined || !isManifoldConfig(current)) return false;
  return await removeFileDurable(configPath);
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

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
