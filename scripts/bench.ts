/**
 * End-to-end benchmark of the plugin process (the figures for the closing notes; not a test).
 *
 * A pod with the cluster default network (bridge + host-local) and two secondary networks
 * (a bridge NAD with host-local, a macvlan NAD with a static IP and MAC), real delegates from
 * /usr/lib/cni, in a scratch netns, Manifold run as a process through scripts/manifold
 * exactly as a runtime calls it, against the HTTPS API stand-in with injected latency.
 * In the same run, the same delegates are run directly (in-process libcni role: one process
 * per delegate, no API, no cache) — the floor — so Manifold's own overhead = total − delegates,
 * paired per iteration.
 *
 * Prints median and p95 over N iterations (default 30) for: ADD and DEL in API mode and in
 * runtime-annotations mode, the delegates alone, the overhead, process start → first byte of
 * stdin read, peak RSS of the plugin process, API requests per ADD and per DEL (events
 * included), and the scaling of ADD overhead with 1, 4, 8 and 16 attachments (default + n−1
 * distinct bridge NADs). Run as root:
 * `deno run -A scripts/bench.ts [--iterations 30] [--latency-ms 3] [--scale-iterations 10]`.
 * `--mode daemon` (default `process`) runs scripts/bench_daemon.ts instead: the same pod
 * through `manifold daemon` and the forwarder (`--concurrent 50` pods at once as well;
 * `--soak N` ADD/DEL pairs with the daemon's RSS before and after; `--status-publish
 * sync|async`, the daemon's setting). `--api-latency MS` (every mode) puts a loopback TCP
 * proxy in front of the API stand-in that adds MS to each chunk each way (RTT = 2 × MS); unlike
 * `--latency-ms` (the stand-in's own delay before it answers) it delays connection set-up and
 * TLS as well, as a distant API server does. `--node` runs scripts/bench_node.ts instead: pod
 * start-up latency of a 0 → `--pods 50` Deployment burst on a real node (the node tier's
 * harness), per call and daemon (`--mode per-call` or `--mode daemon` for one), `--rounds 1` per mode.
 *
 * Process mode ends with the table of issue 30: min / median / max per scenario of the first
 * 10 measured iterations (own overhead = total − the delegates' time of the same iteration),
 * VERSION against an empty `deno run` (the floor), peak RSS. `--vs multus=PATH` (a Multus thin
 * `multus` binary, e.g. v4.2.2 built from source; `--vs multus --multus PATH` is the same) runs
 * scripts/bench_multus.ts instead: Manifold and Multus on the same pod in a real kube-apiserver
 * (`MANIFOLD_KUBE_APISERVER`), interleaved, with the ratios of the medians. `--timeline` (process
 * mode and `--vs multus`) also prints the median of each of Manifold's timeline marks per scenario.
 * `--installed` (every mode): Manifold as `manifold install` puts it on a node — this tree with
 * its pack (scripts/pack.ts), installed into a scratch CNI bin dir by the installer's code, its
 * launcher the plugin (scripts/bench_installed.ts) — instead of the development tree's
 * scripts/manifold.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { k8sArgs, MANIFOLD } from "../tests/support/plugin.ts";
import { exists, until } from "../tests/support/wait.ts";
import { NS, world } from "../tests/support/world.ts";
import { apiLatencyProxy, directFloor, SELECTION, stats } from "./bench_support.ts";

const { values } = parseArgs({
  options: {
    iterations: { type: "string", default: "30" },
    "latency-ms": { type: "string", default: "3" },
    "scale-iterations": { type: "string", default: "10" },
    mode: { type: "string", default: "process" },
    concurrent: { type: "string", default: "50" },
    soak: { type: "string", default: "0" },
    "api-latency": { type: "string", default: "0" },
    "status-publish": { type: "string", default: "sync" },
    vs: { type: "string" },
    timeline: { type: "boolean", default: false },
    multus: { type: "string" },
    manifold: { type: "string", multiple: true },
    node: { type: "boolean", default: false },
    pods: { type: "string", default: "50" },
    rounds: { type: "string", default: "1" },
    installed: { type: "boolean", default: false },
    help: { type: "boolean", short: "h" },
  },
});
if (values.help) {
  console.log(
    "usage: deno run -A scripts/bench.ts [--mode process|daemon] [--iterations 30] " +
      "[--latency-ms 3] [--api-latency MS] [--scale-iterations 10] [--concurrent 50] [--timeline] " +
      "[--soak N] [--status-publish sync|async] [--installed]  (root)\n" +
      "       deno run -A scripts/bench.ts --vs multus=PATH [--iterations 30] [--timeline] " +
      "[--manifold LAUNCHER[=DENO_DIR] …]  " +
      "(root; MANIFOLD_KUBE_APISERVER: Manifold vs a Multus thin binary, interleaved)\n" +
      "       deno run -A scripts/bench.ts --node [--mode per-call|daemon (default both)] [--pods 50] " +
      "[--rounds 1]  (root; MANIFOLD_KUBE_APISERVER)",
  );
  Deno.exit(0);
}
if (values.installed) {
  // Built and installed once, then this benchmark again with the installed launcher as the
  // plugin (tests/support/plugin.ts reads MANIFOLD_TEST_PLUGIN when it is first imported).
  const { installForBench } = await import("./bench_installed.ts");
  const install = await installForBench();
  try {
    console.log(`bench: Manifold as installed: ${install.launcher}`);
    const status = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        new URL(import.meta.url).pathname,
        ...Deno.args.filter((a) => a !== "--installed"),
      ],
      env: { MANIFOLD_TEST_PLUGIN: install.launcher },
    }).spawn().status;
    Deno.exitCode = status.code;
  } finally {
    await install.cleanup();
  }
  Deno.exit();
}
if (values.node) {
  const { benchNode } = await import("./bench_node.ts");
  const modes = values.mode === "daemon"
    ? ["daemon" as const]
    : values.mode === "per-call"
    ? ["per-call" as const]
    : ["per-call" as const, "daemon" as const];
  await benchNode({ pods: Number(values.pods), rounds: Number(values.rounds), modes });
  Deno.exit(0);
}
if (values.vs !== undefined) {
  const [what, path] = values.vs.split(/=(.*)/s);
  const multus = path || values.multus;
  if (what !== "multus" || !multus) {
    console.error("bench: --vs needs multus=PATH (a Multus thin binary)");
    Deno.exit(2);
  }
  const { benchMultus } = await import("./bench_multus.ts");
  await benchMultus({
    multus,
    iterations: Number(values.iterations),
    manifold: values.manifold,
    timeline: values.timeline,
    apiLatencyMs: Number(values["api-latency"]),
  });
  Deno.exit(0);
}
if (values.mode === "daemon") {
  const { benchDaemon } = await import("./bench_daemon.ts");
  await benchDaemon({
    iterations: Number(values.iterations),
    latencyMs: Number(values["latency-ms"]),
    concurrent: Number(values.concurrent),
    soak: Number(values.soak),
    apiLatencyMs: Number(values["api-latency"]),
    statusPublish: values["status-publish"] === "async" ? "async" : "sync",
  });
  Deno.exit(0);
}
if (values.mode !== "process") {
  console.error(`bench: --mode must be process or daemon, got ${values.mode}`);
  Deno.exit(2);
}
const N = Number(values.iterations);
const LATENCY = Number(values["latency-ms"]);
const SCALE_N = Number(values["scale-iterations"]);
const SCALES = [1, 4, 8, 16];

if (Deno.uid() !== 0) {
  console.error("bench: run as root (network namespaces)");
  Deno.exit(1);
}

const selection = SELECTION;

/** One plugin process as measured by the runtime side. */
interface Run {
  ms: number;
  rssKiB: number;
  code: number;
  out: string;
  /** Process spawn → first byte of stdin read (ms), from the plugin's timeline log line. */
  toStdinMs?: number;
  /** The plugin's timeline marks (ms since its runtime started), when it logged them. */
  marks?: Record<string, number>;
}

