/**
 * `manifold explain`: a dry run of ADD for a pod. It resolves the pod's networks exactly as
 * the plugin does (lib/multinet `resolveDefaultNetwork`, `resolveExtraDefaults`,
 * `podSelections`, `resolveSelections`, `planAttachments`) and prints, per attachment and
 * per plugin, what the delegate would receive: the resolved NAD source, the final stdin
 * config (name and cniVersion injected, `runtimeConfig` filtered by the plugin's
 * capabilities, `args.cni` merged; `CniRuntime.buildPluginConfig`), the environment
 * (`CNI_COMMAND=ADD`, `CNI_IFNAME`, `CNI_ARGS`, …) and the interface name. Nothing is
 * attached, no delegate runs, the kernel is not touched; an invalid selection or a NAD
 * missing a capability gives the plugin's own error.
 *
 * - `--pod ns/name`: the pod's annotations and UID from the API (Manifold's kubeconfig);
 * - `--annotation '<selection>' --namespace ns [--name pod]`: a selection to try without a pod.
 *
 * Exit codes: 0 shown, 1 the ADD would fail (the error is printed), 2 usage error.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { outputs, type TextOutputs } from "./io.ts";
import {
  KUBE_FLAG_OPTIONS,
  kubeConnectionFromFlags,
  kubeFlags,
  kubeFlagsGiven,
  kubeFlagsHelp,
} from "./kube_flags.ts";
import { formatCniArgs } from "../cni/env.ts";
import { CniError } from "../cni/errors.ts";
import type { PluginExec } from "../cni/invoke.ts";
import { CniRuntime } from "../cni/runtime.ts";
import { parseNetworkConfig } from "../cni/types.ts";
import { INSTALL_DEFAULTS, MANIFOLD_CONFIG_NAME, underRoot } from "../install/mod.ts";
import type { KubeConnection } from "../k8s/kubeconfig.ts";
import type { ManifoldConf } from "../multinet/config.ts";
import type { NadSource } from "../multinet/nad_source.ts";
import type { PodRef } from "../multinet/pod.ts";
import type { AttachmentPlan, NetworkSelectionElement } from "../multinet/types.ts";
import { errorText, printable } from "../util/text.ts";

/** Layout version of the `--json` output. */
export const EXPLAIN_JSON_VERSION = 1;

/** Usage text of `manifold explain`. */
export const EXPLAIN_USAGE = `Usage:
  manifold explain --pod <namespace/name> [options]
  manifold explain --annotation '<selection>' --namespace <ns> [--name <pod>] [options]

Dry run of ADD: prints what each delegate would receive (NAD source, stdin config, env,
runtimeConfig, interface name) without attaching anything or running a delegate.

Options:
  --config PATH          Manifold's config (default <cni-conf-dir>/${MANIFOLD_CONFIG_NAME})
  --host-root DIR        where the host's file system is mounted (default /)
  --cni-conf-dir DIR     host CNI config directory (default ${INSTALL_DEFAULTS.cniConfDir})
  --container-id ID      CNI_CONTAINERID to show (default <container-id>)
  --netns PATH           CNI_NETNS to show (default <netns>)
  --ifname NAME          the runtime's CNI_IFNAME (default eth0)
  --cni-path DIRS        the runtime's CNI_PATH, colon separated (default /opt/cni/bin)
  --runtime-config JSON  runtimeConfig the runtime would pass (e.g. portMappings)
${kubeFlagsHelp("Manifold's kubeconfig")}  --json                 JSON for tools
  -h, --help             this text

Exit codes: 0 shown, 1 the ADD would fail (error printed), 2 usage error.
`;

/** What one plugin of an attachment would receive. */
export interface ExplainPlugin {
  /** Plugin `type`. */
  type: string;
  /** Binary that would run (binDir, then CNI_PATH); absent when not found. */
  binary?: string;
  /** Why it would not run, e.g. `failed to find plugin "x" in path [...]`. */
  problem?: string;
  /** The CNI_* environment of the call. */
  env: Record<string, string>;
  /** The stdin config; `prevResult` is a placeholder for the previous plugin's result. */
  stdin: Record<string, unknown>;
}

