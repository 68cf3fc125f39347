/**
 * ADD latency against a distant API server, sync vs async network-status (issue 22 §2): one
 * `manifold daemon` per (RTT, `statusPublish`) pair — RTT 0 (the API stand-in directly) and
 * each `--rtts` value through a loopback TCP proxy adding RTT/2 each way
 * (tests/support/tcp_proxy.ts) — all serving the benchmark pod of scripts/bench.ts (default +
 * bridge NAD + macvlan NAD, annotations from the runtime, real delegates). Every iteration runs
 * ADD then DEL once per daemon, in a fresh random order, so the machine's load falls on every
 * configuration alike; requests go to each daemon's socket with the forwarder's own function
 * (lib/daemon/forward.ts) from this process, which leaves out the forwarder process's start
 * (the same in every configuration, and the noisiest part on a shared machine).
 *
 * Prints ADD p50/p99 per configuration and the p50's growth over RTT 0 of the same mode. Run as
 * root: `deno run -A scripts/bench_status_latency.ts [--iterations 60] [--rtts 10,50]`.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { forward } from "../lib/daemon/forward.ts";
import { proxiedKubeconfig } from "../tests/support/burst.ts";
import { type DaemonProcess, startDaemon } from "../tests/support/daemon.ts";
import { k8sArgs } from "../tests/support/plugin.ts";
import { loopbackPort } from "../tests/support/ports.ts";
import { startTcpProxy, type TcpProxy } from "../tests/support/tcp_proxy.ts";
import { until } from "../tests/support/wait.ts";
import { NS, POD, world } from "../tests/support/world.ts";
import { SELECTION, stats } from "./bench_support.ts";

const { values } = parseArgs({
  options: {
    iterations: { type: "string", default: "60" },
    rtts: { type: "string", default: "10,50" },
    help: { type: "boolean", short: "h" },
  },
});
if (values.help) {
  console.log(
    "usage: deno run -A scripts/bench_status_latency.ts [--iterations 60] [--rtts 10,50]",
  );
  Deno.exit(0);
}
if (Deno.uid() !== 0) {
  console.error("bench_status_latency: run as root (network namespaces)");
  Deno.exit(1);
}
const N = Number(values.iterations);
const RTTS = [0, ...values.rtts.split(",").map(Number).filter((n) => n > 0)];
const MODES = ["sync", "async"] as const;
const NODE = "bench-node";
const ANNOTATIONS = "io.kubernetes.cri.pod-annotations";

interface Config {
  rtt: number;
  mode: typeof MODES[number];
  daemon: DaemonProcess;
  metricsPort: number;
  add: number[];
}

const w = await world({ conf: { logLevel: "error" }, nodeName: NODE });
const proxies: TcpProxy[] = [];
const configs: Config[] = [];
try {
  const url = new URL(w.api.url);
  for (const rtt of RTTS) {
    let kubeconfig = w.kubeconfig;
    if (rtt > 0) {
      const proxy = startTcpProxy({ hostname: url.hostname, port: Number(url.port) }, {
        delayMs: rtt / 2,
      });
      proxies.push(proxy);
      kubeconfig = await proxiedKubeconfig(w.kubeconfig, w.api.url, proxy.port);
      // One file per proxy: proxiedKubeconfig writes `<kubeconfig>.proxied`.
      const own = `${w.kubeconfig}.rtt${rtt}`;
      await Deno.rename(kubeconfig, own);
      kubeconfig = own;
    }
    for (const mode of MODES) {
      const metricsPort = loopbackPort();
      const daemon = await startDaemon(await w.scratch.dir(), {
        ...w.conf,
        kubeconfig,
        statusPublish: mode,
        capabilities: { [ANNOTATIONS]: true },
        runtimeConfig: {
          [ANNOTATIONS]: { "k8s.v1.cni.cncf.io/networks": JSON.stringify(SELECTION) },
        },
      }, {
        flags: ["--node-name", NODE, "--metrics-address", `127.0.0.1:${metricsPort}`],
        env: { CNI_PATH: "/usr/lib/cni" },
      });
      configs.push({ rtt, mode, daemon, metricsPort, add: [] });
      await until(
        async () => {
          const res = await fetch(`http://127.0.0.1:${metricsPort}/readyz`).catch(() => undefined);
          await res?.body?.cancel();
          return res?.status === 200;
        },
        "the daemon ready",
        30_000,
      );
    }
  }
  const run = async (c: Config, command: "ADD" | "DEL", id: string) => {
    const stdin = new TextEncoder().encode(JSON.stringify(c.daemon.conf));
    const t0 = performance.now();
    const o = await forward(
      c.daemon.socket,
      {
        CNI_COMMAND: command,
        CNI_CONTAINERID: id,
        CNI_NETNS: w.netnsPath,
        CNI_IFNAME: "eth0",
        CNI_ARGS: k8sArgs(NS, POD, id),
        CNI_PATH: "/usr/lib/cni",
      },
      stdin,
      { timeoutMs: 120_000 },
    );
    const ms = performance.now() - t0;
    if (o.kind !== "answered" || o.answer.code !== 0) {
      throw new Error(`${command} (${c.mode}, RTT ${c.rtt} ms) failed: ${JSON.stringify(o)}`);
    }
    return ms;
  };
  for (let i = 0; i < N + 2; i++) {
    const order = [...configs].sort(() => Math.random() - 0.5);
    for (const c of order) {
      const id = `lat${i}${crypto.randomUUID().slice(0, 8)}`;
      const ms = await run(c, "ADD", id);
      await run(c, "DEL", id);
      if (i >= 2) c.add.push(ms); // two warm-up rounds
    }
  }
  const base = new Map(
    MODES.map((m) => [m, stats(configs.find((c) => c.rtt === 0 && c.mode === m)!.add).p50]),
  );
  console.log(
    `\nADD through manifold daemon (socket round trip, forwarder start left out), default + ` +
      `bridge NAD + macvlan NAD, ${N} interleaved iterations per configuration\n`,
  );
  console.log("RTT (ms)  statusPublish   ADD p50   ADD p99   p50 − p50 at RTT 0");
  for (const c of configs) {
    const { p50, p99 } = stats(c.add);
    console.log(
      `${String(c.rtt).padStart(8)}  ${c.mode.padEnd(13)} ${p50.toFixed(1).padStart(9)} ${
        p99.toFixed(1).padStart(9)
      } ${(p50 - base.get(c.mode)!).toFixed(1).padStart(12)}`,
    );
  }
} finally {
  for (const c of configs) {
    c.daemon.kill("SIGTERM");
    await c.daemon.exited();
  }
  for (const p of proxies) await p.close();
  await w.api.stop();
  await w.scratch.cleanup();
}
