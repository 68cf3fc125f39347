/**
 * `manifold doctor`: checks a node's Manifold setup and prints a readable report, one
 * `ok` / `warn` / `FAIL` line per check, with a hint for each problem:
 *
 * - binary: `<cni-bin-dir>/manifold` exists and is executable;
 * - config: `00-manifold.conflist` exists, parses as Manifold's configuration, is private
 *   (0600) and is the runtime's choice (lexically first config of the directory);
 * - primary: the cluster default network's config exists and parses; its plugins are in
 *   the bin directory;
 * - kubeconfig: readable, and its token file readable and not empty;
 * - api: reachable, and the service account may get pods, patch pods/status, create events
 *   and list NetworkAttachmentDefinitions — probed without changing anything (a pod name
 *   that does not exist, `dryRun=All`, an event the server must reject after authorisation);
 * - netlink: a netlink socket opens in this network namespace, through libmnl;
 * - readiness: the readiness indicator file, when configured, exists;
 * - cache: the cache directory's records are readable (damaged, unfinished, leftover
 *   temporary files).
 *
 * Exit codes: 0 no failure (warnings allowed), 1 some check failed, 2 usage error.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { outputs, type TextOutputs } from "./io.ts";
import {
  KUBE_FLAG_OPTIONS,
  kubeConnectionFromFlags,
  type KubeFlags,
  kubeFlags,
  kubeFlagsGiven,
  kubeFlagsHelp,
} from "./kube_flags.ts";

import { parseNetworkConfig } from "../cni/types.ts";
import {
  findPrimaryConfig,
  INSTALL_DEFAULTS,
  MANIFOLD_CONFIG_NAME,
  underRoot,
} from "../install/mod.ts";
import type { KubeConnection } from "../k8s/kubeconfig.ts";
import type { Logger } from "../log/mod.ts";
import type { ManifoldConf } from "../multinet/config.ts";
import { errorText, oneLine, printable } from "../util/text.ts";

/** Result of one check. */
export type CheckStatus = "ok" | "warn" | "fail";

