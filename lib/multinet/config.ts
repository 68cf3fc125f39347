/**
 * Manifold's own CNI configuration (the stdin of the `manifold` binary). Accepts
 * Multus's keys with the same meaning (docs/multus.md maps them), so an existing
 * `00-multus.conf` works by changing `"type"`. Additions are marked "Manifold:".
 *
 * @module
 */

import { CniError, CniErrorCode } from "../cni/errors.ts";
import {
  DEFAULT_DEVICE_CHECKPOINT_FILE,
  DEFAULT_DEVICE_INFO_DIR,
  DEFAULT_POD_RESOURCES_SOCKET,
  DEFAULT_POD_RESOURCES_TIMEOUT_MS,
  DEFAULT_SYSFS_ROOT,
} from "../devices/constants.ts";
import { type LogOptions, logOptionsIssues } from "../log/rotate.ts";
import { zodDetails } from "../cni/decode.ts";
import { checkManifoldConfShape, type ConfShape } from "./config_shape.ts";

export { checkManifoldConfShape, type ManifoldConfShape } from "./config_shape.ts";

/** Where Manifold keeps its per-container cache by default (Multus: /var/lib/cni/multus). */
export const DEFAULT_CNI_DIR = "/var/lib/cni/manifold";
/** Where on-disk configs named by NADs without spec.config are found (Multus default). */
export const DEFAULT_CONF_DIR = "/etc/cni/multus/net.d";
/** Manifold's KEP-3698 PodNetwork `provider` (domain-prefixed, KEP-3698 "Provider"). */
export const DEFAULT_PODNETWORK_PROVIDER = "manifold.dev/cni";
/** Where delegate binaries are looked up first (then CNI_PATH). */
export const DEFAULT_BIN_DIR = "/opt/cni/bin";

/**
 * Validated Manifold configuration; defaults applied.
 * Times are milliseconds.
 */
