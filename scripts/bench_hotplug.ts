/**
 * Benchmark of hot-plug (issue 14 §1; figures for the closing note, not a test): the time from
 * a pod's `k8s.v1.cni.cncf.io/networks` change (the PATCH to the API stand-in) to the
 * interface being present in the pod's netns (hot-plug), and to it being gone (hot-unplug),
 * as the kernel reports it (`ip -n <netns> monitor link`, so no polling delay), and to the
 * pod's network-status naming it (the stand-in's copy, polled every ms).
 *
 * A real `manifold daemon` (`"hotPlug": true`, `--node-name`) against the HTTPS API stand-in,
 * a sandbox attached by the real plugin in a scratch netns (bridge + host-local), the
 * `bridge-net` NAD (bridge + host-local) added and removed N times. Run as root:
 * `deno run -A scripts/bench_hotplug.ts [--iterations 20]`.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { startDaemon } from "../tests/support/daemon.ts";
import { until } from "../tests/support/wait.ts";
import { NS, POD, world } from "../tests/support/world.ts";
import { stats } from "./bench_support.ts";

const NETS = "k8s.v1.cni.cncf.io/networks";
const { values } = parseArgs({ args: Deno.args, options: { iterations: { type: "string" } } });
const n = Number(values.iterations ?? 20);

const w = await world({ nodeName: "bench", conf: { hotPlug: true, logLevel: "error" } });
const d = await startDaemon(await w.scratch.dir(), w.conf, {
  flags: ["--node-name", "bench", "--log-level", "error"],
  env: { CNI_PATH: "/usr/lib/cni" },
});
const monitor = new Deno.Command("ip", {
  args: ["-n", w.podNetns, "-o", "monitor", "link"],
  stdout: "piped",
  stderr: "null",
}).spawn();
let waiter: { test: (line: string) => boolean; resolve: (t: number) => void } | undefined;
const reading = (async () => {
  let buf = "";
  for await (const chunk of monitor.stdout.pipeThrough(new TextDecoderStream())) {
    buf += chunk;
    let nl: number;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (waiter?.test(line)) {
        const w0 = waiter;
        waiter = undefined;
        w0.resolve(performance.now());
      }
    }
  }
})();
const next = (test: (line: string) => boolean) =>
  new Promise<number>((resolve) => waiter = { test, resolve });
const present = (l: string) => !l.startsWith("Deleted") && /\bnet1@/.test(l) && /\bUP\b/.test(l);
const gone = (l: string) => l.startsWith("Deleted") && /\bnet1@/.test(l);

/** Resolves when the pod's network-status (in the stand-in) has `net1` or not, as asked. */
async function statusHas(want: boolean): Promise<number> {
  for (;;) {
    const pod = w.api.getPod(NS, POD) as { metadata: { annotations?: Record<string, string> } };
    const text = pod.metadata.annotations?.["k8s.v1.cni.cncf.io/network-status"] ?? "[]";
    if (text.includes('"net1"') === want) return performance.now();
    await new Promise((r) => setTimeout(r, 1));
  }
}

const plug: number[] = [];
const plugStatus: number[] = [];
const unplug: number[] = [];
try {
  const add = await w.call("ADD");
  if (add.code !== 0) throw new Error(`sandbox ADD failed: ${add.stdout}`);
  await until(
    () => w.api.requests.some((r) => r.path === "/api/v1/pods" && r.query.includes("watch")),
    "the pod watch",
  );
  await new Promise((r) => setTimeout(r, 300)); // the daemon's first pass over its pods
  for (let i = 0; i < n; i++) {
    let seen = next(present);
    let t0 = performance.now();
    w.api.patchPod(NS, POD, { metadata: { annotations: { [NETS]: "bridge-net" } } });
    plug.push((await seen) - t0);
    plugStatus.push((await statusHas(true)) - t0);
    await new Promise((r) => setTimeout(r, 100)); // events settle
    seen = next(gone);
    t0 = performance.now();
    w.api.patchPod(NS, POD, { metadata: { annotations: { [NETS]: null } } });
    unplug.push((await seen) - t0);
    await new Promise((r) => setTimeout(r, 100));
  }
  const del = await w.call("DEL");
  if (del.code !== 0) throw new Error(`sandbox DEL failed: ${del.stdout}`);
  const leases = await w.leases();
  const f = (xs: number[]) => {
    const s = stats(xs);
    return `p50 ${s.p50.toFixed(1)} ms, p95 ${s.p95.toFixed(1)} ms (n=${s.n})`;
  };
  console.log(`annotation change → interface present (hot-plug):   ${f(plug)}`);
  console.log(`annotation change → network-status with it:       ${f(plugStatus)}`);
  console.log(`annotation change → interface gone (hot-unplug):    ${f(unplug)}`);
  console.log(`leases left after the sandbox DEL: ${leases.length}`);
} finally {
  try {
    monitor.kill("SIGTERM");
  } catch { /* gone */ }
  await monitor.status;
  await reading.catch(() => {});
  d.kill("SIGKILL");
  await d.exited();
  await w.api.stop();
  await w.scratch.cleanup();
}
