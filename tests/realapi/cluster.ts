/**
 * A scratch node (tests/support/world.ts `node`) wired to a real kube-apiserver
 * (tests/support/kube_apiserver.ts): the NAD CRD from deploy/ installed once, a fresh
 * namespace per test with its `default` ServiceAccount, the node's NADs (plus any extra) and
 * a pod bound to a node, a kubeconfig with a token file, and the plugin called as a runtime
 * does with the pod's real UID. Needs root. Always `done(w)` in `finally`.
 *
 * @module
 */

import { parseAllDocuments } from "yaml";
import type { KubeApiServer } from "../support/kube_apiserver.ts";
import { type KubeObject, type KubeRest, NAD_CRD } from "../support/kube_rest.ts";
import { Scratch } from "../support/netns.ts";
import { k8sArgs, MANIFOLD, type PluginCall, runPlugin } from "../support/plugin.ts";
import { type Node, node, type NodeOptions } from "../support/world.ts";

export const POD = "web-0";

const DEPLOY = new URL("../../deploy/", import.meta.url).pathname;

/** Every object of deploy/*.yaml, in file order. */
export async function deployObjects(): Promise<KubeObject[]> {
  const files = [...Deno.readDirSync(DEPLOY)].map((e) => e.name).filter((n) => n.endsWith(".yaml"))
    .sort();
  const out: KubeObject[] = [];
  for (const f of files) {
    for (const doc of parseAllDocuments(await Deno.readTextFile(`${DEPLOY}/${f}`))) {
      if ("errors" in doc && doc.errors.length) throw new Error(`${f}: ${doc.errors[0].message}`);
      const obj = doc.toJS();
      if (obj) out.push(obj);
    }
  }
  return out;
}

/** Installs deploy/00-crd.yaml's CRD (idempotent) and waits until it is Established. */
export async function ensureNadCrd(admin: KubeRest): Promise<void> {
  const crd = (await deployObjects()).find((o) => o.metadata?.name === NAD_CRD);
  if (!crd) throw new Error(`deploy/ has no ${NAD_CRD}`);
  await admin.installCrd(crd);
}

/** A node whose pod lives in a real API server. */
export interface RealWorld extends Node {
  api: KubeApiServer;
  /** This test's namespace. */
  ns: string;
  /** The pod's server-assigned UID. */
  uid: string;
  /** Token file the kubeconfig names. */
  tokenFile: string;
  call(command: PluginCall["command"], extra?: Partial<PluginCall>): ReturnType<typeof runPlugin>;
  /** The pod as the server has it now. */
  pod(): Promise<KubeObject>;
}

/** Options of {@link realWorld}. */
export interface RealWorldOptions extends NodeOptions {
  /** NADs besides the node's `bridge-net` and `macvlan-net`: name → config (JSON text). */
  extraNads?: (n: Node) => Record<string, string>;
  /** Token the plugin uses; default the admin's. */
  token?: string;
}

/** Builds a node, a namespace, the NADs and the pod in `api`; cleans up on failure. */
export async function realWorld(
  api: KubeApiServer,
  opts: RealWorldOptions = {},
): Promise<RealWorld> {
  const scratch = new Scratch();
  try {
    const n = await node(scratch, opts);
    const ns = `mft-${scratch.id}`;
    await ensureNadCrd(api.admin);
    await api.admin.createNamespace(ns);
    const nads = { ...n.nadConfigs, ...opts.extraNads?.(n) };
    for (const [name, config] of Object.entries(nads)) await api.admin.createNad(ns, name, config);
    const pod = await api.admin.createPod(ns, POD, { annotations: opts.annotations });
    const uid = pod.metadata.uid as string;
    const tokenFile = `${n.dirs.kube}/token`;
    await api.writeKubeconfig(n.kubeconfig, { token: opts.token, tokenFile });
    return {
      ...n,
      nadConfigs: nads,
      api,
      ns,
      uid,
      tokenFile,
      call: (command, extra = {}) =>
        runPlugin({
          command,
          config: n.conf,
          containerId: n.containerId,
          netns: n.netnsPath,
          ifName: "eth0",
          args: k8sArgs(ns, POD, n.containerId, uid),
          path: "/usr/lib/cni",
          ...extra,
        }),
      pod: () => api.admin.getPod(ns, POD),
    };
  } catch (e) {
    await scratch.cleanup();
    throw e;
  }
}

/** Deletes the pod (grace 0: no kubelet) and the namespace, and removes the node. */
export async function done(w: RealWorld): Promise<void> {
  try {
    await w.api.admin.delete("v1", "Pod", w.ns, POD);
    await w.api.admin.delete("v1", "Namespace", undefined, w.ns);
  } catch { /* the server may be down in a failed test; its stop removes everything */ }
  await w.scratch.cleanup();
}

/** The pod's network-status annotation, parsed; undefined when absent. */
export function networkStatus(pod: KubeObject): Record<string, unknown>[] | undefined {
  const text = pod.metadata?.annotations?.["k8s.v1.cni.cncf.io/network-status"];
  return text === undefined ? undefined : JSON.parse(text);
}

/** A running `manifold mirror` process (scripts/manifold, as the DaemonSet runs it). */
export interface MirrorProcess {
  child: Deno.ChildProcess;
  /** `<dir>/<namespace>/<name>.json` (README "manifold mirror"). */
  file(namespace: string, name: string): string;
  /** `<dir>/.mirror.json`. */
  stateFile: string;
  /** SIGTERM, then the exit code, stderr (JSON log lines) and ms from SIGTERM to exit. */
  stop(): Promise<{ code: number; stderr: string; ms: number }>;
}

/** Starts `manifold mirror --dir <dir> --kubeconfig <kubeconfig>`; always `stop()` it. */
export function startMirror(dir: string, kubeconfig: string): MirrorProcess {
  const child = new Deno.Command(MANIFOLD, {
    args: ["mirror", "--dir", dir, "--kubeconfig", kubeconfig, "--log-level", "debug"],
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const output = child.output();
  let stopped: Promise<{ code: number; stderr: string; ms: number }> | undefined;
  return {
    child,
    file: (ns, name) => `${dir}/${ns}/${name}.json`,
    stateFile: `${dir}/.mirror.json`,
    stop() {
      stopped ??= (async () => {
        const t0 = performance.now();
        try {
          child.kill("SIGCONT");
          child.kill("SIGTERM");
        } catch { /* already gone */ }
        const out = await output;
        return {
          code: out.code,
          stderr: new TextDecoder().decode(out.stderr),
          ms: Math.round(performance.now() - t0),
        };
      })();
      return stopped;
    },
  };
}
