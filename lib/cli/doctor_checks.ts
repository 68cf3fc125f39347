/**
 * The node-local checks of `manifold doctor` (lib/cli/doctor.ts runs them in order):
 * binary, config (and config order), primary config, netlink, readiness file, cache. Each is
 * a {@link DoctorStep} that reports through {@link DoctorContext.add} and may leave what later
 * steps need in the context (the parsed config). The kubeconfig and API steps are in
 * doctor_api.ts.
 *
 * @module
 */

import { lazyImport } from "../util/lazy.ts";
import { parseNetworkConfig } from "../cni/types.ts";
import { findPrimaryConfig, firstLoadedConfig } from "../install/mod.ts";
import type { KubeConnection } from "../k8s/connection.ts";
import type { ManifoldConf } from "../multinet/config.ts";
import { errorText, oneLine } from "../util/text.ts";
import { warningLogger } from "./io.ts";
import type { KubeFlags } from "./kube_flags.ts";

/** Result of one check. */
export type CheckStatus = "ok" | "warn" | "fail";

/** One line of the report. */
export interface DoctorCheck {
  /** Short name, e.g. `"binary"`, `"api: patch pods/status"`. */
  name: string;
  /** `ok`, `warn` or `fail`. */
  status: CheckStatus;
  /** What was found, one line. */
  message: string;
  /** What to do about a warning or failure. */
  hint?: string;
}

/** The whole report. */
export interface DoctorReport {
  /** The host root the paths were read under. */
  hostRoot: string;
  /** Every check, in the order of the steps. */
  checks: DoctorCheck[];
}

/** Options of {@link runDoctorChecks}; paths are host paths, read below `hostRoot`. */
export interface DoctorOptions {
  /** Where the host's file system is mounted; default `"/"`. */
  hostRoot?: string;
  /** Host CNI configuration directory; default `/etc/cni/net.d`. */
  cniConfDir?: string;
  /** Host CNI binary directory; default `/opt/cni/bin`. */
  cniBinDir?: string;
  /** Manifold's configuration file name; default `00-manifold.conflist`. */
  configName?: string;
  /** libmnl to load for the netlink check; default the plugin's (`libmnl.so.0`). */
  libmnlPath?: string;
  /** Bound on each API request, ms; default 3000. */
  apiTimeoutMs?: number;
  /** Namespace of the permission probes; default `kube-system`. */
  probeNamespace?: string;
  /** `--kubeconfig`/`--context` and the environment (`KUBECONFIG`): check with that kubeconfig. */
  kube?: { flags: KubeFlags; env: Record<string, string | undefined> };
}

/** Records one line of the report. */
export type AddCheck = (name: string, status: CheckStatus, message: string, hint?: string) => void;

/** What the steps share: the resolved options, the report so far, and what earlier steps found. */
export interface DoctorContext {
  /** The options as given. */
  options: DoctorOptions;
  /** Where the host's file system is mounted (`"/"` by default). */
  hostRoot: string;
  /** A host path in this process's view (below `hostRoot`). */
  host(path: string): string;
  /** Host CNI configuration directory, no trailing `/`. */
  confDir: string;
  /** Host CNI binary directory, no trailing `/`. */
  binDir: string;
  /** Manifold's configuration file name. */
  configName: string;
  /** Records a check. */
  add: AddCheck;
  /** Manifold's parsed configuration, once the config step read it. */
  conf?: ManifoldConf;
  /** The plugin's API connection, once the kubeconfig step loaded it (token file mapped). */
  connection?: KubeConnection;
}

/** One named step of the doctor: `run` adds zero or more checks; a throw becomes a failure. */
export interface DoctorStep {
  /** The check name a failure of the step itself is reported under. */
  name: string;
  /** Runs the step. */
  run(ctx: DoctorContext): Promise<void>;
}

/** `<cni-bin-dir>/manifold` exists and is executable. */
export const binaryStep: DoctorStep = {
  name: "binary",
  async run({ binDir, host, add }) {
    const path = `${binDir}/manifold`;
    const st = await statOrUndefined(host(path));
    if (!st) {
      add("binary", "fail", `${path} does not exist`, "run `manifold install` (the DaemonSet)");
    } else if (!isExecutableFile(st)) {
      add(
        "binary",
        "fail",
        `${path} is not an executable file`,
        "reinstall with `manifold install`",
      );
    } else {
      add("binary", "ok", `${path} (${st.size} bytes, executable)`);
    }
  },
};

/**
 * `00-manifold.conflist` exists, parses as Manifold's configuration (kept in `ctx.conf`), is
 * private (0600) and is the runtime's choice (lexically first config of the directory).
 */
