/**
 * End-to-end benchmark of the plugin process (the figures for the closing notes; not a test).
 *
 * A pod with the cluster default network (bridge + host-local) and two secondary networks
 * (a bridge NAD with host-local, a macvlan NAD with a static IP and MAC), real delegates from
 * /usr/lib/cni, in a scratch netns, Manifold run as a process through scripts/manifold
 * exactly as a runtime calls it, against the HTTPS API stand-in with injected latency.
 * In the same run, the same delegates are run directly (in-process libcni role: one process
 * per delegate, no API) — the floor — so Manifold's own overhead = total − delegates.
 *
 * Prints median and p95 over N iterations (default 30) for: ADD and DEL (API mode and
 * runtime-annotations mode), the delegates alone, overhead, API requests per ADD/DEL, and peak
 * RSS of the plugin process. Run as root: `deno run -A scripts/bench.ts [--iterations 30]
 * [--latency-ms 3]`.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { ProcessPluginExec } from "../lib/cni/invoke.ts";
import { CniRuntime } from "../lib/cni/runtime.ts";
import { parseNetworkConfig } from "../lib/cni/types.ts";
import { linkNames } from "../tests/support/netns.ts";
import { NS, POD, world } from "../tests/support/world.ts";

const { values } = parseArgs({
  options: {
    iterations: { type: "string", default: "30" },
    "latency-ms": { type: "string", default: "3" },
  },
});
const N = Number(values.iterations);
const LATENCY = Number(values["latency-ms"]);

if (Deno.uid() !== 0) {
  console.error("bench: run as root (network namespaces)");
  Deno.exit(1);
}

const selection = [
  { name: "bridge-net" },
  { name: "macvlan-net", interface: "data0", ips: ["10.240.3.7/24"], mac: "02:00:00:0a:f0:07" },
];

function stats(xs: number[]) {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p: number) => s[Math.min(s.length - 1, Math.floor(p * (s.length - 1) + 0.5))];
  return { p50: q(0.5), p95: q(0.95), n: s.length };
}

interface Run {
  ms: number;
  rssKiB: number;
  code: number;
  out: string;
}

const w = await world({
  annotations: { "k8s.v1.cni.cncf.io/networks": JSON.stringify(selection) },
});
try {
  w.api.fault({ delayMs: LATENCY, times: Infinity });
  const runtimeMode = {
    ...w.conf,
    capabilities: { "io.kubernetes.cri.pod-annotations": true },
    runtimeConfig: {
      "io.kubernetes.cri.pod-annotations": {
        "k8s.v1.cni.cncf.io/networks": JSON.stringify(selection),
      },
    },
  };
  /** Runs the plugin as the runtime would (w.call), under /usr/bin/time for its peak RSS. */
  const measured = async (
    command: "ADD" | "DEL",
    containerId: string,
    config: Record<string, unknown>,
  ): Promise<Run> => {
    const rssFile = await Deno.makeTempFile();
    try {
      const r = await w.call(command, {
        containerId,
        config,
        launcher: ["/usr/bin/time", "-f", "%M", "-o", rssFile],
      });
      const rssKiB = Number((await Deno.readTextFile(rssFile)).trim().split("\n").pop());
      return { ms: r.ms, rssKiB, code: r.code, out: r.stdout };
    } finally {
      await Deno.remove(rssFile);
    }
  };

  // The floor: the same delegates with the same configs and inputs, run directly
  // (one process per plugin, as a runtime would), no API, no cache, no status.
  const runtime = new CniRuntime({
    binDirs: ["/usr/lib/cni"],
    exec: new ProcessPluginExec(),
    baseEnv: { PATH: "/usr/bin:/bin" },
  });
  const direct = [
    {
      list: parseNetworkConfig(await Deno.readTextFile(`${w.dirs.conf}/10-default.conflist`)),
      ifName: "eth0",
      capabilityArgs: {},
    },
    {
      list: parseNetworkConfig({ ...JSON.parse(w.nadConfigs["bridge-net"]), name: "bridge-net" }),
      ifName: "net1",
      capabilityArgs: {},
    },
    {
      list: parseNetworkConfig(w.nadConfigs["macvlan-net"]),
      ifName: "data0",
      capabilityArgs: { ips: selection[1].ips, mac: selection[1].mac },
    },
  ];
  const rt = (containerId: string, d: typeof direct[number]) => ({
    containerId,
    netns: w.netnsPath,
    ifName: d.ifName,
    args: [["IgnoreUnknown", "1"], ["K8S_POD_NAMESPACE", NS], ["K8S_POD_NAME", POD]] as [
      string,
      string,
    ][],
    capabilityArgs: d.capabilityArgs,
  });

  const t = {
    addApi: [] as number[],
    delApi: [] as number[],
    addRt: [] as number[],
    delRt: [] as number[],
    addDirect: [] as number[],
    delDirect: [] as number[],
    rss: [] as number[],
    reqAdd: [] as number[],
    reqDel: [] as number[],
    reqAddRt: [] as number[],
  };
  const count = () => w.api.requests.filter((r) => !r.path.endsWith("/events")).length;
  const must = (r: Run, what: string) => {
    if (r.code !== 0) throw new Error(`${what} failed: ${r.out}`);
  };

  for (let i = 0; i < N + 2; i++) {
    const warm = i < 2; // two warm-up rounds (page cache, code cache)
    // 1. Manifold, pod annotations from the API.
    let id = `bench${i}a${crypto.randomUUID().slice(0, 8)}`;
    let before = count();
    const add = await measured("ADD", id, w.conf);
    must(add, "ADD");
    const reqAdd = count() - before;
    before = count();
    const del = await measured("DEL", id, w.conf);
    must(del, "DEL");
    const reqDel = count() - before;
    // 2. Manifold, pod annotations from the runtime (no pod GET).
    id = `bench${i}b${crypto.randomUUID().slice(0, 8)}`;
    before = count();
    const addRt = await measured("ADD", id, runtimeMode);
    must(addRt, "ADD (runtime annotations)");
    const reqAddRt = count() - before;
    const delRt = await measured("DEL", id, runtimeMode);
    must(delRt, "DEL (runtime annotations)");
    // 3. The delegates alone.
    id = `bench${i}c${crypto.randomUUID().slice(0, 8)}`;
    let s = performance.now();
    const results: unknown[] = [];
    for (const d of direct) results.push(await runtime.addNetworkList(d.list, rt(id, d)));
    const addDirect = performance.now() - s;
    s = performance.now();
    for (const [k, d] of [...direct.entries()].reverse()) {
      await runtime.delNetworkList(d.list, rt(id, d), results[k]);
    }
    const delDirect = performance.now() - s;
    if ((await linkNames(w.podNetns)).length !== 0) throw new Error("interfaces left after DEL");
    if (warm) continue;
    t.addApi.push(add.ms);
    t.delApi.push(del.ms);
    t.addRt.push(addRt.ms);
    t.delRt.push(delRt.ms);
    t.addDirect.push(addDirect);
    t.delDirect.push(delDirect);
    t.rss.push(add.rssKiB, del.rssKiB, addRt.rssKiB, delRt.rssKiB);
    t.reqAdd.push(reqAdd);
    t.reqDel.push(reqDel);
    t.reqAddRt.push(reqAddRt);
  }

  const row = (name: string, xs: number[], unit = "ms") => {
    const { p50, p95 } = stats(xs);
    console.log(
      `${name.padEnd(46)} ${p50.toFixed(1).padStart(8)} ${p95.toFixed(1).padStart(8)}  ${unit}`,
    );
  };
  console.log(
    `\nManifold end-to-end: default (bridge) + bridge NAD + macvlan NAD, host-local/static IPAM, ` +
      `API stand-in latency ${LATENCY} ms, ${N} iterations\n`,
  );
  console.log(`${"".padEnd(46)} ${"p50".padStart(8)} ${"p95".padStart(8)}`);
  row("ADD, annotations from the API", t.addApi);
  row("ADD, annotations from the runtime", t.addRt);
  row("ADD, the 3 delegates alone (floor)", t.addDirect);
  row("ADD overhead (API mode − delegates, paired)", t.addApi.map((x, i) => x - t.addDirect[i]));
  row("ADD overhead (runtime mode − delegates, paired)", t.addRt.map((x, i) => x - t.addDirect[i]));
  row("DEL (API mode config)", t.delApi);
  row("DEL (runtime mode config)", t.delRt);
  row("DEL, the 3 delegates alone (floor)", t.delDirect);
  row("DEL overhead (− delegates, paired)", t.delApi.map((x, i) => x - t.delDirect[i]));
  row("peak RSS of the plugin process", t.rss.map((k) => k / 1024), "MiB");
  row("API requests per ADD (API mode, excl. events)", t.reqAdd, "req");
  row("API requests per ADD (runtime mode, excl. events)", t.reqAddRt, "req");
  row("API requests per DEL", t.reqDel, "req");
} finally {
  await w.api.stop();
  await w.scratch.cleanup();
}
