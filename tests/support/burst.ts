/**
 * A node's burst (issue 22 §3): N sandboxes ADDed at once through one real `manifold daemon`
 * (kubelet starts a rebooted node's pods in parallel), each a distinct pod of the HTTPS API
 * stand-in bound to the node, with the cluster default network and one bridge NAD (real
 * delegates from /usr/lib/cni, one netns each), then all DELeted at once. Optionally the
 * stand-in answers 429 (`Retry-After: 1`) to one network-status PATCH in three, and the API is
 * reached through a delaying loopback TCP proxy (tests/support/tcp_proxy.ts).
 *
 * Requests go to the daemon's socket with the forwarder's own function (lib/daemon/forward.ts)
 * from this process — the protocol the `manifold` binary speaks — so 200 sandboxes do not need
 * 200 forwarder processes on the measuring machine. Used by scripts/bench_burst.ts (200) and
 * tests/integration/burst_test.ts (20). Needs root.
 *
 * @module
 */

import { forward } from "../../lib/daemon/forward.ts";
import { startDaemon } from "./daemon.ts";
import { linkNames, sh } from "./netns.ts";
import { k8sArgs } from "./plugin.ts";
import { loopbackPort } from "./ports.ts";
import { startTcpProxy, type TcpProxy } from "./tcp_proxy.ts";
import { until } from "./wait.ts";
import { NS, world } from "./world.ts";

/** Options of {@link runBurst}. */
export interface BurstOptions {
  /** Sandboxes ADDed at once. */
  pods: number;
  /** The daemon's `statusPublish`; default `"sync"`. */
  statusPublish?: "sync" | "async";
  /** Answer 429 to one network-status PATCH in three, with this `Retry-After` (seconds). */
  throttle?: { retryAfterSeconds: number };
  /** Delay added by a TCP proxy to each chunk each way, ms (RTT = 2 ×); 0: no proxy. */
  apiLatencyMs?: number;
  /** Bound on one request's answer, ms (a hang fails the run); default 180 000. */
  requestTimeoutMs?: number;
  /** Extra keys of the daemon's config (e.g. `apiDeadlineMs`). */
  conf?: Record<string, unknown>;
}

/** One sandbox's ADD or DEL as the runtime saw it. */
export interface BurstCall {
  /** Wall time, ms. */
  ms: number;
  /** 0 on success; the CNI error code otherwise; -1 when no answer came (lost or timed out). */
  code: number;
  /** The answer's stdout (result or error JSON), or why none came. */
  out: string;
}

/** What {@link runBurst} measured. */
export interface BurstReport {
  adds: BurstCall[];
  dels: BurstCall[];
  /** Pods whose network-status annotation lists both interfaces when the last ADD returned. */
  statusesAtReturn: number;
  /** The same once written (async: after the publisher's retries; 60 s at most). */
  statusesWritten: number;
  /** IPAM leases left after the DELs. */
  leasesLeft: number;
  /** Interfaces other than `lo` left in the sandboxes' netns after the DELs. */
  interfacesLeft: number;
  /** Host ports (veths) still enslaved to the test's bridges after the DELs. */
  bridgePortsLeft: number;
  /** The daemon's peak RSS (VmHWM), MiB, and RSS at start, MiB. */
  peakRssMiB: number;
  startRssMiB: number;
  /** PATCHes of network-status the stand-in answered, by status. */
  patches: Record<number, number>;
  /**
   * For each 429 answered to a pod's PATCH that was followed by another PATCH of the same pod:
   * the time between the two, ms (how long the `Retry-After` was honoured).
   */
  retryGapsMs: number[];
  /** Wall time of the whole ADD burst, ms. */
  addWallMs: number;
  /** The daemon's exit (code, signal) and the last 4 KiB of its stderr. */
  daemonExit: { code: number; signal: string | null; stderrTail: string };
}

const ANNOTATIONS = "io.kubernetes.cri.pod-annotations";
const NODE = "burst-node";

function procKiB(pid: number, field: string): number {
  const m = new RegExp(`^${field}:\\s+(\\d+)`, "m").exec(
    Deno.readTextFileSync(`/proc/${pid}/status`),
  );
  return m ? Number(m[1]) : NaN;
}

/**
 * Runs one burst (module doc) and cleans up everything it made.
 * @param opts pods, mode, faults
 * @returns what was measured
 */