/** One attachment in ADD order. */
export interface ExplainAttachment {
  /** Status name: `"ns/nad"` or the default network's name. */
  network: string;
  isDefault: boolean;
  /** `"nad:ns/name"`, `"file:/path"` or `"inline:delegates[i]"`. */
  source: string;
  /** CNI_IFNAME. */
  ifName: string;
  /** The selection element that asked for it (absent for default networks). */
  selection?: NetworkSelectionElement;
  /** runtimeConfig candidates; each reaches only plugins declaring that capability. */
  capabilityArgs: Record<string, unknown>;
  plugins: ExplainPlugin[];
  /** What a dry run cannot show or what the plugin would warn about. */
  notes: string[];
}

/** The `--json` output. */
export interface ExplainReport {
  version: number;
  pod: { namespace: string; name: string; uid: string };
  /** Manifold's config file. */
  config: string;
  /** Its cniVersion. */
  cniVersion: string;
  attachments: ExplainAttachment[];
}

/** Inputs of {@link explainPod}. */
export interface ExplainInput {
  /** Manifold's configuration (paths already as this process sees them). */
  conf: ManifoldConf;
  /** The pod; `infraContainerId` is the container ID shown. */
  pod: PodRef;
  /** The pod's annotations (selection, default-network override). */
  annotations: Record<string, string>;
  /** NADs; undefined without API and `nadDir`. */
  nads?: NadSource;
  /** CNI_CONTAINERID, CNI_NETNS and CNI_IFNAME of the simulated call. */
  containerId: string;
  netns: string;
  ifName: string;
  /** CNI_PATH of the runtime. */
  cniPath: string[];
  /** runtimeConfig the runtime passes to Manifold (only declared capabilities count). */
  runtimeConfig?: Record<string, unknown>;
  /** The config file, for the report. */
  configPath: string;
}

/**
 * Plans a pod's ADD like the plugin and builds what each delegate would receive.
 *
 * @param input configuration, pod, annotations, NAD source, simulated CNI call
 * @returns the report, attachments in ADD order
 * @throws {CniError} exactly as ADD would fail before running a delegate: code 7 for an
 *   invalid annotation, a missing NAD, an isolation violation, a duplicate interface or a
 *   requested key whose capability no plugin declares (e.g. `network "ns/x": "ips" was
 *   requested but no plugin declares capability "ips"`); NAD source errors as is
 */
export async function explainPod(input: ExplainInput): Promise<ExplainReport> {
  const m = await import("../multinet/mod.ts");
  const { conf, pod, annotations, nads } = input;
  // The runtime passes only what Manifold declares (libcni), as ADD sees it.
  const runtimeConfig: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(input.runtimeConfig ?? {})) {
    if (conf.capabilities[k] === true) runtimeConfig[k] = v;
  }
  if (conf.capabilities[m.POD_ANNOTATIONS_CAPABILITY]) {
    runtimeConfig[m.POD_ANNOTATIONS_CAPABILITY] = { ...annotations };
  }
  const elements = m.podSelections(pod, annotations);
  const memo = nads ? m.memoNadSource(nads) : undefined;
  const defaultNetwork = await m.resolveDefaultNetwork(conf, memo, pod, annotations);
  const [extra, selections] = await Promise.all([
    m.resolveExtraDefaults(conf, memo, pod),
    m.resolveSelections(conf, memo, pod, elements),
  ]);
  const runtimeArgs: [string, string][] = [
    ["IgnoreUnknown", "1"],
    ["K8S_POD_NAMESPACE", pod.namespace],
    ["K8S_POD_NAME", pod.name],
    ["K8S_POD_INFRA_CONTAINER_ID", pod.infraContainerId],
    ...(pod.uid ? [["K8S_POD_UID", pod.uid] as [string, string]] : []),
  ];
  const plans = m.planAttachments({
    pod: {
      namespace: pod.namespace,
      name: pod.name,
      uid: pod.uid,
      infraContainerId: pod.infraContainerId,
    },
    runtimeIfName: input.ifName,
    runtimeArgs,
    runtimeCapabilityArgs: runtimeConfig,
    defaultNetwork,
    defaultNetworks: extra,
    selections,
  });
  const binDirs = [conf.binDir, ...input.cniPath];
  const runtime = new CniRuntime({ binDirs, exec: NO_EXEC });
  const { findPlugin } = await import("../cni/invoke.ts");
  const attachments: ExplainAttachment[] = [];
  for (const plan of plans) {
    attachments.push(
      await explainAttachment(plan, {
        runtime,
        binDirs,
        findPlugin,
        containerId: input.containerId,
        netns: input.netns,
        declares: m.declaresCapability,
      }),
    );
  }
  return {
    version: EXPLAIN_JSON_VERSION,
    pod: { namespace: pod.namespace, name: pod.name, uid: pod.uid },
    config: input.configPath,
    cniVersion: conf.cniVersion,
    attachments,
  };
}

