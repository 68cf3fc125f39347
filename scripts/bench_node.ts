/**
 * Pod start-up latency at a burst on a real node (issue 27 §3; not a test): the node harness
 * (tests/support/node_cluster.ts: kube-apiserver, controller-manager, scheduler, containerd,
 * kubelet) with Manifold as the node's CNI, per call and with `manifold daemon`. A Deployment
 * of netcheck pods selecting one bridge NAD (host-local) is scaled 0 → N (default 50); printed
 * per mode and round:
 * - the wall time from the scale PATCH to all N pods Running and Ready (polled every 200 ms);
 * - kubelet's own figure per pod, `podStartE2EDuration` of its "Observed pod startup duration"
 *   log line (pod creation → all containers running, observed by kubelet), median/p95/max;
 * - the node's start time.
 * Then scaled back to 0 (all gone) before the next round.
 *
 * Run through `deno run -A scripts/bench.ts --node [--pods 50] [--rounds 1]` as root with
 * `MANIFOLD_KUBE_APISERVER` set (kubelet, kube-controller-manager, kube-scheduler beside it).
 *
 * @module
 */

import { type NodeMode, poll, startNodeCluster } from "../tests/support/node_cluster.ts";
import { bridgeNad, deployment } from "../tests/support/node/workloads.ts";

/** Options of {@link benchNode}. */
export interface BenchNodeOptions {
  /** Pods in the burst. */
  pods: number;
  /** Bursts per mode. */
  rounds: number;
  /** Modes to measure. */
  modes: NodeMode[];
}

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
}

/** Parses kubelet's `podStartE2EDuration="1.23s"` (Go duration) to ms, per pod. */
async function kubeletE2E(log: string, namespace: string): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  const text = await Deno.readTextFile(log).catch(() => "");
  for (const line of text.split("\n")) {
    if (!line.includes("Observed pod startup duration")) continue;
    const pod = /pod="([^"]+)"/.exec(line)?.[1];
    const d = /podStartE2EDuration="([^"]+)"/.exec(line)?.[1];
    if (!pod || !d || !pod.startsWith(`${namespace}/`)) continue;
    out.set(pod, goDurationMs(d));
  }
  return out;
}

function goDurationMs(d: string): number {
  let ms = 0;
  for (const [, n, u] of d.matchAll(/([\d.]+)(h|ms|µs|us|ns|m|s)/g)) {
    const v = Number(n);
    ms += u === "h"
      ? v * 3_600_000
      : u === "m"
      ? v * 60_000
      : u === "s"
      ? v * 1000
      : u === "ms"
      ? v
      : u === "ns"
      ? v / 1e6
      : v / 1000;
  }
  return ms;
}

/** Runs the burst per mode and prints the figures. */
export async function benchNode(opts: BenchNodeOptions): Promise<void> {
  console.log(
    `node burst: Deployment 0 → ${opts.pods} pods (eth0 + one bridge/host-local NAD), ` +
      `${opts.rounds} round(s) per mode; ${navigator.hardwareConcurrency} CPUs`,
  );
  for (const mode of opts.modes) {
    const node = await startNodeCluster({ mode });
    const br = `mbn${crypto.randomUUID().slice(0, 5)}`;
    try {
      console.log(`\n${mode}: node started in ${node.startMs} ms`);
      await node.createNamespace("bench");
      await node.createNad("bench", "net-a", bridgeNad(node, "net-a", br, "10.36.0.0/23"));
      await node.apply(deployment("bench", "web", 0, "net-a"));
      for (let r = 1; r <= opts.rounds; r++) {
        const seen = new Set((await kubeletE2E(node.logPath("kubelet"), "bench")).keys());
        const began = performance.now();
        await node.scale("bench", "web", opts.pods);
        await poll(
          `${opts.pods} pods Running`,
          async () => {
            const pods = await node.listPods("bench", "app=web");
            return pods.length === opts.pods && pods.every((p) =>
              p.status?.phase === "Running" &&
              // deno-lint-ignore no-explicit-any
              p.status?.conditions?.some((c: any) => c.type === "Ready" && c.status === "True")
            );
          },
          600_000,
          200,
        );
        const wall = performance.now() - began;
        const pods = await node.listPods("bench", "app=web");
        const names = new Set(pods.map((p) => `bench/${p.metadata.name}`));
        // kubelet logs the figure when it observes the pod running; give it a moment.
        let e2e: number[] = [];
        await poll(
          "kubelet's podStartE2EDuration of every pod",
          async () => {
            const all = await kubeletE2E(node.logPath("kubelet"), "bench");
            e2e = [...all].filter(([k]) => names.has(k) && !seen.has(k)).map(([, v]) => v);
            return e2e.length === opts.pods;
          },
          30_000,
          500,
        ).catch(() => {});
        const f = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
        console.log(
          `${mode} round ${r}: all ${opts.pods} Running in ${
            f(wall)
          }; kubelet podStartE2EDuration ` +
            (e2e.length
              ? `median ${f(pct(e2e, 50))}, p95 ${f(pct(e2e, 95))}, max ${
                f(Math.max(...e2e))
              } (${e2e.length} pods)`
              : "not logged"),
        );
        await node.scale("bench", "web", 0);
        await node.waitPodsGone("bench", "app=web", 300_000);
      }
    } finally {
      await node.stop();
      await new Deno.Command("ip", { args: ["link", "del", br], stderr: "null" }).output();
    }
  }
}
