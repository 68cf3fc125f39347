/**
 * A node running a real `manifold daemon` with `"multiNetworkPolicy": true` (root): the API
 * stand-in (tests/support/kube_api.ts) holding namespaces `a` (team=a) and `b` (team=b), the
 * NAD `a/net1` (bridge on a host bridge + host-local 10.98.0.0/24, `ips` capability), pods
 * created in the API and attached through the plugin binary forwarding to the daemon (ADD →
 * real delegates, the cache, network-status PATCH), each with a traffic agent in its netns.
 * Shared by tests/policy/daemon_test.ts and scripts/bench_policy_daemon.ts.
 *
 * @module
 */

import { loopbackPort } from "../../support/ports.ts";
import { type KubeApiStandIn, startKubeApi } from "../../support/kube_api.ts";
import type { KubeApiServer } from "../../support/kube_apiserver.ts";
import { type LabApi, realLabApi, standInLabApi } from "./lab_api.ts";
import { type DaemonProcess, startDaemon } from "../../support/daemon.ts";
import { isRoot, Scratch } from "../../support/netns.ts";
import { k8sArgs, runPlugin } from "../../support/plugin.ts";
import { until } from "../../support/wait.ts";
import { LabPod } from "./lab.ts";

/** The node's name (pods' `spec.nodeName`, the daemon's `--node-name`). */
export const NODE = "node1";

/** A pod of the lab. */
export interface DaemonLabPod {
  namespace: string;
  name: string;
  uid: string;
  containerId: string;
  /** netns name and path. */
  netns: string;
  path: string;
  /** Its net1 address. */
  ip: string;
  /** Traffic agent in its netns. */
  agent: LabPod;
}

/** The running lab; `cleanup()` in `finally`. */
export class DaemonLab {
  readonly scratch = new Scratch();
  /** The API writes (stand-in or real server). */
  api!: LabApi;
  /** The stand-in, when no real server was given. */
  standIn: KubeApiStandIn | undefined;
  daemon!: DaemonProcess;
  conf!: Record<string, unknown>;
  dir = "";
  metricsPort = 0;
  readonly pods: DaemonLabPod[] = [];
  #daemonConf: Record<string, unknown> = {};
  #readyTimeoutMs = 10_000;

