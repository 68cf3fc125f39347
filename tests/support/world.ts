/**
 * A scratch "node" for plugin integration tests: a pod netns, host bridges, temp dirs,
 * a default network conflist (bridge + host-local), two NADs in the API stand-in
 * (`bridge-net`: bridge + host-local; `macvlan-net`: macvlan + static IPAM + tuning, with
 * `ips`/`mac` capabilities), a pod, a tokenFile kubeconfig, and Manifold's config.
 * Needs root. Always `done(w)` in `finally`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { type KubeApiStandIn, startKubeApi, type StartKubeApiOptions } from "./kube_api.ts";
import { rootTest, Scratch } from "./netns.ts";
import { k8sArgs, type PluginCall, type PluginOutcome, runPlugin } from "./plugin.ts";

export const NS = "tenant-a";
export const POD = "web-0";
export const UID = "0f3a2f4c-1111-4222-8333-444455556666";

/**
 * The API-independent part of a {@link World}: netns, host bridges, dirs, the default
 * network conflist, the NAD configs (not yet put anywhere) and Manifold's config naming
 * `<dirs.kube>/kubeconfig` (the seam: whoever serves the API writes that file).
 */
export interface Node {
  scratch: Scratch;
  podNetns: string;
  netnsPath: string;
  dirs: { conf: string; cache: string; ipam: string; kube: string; bin: string };
  conf: Record<string, unknown>;
  containerId: string;
  /** Host bridge names used by the NADs. */
  br: { def: string; sec: string; master: string };
  /** NAD configs by NAD name (as JSON text): `bridge-net` and `macvlan-net`. */
  nadConfigs: Record<string, string>;
  /** Path of the kubeconfig Manifold's config names (not written by {@link node}). */
  kubeconfig: string;
  leases(): Promise<string[]>;
}

export interface World extends Node {
  api: KubeApiStandIn;
  call(command: PluginCall["command"], extra?: Partial<PluginCall>): ReturnType<typeof runPlugin>;
}

/** Options of {@link node} and {@link world}. */
export interface NodeOptions {
  annotations?: Record<string, string>;
  conf?: Record<string, unknown>;
  cniVersion?: string;
  /** The pod's `spec.nodeName` (the daemon's pod informer selects by it). */
  nodeName?: string;
  /** Options of the API stand-in ({@link world} only). */
  kubeApi?: StartKubeApiOptions;
}

/**
 * Builds the scratch node of a world in `scratch` (cleaned up by the caller); no API.
 */
