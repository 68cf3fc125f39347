/**
 * The report of `manifold explain`: the pod's plan from lib/multinet's planning module (the
 * code ADD executes, `buildPodPlan`) and, per attachment and per plugin, what the delegate
 * would receive: the resolved NAD source, the final stdin config (name and cniVersion
 * injected, `runtimeConfig` filtered by the plugin's capabilities, `args.cni` merged;
 * `CniRuntime.buildPluginConfig`), the environment (`CNI_COMMAND=ADD`, `CNI_IFNAME`,
 * `CNI_ARGS`, …) and the binary. Nothing is attached and no delegate runs.
 *
 * @module
 */

import { lazyImport } from "../util/lazy.ts";
import { formatCniArgs } from "../cni/env.ts";
import { CniError } from "../cni/errors.ts";
import type { PluginExec } from "../cni/invoke.ts";
import { CniRuntime } from "../cni/runtime.ts";
import { DEVICE_INFO_CAPABILITY } from "../devices/constants.ts";
import type { ManifoldConf } from "../multinet/config.ts";
import type { NadSource } from "../multinet/nad/source.ts";
import { declaresCapability } from "../multinet/plan/plan.ts";
import type { PodRef } from "../multinet/plan/pod.ts";
import type { PodNetworkSource } from "../multinet/plan/pod_networks.ts";
import {
  type AttachmentPlan,
  NETWORKS_ANNOTATION,
  type NetworkSelectionElement,
  POD_ANNOTATIONS_CAPABILITY,
} from "../multinet/types.ts";

/** Layout version of the `--json` output. */
export const EXPLAIN_JSON_VERSION = 1;

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
  /** True for the cluster default network. */
  isDefault: boolean;
  /** `"nad:ns/name"`, `"file:/path"` or `"inline:delegates[i]"`. */
  source: string;
  /** CNI_IFNAME. */
  ifName: string;
  /** The selection element that asked for it (absent for default networks). */
  selection?: NetworkSelectionElement;
  /** runtimeConfig candidates; each reaches only plugins declaring that capability. */
  capabilityArgs: Record<string, unknown>;
  /** What each plugin of the delegate would receive, in invocation order. */
  plugins: ExplainPlugin[];
  /** What a dry run cannot show or what the plugin would warn about. */
  notes: string[];
}

/** The `--json` output. */
export interface ExplainReport {
  /** Layout version, {@link EXPLAIN_JSON_VERSION}. */
  version: number;
  /** The pod explained. */
  pod: { namespace: string; name: string; uid: string };
  /**
   * Manifold's config file, or `"configmap kube-system/manifold-config (cluster view)"` when
   * it was read from the cluster (no node config on this machine).
   */
  config: string;
  /**
   * In the cluster view only: the node-local inputs this machine cannot read and what was
   * assumed for them (the cluster network file, the NAD mirror, node paths).
   */
  assumed?: string[];
  /** Its cniVersion. */
  cniVersion: string;
  /** The attachments in ADD order, the default network first. */
  attachments: ExplainAttachment[];
  /** What ADD would warn about for the whole pod (an ignored invalid selection). */
  warnings: string[];
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
  /** KEP-3698 PodNetworks (the API); undefined without one. */
  podNetworks?: PodNetworkSource;
  /** CNI_CONTAINERID, CNI_NETNS and CNI_IFNAME of the simulated call. */
  containerId: string;
  /** CNI_NETNS of the simulated call. */
  netns: string;
  /** CNI_IFNAME of the simulated call (the runtime's, usually "eth0"). */
  ifName: string;
  /** CNI_PATH of the runtime. */
  cniPath: string[];
  /** runtimeConfig the runtime passes to Manifold (only declared capabilities count). */
  runtimeConfig?: Record<string, unknown>;
  /** The config file (or the ConfigMap), for the report. */
  configPath: string;
  /** Node-local inputs assumed (cluster view), for the report. */
  assumed?: string[];
}

/**
 * Plans a pod's ADD with the plugin's own planning module (`buildPodPlan`, the code ADD runs)
 * and builds what each delegate would receive.
 *
 * @param input configuration, pod, annotations, NAD source, simulated CNI call
 * @returns the report, attachments in ADD order
 * @throws {CniError} exactly as ADD would fail before running a delegate: code 7 for an
 *   invalid annotation (unless `invalidNetworkSelection` is `"ignore"`: then a warning), a
 *   missing NAD, an isolation violation, a duplicate interface, `default-route` on more than
 *   one attachment, or a requested key whose capability no plugin declares (e.g.
 *   `network "ns/x": "ips" was requested but no plugin declares capability "ips"`); NAD source
 *   errors as is
 */
export async function explainPod(input: ExplainInput): Promise<ExplainReport> {
  const { buildPodPlan } = await lazyImport<typeof import("../multinet/plan/pod_plan.ts")>(
    "../multinet/plan/pod_plan.ts",
    import.meta.url,
  );
  const { conf, pod, annotations, nads, podNetworks } = input;
  // The runtime passes only what Manifold declares (libcni), as ADD sees it.
  const runtimeConfig: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(input.runtimeConfig ?? {})) {
    if (conf.capabilities[k] === true) runtimeConfig[k] = v;
  }
  if (conf.capabilities[POD_ANNOTATIONS_CAPABILITY]) {
    runtimeConfig[POD_ANNOTATIONS_CAPABILITY] = { ...annotations };
  }
  // CNI_ARGS as kubelet's runtime sends them.
  const runtimeArgs: [string, string][] = [
    ["IgnoreUnknown", "1"],
    ["K8S_POD_NAMESPACE", pod.namespace],
    ["K8S_POD_NAME", pod.name],
    ["K8S_POD_INFRA_CONTAINER_ID", pod.infraContainerId],
    ...(pod.uid ? [["K8S_POD_UID", pod.uid] as [string, string]] : []),
  ];
  const plan = await buildPodPlan({
    conf: { ...conf, runtimeConfig },
    pod,
    containerId: input.containerId,
    ifName: input.ifName,
    runtimeArgs,
    annotations,
    nads,
    podNetworks,
  });
  const binDirs = [conf.binDir, ...input.cniPath];
  const runtime = new CniRuntime({ binDirs, exec: NO_EXEC });
  const { findPlugin } = await lazyImport<typeof import("../cni/invoke.ts")>(
    "../cni/invoke.ts",
    import.meta.url,
  );
  const attachments: ExplainAttachment[] = [];
  for (const attachment of plan.attachments) {
    attachments.push(
      await explainAttachment(attachment, {
        runtime,
        binDirs,
        findPlugin,
        containerId: input.containerId,
        netns: input.netns,
      }),
    );
  }
  const warnings = plan.ignoredSelection
    ? [
      `${NETWORKS_ANNOTATION} is invalid and ignored (invalidNetworkSelection "ignore"): ` +
      plan.ignoredSelection.message,
    ]
    : [];
  return {
    version: EXPLAIN_JSON_VERSION,
    pod: { namespace: pod.namespace, name: pod.name, uid: pod.uid },
    config: input.configPath,
    ...(input.assumed ? { assumed: input.assumed } : {}),
    cniVersion: conf.cniVersion,
    attachments,
    warnings,
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
  },
): Promise<ExplainAttachment> {
  const { delegate } = plan;
  const { list } = delegate;
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
  if (declaresCapability(delegate.conflist, DEVICE_INFO_CAPABILITY)) {
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