  /**
   * Starts the API stand-in and the daemon; waits for `/readyz`.
   * @param opts `conf`: extra plugin config keys; `server`: a real kube-apiserver to use
   *   instead of the stand-in; `beforeDaemon`: runs once the lab's namespaces and NAD exist,
   *   before the daemon starts (e.g. fill the cluster); `readyTimeoutMs`: bound on `/readyz`
   *   (default 10 000)
   */
  async start(
    opts: {
      conf?: Record<string, unknown>;
      server?: KubeApiServer;
      beforeDaemon?: () => Promise<void>;
      readyTimeoutMs?: number;
    } = {},
  ): Promise<void> {
    if (opts.server) this.api = await realLabApi(opts.server);
    else this.api = standInLabApi(this.standIn = await startKubeApi());
    this.dir = await this.scratch.dir();
    const d = this.dir;
    for (const sub of ["net.d", "cache", "ipam", "run"]) await Deno.mkdir(`${d}/${sub}`);
    const id = this.scratch.id;
    const brDef = this.scratch.trackLink(`mpd${id}`);
    const brSec = this.scratch.trackLink(`mps${id}`);
    await Deno.writeTextFile(
      `${d}/net.d/10-default.conflist`,
      JSON.stringify({
        cniVersion: "1.0.0",
        name: "cbr0",
        plugins: [{
          type: "bridge",
          bridge: brDef,
          ipam: {
            type: "host-local",
            dataDir: `${d}/ipam`,
            ranges: [[{ subnet: "10.241.0.0/24" }]],
          },
        }],
      }),
    );
    await this.api.putNamespace("a", { team: "a" });
    await this.api.putNamespace("b", { team: "b" });
    await this.api.addNad(
      "a",
      "net1",
      JSON.stringify({
        cniVersion: "1.0.0",
        type: "bridge",
        bridge: brSec,
        capabilities: { ips: true },
        ipam: { type: "host-local", dataDir: `${d}/ipam`, ranges: [[{ subnet: "10.98.0.0/24" }]] },
      }),
    );
    await this.api.writeKubeconfig(`${d}/kubeconfig`, `${d}/token`);
    this.metricsPort = loopbackPort();
    this.#daemonConf = {
      cniVersion: "1.0.0",
      name: "manifold-net",
      type: "manifold",
      clusterNetwork: `${d}/net.d/10-default.conflist`,
      kubeconfig: `${d}/kubeconfig`,
      confDir: `${d}/net.d`,
      cniDir: `${d}/cache`,
      logLevel: "debug",
      multiNetworkPolicy: true,
      ...opts.conf,
    };
    await opts.beforeDaemon?.();
    this.#readyTimeoutMs = opts.readyTimeoutMs ?? 10_000;
    await this.#startDaemon();
  }

  /**
   * Stops the daemon (SIGTERM, waits for its exit), runs `whileDown`, and starts a new one
   * with the same config and flags (waits for `/readyz`).
   */
  async restart(whileDown: () => Promise<void> = () => Promise.resolve()): Promise<void> {
    this.daemon.kill("SIGTERM");
    const { code } = await this.daemon.exited();
    if (code !== 0) throw new Error(`the daemon exited ${code}`);
    await whileDown();
    await this.#startDaemon();
  }

  async #startDaemon(): Promise<void> {
    this.daemon = await startDaemon(this.dir, this.#daemonConf, {
      flags: ["--node-name", NODE, "--metrics-address", `127.0.0.1:${this.metricsPort}`],
    });
    this.conf = this.daemon.conf;
    await until(
      async () => (await this.http("/readyz")).status === 200,
      "the daemon ready",
      this.#readyTimeoutMs,
    );
  }

  /** GET on the daemon's metrics address. */
  async http(path: string): Promise<{ status: number; text: string }> {
    try {
      const r = await fetch(`http://127.0.0.1:${this.metricsPort}${path}`);
      return { status: r.status, text: await r.text() };
    } catch {
      return { status: 0, text: "" };
    }
  }

  /**
   * Creates the pod in the API (labels, `spec.nodeName`, a net1 selection with a static
   * address `10.98.0.<host>`), its netns, runs ADD through the plugin → daemon, starts its agent.
   */
  async pod(
    namespace: string,
    name: string,
    labels: Record<string, string>,
    host: number,
  ): Promise<DaemonLabPod> {
    const netns = await this.scratch.netns(`${name.slice(0, 3)}${host}`);
    const ip = `10.98.0.${host}`;
    const uid = await this.api.addPod({
      namespace,
      name,
      labels,
      nodeName: NODE,
      annotations: {
        "k8s.v1.cni.cncf.io/networks": JSON.stringify([
          { name: "net1", namespace: "a", interface: "net1", ips: [`${ip}/24`] },
        ]),
      },
    });
    const containerId = `c${this.scratch.id}${host}${crypto.randomUUID().slice(0, 8)}`;
    const pod: DaemonLabPod = {
      namespace,
      name,
      uid,
      containerId,
      netns,
      path: `/var/run/netns/${netns}`,
      ip,
      agent: undefined as unknown as LabPod,
    };
    const r = await this.cni("ADD", pod);
    if (r.code !== 0) throw new Error(`ADD ${namespace}/${name}: ${r.stdout} ${r.stderr}`);
    pod.agent = new LabPod(netns, ip, "");
    this.pods.push(pod);
    return pod;
  }

  /** Runs a CNI command for the pod through the plugin binary (forwarded to the daemon). */
  cni(command: "ADD" | "DEL", pod: DaemonLabPod): ReturnType<typeof runPlugin> {
    return runPlugin({
      command,
      config: this.conf,
      containerId: pod.containerId,
      netns: pod.path,
      ifName: "eth0",
      args: k8sArgs(pod.namespace, pod.name, pod.containerId, pod.uid),
    });
  }

  /** DEL of every pod, daemon stopped, API stopped, namespaces and links removed; never throws. */
  async cleanup(): Promise<void> {
    for (const p of this.pods) {
      await p.agent?.close().catch(() => {});
      await this.cni("DEL", p).catch(() => {});
    }
    if (this.daemon) {
      this.daemon.kill("SIGTERM");
      await this.daemon.exited().catch(() => {});
    }
    await this.standIn?.stop().catch(() => {});
    await this.scratch.cleanup();
  }
}

/**
 * Registers a root-only test on a started {@link DaemonLab} (stand-in API), cleaned up in
 * `finally` also on failure; skipped without root.
 *
 * @param name the test's name
 * @param fn the scenario, given the started lab
 * @param start options of {@link DaemonLab.start} (e.g. `conf`)
 */
export function daemonLabTest(
  name: string,
  fn: (lab: DaemonLab) => Promise<void>,
  start: Parameters<DaemonLab["start"]>[0] = {},
): void {
  Deno.test({
    name,
    ignore: !isRoot(),
    sanitizeOps: false,
    sanitizeResources: false,
    async fn() {
      const lab = new DaemonLab();
      try {
        await lab.start(start);
        await fn(lab);
      } finally {
        await lab.cleanup();
      }
    },
  });
}

/** Polls a connect until it gives `want` (each try 200 ms); returns the ms it took. */
export async function reaches(
  from: DaemonLabPod,
  to: DaemonLabPod,
  port: number,
  want: boolean,
  ms = 2000,
): Promise<number> {
  const t0 = performance.now();
  await until(
    async () => (await from.agent.connects(to.ip, port, 200)) === want,
    `${from.name} → ${to.name}:${port} ${want ? "passing" : "dropped"}`,
    ms,
    5,
  );
  return performance.now() - t0;
}

/**
 * A MultiNetworkPolicy object in namespace `a`.
 *
 * @param name `metadata.name`
 * @param spec its `spec`
 * @param policyFor the `k8s.v1.cni.cncf.io/policy-for` annotation (default `"net1"`)
 */
export function labPolicy(
  name: string,
  spec: Record<string, unknown>,
  policyFor = "net1",
): Record<string, unknown> {
  return {
    metadata: {
      name,
      namespace: "a",
      annotations: { "k8s.v1.cni.cncf.io/policy-for": policyFor },
    },
    spec,
  };
}

/** `app=web` pods may reach `app=db` pods on TCP 80 over net1. */
export const WEB_TO_DB_80: Record<string, unknown> = labPolicy("db", {
  podSelector: { matchLabels: { app: "db" } },
  ingress: [{ from: [{ podSelector: { matchLabels: { app: "web" } } }], ports: [{ port: 80 }] }],
});
