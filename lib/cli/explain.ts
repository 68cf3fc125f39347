/**
 * `manifold explain`: a dry run of ADD for a pod. It plans the pod's attachments with the
 * plugin's own planning module (lib/multinet `buildPodPlan`, the code ADD executes) and
 * prints, per attachment and per plugin, what the delegate would receive (see
 * {@link explainPod}). Nothing is attached, no delegate runs, the kernel is not touched; an
 * invalid selection or a NAD missing a capability gives the plugin's own error.
 *
 * - `--pod ns/name`: the pod's annotations and UID from the API (Manifold's kubeconfig);
 * - `--annotation '<selection>' --namespace ns [--name pod]`: a selection to try without a pod.
 *
 * Exit codes: 0 shown, 1 the ADD would fail (the error is printed), 2 usage error.
 *
 * @module
 */

import { lazyImport } from "../util/lazy.ts";
import { parseArgs } from "node:util";
import { outputs, type TextOutputs } from "./io.ts";
import {
  formatOutput,
  KUBE_FLAG_OPTIONS,
  kubeConnectionFromFlags,
  kubeFlags,
  kubeFlagsGiven,
  kubeFlagsHelp,
  OUTPUT_FLAG_OPTIONS,
  outputFormat,
  podArgument,
  withKubectlDefaults,
} from "./kube_flags.ts";
import { parseNetworkConfig } from "../cni/types.ts";
import { INSTALL_DEFAULTS, MANIFOLD_CONFIG_NAME, underRoot } from "../install/mod.ts";
import type { KubeClient } from "../k8s/client.ts";
import type { KubeConnection } from "../k8s/connection.ts";
import type { ManifoldConf } from "../multinet/config.ts";
import type { NadSource } from "../multinet/nad/source.ts";
import type { PodNetworkSource } from "../multinet/plan/pod_networks.ts";
import { errorText } from "../util/text.ts";
import { explainPod } from "./explain_plan.ts";
import { formatExplainText } from "./explain_format.ts";

export {
  EXPLAIN_JSON_VERSION,
  type ExplainAttachment,
  type ExplainInput,
  type ExplainPlugin,
  explainPod,
  type ExplainReport,
} from "./explain_plan.ts";
export { formatExplainText } from "./explain_format.ts";