/** One line of the report. */
export interface DoctorCheck {
  /** Short name, e.g. `"binary"`, `"api: patch pods/status"`. */
  name: string;
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

/** Name of the pod the probes address; it must not exist, so nothing is ever changed. */
export const PROBE_POD = "manifold-doctor-probe-0";

/** Usage text of `manifold doctor`. */
export const DOCTOR_USAGE = `Usage: manifold doctor [options]

Checks this node's Manifold setup: binary, config, primary config, kubeconfig and API
permissions, netlink (libmnl), readiness file, cache directory.

Options:
  --host-root DIR        where the host's file system is mounted (default /)
  --cni-conf-dir DIR     host CNI config directory (default ${INSTALL_DEFAULTS.cniConfDir})
  --cni-bin-dir DIR      host CNI binary directory (default ${INSTALL_DEFAULTS.cniBinDir})
  --config-name NAME     Manifold's config file (default ${MANIFOLD_CONFIG_NAME})
  --libmnl PATH          libmnl to load (default libmnl.so.0)
  --api-timeout-ms MS    bound on each API request (default 3000)
${kubeFlagsHelp("Manifold's kubeconfig")}  --json                 the report as JSON
  -h, --help             this text

Exit codes: 0 no failure (warnings allowed), 1 a check failed, 2 usage error.
`;

/**
 * Runs every check. Never throws: an unexpected error becomes a failed check.
 *
 * @param options host root, directories, libmnl path, API timeout
 * @returns the report, checks in the order of the module documentation
 */
export async function runDoctorChecks(options: DoctorOptions = {}): Promise<DoctorReport> {
  const hostRoot = options.hostRoot ?? "/";
  const host = (p: string) => underRoot(hostRoot, p);
  const confDir = (options.cniConfDir ?? INSTALL_DEFAULTS.cniConfDir).replace(/\/+$/, "");
  const binDir = (options.cniBinDir ?? INSTALL_DEFAULTS.cniBinDir).replace(/\/+$/, "");
  const configName = options.configName ?? MANIFOLD_CONFIG_NAME;
  const checks: DoctorCheck[] = [];
  const add = (name: string, status: CheckStatus, message: string, hint?: string) =>
    void checks.push({ name, status, message, ...(hint ? { hint } : {}) });
  const guard = async (name: string, fn: () => Promise<void>) => {
    try {
      await fn();
    } catch (e) {
      add(name, "fail", `unexpected error: ${oneLine(errorText(e))}`);
    }
  };

  // Binary.
  await guard("binary", async () => {
    const path = `${binDir}/manifold`;
    const st = await statOrUndefined(host(path));
    if (!st) {
      add("binary", "fail", `${path} does not exist`, "run `manifold install` (the DaemonSet)");
    } else if (!st.isFile || st.mode === null || (st.mode & 0o111) === 0) {
      add(
        "binary",
        "fail",
        `${path} is not an executable file`,
        "reinstall with `manifold install`",
      );
    } else {
      add("binary", "ok", `${path} (${st.size} bytes, executable)`);
    }
  });

  // Config.
  let conf: ManifoldConf | undefined;
  await guard("config", async () => {
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
    let text: string;
    try {
      text = await Deno.readTextFile(host(path));
      conf = await parseOwnConfig(text);
    } catch (e) {
      add("config", "fail", `${path} is not a valid Manifold config: ${oneLine(errorText(e))}`);
      return;
    }
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
    const first = await firstConfigFile(host(confDir));
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
  });

  // Primary.
  await guard("primary", async () => {
    if (!conf) {
      const lookup = await findPrimaryConfig(host(confDir), { ownFileName: configName });
      if (lookup.status === "found") {
        add(
          "primary",
          "ok",
          `${confDir}/${lookup.primary.fileName} (not yet used: no Manifold config)`,
        );
      } else {
        add(
          "primary",
          "fail",
          lookup.status === "missing"
            ? `no primary config (*.conf or *.conflist) in ${confDir}`
            : `primary config ${lookup.fileName} does not parse: ${lookup.reason}`,
          "install or fix the cluster default network (flannel, calico, cilium, …)",
        );
      }
      return;
    }
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
      const st = await Deno.stat(host(net));
      if (st.isDirectory) {
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
      if (!st || !st.isFile || st.mode === null || (st.mode & 0o111) === 0) {
        missing.push(String(p.type));
      }
    }
    if (missing.length) {
      add(
        "primary plugins",
        "warn",
        `not in ${conf.binDir}: ${missing.join(", ")}`,
        "CNI_PATH may still provide them; otherwise ADD fails",
      );
    }
  });

  // Kubeconfig and API.
  let connection: KubeConnection | undefined;
  await guard("kubeconfig", async () => {
    const kube = options.kube;
    if (kube && kubeFlagsGiven(kube.flags, kube.env)) {
      const what = kube.flags.kubeconfig ?? `$KUBECONFIG (${kube.env.KUBECONFIG})`;
      try {
        connection = await kubeConnectionFromFlags(kube.flags, kube.env, { runExec: true });
      } catch (e) {
        add("kubeconfig", "fail", `${what}: ${oneLine(errorText(e))}`);
        return;
      }
      add("kubeconfig", "ok", `${what} (server ${connection!.server})`);
      return;
    }
    if (!conf) return;
    if (!conf.kubeconfig) {
      if (conf.nadDir) add("kubeconfig", "ok", `none: standalone mode (nadDir ${conf.nadDir})`);
      else {
        add(
          "kubeconfig",
          "warn",
          "no kubeconfig in the config: the plugin uses in-cluster settings or no API",
          "the plugin runs on the host, where in-cluster settings are usually absent",
        );
      }
      return;
    }
    try {
      connection = await loadKubeconfigUnder(conf.kubeconfig, hostRoot);
    } catch (e) {
      add(
        "kubeconfig",
        "fail",
        `${conf.kubeconfig}: ${oneLine(errorText(e))}`,
        "rerun `manifold install`",
      );
      return;
    }
    if (connection.tokenFile) {
      const token = await Deno.readTextFile(host(connection.tokenFile)).catch(() => undefined);
      if (!token?.trim()) {
        add(
          "kubeconfig",
          "fail",
          `token file ${connection.tokenFile} is missing or empty`,
          "the installer mirrors the service-account token there; is it running?",
        );
        connection = undefined;
        return;
      }
      connection = { ...connection, tokenFile: host(connection.tokenFile) };
    }
    add("kubeconfig", "ok", `${conf.kubeconfig} (server ${connection.server})`);
  });
  if (connection) {
    await guard("api", () =>
      checkApi(connection!, {
        timeoutMs: options.apiTimeoutMs ?? 3000,
        namespace: options.probeNamespace ?? "kube-system",
        add,
      }));
  }

  // Netlink.
  await guard("netlink", async () => {
    const { openNetlinkSocket } = await import("../netlink/mod.ts");
    const warnings: string[] = [];
    const logger = collectingLogger(warnings);
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
  });

  // Readiness.
  await guard("readiness", async () => {
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
  });

  // Cache.
  await guard("cache", async () => {
    if (!conf) return;
    await checkCache(conf.cniDir, host(conf.cniDir), add);
  });

  return { hostRoot, checks };
}

/**
 * Formats the report for people: a header, one line per check (`ok`, `warn`, `FAIL`,
 * aligned names), hints indented below, and a summary line. Pure.
 *
 * @param report from {@link runDoctorChecks}
 * @returns the text, ending with a newline
 * @example
 * ```ts
 * formatDoctorReport({ hostRoot: "/", checks: [{ name: "binary", status: "ok", message: "x" }] });
 * // "Manifold doctor (host root /)\n  ok    binary  x\n\n1 ok, 0 warnings, 0 failures\n"
 * ```
 */
export function formatDoctorReport(report: DoctorReport): string {
  const width = Math.max(0, ...report.checks.map((c) => c.name.length));
  const lines = [`Manifold doctor (host root ${report.hostRoot})`];
  for (const c of report.checks) {
    const label = c.status === "fail" ? "FAIL" : c.status;
    lines.push(`  ${label.padEnd(4)}  ${c.name.padEnd(width)}  ${printable(c.message)}`.trimEnd());
    if (c.hint && c.status !== "ok") lines.push(`  ${" ".repeat(6 + width)}  hint: ${c.hint}`);
  }
  const count = (s: CheckStatus) => report.checks.filter((c) => c.status === s).length;
  const n = (k: number, word: string) => `${k} ${word}${k === 1 ? "" : "s"}`;
  lines.push(
    "",
    `${count("ok")} ok, ${n(count("warn"), "warning")}, ${n(count("fail"), "failure")}`,
  );
  return lines.join("\n") + "\n";
}

/** Injected I/O of {@link runDoctor}. */
export interface DoctorIO extends TextOutputs {
  /** Environment (`KUBECONFIG`); default the process's. */
  env?: Record<string, string>;
}

/**
 * `manifold doctor …`: parses the flags, runs the checks, prints the report.
 *
 * @param args the words after `doctor`
 * @param io stdout and stderr (default: the process's)
 * @returns 0 no failure, 1 a check failed, 2 usage error
 */
export async function runDoctor(args: string[], io: DoctorIO = {}): Promise<number> {
  const { stdout, stderr } = outputs(io);
  let values;
  try {
    ({ values } = parseArgs({
      args,
      options: {
        "host-root": { type: "string" },
        "cni-conf-dir": { type: "string" },
        "cni-bin-dir": { type: "string" },
        "config-name": { type: "string" },
        libmnl: { type: "string" },
        "api-timeout-ms": { type: "string" },
        ...KUBE_FLAG_OPTIONS,
        json: { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
      strict: true,
      allowPositionals: false,
    }));
    for (const k of ["host-root", "cni-conf-dir", "cni-bin-dir"] as const) {
      const v = values[k];
      if (v !== undefined && !v.startsWith("/")) throw new Error(`--${k} must be an absolute path`);
    }
    const t = values["api-timeout-ms"];
    if (t !== undefined && !/^[1-9]\d{0,5}$/.test(t)) {
      throw new Error("--api-timeout-ms must be an integer between 1 and 999999");
    }
    kubeFlags(values); // usage errors now, before any check runs
  } catch (e) {
    stderr(`manifold doctor: ${oneLine(errorText(e))}\nTry 'manifold doctor --help'.\n`);
    return 2;
  }
  if (values.help) {
    stdout(DOCTOR_USAGE);
    return 0;
  }
  const report = await runDoctorChecks({
    hostRoot: values["host-root"],
    cniConfDir: values["cni-conf-dir"],
    cniBinDir: values["cni-bin-dir"],
    configName: values["config-name"],
    libmnlPath: values.libmnl,
    apiTimeoutMs: values["api-timeout-ms"] ? Number(values["api-timeout-ms"]) : undefined,
    kube: { flags: kubeFlags(values), env: io.env ?? Deno.env.toObject() },
  });
  stdout(values.json ? `${JSON.stringify(report, null, 2)}\n` : formatDoctorReport(report));
  return report.checks.some((c) => c.status === "fail") ? 1 : 0;
}

/** Parses Manifold's file as the runtime would hand it to the plugin (name, cniVersion injected). */
async function parseOwnConfig(text: string): Promise<ManifoldConf> {
  const { parseManifoldConf } = await import("../multinet/config.ts");
  const list = parseNetworkConfig(text);
  const plugin = list.plugins.find((p) => p.type === "manifold");
  if (!plugin) throw new Error('no plugin of type "manifold"');
  return parseManifoldConf({ ...plugin, name: list.name, cniVersion: list.cniVersion });
}

/** The lexically first file libcni would load (`.conf`, `.conflist`, `.json`). */
async function firstConfigFile(dir: string): Promise<string | undefined> {
  const names: string[] = [];
  for await (const e of Deno.readDir(dir)) {
    if (e.isDirectory) continue;
    if ([".conf", ".conflist", ".json"].some((x) => e.name.endsWith(x))) names.push(e.name);
  }
  return names.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))[0];
}

/**
 * Loads a kubeconfig whose path and file paths are host paths. Under a host root other than
 * `/`, a private temporary copy (0600, removed at once) with `certificate-authority`,
 * `client-certificate` and `client-key` mapped below the root is loaded; `tokenFile` stays a
 * host path (callers map it before reading it).
 *
 * @param path host path of the kubeconfig
 * @param hostRoot where the host's file system is mounted
 * @returns the connection (see `loadKubeconfig`)
 * @throws {CniError} code 7 as `loadKubeconfig`
 */
export async function loadKubeconfigUnder(
  path: string,
  hostRoot: string,
): Promise<KubeConnection> {
  const { loadKubeconfig } = await import("../k8s/kubeconfig.ts");
  if (underRoot(hostRoot, "/") === "/") return await loadKubeconfig(path);
  const text = await Deno.readTextFile(underRoot(hostRoot, path));
  let doc: Record<string, unknown>;
  try {
    doc = JSON.parse(text);
  } catch {
    const { parse } = await import("yaml");
    doc = parse(text);
  }
  const dir = await Deno.makeTempDir({ prefix: "manifold-doctor-" });
  try {
    const map = (o: unknown, keys: string[]) => {
      if (typeof o !== "object" || o === null) return;
      const rec = o as Record<string, unknown>;
      for (const k of keys) {
        const v = rec[k];
        if (typeof v === "string" && v.startsWith("/")) rec[k] = underRoot(hostRoot, v);
      }
    };
    for (const c of (doc.clusters as { cluster?: unknown }[] | undefined) ?? []) {
      map(c?.cluster, ["certificate-authority"]);
    }
    for (const u of (doc.users as { user?: unknown }[] | undefined) ?? []) {
      map(u?.user, ["client-certificate", "client-key"]);
    }
    await Deno.writeTextFile(`${dir}/kubeconfig`, JSON.stringify(doc), { mode: 0o600 });
    return await loadKubeconfig(`${dir}/kubeconfig`);
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

/** Reachability and the four permissions of deploy/20-clusterrole.yaml, changing nothing. */
async function checkApi(
  conn: KubeConnection,
  opts: {
    timeoutMs: number;
    namespace: string;
    add: (name: string, status: CheckStatus, message: string, hint?: string) => void;
  },
): Promise<void> {
  const { createTransport } = await import("../k8s/transport.ts");
  const transport = createTransport(conn);
  const ns = encodeURIComponent(opts.namespace);
  const request = async (method: string, path: string, body?: unknown, contentType?: string) => {
    const headers: Record<string, string> = {
      accept: "application/json",
      "user-agent": "manifold-doctor",
    };
    const token = conn.tokenFile ? (await Deno.readTextFile(conn.tokenFile)).trim() : conn.token;
    if (token) headers.authorization = `Bearer ${token}`;
    if (contentType) headers["content-type"] = contentType;
    const res = await transport.send({
      method,
      url: `${conn.server}${path}`,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(opts.timeoutMs),
    });
    let message = "";
    try {
      message = String((JSON.parse(res.body) as { message?: unknown }).message ?? "");
    } catch { /* not a Status */ }
    return { status: res.status, message };
  };
  try {
    try {
      const v = await request("GET", "/version");
      if (v.status >= 500) throw new Error(`HTTP ${v.status}`);
      opts.add("api", "ok", `${conn.server} reachable`);
    } catch (e) {
      opts.add(
        "api",
        "fail",
        `${conn.server} unreachable: ${oneLine(errorText(e))}`,
        "the plugin runs on the host: the server address must be reachable from the node",
      );
      return;
    }
    const pod = `/api/v1/namespaces/${ns}/pods/${PROBE_POD}`;
    const probes: { name: string; run: () => ReturnType<typeof request>; allowed: number[] }[] = [
      { name: "get pods", run: () => request("GET", pod), allowed: [200, 404] },
      {
        name: "patch pods/status",
        run: () => request("PATCH", `${pod}/status?dryRun=All`, {}, "application/merge-patch+json"),
        allowed: [200, 404],
      },
      {
        // No name: the server rejects it (422) after authorising it; dryRun=All besides.
        name: "create events",
        run: () =>
          request("POST", `/api/v1/namespaces/${ns}/events?dryRun=All`, {
            apiVersion: "v1",
            kind: "Event",
            metadata: {},
          }, "application/json"),
        allowed: [200, 201, 400, 422],
      },
      {
        name: "list network-attachment-definitions",
        run: () =>
          request("GET", "/apis/k8s.cni.cncf.io/v1/network-attachment-definitions?limit=1"),
        allowed: [200],
      },
    ];
    for (const p of probes) {
      const name = `api: ${p.name}`;
      try {
        const r = await p.run();
        if (p.allowed.includes(r.status)) opts.add(name, "ok", "allowed");
        else if (r.status === 401) {
          opts.add(
            name,
            "fail",
            "401 Unauthorized: the token is not accepted",
            "token expired or revoked? rerun the installer",
          );
        } else if (r.status === 403) {
          opts.add(
            name,
            "fail",
            `403 Forbidden: ${r.message}`,
            "apply deploy/20-clusterrole.yaml and 30-clusterrolebinding.yaml",
          );
        } else if (r.status === 404) {
          opts.add(
            name,
            "fail",
            "404: the NetworkAttachmentDefinition CRD is not installed",
            "apply deploy/00-crd.yaml",
          );
        } else opts.add(name, "fail", `unexpected HTTP ${r.status}: ${r.message}`);
      } catch (e) {
        opts.add(name, "fail", `request failed: ${oneLine(errorText(e))}`);
      }
    }
  } finally {
    transport.close();
  }
}

async function checkCache(
  dir: string,
  path: string,
  add: (name: string, status: CheckStatus, message: string, hint?: string) => void,
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
  const { AttachmentCache, CacheCorruptError } = await import("../multinet/cache.ts");
  const cache = new AttachmentCache(path);
  const ids = await cache.list();
  const corrupt: string[] = [];
  const unfinished: string[] = [];
  let live = 0;
  for (const id of ids) {
    try {
      const r = await cache.read(id);
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

async function statOrUndefined(path: string): Promise<Deno.FileInfo | undefined> {
  try {
    return await Deno.stat(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound || e instanceof Deno.errors.NotADirectory) {
      return undefined;
    }
    throw e;
  }
}

function collectingLogger(into: string[]): Logger {
  const rec = (msg: string, fields?: Record<string, unknown>) =>
    void into.push(fields?.error ? `${msg}: ${fields.error}` : msg);
  const l: Logger = { debug: () => {}, info: () => {}, warn: rec, error: rec, with: () => l };
  return l;
}