export const configStep: DoctorStep = {
  name: "config",
  async run(ctx) {
    const { confDir, configName, host, add } = ctx;
    const path = `${confDir}/${configName}`;
    const st = await statOrUndefined(host(path));
    if (!st) {
      add(
        "config",
        "fail",
        `${path} does not exist`,
        "the installer writes it once the primary config exists; check its log",
      );
      return;
    }
    let conf: ManifoldConf;
    try {
      conf = await parseOwnConfig(await Deno.readTextFile(host(path)));
    } catch (e) {
      add("config", "fail", `${path} is not a valid Manifold config: ${oneLine(errorText(e))}`);
      return;
    }
    ctx.conf = conf;
    if (st.mode !== null && (st.mode & 0o077) !== 0) {
      add(
        "config",
        "warn",
        `${path} is readable by others (mode ${(st.mode & 0o777).toString(8)})`,
        "chmod 600; the installer writes it with 0600",
      );
    } else {
      add("config", "ok", `${path} (cniVersion ${conf.cniVersion})`);
    }
    const first = await firstLoadedConfig(host(confDir));
    if (first !== configName) {
      add(
        "config order",
        "fail",
        `the runtime loads ${first} first, not ${configName}: pods bypass Manifold`,
        "rename the other file or give Manifold's config a name that sorts first",
      );
    } else {
      add("config order", "ok", `${configName} is the first config in ${confDir}`);
    }
  },
};

/**
 * The cluster default network's config: found in the directory (no Manifold config yet), or
 * Manifold's `clusterNetwork` when it is a path — exists, parses, its plugins are installed.
 */
export const primaryStep: DoctorStep = {
  name: "primary",
  async run(ctx) {
    if (!ctx.conf) return await checkPrimaryLookup(ctx);
    const { conf, host, add } = ctx;
    const net = conf.clusterNetwork;
    if (!net || !net.startsWith("/")) {
      add(
        "primary",
        "ok",
        net ? `clusterNetwork "${net}" is a NAD or config name, resolved at ADD` : "delegates[0]",
      );
      return;
    }
    let text: string;
    try {
      if ((await Deno.stat(host(net))).isDirectory) {
        add("primary", "ok", `${net} is a directory; its first config is used at ADD`);
        return;
      }
      text = await Deno.readTextFile(host(net));
    } catch (e) {
      add(
        "primary",
        "fail",
        `clusterNetwork ${net} cannot be read: ${oneLine(errorText(e))}`,
        "the installer removes Manifold's config when the primary goes away; is it running?",
      );
      return;
    }
    let list;
    try {
      list = parseNetworkConfig(text, { source: net });
    } catch (e) {
      add("primary", "fail", `clusterNetwork ${net} does not parse: ${oneLine(errorText(e))}`);
      return;
    }
    add("primary", "ok", `${net} (${list.name}, cniVersion ${list.cniVersion})`);
    const missing: string[] = [];
    for (const p of list.plugins) {
      const st = await statOrUndefined(host(`${conf.binDir}/${String(p.type)}`));
      if (!st || !isExecutableFile(st)) missing.push(String(p.type));
    }
    if (missing.length) {
      add(
        "primary plugins",
        "warn",
        `not in ${conf.binDir}: ${missing.join(", ")}`,
        "CNI_PATH may still provide them; otherwise ADD fails",
      );
    }
  },
};

/** Without Manifold's config: the primary the installer would pick from the directory. */
async function checkPrimaryLookup({ confDir, configName, host, add }: DoctorContext) {
  const lookup = await findPrimaryConfig(host(confDir), { ownFileName: configName });
  if (lookup.status === "found") {
    add(
      "primary",
      "ok",
      `${confDir}/${lookup.primary.fileName} (not yet used: no Manifold config)`,
    );
    return;
  }
  add(
    "primary",
    "fail",
    lookup.status === "missing"
      ? `no primary config (*.conf or *.conflist) in ${confDir}`
      : `primary config ${lookup.fileName} ${lookup.reason}`,
    "install or fix the cluster default network (flannel, calico, cilium, …)",
  );
}

/** A netlink socket opens in this network namespace, through libmnl (else a warning). */
export const netlinkStep: DoctorStep = {
  name: "netlink",
  async run({ options, add }) {
    const { openNetlinkSocket } = await lazyImport<typeof import("../netlink/mod.ts")>(
      "../netlink/mod.ts",
      import.meta.url,
    );
    const warnings: string[] = [];
    const logger = warningLogger((msg, fields) =>
      void warnings.push(fields?.error ? `${msg}: ${fields.error}` : msg)
    );
    const sock = openNetlinkSocket({ libmnlPath: options.libmnlPath, logger });
    try {
      if (sock.backend === "libmnl") add("netlink", "ok", "netlink socket opened through libmnl");
      else {
        add(
          "netlink",
          "warn",
          `libmnl cannot be loaded; plain libc netlink sockets are used${
            warnings.length ? ` (${warnings[0]})` : ""
          }`,
          "install libmnl0 (Debian) / libmnl (RHEL)",
        );
      }
    } finally {
      sock.close();
    }
  },
};