/** Usage text of `manifold explain`. */
export const EXPLAIN_USAGE = `Usage:
  manifold explain POD [-n NAMESPACE] [options]          (also --pod <namespace/name>)
  manifold explain --annotation '<selection>' -n <ns> [--name <pod>] [options]

Dry run of ADD: prints what each delegate would receive (NAD source, stdin config, env,
runtimeConfig, interface name) without attaching anything or running a delegate.

Options:
  --config PATH          Manifold's config (default <cni-conf-dir>/${MANIFOLD_CONFIG_NAME}; on a
                         machine without it, e.g. a workstation, deploy/'s ConfigMap
                         kube-system/manifold-config read through the kubeconfig)
  --host-root DIR        where the host's file system is mounted (default /)
  --cni-conf-dir DIR     host CNI config directory (default ${INSTALL_DEFAULTS.cniConfDir})
  --container-id ID      CNI_CONTAINERID to show (default <container-id>)
  --netns PATH           CNI_NETNS to show (default <netns>)
  --ifname NAME          the runtime's CNI_IFNAME (default eth0)
  --cni-path DIRS        the runtime's CNI_PATH, colon separated (default /opt/cni/bin)
  --runtime-config JSON  runtimeConfig the runtime would pass (e.g. portMappings)
  -n, --namespace NS     the pod's namespace (default "default")
${
  kubeFlagsHelp("Manifold's kubeconfig")
}  -o, --output FORMAT    json or yaml, for tools (--json = -o json)
  -h, --help             this text

Exit codes: 0 shown, 1 the ADD would fail (error printed), 2 usage error.
`;

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
    let connection: KubeConnection | undefined;
    let nads: NadSource | undefined;
    let podNetworks: PodNetworkSource | undefined;
    let podInfo: { uid: string; annotations: Record<string, string> } | undefined;
    const env = io.env ?? Deno.env.toObject();
    opts.kube = withKubectlDefaults(opts.kube, env);
    let conf: ManifoldConf;
    let configLabel = opts.configPath;
    let assumed: string[] | undefined;
    const localConfig = opts.configGiven || await isFile(host(opts.configPath));
    if (!localConfig && !kubeFlagsGiven(opts.kube, env)) {
      throw new Error(
        `no ${opts.configPath} on this machine and no kubeconfig (--kubeconfig, $KUBECONFIG, ` +
          "~/.kube/config) to read deploy/'s ConfigMap with: pass --config PATH or a kubeconfig",
      );
    }
    if (!localConfig) {
      // A workstation: no node config here. deploy/'s ConfigMap is the nodes' source of truth.
      connection = await kubeConnectionFromFlags(opts.kube, env);
      if (!connection) throw new Error("no kubeconfig to read Manifold's ConfigMap with");
      const view = await clusterConfig(connection);
      conf = view.conf;
      assumed = view.assumed;
      configLabel = `${view.source} (cluster view: ${opts.configPath} is not on this machine)`;
    } else {
      conf = mapConf(await loadOwnConfig(host(opts.configPath)), host);
    }
    if (conf.nadDir) {
      if (opts.kube.kubeconfig !== undefined || opts.kube.context !== undefined) {
        throw new Error(
          "Manifold's config sets nadDir: the plugin reads no API, so neither does explain",
        );
      }
      const { DirectoryNadSource } = await lazyImport<typeof import("../multinet/nad/source.ts")>(
        "../multinet/nad/source.ts",
        import.meta.url,
      );
      nads = new DirectoryNadSource(conf.nadDir);
    } else if (connection) {
      // the cluster view's connection (above)
    } else if (kubeFlagsGiven(opts.kube, env)) {
      connection = await kubeConnectionFromFlags(opts.kube, env);
    } else {
      if (conf.kubeconfig) {
        const { loadKubeconfigUnder } = await lazyImport<typeof import("./doctor.ts")>(
          "./doctor.ts",
          import.meta.url,
        );
        connection = await loadKubeconfigUnder(conf.kubeconfig, opts.hostRoot);
        if (connection.tokenFile) {
          connection = { ...connection, tokenFile: host(connection.tokenFile) };
        }
      } else {
        const { inClusterConnection } = await lazyImport<typeof import("../k8s/connection.ts")>(
          "../k8s/connection.ts",
          import.meta.url,
        );
        connection = inClusterConnection(env);
      }
    }
    if (connection) {
      const [{ KubeClient }, { apiNadSource, apiPodSource, apiPodNetworkSource }] = await Promise
        .all([
          lazyImport<typeof import("../k8s/client.ts")>("../k8s/client.ts", import.meta.url),
          lazyImport<typeof import("../multinet/nad/api_sources.ts")>(
            "../multinet/nad/api_sources.ts",
            import.meta.url,
          ),
        ]);
      const kube = new KubeClient({ connection, timeoutMs: conf.apiTimeoutMs, retries: 1 });
      close = () => kube.close();
      nads = apiNadSource(kube);
      podNetworks = apiPodNetworkSource(kube);
      if (opts.pod) {
        podInfo = await apiPodSource(kube).get(opts.pod.namespace, opts.pod.name);
        if (!podInfo) throw new Error(`pod ${opts.pod.namespace}/${opts.pod.name} not found`);
        if (assumed) assumed.unshift(await whoseView(kube, opts.pod.namespace, opts.pod.name));
      }
    } else if (opts.pod) {
      throw new Error(
        "a pod needs the Kubernetes API, and Manifold's config has none: use --annotation",
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
      podNetworks,
      containerId: opts.containerId,
      netns: opts.netns,
      ifName: opts.ifName,
      cniPath: opts.cniPath,
      runtimeConfig: opts.runtimeConfig,
      configPath: configLabel,
      assumed,
    });
    stdout(await formatOutput(opts.format, report, () => formatExplainText(report)));
    return 0;
  } catch (e) {
    stderr(`manifold explain: ${errorText(e, { multiline: true })}\n`);
    return 1;
  } finally {
    close();
  }
}

function parseExplainArgs(args: string[]) {
  const { values, positionals } = parseArgs({
    args,
    options: {
      pod: { type: "string" },
      annotation: { type: "string" },
      namespace: { type: "string", short: "n" },
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
      ...OUTPUT_FLAG_OPTIONS,
      help: { type: "boolean", short: "h" },
    },
    strict: true,
    allowPositionals: true,
  });
  if (values.help) return "help" as const;
  if (values.pod !== undefined && values.namespace !== undefined) {
    throw new Error("--pod cannot be used with -n/--namespace: give POD -n NAMESPACE");
  }
  const pod = podArgument(positionals, values.namespace, values.pod);
  if (pod) {
    if (values.annotation !== undefined || values.name !== undefined) {
      throw new Error("a pod cannot be used with --annotation or --name");
    }
  } else if (values.annotation !== undefined) {
    if (!values.namespace) throw new Error("--annotation needs --namespace");
  } else {
    throw new Error("a pod (POD -n NAMESPACE, or --pod) or --annotation is required");
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
    configGiven: values.config !== undefined,
    hostRoot: values["host-root"] ?? "/",
    containerId: values["container-id"] ?? "<container-id>",
    netns: values.netns ?? "<netns>",
    ifName: values.ifname ?? "eth0",
    cniPath: (values["cni-path"] ?? INSTALL_DEFAULTS.cniBinDir).split(":").filter(Boolean),
    runtimeConfig,
    format: outputFormat(values),
    kube: kubeFlags(values),
  };
}

