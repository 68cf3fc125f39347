/**
 * The node installer's settings and outcomes (`manifold install`): the options of
 * `runInstaller` and their defaults, what it returns, the error of a first wait that timed
 * out, and how a host path is reached below `hostRoot`. The lifecycle itself (`runInstaller`)
 * is lib/install/installer.ts.
 *
 * @module
 */

import type { Logger } from "../log/mod.ts";
import type { BundleSource } from "./bundle.ts";

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
  pruneGraceMs: 60_000,
} as const;

/**
 * Options of `runInstaller` (lib/install/installer.ts). Paths named "host path" are as the
 * host sees them.
 */
export interface InstallerOptions {
  /** Where the host's file system is mounted in the installer's view; default `"/"`. */
  hostRoot?: string;
  /** Host path of the CNI configuration directory; default `/etc/cni/net.d`. */
  cniConfDir?: string;
  /** Host path of the CNI binary directory; default `/opt/cni/bin`. */
  cniBinDir?: string;
  /**
   * File name of the generated config; default `MANIFOLD_CONFIG_NAME` of
   * lib/install/conflist.ts (`00-manifold.conflist`).
   */
  configName?: string;
  /** The binary to install (installer view); absent: no copy. */
  binary?: string;
  /**
   * The source variant: the bundle (deno + source tree + npm cache, installer view) to put
   * into `<cniBinDir>/.manifold/<hash>/`, with `<cniBinDir>/<binaryName>` a launcher naming it
   * (lib/install/source_install.ts). Not with `binary`.
   */
  bundle?: BundleSource;
  /**
   * How long a bundle no launcher names and no process runs is kept before removal, ms;
   * default 60 000 (lib/install/bundle_prune.ts).
   */
  pruneGraceMs?: number;
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

/** What `runInstaller` (lib/install/installer.ts) did when it returned. */
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
   * The error for a wait of `waitedMs` that ended without a ready default network.
   *
   * @param waitedMs how long the installer waited, ms
   * @param reason why it was not ready, e.g. `no *.conf or *.conflist file in /host/etc/cni/net.d`
   */
  constructor(readonly waitedMs: number, readonly reason: string) {
    super(
      `the cluster default network was not ready within ${waitedMs} ms: ${reason} ` +
        "(the installer exits and its container restarts; is the network plugin running on " +
        "this node? --primary-config pins its file, --primary-timeout-ms=0 waits without a bound)",
    );
    this.name = "InstallTimeoutError";
  }
}

/** The host path `p` in the installer's view: `hostRoot` + `p`. */
export function underRoot(hostRoot: string, p: string): string {
  const root = hostRoot.replace(/\/+$/, "");
  return root === "" ? p : `${root}${p.startsWith("/") ? "" : "/"}${p}`;
}
