/**
 * Shared parts of the benchmarks (scripts/bench.ts, scripts/bench_daemon.ts): percentiles and
 * the floor — the same delegates with the same configs run directly (one process per plugin,
 * as a runtime would; no API, no cache, no status).
 *
 * @module
 */

import { ProcessPluginExec } from "../lib/cni/invoke.ts";
import { CniRuntime } from "../lib/cni/runtime.ts";
import { type NetworkConfigList, parseNetworkConfig } from "../lib/cni/types.ts";
import { linkNames } from "../tests/support/netns.ts";
import { type Node, NS, POD, type World } from "../tests/support/world.ts";
import { startTcpProxy, type TcpProxy } from "../tests/support/tcp_proxy.ts";

/**
 * `--api-latency MS`: a loopback TCP proxy adding `ms` to every chunk each way (one RTT is
 * 2 × `ms`) in front of the world's API stand-in; the world's kubeconfig is rewritten to go
 * through it, so every mode (plugin process, mirror, daemon) sees the delay.
 * @param w the benchmark world
 * @param ms delay each way, ms; 0: no proxy
 * @returns the proxy (close it at the end), or undefined for 0
 */
export async function apiLatencyProxy(w: World, ms: number): Promise<TcpProxy | undefined> {
  if (!ms) return undefined;
  const url = new URL(w.api.url);
  const proxy = startTcpProxy({ hostname: url.hostname, port: Number(url.port) }, { delayMs: ms });
  const text = await Deno.readTextFile(w.kubeconfig);
  await Deno.writeTextFile(
    w.kubeconfig,
    text.replaceAll(w.api.url, `https://${url.hostname}:${proxy.port}`),
  );
  return proxy;
}

/** The secondary networks of the benchmark pod (NPWG selection elements). */
export const SELECTION = [
  { name: "bridge-net" },
  { name: "macvlan-net", interface: "data0", ips: ["10.240.3.7/24"], mac: "02:00:00:0a:f0:07" },
];

/** Median, p95 and p99 (nearest rank) of a sample. */
export function stats(xs: number[]): { p50: number; p95: number; p99: number; n: number } {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p: number) => s[Math.min(s.length - 1, Math.floor(p * (s.length - 1) + 0.5))];
  return { p50: q(0.5), p95: q(0.95), p99: q(0.99), n: s.length };
}

/** One delegate list run directly. */
export interface Direct {
  list: NetworkConfigList;
  ifName: string;
  capabilityArgs: Record<string, unknown>;
}

/**
 * The floor of a benchmark node (API stand-in or real kube-apiserver): its delegate lists and a
 * runner.
 */
export async function directFloor(w: Node): Promise<{
  direct: Direct[];
  defaultDirect: Direct;
  bridgeDirect: (name: string, ifName: string) => Direct;
  runDirect: (containerId: string, ds: Direct[]) => Promise<{ add: number; del: number }>;
}> {
  const runtime = new CniRuntime({
    binDirs: ["/usr/lib/cni"],
    exec: new ProcessPluginExec(),
    baseEnv: { PATH: "/usr/bin:/bin" },
  });
  const defaultDirect: Direct = {
    list: parseNetworkConfig(await Deno.readTextFile(`${w.dirs.conf}/10-default.conflist`)),
    ifName: "eth0",
    capabilityArgs: {},
  };
  const bridgeDirect = (name: string, ifName: string): Direct => ({
    list: parseNetworkConfig({ ...JSON.parse(w.nadConfigs["bridge-net"]), name }),
    ifName,
    capabilityArgs: {},
  });
  const direct: Direct[] = [
    defaultDirect,
    bridgeDirect("bridge-net", "net1"),
    {
      list: parseNetworkConfig(w.nadConfigs["macvlan-net"]),
      ifName: "data0",
      capabilityArgs: { ips: SELECTION[1].ips, mac: SELECTION[1].mac },
    },
  ];
  /** ADD then DEL (reverse) of the delegates alone; returns both times (ms). */
  const runDirect = async (containerId: string, ds: Direct[]) => {
    const rt = (d: Direct) => ({
      containerId,
      netns: w.netnsPath,
      ifName: d.ifName,
      args: [["IgnoreUnknown", "1"], ["K8S_POD_NAMESPACE", NS], ["K8S_POD_NAME", POD]] as [
        string,
        string,
      ][],
      capabilityArgs: d.capabilityArgs,
    });
    let s = performance.now();
    const results: unknown[] = [];
    for (const d of ds) results.push((await runtime.addNetworkList(d.list, rt(d))).raw);
    const add = performance.now() - s;
    s = performance.now();
    for (const [k, d] of [...ds.entries()].reverse()) {
      await runtime.delNetworkList(d.list, rt(d), results[k]);
    }
    const del = performance.now() - s;
    if ((await linkNames(w.podNetns)).length !== 0) throw new Error("interfaces left after DEL");
    return { add, del };
  };
  return { direct, defaultDirect, bridgeDirect, runDirect };
}

let libc:
  | Deno.DynamicLibrary<{ getrusage: { parameters: ["i32", "buffer"]; result: "i32" } }>
  | undefined;
const usage = new BigInt64Array(18); // struct rusage: ru_utime, ru_stime (timeval), then longs

/**
 * User + system CPU time of every child process this process has waited for so far
 * (getrusage(2), `RUSAGE_CHILDREN`), ms: a plugin call's CPU time, its delegates' included, is the
 * difference around the call. A loaded machine moves it far less than wall time.
 * @returns CPU time, ms (µs resolution)
 * @throws Error when getrusage fails
 */
export function childCpuMs(): number {
  libc ??= Deno.dlopen("libc.so.6", {
    getrusage: { parameters: ["i32", "buffer"], result: "i32" },
  });
  if (libc.symbols.getrusage(-1, /* RUSAGE_CHILDREN */ usage) !== 0) throw new Error("getrusage");
  return Number(usage[0] + usage[2]) * 1000 + Number(usage[1] + usage[3]) / 1000;
}