/** Reads Manifold's config file as the plugin gets it (the list's name and cniVersion injected). */
async function loadOwnConfig(path: string): Promise<ManifoldConf> {
  const { parseManifoldConf } = await lazyImport<typeof import("../multinet/config.ts")>(
    "../multinet/config.ts",
    import.meta.url,
  );
  const list = parseNetworkConfig(await Deno.readTextFile(path), { source: path });
  const plugin = list.plugins.find((p) => p.type === "manifold");
  if (!plugin) throw new Error(`${path} has no plugin of type "manifold"`);
  return parseManifoldConf({ ...plugin, name: list.name, cniVersion: list.cniVersion });
}

/** Whether `path` is a file this process can see (a missing one is not an error here). */
async function isFile(path: string): Promise<boolean> {
  try {
    return (await Deno.stat(path)).isFile;
  } catch {
    return false;
  }
}

/**
 * Manifold's config as deploy/'s ConfigMap gives it to every node's installer
 * (lib/install/config_map.ts), for a machine that is not a node.
 *
 * @param connection the operator's kubeconfig
 * @returns the parsed config, where it came from, and the node-local inputs assumed
 * @throws {Error} when the ConfigMap or its key is missing or not a JSON object; a
 *   ConfigMap that names invalid keys fails with the plugin's own code 7 error
 */
async function clusterConfig(
  connection: KubeConnection,
): Promise<{ conf: ManifoldConf; source: string; assumed: string[] }> {
  const [{ KubeClient }, { isNotFound }, { parseManifoldConf }, install] = await Promise.all([
    lazyImport<typeof import("../k8s/client.ts")>("../k8s/client.ts", import.meta.url),
    lazyImport<typeof import("../k8s/errors.ts")>("../k8s/errors.ts", import.meta.url),
    lazyImport<typeof import("../multinet/config.ts")>("../multinet/config.ts", import.meta.url),
    lazyImport<typeof import("../install/config_map.ts")>(
      "../install/config_map.ts",
      import.meta.url,
    ),
  ]);
  const { namespace, name, key } = install.MANIFOLD_CONFIG_MAP;
  const source = `configmap ${namespace}/${name}`;
  const kube = new KubeClient({ connection, retries: 1 });
  let body: unknown;
  try {
    body = await kube.send(
      "GET",
      `/api/v1/namespaces/${namespace}/configmaps/${name}`,
    );
  } catch (e) {
    if (isNotFound(e)) {
      throw new Error(
        `no ${MANIFOLD_CONFIG_NAME} on this machine and no ${source} in the cluster: ` +
          "pass --config PATH, or apply deploy/",
      );
    }
    throw e;
  } finally {
    kube.close();
  }
  const text = install.pluginConfText(body, source);
  const { entry, assumed } = install.clusterViewEntry(
    install.parsePluginConf(text, `${source} key ${key}`),
  );
  return { conf: parseManifoldConf(entry), source, assumed };
}

/**
 * Which node's view the cluster view stands for: the node the pod is bound to
 * (`spec.nodeName`, read once more: the plan's pod source keeps only UID and annotations), whose
 * node-local inputs could not be read from here.
 *
 * @param kube the operator's client
 * @param namespace the pod's namespace
 * @param name the pod's name
 * @returns one `assumed:` line naming the node, or saying the pod is not bound to one
 */
async function whoseView(kube: KubeClient, namespace: string, name: string): Promise<string> {
  const pod = await kube.getPod(namespace, name);
  const node = (pod.raw.spec as { nodeName?: unknown } | undefined)?.nodeName;
  return typeof node === "string" && node !== ""
    ? `the pod runs on node "${node}": its node-local inputs below are not read from there`
    : "the pod is not bound to a node yet: any node's view, node-local inputs as below";
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