export async function runBurst(opts: BurstOptions): Promise<BurstReport> {
  const w = await world({ conf: { logLevel: "error" } });
  let proxy: TcpProxy | undefined;
  let daemon: Awaited<ReturnType<typeof startDaemon>> | undefined;
  let report: Omit<BurstReport, "daemonExit"> | undefined;
  let exit: { code: number; signal: Deno.Signal | null; stderr: string } | undefined;
  try {
    const names = Array.from({ length: opts.pods }, (_, k) => `burst-${k}`);
    const uids = names.map((name) =>
      String(
        (w.api.addPod({ namespace: NS, name, nodeName: NODE }).metadata as { uid: string }).uid,
      )
    );
    if (opts.throttle) {
      w.api.fault({
        method: "PATCH",
        path: /\/pods\/[^/]+\/status$/,
        status: 429,
        retryAfterSeconds: opts.throttle.retryAfterSeconds,
        every: 3,
        times: Infinity,
      });
    }
    let kubeconfig = w.kubeconfig;
    if (opts.apiLatencyMs) {
      const url = new URL(w.api.url);
      proxy = startTcpProxy({ hostname: url.hostname, port: Number(url.port) }, {
        delayMs: opts.apiLatencyMs,
      });
      kubeconfig = await proxiedKubeconfig(w.kubeconfig, w.api.url, proxy.port);
    }
    const dir = await w.scratch.dir();
    const metricsPort = loopbackPort();
    // The daemon's --config is the runtime's config file: the capability the runtime honours
    // (pod annotations in runtimeConfig) is declared there; a request's own keys are not read.
    const conf = {
      ...w.conf,
      kubeconfig,
      capabilities: { [ANNOTATIONS]: true },
      statusPublish: opts.statusPublish ?? "sync",
      ...opts.conf,
    };
    daemon = await startDaemon(dir, conf, {
      flags: ["--node-name", NODE, "--metrics-address", `127.0.0.1:${metricsPort}`],
      env: { CNI_PATH: "/usr/lib/cni" },
    });
    await until(
      async () => {
        const res = await fetch(`http://127.0.0.1:${metricsPort}/readyz`).catch(() => undefined);
        await res?.body?.cancel();
        return res?.status === 200;
      },
      "the daemon ready",
      30_000,
    );
    const pid = daemon.child.pid;
    const startRssMiB = procKiB(pid, "VmRSS") / 1024;
    const netns: string[] = [];
    for (let k = 0; k < opts.pods; k++) netns.push(await w.scratch.netns(`b${k}`));
    const config = new TextEncoder().encode(JSON.stringify({
      ...daemon.conf,
      capabilities: { [ANNOTATIONS]: true },
      runtimeConfig: { [ANNOTATIONS]: { "k8s.v1.cni.cncf.io/networks": "bridge-net" } },
    }));
    const ids = names.map((_, k) => `burst${k}${crypto.randomUUID().slice(0, 8)}`);
    const call = async (command: "ADD" | "DEL", k: number): Promise<BurstCall> => {
      const env = {
        CNI_COMMAND: command,
        CNI_CONTAINERID: ids[k],
        CNI_NETNS: `/var/run/netns/${netns[k]}`,
        CNI_IFNAME: "eth0",
        CNI_ARGS: k8sArgs(NS, names[k], ids[k], uids[k]),
        CNI_PATH: "/usr/lib/cni",
      };
      const t0 = performance.now();
      const o = await forward(daemon!.socket, env, config, {
        timeoutMs: opts.requestTimeoutMs ?? 180_000,
      });
      const ms = performance.now() - t0;
      if (o.kind !== "answered") return { ms, code: -1, out: `${o.kind}: ${o.reason}` };
      if (o.answer.code === 0) return { ms, code: 0, out: o.answer.stdout };
      let code = -1;
      try {
        code = Number(JSON.parse(o.answer.stdout).code);
      } catch { /* not JSON */ }
      return { ms, code, out: o.answer.stdout };
    };
    const t0 = performance.now();
    const adds = await Promise.all(names.map((_, k) => call("ADD", k)));
    const addWallMs = performance.now() - t0;
    const written = () =>
      names.filter((name) => {
        const pod = w.api.getPod(NS, name) as {
          metadata: { annotations?: Record<string, string> };
        };
        const text = pod?.metadata.annotations?.["k8s.v1.cni.cncf.io/network-status"];
        return text !== undefined && JSON.parse(text).length === 2;
      }).length;
    const statusesAtReturn = written();
    const expected = adds.filter((a) => a.code === 0).length;
    await until(() => Promise.resolve(written() >= expected), "the statuses written", 60_000)
      .catch(() => {});
    const statusesWritten = written();
    const dels = await Promise.all(names.map((_, k) => call("DEL", k)));
    const peakRssMiB = procKiB(pid, "VmHWM") / 1024;
    let interfacesLeft = 0;
    for (const ns of netns) interfacesLeft += (await linkNames(ns)).length;
    let bridgePortsLeft = 0;
    for (const br of [w.br.def, w.br.sec]) {
      const { stdout } = await sh("ip", ["-j", "link", "show", "master", br]);
      bridgePortsLeft += (JSON.parse(stdout.trim() || "[]") as unknown[]).length;
    }
    const patches: Record<number, number> = {};
    const retryGapsMs: number[] = [];
    const statusPatches = w.api.requests.filter((r) =>
      r.method === "PATCH" && r.path.endsWith("/status")
    );
    statusPatches.forEach((r, i) => {
      patches[r.status] = (patches[r.status] ?? 0) + 1;
      if (r.status !== 429) return;
      const next = statusPatches.slice(i + 1).find((n) => n.path === r.path);
      if (next) retryGapsMs.push(next.at - r.at);
    });
    report = {
      adds,
      dels,
      statusesAtReturn,
      statusesWritten,
      leasesLeft: (await w.leases()).length,
      interfacesLeft,
      bridgePortsLeft,
      peakRssMiB,
      startRssMiB,
      patches,
      retryGapsMs,
      addWallMs,
    };
  } finally {
    daemon?.kill("SIGTERM");
    exit = await daemon?.exited();
    await proxy?.close();
    await w.api.stop();
    await w.scratch.cleanup();
  }
  if (!report || !exit) throw new Error("the burst made no report");
  return {
    ...report,
    daemonExit: { code: exit.code, signal: exit.signal, stderrTail: exit.stderr.slice(-4096) },
  };
}

/** A copy of `kubeconfig` whose server is the proxy (the stand-in's certificate has 127.0.0.1). */
export async function proxiedKubeconfig(
  kubeconfig: string,
  server: string,
  port: number,
): Promise<string> {
  const text = await Deno.readTextFile(kubeconfig);
  const url = new URL(server);
  const path = `${kubeconfig}.proxied`;
  await Deno.writeTextFile(path, text.replaceAll(server, `https://${url.hostname}:${port}`), {
    mode: 0o600,
  });
  return path;
}
