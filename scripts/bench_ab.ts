/**
 * A/B of two plugin launchers on the benchmark pod (how each lever of issue 30 was kept or
 * dropped; not a test). Runs A and B alternately (A, B, B, A, …: the machine's load falls on
 * both alike) on scripts/bench.ts's pod — the cluster default network and two NADs, real
 * delegates, the HTTPS API stand-in — and prints min / median / max of each call's wall time:
 * ADD with a pod GET, ADD with the runtime's annotations and the NAD mirror, DEL, and VERSION;
 * and the CPU time (user + system, the plugin and its delegates, from getrusage(2) of the
 * waited-for children) of each, which a loaded machine moves far less than wall time.
 *
 * A launcher is any executable that runs as a plugin: `scripts/manifold` of another worktree
 * (`git worktree add /tmp/base main`), or a copy with other flags.
 *
 * Run as root: `deno run -A scripts/bench_ab.ts --a /tmp/base/scripts/manifold
 * --b scripts/manifold [--runs 10] [--env-a K=V] [--env-b K=V]`.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { MANIFOLD } from "../tests/support/plugin.ts";
import { exists, until } from "../tests/support/wait.ts";
import { world } from "../tests/support/world.ts";
import { childCpuMs, SELECTION } from "./bench_support.ts";

const { values } = parseArgs({
  options: {
    a: { type: "string" },
    b: { type: "string", default: MANIFOLD },
    runs: { type: "string", default: "10" },
    rss: { type: "boolean", default: false },
    "env-a": { type: "string", multiple: true, default: [] },
    "env-b": { type: "string", multiple: true, default: [] },
    help: { type: "boolean", short: "h" },
  },
});
if (values.help || !values.a) {
  console.log(
    "usage: deno run -A scripts/bench_ab.ts --a LAUNCHER [--b LAUNCHER (default scripts/manifold)] " +
      "[--runs 10] [--rss] [--env-a K=V …] [--env-b K=V …]  (root)",
  );
  Deno.exit(values.help ? 0 : 2);
}
if (Deno.uid() !== 0) {
  console.error("bench_ab: run as root (network namespaces)");
  Deno.exit(1);
}
const RUNS = Number(values.runs);
const envOf = (xs: string[]) => Object.fromEntries(xs.map((x) => x.split(/=(.*)/s).slice(0, 2)));
const sides = {
  A: { plugin: values.a, env: envOf(values["env-a"]) },
  B: { plugin: values.b, env: envOf(values["env-b"]) },
};

const w = await world({
  annotations: { "k8s.v1.cni.cncf.io/networks": JSON.stringify(SELECTION) },
});
let mirror: Deno.ChildProcess | undefined;
try {
  w.api.fault({ delayMs: 3, times: Infinity });
  const mirrorDir = `${await w.scratch.dir()}/nads`;
  mirror = new Deno.Command(MANIFOLD, {
    args: ["mirror", "--dir", mirrorDir, "--kubeconfig", String(w.conf.kubeconfig)],
    stdout: "null",
    stderr: "null",
  }).spawn();
  await until(() => exists(`${mirrorDir}/.mirror.json`), "the NAD mirror's first list", 10_000);
  const conf = { ...w.conf, logLevel: "info" };
  const mirrorMode = {
    ...conf,
    capabilities: { "io.kubernetes.cri.pod-annotations": true },
    runtimeConfig: {
      "io.kubernetes.cri.pod-annotations": {
        "k8s.v1.cni.cncf.io/networks": JSON.stringify(SELECTION),
      },
    },
    nadMirrorDir: mirrorDir,
  };
  const t: Record<string, Record<string, number[]>> = { A: {}, B: {} };
  const push = (side: string, what: string, ms: number) => (t[side][what] ??= []).push(ms);
  const one = async (side: "A" | "B", warm: boolean) => {
    const { plugin, env } = sides[side];
    const call = async (command: "ADD" | "DEL" | "VERSION", id: string, config: object) => {
      const cpu0 = childCpuMs();
      const r = await w.call(command, {
        containerId: id,
        config: config as Record<string, unknown>,
        plugin,
        env,
      });
      if (r.code !== 0) throw new Error(`${side} ${command}: ${r.stdout} ${r.stderr.slice(-2000)}`);
      if (!warm) {
        push(side, `  ${command} CPU (${config === conf ? "GET" : "mirror"})`, childCpuMs() - cpu0);
      }
      return r.ms;
    };
    let id = `ab${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`;
    const addGet = await call("ADD", id, conf);
    const del = await call("DEL", id, conf);
    id = `ab${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`;
    const addMirror = await call("ADD", id, mirrorMode);
    const delMirror = await call("DEL", id, mirrorMode);
    const version = await call("VERSION", "abv", conf);
    if (values.rss && !warm) {
      const rssFile = await Deno.makeTempFile();
      try {
        id = `ab${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`;
        for (const command of ["ADD", "DEL"] as const) {
          const launcher = ["/usr/bin/time", "-f", "%M", "-o", rssFile];
          const r = await w.call(command, { containerId: id, config: conf, plugin, env, launcher });
          if (r.code !== 0) throw new Error(`${side} ${command} (RSS): ${r.stdout}`);
          const kib = Number((await Deno.readTextFile(rssFile)).trim().split("\n").pop());
          push(side, `peak RSS, ${command} (MiB)`, kib / 1024);
        }
      } finally {
        await Deno.remove(rssFile);
      }
    }
    if (warm) return;
    push(side, "ADD, pod GET", addGet);
    push(side, "ADD, runtime annotations + NAD mirror", addMirror);
    push(side, "DEL", del);
    push(side, "DEL (mirror config)", delMirror);
    push(side, "VERSION", version);
  };
  for (let i = 0; i < RUNS + 1; i++) {
    const order: ("A" | "B")[] = i % 2 === 0 ? ["A", "B"] : ["B", "A"];
    for (const side of order) await one(side, i === 0);
  }
  const load = (await Deno.readTextFile("/proc/loadavg")).split(" ").slice(0, 3).join(" ");
  const mmm = (xs: number[]) => {
    const s = [...xs].sort((a, b) => a - b);
    return `${s[0].toFixed(1)} / ${s[s.length >> 1].toFixed(1)} / ${s[s.length - 1].toFixed(1)}`;
  };
  console.log(`\nA = ${sides.A.plugin} ${JSON.stringify(sides.A.env)}`);
  console.log(`B = ${sides.B.plugin} ${JSON.stringify(sides.B.env)}`);
  console.log(`${RUNS} runs each, interleaved, load average ${load}; min / median / max ms\n`);
  console.log(`${"".padEnd(40)} ${"A".padStart(24)} ${"B".padStart(24)}`);
  for (const what of Object.keys(t.A)) {
    console.log(`${what.padEnd(40)} ${mmm(t.A[what]).padStart(24)} ${mmm(t.B[what]).padStart(24)}`);
  }
} finally {
  if (mirror) {
    mirror.kill("SIGTERM");
    await mirror.status;
  }
  await w.api.stop();
  await w.scratch.cleanup();
}