const NO_EXEC: PluginExec = {
  exec: () => Promise.reject(new Error("manifold explain never runs a delegate")),
};

async function explainAttachment(
  plan: AttachmentPlan,
  ctx: {
    runtime: CniRuntime;
    binDirs: string[];
    findPlugin: (type: string, dirs: string[]) => Promise<string>;
    containerId: string;
    netns: string;
    declares: (conflist: Record<string, unknown>, capability: string) => boolean;
  },
): Promise<ExplainAttachment> {
  const { delegate } = plan;
  const list = parseNetworkConfig(delegate.conflist, { source: delegate.source });
  const rt = {
    containerId: ctx.containerId,
    netns: ctx.netns,
    ifName: plan.ifName,
    args: plan.cniArgs,
    capabilityArgs: plan.capabilityArgs,
  };
  const env: Record<string, string> = {
    CNI_COMMAND: "ADD",
    CNI_CONTAINERID: ctx.containerId,
    CNI_NETNS: ctx.netns,
    CNI_IFNAME: plan.ifName,
    CNI_ARGS: formatCniArgs(plan.cniArgs),
    CNI_PATH: ctx.binDirs.join(":"),
  };
  const notes: string[] = [];
  const plugins: ExplainPlugin[] = [];
  for (const [i, plugin] of list.plugins.entries()) {
    const type = String(plugin.type);
    const prev = i === 0
      ? undefined
      : `<result of plugin ${i} (${
        String(list.plugins[i - 1].type)
      }) at ADD, cniVersion ${list.cniVersion}>`;
    const out: ExplainPlugin = {
      type,
      env: { ...env },
      stdin: ctx.runtime.buildPluginConfig(list, plugin, rt, prev),
    };
    try {
      out.binary = await ctx.findPlugin(type, ctx.binDirs);
    } catch (e) {
      out.problem = e instanceof CniError ? e.msg : String(e);
    }
    plugins.push(out);
  }
  const reached = new Set(
    plugins.flatMap((p) => Object.keys((p.stdin.runtimeConfig ?? {}) as Record<string, unknown>)),
  );
  for (const key of Object.keys(plan.capabilityArgs)) {
    // The pod's annotations are offered to the default network for plugins that want them.
    if (!reached.has(key) && key !== "io.kubernetes.cri.pod-annotations") {
      notes.push(`runtimeConfig "${key}" reaches no plugin: none declares that capability`);
    }
  }
  if (delegate.resourceName) {
    notes.push(
      `device-backed (resource "${delegate.resourceName}"): the device kubelet allocated is ` +
        `injected at ADD as "deviceID"/"pciBusID" and runtimeConfig "deviceID"`,
    );
  }
  if (ctx.declares(delegate.conflist, "CNIDeviceInfoFile")) {
    notes.push('runtimeConfig "CNIDeviceInfoFile" gets the attachment\'s device-info file at ADD');
  }
  if (plan.selection?.["default-route"]) {
    notes.push(
      `default-route ${JSON.stringify(plan.selection["default-route"])} is applied by Manifold ` +
        "with netlink after the attachments are made",
    );
  }
  return {
    network: delegate.statusName,
    isDefault: delegate.isDefault,
    source: delegate.source,
    ifName: plan.ifName,
    ...(plan.selection ? { selection: structuredClone(plan.selection) } : {}),
    capabilityArgs: structuredClone(plan.capabilityArgs),
    plugins,
    notes,
  };
}

/**
 * Formats the report for people: the pod and config, then per attachment its network,
 * source and interface, and per plugin the binary, the environment and the stdin config
 * (indented JSON). Pure.
 *
 * @param report from {@link explainPod}
 * @returns the text, ending with a newline
 */