export async function node(scratch: Scratch, opts: NodeOptions = {}): Promise<Node> {
  const podNetns = await scratch.netns("pod");
  const base = await scratch.dir();
  const dirs = {
    conf: `${base}/net.d`,
    cache: `${base}/cache`,
    ipam: `${base}/ipam`,
    kube: `${base}/kube`,
    bin: `${base}/bin`,
  };
  for (const d of Object.values(dirs)) await Deno.mkdir(d, { recursive: true });
  const br = {
    def: scratch.trackLink(`mfd${scratch.id}`),
    sec: scratch.trackLink(`mfs${scratch.id}`),
    master: await scratch.bridge("m"),
  };
  const v = opts.cniVersion ?? "1.0.0";
  const delegateVersion = v === "1.1.0" ? "1.0.0" : v;
  await Deno.writeTextFile(
    `${dirs.conf}/10-default.conflist`,
    JSON.stringify({
      cniVersion: delegateVersion,
      name: "cbr0",
      plugins: [{
        type: "bridge",
        bridge: br.def,
        ipam: {
          type: "host-local",
          dataDir: dirs.ipam,
          ranges: [[{ subnet: "10.240.1.0/24" }]],
          routes: [{ dst: "0.0.0.0/0" }],
        },
      }],
    }),
  );
  const nadConfigs: Record<string, string> = {};
  nadConfigs["bridge-net"] = JSON.stringify({
    cniVersion: delegateVersion,
    type: "bridge",
    bridge: br.sec,
    ipam: { type: "host-local", dataDir: dirs.ipam, subnet: "10.240.2.0/24" },
  });
  nadConfigs["macvlan-net"] = JSON.stringify({
    cniVersion: delegateVersion,
    name: "macvlan-net",
    plugins: [
      {
        type: "macvlan",
        master: br.master,
        mode: "bridge",
        ipam: { type: "static" },
        capabilities: { ips: true },
      },
      { type: "tuning", capabilities: { mac: true } },
    ],
  });
  const kubeconfig = `${dirs.kube}/kubeconfig`;
  const conf = {
    cniVersion: v,
    name: "manifold-net",
    type: "manifold",
    clusterNetwork: `${dirs.conf}/10-default.conflist`,
    kubeconfig,
    confDir: dirs.conf,
    cniDir: dirs.cache,
    binDir: dirs.bin,
    logLevel: "debug",
    logToStderr: true,
    ...opts.conf,
  };
  const containerId = `c${scratch.id}${crypto.randomUUID().replaceAll("-", "").slice(0, 20)}`;
  const netnsPath = `/var/run/netns/${podNetns}`;
  return {
    scratch,
    podNetns,
    netnsPath,
    dirs,
    conf,
    containerId,
    br,
    nadConfigs,
    kubeconfig,
    async leases() {
      const out: string[] = [];
      for await (const n of Deno.readDir(dirs.ipam)) {
        for await (const f of Deno.readDir(`${dirs.ipam}/${n.name}`)) {
          if (/^[0-9a-f.:]+$/.test(f.name)) out.push(`${n.name}/${f.name}`);
        }
      }
      return out;
    },
  };
}

/**
 * Registers a root test with a fresh {@link world}, always torn down with {@link done} (netns,
 * links, leases, the API stand-in), also when the test fails.
 *
 * @param name the test's name
 * @param opts the world (annotations, config, NADs)
 * @param body the test
 */
export function worldTest(
  name: string,
  opts: NodeOptions,
  body: (w: World) => Promise<void>,
): void {
  rootTest(name, async () => {
    const w = await world(opts);
    try {
      await body(w);
    } finally {
      await done(w);
    }
  });
}

export async function world(opts: NodeOptions = {}): Promise<World> {
  const scratch = new Scratch();
  const api = await startKubeApi(opts.kubeApi);
  try {
    const n = await node(scratch, opts);
    for (const [name, config] of Object.entries(n.nadConfigs)) {
      api.addNad({ namespace: NS, name, config });
    }
    api.addPod({
      namespace: NS,
      name: POD,
      uid: UID,
      annotations: opts.annotations ?? {},
      nodeName: opts.nodeName,
    });
    await Deno.writeTextFile(`${n.dirs.kube}/token`, api.token);
    await api.writeKubeconfig(n.kubeconfig, {
      auth: "tokenFile",
      tokenFile: `${n.dirs.kube}/token`,
    });
    return {
      ...n,
      api,
      call: (command, extra = {}) =>
        runPlugin({
          command,
          config: n.conf,
          containerId: n.containerId,
          netns: n.netnsPath,
          ifName: "eth0",
          args: k8sArgs(NS, POD, n.containerId, UID),
          path: "/usr/lib/cni",
          ...extra,
        }),
    };
  } catch (e) {
    await api.stop();
    await scratch.cleanup();
    throw e;
  }
}

export async function done(w: World) {
  await w.api.stop();
  await w.scratch.cleanup();
}

export function podStatus(w: World): Record<string, unknown>[] {
  const pod = w.api.getPod(NS, POD) as { metadata: { annotations?: Record<string, string> } };
  const text = pod.metadata.annotations?.["k8s.v1.cni.cncf.io/network-status"];
  assert.ok(text, "network-status annotation written");
  return JSON.parse(text!);
}

export function expectOk(r: PluginOutcome, what: string) {
  assert.deepEqual(r.code, 0, `${what} failed: ${r.stdout}\n${r.stderr.slice(-3000)}`);
}