const w = await world({
  annotations: { "k8s.v1.cni.cncf.io/networks": JSON.stringify(selection) },
  conf: { logLevel: "verbose" }, // the timeline line (verbose), not every debug line
});
const proxy = await apiLatencyProxy(w, Number(values["api-latency"]));
/** The NAD mirror process and the empty script, stopped and removed also on failure. */
let mirror: Deno.ChildProcess | undefined;
let emptyFile: string | undefined;
try {
  if (LATENCY > 0) w.api.fault({ delayMs: LATENCY, times: Infinity });
  const runtimeMode = {
    ...w.conf,
    capabilities: { "io.kubernetes.cri.pod-annotations": true },
    runtimeConfig: {
      "io.kubernetes.cri.pod-annotations": {
        "k8s.v1.cni.cncf.io/networks": JSON.stringify(selection),
      },
    },
  };

  // The node-local NAD mirror, kept by `manifold mirror` as the DaemonSet runs it.
  const mirrorDir = `${await w.scratch.dir()}/nads`;
  mirror = new Deno.Command(MANIFOLD, {
    args: ["mirror", "--dir", mirrorDir, "--kubeconfig", String(w.conf.kubeconfig)],
    stdout: "null",
    stderr: "null",
  }).spawn();
  await until(() => exists(`${mirrorDir}/.mirror.json`), "the NAD mirror's first list", 10_000);
  const mirrorMode = { ...runtimeMode, nadMirrorDir: mirrorDir };

  /**
   * Runs the plugin as the runtime would (w.call); with `rss`, under /usr/bin/time for its peak
   * RSS (separate runs: the launcher's own fork + exec, ≈ 1 ms, is no part of the plugin).
   */
  const measured = async (
    command: "ADD" | "DEL" | "VERSION",
    containerId: string,
    config: Record<string, unknown>,
    args?: string,
    rss = false,
  ): Promise<Run> => {
    const rssFile = await Deno.makeTempFile();
    try {
      const spawnedAt = performance.timeOrigin + performance.now();
      const r = await w.call(command, {
        containerId,
        config,
        ...(args ? { args } : {}),
        launcher: rss ? ["/usr/bin/time", "-f", "%M", "-o", rssFile] : [],
      });
      const rssKiB = rss
        ? Number((await Deno.readTextFile(rssFile)).trim().split("\n").pop())
        : NaN;
      let toStdinMs: number | undefined;
      let marks: Record<string, number> | undefined;
      for (const line of r.stderr.split("\n")) {
        if (!line.includes('"timeline"')) continue;
        const t = JSON.parse(line) as { epochMs: number; stdinStart: number };
        toStdinMs = t.epochMs + t.stdinStart - spawnedAt;
        marks = t as unknown as Record<string, number>;
      }
      return { ms: r.ms, rssKiB, code: r.code, out: r.stdout, toStdinMs, marks };
    } finally {
      await Deno.remove(rssFile);
    }
  };
  const must = (r: Run, what: string) => {
    if (r.code !== 0) throw new Error(`${what} failed: ${r.out}`);
  };

  const { direct, defaultDirect, bridgeDirect, runDirect } = await directFloor(w);

  /** An empty `deno run` with the launcher's flags: the floor of every call (ms). */
  const empty = emptyFile = await Deno.makeTempFile({ suffix: ".ts" });
  await Deno.writeTextFile(empty, "void 0;\n");
  const emptyRun = async (): Promise<number> => {
    const start = performance.now();
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "--quiet", "--no-prompt", "--cached-only", "--no-check", empty],
      stdin: "null",
      stdout: "null",
      stderr: "null",
    }).output();
    if (!out.success) throw new Error("empty deno run failed");
    return performance.now() - start;
  };

  const t = {
    addApi: [] as number[],
    delApi: [] as number[],
    addRt: [] as number[],
    delRt: [] as number[],
    addMirror: [] as number[],
    reqAddMirror: [] as number[],
    addDirect: [] as number[],
    delDirect: [] as number[],
    toStdin: [] as number[],
    rss: [] as number[],
    reqAdd: [] as number[],
    reqDel: [] as number[],
    reqAddRt: [] as number[],
    getsAddRt: [] as number[],
    version: [] as number[],
    empty: [] as number[],
  };
  /** Timeline marks per scenario (`--timeline`). */
  const marks: Record<string, Record<string, number>[]> = {};
  const keepMarks = (scenario: string, r: Run) => {
    if (r.marks) (marks[scenario] ??= []).push(r.marks);
  };
  const count = () => w.api.requests.length;

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
    const getsAddRt = w.api.requests.slice(before).filter((r) => r.method === "GET").length;
    const delRt = await measured("DEL", id, runtimeMode);
    must(delRt, "DEL (runtime annotations)");
    // 3. Manifold, annotations from the runtime and NADs from the mirror.
    id = `bench${i}m${crypto.randomUUID().slice(0, 8)}`;
    before = count();
    const addMirror = await measured("ADD", id, mirrorMode);
    must(addMirror, "ADD (runtime annotations + NAD mirror)");
    const reqAddMirror = count() - before;
    must(await measured("DEL", id, mirrorMode), "DEL (mirror mode)");
    // 4. The delegates alone.
    const floor = await runDirect(`bench${i}c${crypto.randomUUID().slice(0, 8)}`, direct);
    // 5. VERSION, and an empty `deno run` (the floor every call pays).
    const version = await measured("VERSION", `bench${i}v`, w.conf);
    must(version, "VERSION");
    const empty = await emptyRun();
    if (warm) continue;
    t.version.push(version.ms);
    t.empty.push(empty);
    t.addApi.push(add.ms);
    t.delApi.push(del.ms);
    t.addRt.push(addRt.ms);
    t.addMirror.push(addMirror.ms);
    keepMarks("ADD, annotations from the API", add);
    keepMarks("ADD, annotations from the runtime", addRt);
    keepMarks("ADD, annotations from the runtime + NAD mirror", addMirror);
    keepMarks("DEL", del);
    t.reqAddMirror.push(reqAddMirror);
    t.delRt.push(delRt.ms);
    t.addDirect.push(floor.add);
    t.delDirect.push(floor.del);
    for (const r of [add, del, addRt, delRt]) {
      if (r.toStdinMs !== undefined) t.toStdin.push(r.toStdinMs);
    }
    t.reqAdd.push(reqAdd);
    t.reqDel.push(reqDel);
    t.reqAddRt.push(reqAddRt);
    t.getsAddRt.push(getsAddRt);
  }
  for (let i = 0; i < Math.min(N, 10); i++) {
    for (const config of [w.conf, runtimeMode]) {
      const id = `rss${i}${crypto.randomUUID().slice(0, 8)}`;
      const add = await measured("ADD", id, config, undefined, true);
      must(add, "ADD (RSS)");
      const del = await measured("DEL", id, config, undefined, true);
      must(del, "DEL (RSS)");
      t.rss.push(add.rssKiB, del.rssKiB);
    }
  }

  // Scaling: default + (n − 1) distinct bridge NADs, one pod per n, annotations from the API.
  const scale: Record<number, { add: number[]; direct: number[]; del: number[] }> = {};
  for (let k = 2; k <= Math.max(...SCALES); k++) {
    w.api.addNad({ namespace: NS, name: `bridge-net-${k}`, config: w.nadConfigs["bridge-net"] });
  }
  for (const n of SCALES) {
    const nads = Array.from({ length: n - 1 }, (_, k) => `bridge-net-${k + 2}`);
    const pod = `scale-${n}`;
    const uid = crypto.randomUUID();
    w.api.addPod({
      namespace: NS,
      name: pod,
      uid,
      annotations: { "k8s.v1.cni.cncf.io/networks": nads.join(",") },
    });
    const ds = [defaultDirect, ...nads.map((name, k) => bridgeDirect(name, `net${k + 1}`))];
    scale[n] = { add: [], direct: [], del: [] };
    for (let i = 0; i < SCALE_N + 1; i++) {
      const id = `scale${n}x${i}${crypto.randomUUID().slice(0, 8)}`;
      const args = k8sArgs(NS, pod, id, uid);
      const add = await measured("ADD", id, w.conf, args);
      must(add, `ADD (${n} attachments)`);
      const del = await measured("DEL", id, w.conf, args);
      must(del, `DEL (${n} attachments)`);
      const floor = await runDirect(`scale${n}d${i}${crypto.randomUUID().slice(0, 8)}`, ds);
      if (i === 0) continue;
      scale[n].add.push(add.ms);
      scale[n].del.push(del.ms);
      scale[n].direct.push(floor.add);
    }
  }

  const row = (name: string, xs: number[], unit = "ms") => {
    const { p50, p95 } = stats(xs);
    console.log(
      `${name.padEnd(52)} ${p50.toFixed(1).padStart(8)} ${p95.toFixed(1).padStart(8)}  ${unit}`,
    );
  };
  console.log(
    `\nManifold end-to-end: default (bridge) + bridge NAD + macvlan NAD, host-local/static IPAM, ` +
      `API stand-in latency ${LATENCY} ms, ${N} iterations\n`,
  );
  console.log(`${"".padEnd(52)} ${"p50".padStart(8)} ${"p95".padStart(8)}`);
  row("ADD, annotations from the API", t.addApi);
  row("ADD, annotations from the runtime", t.addRt);
  row("ADD, annotations from the runtime + NAD mirror", t.addMirror);
  row("ADD, the 3 delegates alone (floor)", t.addDirect);
  row("ADD overhead (API mode − delegates, paired)", t.addApi.map((x, i) => x - t.addDirect[i]));
  row("ADD overhead (runtime mode − delegates, paired)", t.addRt.map((x, i) => x - t.addDirect[i]));
  row(
    "ADD overhead (mirror mode − delegates, paired)",
    t.addMirror.map((x, i) => x - t.addDirect[i]),
  );
  row("DEL (API mode config)", t.delApi);
  row("DEL (runtime mode config)", t.delRt);
  row("DEL, the 3 delegates alone (floor)", t.delDirect);
  row("DEL overhead (− delegates, paired)", t.delApi.map((x, i) => x - t.delDirect[i]));
  row("process spawn → first byte of stdin read", t.toStdin);
  row("peak RSS of the plugin process (own runs)", t.rss.map((k) => k / 1024), "MiB");
  row("API requests per ADD (API mode, events included)", t.reqAdd, "req");
  row("API requests per ADD (runtime mode, events included)", t.reqAddRt, "req");
  row("  of which GETs (runtime mode)", t.getsAddRt, "req");
  row("API requests per ADD (mirror mode, events included)", t.reqAddMirror, "req");
  row("API requests per DEL", t.reqDel, "req");
  const mmm = (xs: number[]) => {
    const s = [...xs].slice(0, 10).sort((a, b) => a - b);
    return `${s[0].toFixed(1)} / ${s[s.length >> 1].toFixed(1)} / ${s[s.length - 1].toFixed(1)}`;
  };
  const own = (xs: number[], ds: number[]) => xs.map((x, i) => x - ds[i]);
  console.log(`\nIssue 30 table: min / median / max of ${Math.min(N, 10)} runs, ms (RSS MiB)\n`);
  const goal = (name: string, xs: number[], target: string) =>
    console.log(`${name.padEnd(52)} ${mmm(xs).padStart(24)}   goal ${target}`);
  goal("ADD own overhead, runtime annotations + NAD mirror", own(t.addMirror, t.addDirect), "≤ 45");
  goal("ADD own overhead, runtime annotations (NAD GETs)", own(t.addRt, t.addDirect), "—");
  goal("ADD own overhead, one pod GET", own(t.addApi, t.addDirect), "≤ 65");
  goal("DEL own overhead", own(t.delApi, t.delDirect), "≤ 30");
  goal("VERSION", t.version, "≤ floor + 5");
  goal("  floor: an empty deno run", t.empty, "—");
  goal("peak RSS (MiB)", t.rss.map((k) => k / 1024), "≤ 60");
  if (values.timeline) {
    console.log("\nTimeline, median ms since the plugin's runtime started:");
    for (const [scenario, ms] of Object.entries(marks)) {
      const names = Object.keys(ms[0]).filter((k) =>
        k !== "epochMs" && typeof ms[0][k] === "number"
      );
      const med = (k: string) => stats(ms.map((m) => m[k]).filter(Number.isFinite)).p50;
      console.log(`  ${scenario}: ${names.map((k) => `${k} ${med(k).toFixed(1)}`).join(", ")}`);
    }
  }
  console.log(
    `\nScaling (annotations from the API, default + n−1 bridge NADs, ${SCALE_N} iterations): p50 ms`,
  );
  console.log(
    `${"attachments".padEnd(12)} ${"ADD".padStart(8)} ${"delegates".padStart(10)} ` +
      `${"overhead".padStart(9)} ${"per att.".padStart(9)} ${"DEL".padStart(8)}`,
  );
  for (const n of SCALES) {
    const s = scale[n];
    const over = stats(s.add.map((x, i) => x - s.direct[i])).p50;
    console.log(
      `${String(n).padEnd(12)} ${stats(s.add).p50.toFixed(1).padStart(8)} ` +
        `${stats(s.direct).p50.toFixed(1).padStart(10)} ${over.toFixed(1).padStart(9)} ` +
        `${(over / n).toFixed(1).padStart(9)} ${stats(s.del).p50.toFixed(1).padStart(8)}`,
    );
  }
} finally {
  if (mirror) {
    mirror.kill("SIGTERM");
    await mirror.status;
  }
  if (emptyFile) await Deno.remove(emptyFile).catch(() => {});
  await proxy?.close();
  await w.api.stop();
  await w.scratch.cleanup();
}