export function formatExplainText(report: ExplainReport): string {
  const out: string[] = [
    `Pod ${report.pod.namespace}/${report.pod.name}${
      report.pod.uid ? ` (uid ${report.pod.uid})` : ""
    }`,
    `Config ${report.config} (cniVersion ${report.cniVersion})`,
    "Dry run of ADD: nothing is attached and no delegate runs.",
  ];
  report.attachments.forEach((a, i) => {
    const role = a.isDefault
      ? " (cluster default network)"
      : a.selection
      ? ""
      : " (defaultNetworks)";
    out.push(
      "",
      `Attachment ${i + 1}: ${a.ifName} <- ${a.network}${role}`,
      `  source: ${a.source}`,
    );
    if (a.selection) out.push(`  selection: ${JSON.stringify(a.selection)}`);
    a.plugins.forEach((p, j) => {
      out.push(
        `  plugin ${j + 1}/${a.plugins.length}: ${p.type} -> ${
          p.binary ?? `NOT FOUND (${p.problem})`
        }`,
        "    env:",
        ...Object.entries(p.env).map(([k, v]) => `      ${k}=${v}`),
        "    stdin:",
        ...JSON.stringify(p.stdin, null, 2).split("\n").map((l) => `      ${l}`),
      );
    });
    for (const n of a.notes) out.push(`  note: ${n}`);
  });
  return out.map((l) => printable(l, { keepNewlines: true })).join("\n") + "\n";
}

/** Injected I/O of {@link runExplain}. */
export interface ExplainIO extends TextOutputs {
  /** Environment (in-cluster API settings when the config has no kubeconfig). */
  env?: Record<string, string>;
}

/**
 * `manifold explain …`: parses the flags, loads Manifold's config, reads the pod (or takes
 * the given annotation), and prints what each delegate would receive.
 *
 * @param args the words after `explain`
 * @param io stdout, stderr, env (default: the process's)
 * @returns 0 shown, 1 the ADD would fail or the pod/config cannot be read, 2 usage error
 */
export async function runExplain(args: string[], io: ExplainIO = {}): Promise<number> {
  const { stdout, stderr } = outputs(io);
  let opts: ReturnType<typeof parseExplainArgs>;
  try {
    opts = parseExplainArgs(args);
  } catch (e) {
    stderr(
      `manifold explain: ${errorText(e, { multiline: true })}\nTry 'manifold explain --help'.\n`,
    );
    return 2;
  }
  if (opts === "help") {
    stdout(EXPLAIN_USAGE);
    return 0;
  }
  const host = (p: string) => underRoot(opts.hostRoot, p);
  let close = () => {};
  try {
    const conf = mapConf(await loadOwnConfig(host(opts.configPath)), host);
    let connection: KubeConnection | undefined;
    let nads: NadSource | undefined;
    let podInfo: { uid: string; annotations: Record<string, string> } | undefined;
    const env = io.env ?? Deno.env.toObject();
    if (conf.nadDir) {
      if (opts.kube.kubeconfig !== undefined || opts.kube.context !== undefined) {
        throw new Error(
          "Manifold's config sets nadDir: the plugin reads no API, so neither does explain",
        );
      }
      const { DirectoryNadSource } = await import("../multinet/nad_source.ts");
      nads = new DirectoryNadSource(conf.nadDir);
    } else if (kubeFlagsGiven(opts.kube, env)) {
      connection = await kubeConnectionFromFlags(opts.kube, env);
    } else {
      if (conf.kubeconfig) {
        const { loadKubeconfigUnder } = await import("./doctor.ts");
        connection = await loadKubeconfigUnder(conf.kubeconfig, opts.hostRoot);
        if (connection.tokenFile) {
          connection = { ...connection, tokenFile: host(connection.tokenFile) };
        }
      } else {
        const { inClusterConnection } = await import("../k8s/connection.ts");
        connection = inClusterConnection(env);
      }
    }
    if (connection) {
      const [{ KubeClient }, { apiNadSource, apiPodSource }] = await Promise.all([
        import("../k8s/client.ts"),
        import("../multinet/api_sources.ts"),
      ]);
      const kube = new KubeClient({ connection, timeoutMs: conf.apiTimeoutMs, retries: 1 });
      close = () => kube.close();
      nads = apiNadSource(kube);
      if (opts.pod) {
        podInfo = await apiPodSource(kube).get(opts.pod.namespace, opts.pod.name);
        if (!podInfo) throw new Error(`pod ${opts.pod.namespace}/${opts.pod.name} not found`);
      }
    } else if (opts.pod) {
      throw new Error(
        "--pod needs the Kubernetes API, and Manifold's config has none: use --annotation",
      );
    }
    const ns = opts.pod?.namespace ?? opts.namespace!;
    const name = opts.pod?.name ?? opts.name;
    const annotations = podInfo?.annotations ??
      { "k8s.v1.cni.cncf.io/networks": opts.annotation! };
    const report = await explainPod({
      conf,
      pod: { namespace: ns, name, uid: podInfo?.uid ?? "", infraContainerId: opts.containerId },
      annotations,
      nads,
      containerId: opts.containerId,
      netns: opts.netns,
      ifName: opts.ifName,
      cniPath: opts.cniPath,
      runtimeConfig: opts.runtimeConfig,
      configPath: opts.configPath,
    });
    stdout(opts.json ? `${JSON.stringify(report, null, 2)}\n` : formatExplainText(report));
    return 0;
  } catch (e) {
    stderr(`manifold explain: ${errorText(e, { multiline: true })}\n`);
    return 1;
  } finally {
    close();
  }
}