export interface ManifoldConf {
  /** The list's `cniVersion`, injected by the runtime (CNI SPEC). */
  cniVersion: string;
  /** The list's network name, injected by the runtime. */
  name: string;
  /** Manifold's plugin `type` ("manifold" or the name it was installed under). */
  type: string;
  /** Cluster default network: NAD name, conf name, conf dir or conf file (Multus semantics). */
  clusterNetwork?: string;
  /** Extra attachments for every pod outside `systemNamespaces`. */
  defaultNetworks: string[];
  /** Inline delegate configs; `[0]` is the default network when `clusterNetwork` is unset. */
  delegates?: Record<string, unknown>[];
  /** Path of the kubeconfig for API access; in-cluster config is tried when empty. */
  kubeconfig?: string;
  /** Multus `confDir`: on-disk configs for NADs without `spec.config` (NPWG v1.3 §3.4.1); default `/etc/cni/multus/net.d`. */
  confDir: string;
  /** Cache directory (Multus `cniDir`). */
  cniDir: string;
  /** Multus `binDir`: searched for delegates before `CNI_PATH`; default `/opt/cni/bin`. */
  binDir: string;
  /** Multus `namespaceIsolation` (NPWG v1.3 §7.4): a pod may use NADs of its own namespace and `globalNamespaces` only. */
  namespaceIsolation: boolean;
  /** Namespaces whose NADs any pod may use under isolation (`default` is always included, as Multus). */
  globalNamespaces: string[];
  /** Pods here get no `defaultNetworks`. */
  systemNamespaces: string[];
  /** Namespace of clusterNetwork/defaultNetworks NADs and of the default-network annotation's NAD. */
  multusNamespace: string;
  /** Wait (≤ `readinessTimeoutMs`) for this file before ADD/GC/STATUS. */
  readinessindicatorfile?: string;
  /** Multus `logLevel`: `debug`, `verbose`, `error` or `panic` (default). */
  logLevel: string;
  /** Multus `logFile`: JSON lines, created 0600. */
  logFile?: string;
  /** Multus `logOptions`: size rotation of `logFile` (lib/log/rotate.ts); absent: none. */
  logOptions?: LogOptions;
  /** Multus `logToStderr` (default true). */
  logToStderr: boolean;
  /** Capabilities Manifold declares to the runtime (what it may receive in runtimeConfig). */
  capabilities: Record<string, boolean>;
  /** runtimeConfig from the runtime (only for the default network, NPWG §7.5). */
  runtimeConfig: Record<string, unknown>;
  /** Keep the cache when a delegate DEL fails so a later DEL retries it (Multus `retryDeleteOnError`). */
  retryDeleteOnError: boolean;
  /** Manifold: standalone mode (no API server): NADs from this directory of manifests. */
  nadDir?: string;
  /**
   * Manifold: a node-local NAD mirror kept current by `manifold mirror` (the DaemonSet): NADs
   * are read from `<nadMirrorDir>/<namespace>/<name>.json` and fetched from the API only when
   * an entry is missing or the mirror is not synced. Unset: every NAD is a GET.
   */
  nadMirrorDir?: string;
  /**
   * Manifold: unix socket of the node agent (`manifold daemon`). When set, the binary forwards
   * the request there (lib/daemon/forward.ts) instead of running it; read in main.ts before this
   * schema loads, validated here so a wrong type or a relative path is a code-7 error.
   */
  daemonSocket?: string;
  /**
   * Manifold: run in-process when the daemon's socket is absent or refuses connections
   * (default true); false answers code 11 instead.
   */
  daemonFallback: boolean;
  /**
   * Manifold: `manifold daemon` hot-plugs and hot-unplugs networks of running pods when their
   * `k8s.v1.cni.cncf.io/networks` annotation changes (lib/daemon/hotplug/hotplug.ts); default false.
   * Read by the daemon only.
   */
  hotPlug: boolean;
  /**
   * Manifold, `manifold daemon` only: when ADD publishes network-status (and KEP-3698
   * networks-status). `"sync"` (default): the PATCH is part of ADD, which fails when it fails.
   * `"async"`: ADD returns once the final cache record is durable and the kernel check passed;
   * the daemon then PATCHes from that record in the background — coalesced per pod, retried
   * with back-off, with the pod's UID as a precondition, re-driven after a restart
   * (lib/daemon/status_publisher.ts). Pods with a device-backed attachment (a NAD with a
   * `resourceName`, or device-info) are always published synchronously. The in-process
   * plugin (no daemon) is always `"sync"`.
   */
  statusPublish: "sync" | "async";
  /**
   * Manifold: which Kubernetes Events ADD sends: `"warnings"` (default: only problems —
   * `ErrorAddingNetwork`, `InterfaceMismatch`, device warnings — so a healthy ADD costs no
   * event request), `"all"` (also one `AddedInterface` per attachment, as Multus) or `"none"`.
   */
  events: "all" | "warnings" | "none";
  /**
   * Manifold: what ADD does with an invalid `k8s.v1.cni.cncf.io/networks` annotation:
   * `"fail"` (default, as Multus: the ADD fails with code 7 naming the element and key) or
   * `"ignore"` (NPWG v1.3 §4.1.2.1: the annotation "shall be invalid and ignored": the pod
   * gets the cluster default network only, a Warning event `InvalidNetworkSelection` and a
   * log line with the reason).
   */
  invalidNetworkSelection: "fail" | "ignore";
  /**
   * Manifold: the KEP-3698 `provider` this installation serves: a pod may attach only to
   * PodNetworks whose `spec.provider` is exactly this (default {@link DEFAULT_PODNETWORK_PROVIDER}).
   */
  podNetworkProvider: string;
  /**
   * Manifold: `manifold daemon` enforces MultiNetworkPolicy (`k8s.cni.cncf.io/v1beta1`) on
   * secondary networks with nftables in each selected pod's netns (default false; lib/policy).
   */
  multiNetworkPolicy: boolean;
  /**
   * Manifold: how long a local pod a MultiNetworkPolicy selects may have no sandbox in the
   * attachment cache before `manifold daemon` reports it (Warning `MultiNetworkPolicyFailed`
   * `NoSandbox`, `manifold_policy_apply_failures_total{reason="no_sandbox"}`), ms (default
   * 10 000).
   */
  policyNoSandboxGraceMs: number;
  /**
   * Manifold (Multus thick `chrootDir`): run every delegate chrooted into this directory, where
   * the host's `/` is mounted (`"/hostroot"` in deploy/40-daemonset.yaml): the delegate binary
   * (looked up in `binDir` + CNI_PATH inside it), its libraries, CNI_NETNS, its config's paths
   * and its state (host-local leases) are the host's. Kernel verification opens CNI_NETNS
   * inside it too; Manifold's cache (`cniDir`) stays in this process's view. Ignored when the
   * directory does not exist (the plugin itself, run by the runtime on the host, shares the
   * config with `manifold daemon`, which refuses to start without it). Unset: no chroot.
   */
  chrootDir?: string;
  /** Manifold: per-delegate time bound, ms (default 60 000). */
  delegateTimeoutMs: number;
  /** Manifold: per API request time bound, ms (default 5 000). */
  apiTimeoutMs: number;
  /**
   * Manifold: bound on one API call with its retries and the server's `Retry-After` waits, ms
   * (default 15 000): a network-status PATCH against a slow or throttling API server fails
   * with code 11 and says why once it is spent, instead of holding the pod's ADD.
   */
  apiDeadlineMs: number;
  /** Manifold: readiness indicator wait bound, ms (default 45 000, as Multus). */
  readinessTimeoutMs: number;
  /**
   * Manifold: kubelet's pod-resources gRPC socket, asked for the devices of NADs with a
   * `k8s.v1.cni.cncf.io/resourceName` (default `/var/lib/kubelet/pod-resources/kubelet.sock`).
   */
  podResourcesSocket: string;
  /** Manifold: bound on each pod-resources call, ms (default 5 000). */
  podResourcesTimeoutMs: number;
  /**
   * Manifold: kubelet's device-plugin checkpoint, read when the pod-resources API cannot answer
   * (default `/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint`).
   */
  deviceCheckpointFile: string;
  /** Manifold: where sysfs is mounted, for device-info discovery (default `/sys`). */
  sysfsRoot: string;
  /**
   * Manifold: root of the device-info files, `dp/` and `cni/` below it (Device Information
   * Spec v1.1 §4; default `/var/run/k8s.cni.cncf.io/devinfo`).
   */
  deviceInfoDir: string;
  /** The stdin object as given (for `prevResult`, unknown keys). */
  raw: Record<string, unknown>;
}