/** The readiness indicator file, when the config names one, exists. */
export const readinessStep: DoctorStep = {
  name: "readiness",
  async run({ conf, host, add }) {
    if (!conf) return;
    const file = conf.readinessindicatorfile;
    if (!file) add("readiness", "ok", "no readiness indicator file configured");
    else if (await statOrUndefined(host(file))) add("readiness", "ok", `${file} exists`);
    else {
      add(
        "readiness",
        "fail",
        `${file} does not exist: ADD waits and fails with code 11, STATUS fails with 50`,
        "the cluster default network writes it when ready",
      );
    }
  },
};

/** The cache directory's records are readable: damaged, unfinished, leftover temporary files. */
export const cacheStep: DoctorStep = {
  name: "cache",
  async run({ conf, host, add }) {
    if (conf) await checkCache(conf.cniDir, host(conf.cniDir), add);
  },
};

/** The cache step's work: records read, problems summed up in one line. */
async function checkCache(
  dir: string,
  path: string,
  add: AddCheck,
): Promise<void> {
  const st = await statOrUndefined(path);
  if (!st) {
    add("cache", "ok", `${dir} does not exist yet (created by the first ADD)`);
    return;
  }
  if (!st.isDirectory) {
    add("cache", "fail", `${dir} is not a directory`, "DEL cannot find what ADD did");
    return;
  }
  const { AttachmentCache, CacheCorruptError } = await lazyImport<
    typeof import("../multinet/cache/cache.ts")
  >("../multinet/cache/cache.ts", import.meta.url);
  const cache = new AttachmentCache(path);
  const ids = await cache.list();
  const corrupt: string[] = [];
  const unfinished: string[] = [];
  let live = 0;
  for (const key of ids) {
    const id = key.ifName ? `${key.containerId}@${key.ifName}` : key.containerId;
    try {
      const r = await cache.read(key.containerId, key.ifName);
      if (!r) continue;
      if (r.deletedAt === undefined) live++;
      if (r.deletedAt === undefined && r.attachments.some((a) => a.state === "adding")) {
        unfinished.push(id);
      }
    } catch (e) {
      corrupt.push(
        e instanceof CacheCorruptError ? `${id} (${e.reason})` : `${id} (${oneLine(errorText(e))})`,
      );
    }
  }
  const temps: string[] = [];
  for await (const e of Deno.readDir(path)) if (e.name.includes(".tmp-")) temps.push(e.name);
  const summary = `${dir}: ${ids.length} records, ${live} live`;
  const problems: string[] = [];
  if (corrupt.length) problems.push(`damaged: ${corrupt.join(", ")}`);
  if (unfinished.length) problems.push(`ADD never finished: ${unfinished.join(", ")}`);
  if (temps.length) problems.push(`${temps.length} leftover temporary files`);
  if (st.mode !== null && (st.mode & 0o077) !== 0) {
    problems.push(`mode ${(st.mode & 0o777).toString(8)} (expected 700)`);
  }
  if (problems.length) {
    add(
      "cache",
      "warn",
      `${summary}; ${problems.join("; ")}`,
      "DEL rebuilds damaged records from the API when it can; `manifold inspect --pod` shows a pod's record",
    );
  } else add("cache", "ok", summary);
}

/** Parses Manifold's file as the runtime would hand it to the plugin (name, cniVersion injected). */
async function parseOwnConfig(text: string): Promise<ManifoldConf> {
  const { parseManifoldConf } = await lazyImport<typeof import("../multinet/config.ts")>(
    "../multinet/config.ts",
    import.meta.url,
  );
  const list = parseNetworkConfig(text);
  const plugin = list.plugins.find((p) => p.type === "manifold");
  if (!plugin) throw new Error('no plugin of type "manifold"');
  return parseManifoldConf({ ...plugin, name: list.name, cniVersion: list.cniVersion });
}

function isExecutableFile(st: Deno.FileInfo): boolean {
  return st.isFile && st.mode !== null && (st.mode & 0o111) !== 0;
}

/**
 * `Deno.stat`, or undefined when the path (or a directory on it) does not exist.
 *
 * @param path the path to stat
 * @returns its info, or undefined
 * @throws Deno errors other than NotFound/NotADirectory (e.g. PermissionDenied)
 */
export async function statOrUndefined(path: string): Promise<Deno.FileInfo | undefined> {
  try {
    return await Deno.stat(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound || e instanceof Deno.errors.NotADirectory) {
      return undefined;
    }
    throw e;
  }
}