function parseExplainArgs(args: string[]) {
  const { values } = parseArgs({
    args,
    options: {
      pod: { type: "string" },
      annotation: { type: "string" },
      namespace: { type: "string" },
      name: { type: "string" },
      config: { type: "string" },
      "host-root": { type: "string" },
      "cni-conf-dir": { type: "string" },
      "container-id": { type: "string" },
      netns: { type: "string" },
      ifname: { type: "string" },
      "cni-path": { type: "string" },
      "runtime-config": { type: "string" },
      ...KUBE_FLAG_OPTIONS,
      json: { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) return "help" as const;
  let pod: { namespace: string; name: string } | undefined;
  if (values.pod !== undefined) {
    if (
      values.annotation !== undefined || values.namespace !== undefined || values.name !== undefined
    ) {
      throw new Error("--pod cannot be used with --annotation, --namespace or --name");
    }
    const parts = values.pod.split("/");
    if (parts.length !== 2 || !parts[0] || !parts[1]) {
      throw new Error(`--pod must be namespace/name, got ${JSON.stringify(values.pod)}`);
    }
    pod = { namespace: parts[0], name: parts[1] };
  } else if (values.annotation !== undefined) {
    if (!values.namespace) throw new Error("--annotation needs --namespace");
  } else {
    throw new Error("one of --pod or --annotation is required");
  }
  for (const k of ["host-root", "cni-conf-dir", "config"] as const) {
    const v = values[k];
    if (v !== undefined && !v.startsWith("/")) throw new Error(`--${k} must be an absolute path`);
  }
  let runtimeConfig: Record<string, unknown> | undefined;
  if (values["runtime-config"] !== undefined) {
    let v: unknown;
    try {
      v = JSON.parse(values["runtime-config"]);
    } catch (e) {
      throw new Error(`--runtime-config is not valid JSON: ${errorText(e)}`);
    }
    if (typeof v !== "object" || v === null || Array.isArray(v)) {
      throw new Error("--runtime-config must be a JSON object");
    }
    runtimeConfig = v as Record<string, unknown>;
  }
  const confDir = (values["cni-conf-dir"] ?? INSTALL_DEFAULTS.cniConfDir).replace(/\/+$/, "");
  return {
    pod,
    annotation: values.annotation,
    namespace: values.namespace,
    name: values.name ?? "explain",
    configPath: values.config ?? `${confDir}/${MANIFOLD_CONFIG_NAME}`,
    hostRoot: values["host-root"] ?? "/",
    containerId: values["container-id"] ?? "<container-id>",
    netns: values.netns ?? "<netns>",
    ifName: values.ifname ?? "eth0",
    cniPath: (values["cni-path"] ?? INSTALL_DEFAULTS.cniBinDir).split(":").filter(Boolean),
    runtimeConfig,
    json: values.json === true,
    kube: kubeFlags(values),
  };
}

/** Reads Manifold's config file as the plugin gets it (the list's name and cniVersion injected). */
async function loadOwnConfig(path: string): Promise<ManifoldConf> {
  const { parseManifoldConf } = await import("../multinet/config.ts");
  const list = parseNetworkConfig(await Deno.readTextFile(path), { source: path });
  const plugin = list.plugins.find((p) => p.type === "manifold");
  if (!plugin) throw new Error(`${path} has no plugin of type "manifold"`);
  return parseManifoldConf({ ...plugin, name: list.name, cniVersion: list.cniVersion });
}

/** The host paths of the config as this process sees them (below the host root). */
function mapConf(conf: ManifoldConf, host: (p: string) => string): ManifoldConf {
  const abs = (p: string | undefined) => (p && p.startsWith("/") ? host(p) : p);
  return {
    ...conf,
    clusterNetwork: abs(conf.clusterNetwork),
    confDir: abs(conf.confDir)!,
    binDir: abs(conf.binDir)!,
    nadDir: abs(conf.nadDir),
    // kubeconfig stays a host path: loadKubeconfigUnder maps it and the files it names.
  };
}