/** A comma-separated string or a list, as Multus accepts for namespace/network lists. */
function stringList(v: string | string[] | undefined, fallback: string[]): string[] {
  if (v === undefined) return fallback;
  if (Array.isArray(v)) return v;
  return v.split(",").map((x) => x.trim()).filter((x) => x !== "");
}

/**
 * Validates Manifold's stdin configuration and applies defaults.
 *
 * @param raw the parsed stdin JSON object.
 * @returns the configuration with defaults (see {@link ManifoldConf}).
 * @throws {CniError} code 7 when a key has the wrong type, or when neither
 *   `clusterNetwork` nor a non-empty `delegates` names the default network (details: the zod issues).
 * @example
 * ```ts
 * const conf = parseManifoldConf({ cniVersion: "1.0.0", type: "manifold", clusterNetwork: "/etc/cni/net.d/10-bridge.conflist" });
 * conf.cniDir; // "/var/lib/cni/manifold"
 * ```
 */
export function parseManifoldConf(raw: Record<string, unknown>): ManifoldConf {
  const parsed = checkManifoldConfShape(raw);
  if (!parsed.success) {
    throw new CniError(
      CniErrorCode.InvalidNetworkConfig,
      "invalid manifold configuration",
      zodDetails(parsed.error),
    );
  }
  const c = parsed.data as unknown as ConfShape;
  // Bounds and non-empty paths, reported like zod's own issues ("✖ problem\n  → at key").
  const issues: string[] = [];
  const int = (key: string, v: number | undefined, def: number, min: number, max: number) => {
    if (v === undefined) return def;
    if (!Number.isInteger(v) || v < min || v > max) {
      issues.push(`✖ Expected an integer from ${min} to ${max} (milliseconds)\n  → at ${key}`);
    }
    return v;
  };
  const path = (key: string, v: string | undefined, def: string) => {
    if (v === undefined) return def;
    if (v === "") issues.push(`✖ Expected a non-empty path\n  → at ${key}`);
    return v;
  };
  const conf = {
    confDir: path("confDir", c.confDir, DEFAULT_CONF_DIR),
    cniDir: path("cniDir", c.cniDir, DEFAULT_CNI_DIR),
    binDir: path("binDir", c.binDir, DEFAULT_BIN_DIR),
    multusNamespace: path("multusNamespace", c.multusNamespace, "kube-system"),
    podResourcesSocket: path(
      "podResourcesSocket",
      c.podResourcesSocket,
      DEFAULT_POD_RESOURCES_SOCKET,
    ),
    deviceCheckpointFile: path(
      "deviceCheckpointFile",
      c.deviceCheckpointFile,
      DEFAULT_DEVICE_CHECKPOINT_FILE,
    ),
    sysfsRoot: path("sysfsRoot", c.sysfsRoot, DEFAULT_SYSFS_ROOT),
    deviceInfoDir: path("deviceInfoDir", c.deviceInfoDir, DEFAULT_DEVICE_INFO_DIR),
    delegateTimeoutMs: int("delegateTimeoutMs", c.delegateTimeoutMs, 60_000, 1, 600_000),
    apiTimeoutMs: int("apiTimeoutMs", c.apiTimeoutMs, 5_000, 1, 120_000),
    apiDeadlineMs: int("apiDeadlineMs", c.apiDeadlineMs, 15_000, 1, 600_000),
    readinessTimeoutMs: int("readinessTimeoutMs", c.readinessTimeoutMs, 45_000, 0, 600_000),
    policyNoSandboxGraceMs: int(
      "policyNoSandboxGraceMs",
      c.policyNoSandboxGraceMs,
      10_000,
      0,
      3_600_000,
    ),
    podResourcesTimeoutMs: int(
      "podResourcesTimeoutMs",
      c.podResourcesTimeoutMs,
      DEFAULT_POD_RESOURCES_TIMEOUT_MS,
      1,
      120_000,
    ),
  };
  if (c.chrootDir && !c.chrootDir.startsWith("/")) {
    issues.push("✖ Expected an absolute path\n  → at chrootDir");
  }
  if (c.daemonSocket && !c.daemonSocket.startsWith("/")) {
    issues.push("✖ Expected an absolute path\n  → at daemonSocket");
  }
  if (c.logOptions !== undefined) issues.push(...logOptionsIssues(c.logOptions));
  if (issues.length > 0) {
    throw new CniError(
      CniErrorCode.InvalidNetworkConfig,
      "invalid manifold configuration",
      issues.join("\n"),
    );
  }
  if (!c.clusterNetwork && !(c.delegates && c.delegates.length > 0)) {
    throw new CniError(
      CniErrorCode.InvalidNetworkConfig,
      "invalid manifold configuration",
      'set "clusterNetwork" or a non-empty "delegates" list to name the cluster default network',
    );
  }
  const global = stringList(c.globalNamespaces, []);
  const globalNamespaces = global.includes("default") ? global : ["default", ...global];
  return {
    cniVersion: c.cniVersion,
    name: c.name ?? "manifold-cni-network",
    type: c.type,
    clusterNetwork: c.clusterNetwork || undefined,
    defaultNetworks: stringList(c.defaultNetworks, []),
    delegates: c.delegates,
    kubeconfig: c.kubeconfig || undefined,
    ...conf,
    namespaceIsolation: c.namespaceIsolation ?? false,
    globalNamespaces,
    systemNamespaces: stringList(c.systemNamespaces, ["kube-system"]),
    readinessindicatorfile: c.readinessindicatorfile || undefined,
    logLevel: c.logLevel ?? "panic",
    logFile: c.logFile || undefined,
    logOptions: c.logOptions as LogOptions | undefined,
    logToStderr: c.logToStderr ?? true,
    capabilities: c.capabilities ?? {},
    runtimeConfig: c.runtimeConfig ?? {},
    retryDeleteOnError: c.retryDeleteOnError ?? false,
    nadDir: c.nadDir || undefined,
    nadMirrorDir: c.nadMirrorDir || undefined,
    daemonSocket: c.daemonSocket || undefined,
    daemonFallback: c.daemonFallback ?? true,
    chrootDir: c.chrootDir || undefined,
    hotPlug: c.hotPlug ?? false,
    statusPublish: c.statusPublish ?? "sync",
    events: c.events ?? "warnings",
    invalidNetworkSelection: c.invalidNetworkSelection ?? "fail",
    podNetworkProvider: c.podNetworkProvider || DEFAULT_PODNETWORK_PROVIDER,
    multiNetworkPolicy: c.multiNetworkPolicy ?? false,
    raw,
  };
}
