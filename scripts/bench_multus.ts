/**
 * `scripts/bench.ts --vs multus=PATH`: Manifold per call against a Multus thin binary on the
 * same pod, in one interleaved run (the comparison of issue 30; not a test).
 *
 * The pod lives in a real kube-apiserver (`MANIFOLD_KUBE_APISERVER`, with etcd; started here):
 * Multus PUTs the pod's status as protobuf, which the JSON-only API stand-in cannot serve. The
 * pod has the cluster default network (bridge + host-local, the same conflist for both: Multus
 * gets it as its `delegates` entry, Manifold as its `clusterNetwork`) and two NADs (bridge +
 * host-local; macvlan with a static IP and MAC through `ips`/`mac` capabilities), the same
 * delegates from /usr/lib/cni, in one scratch netns. Both read the pod and the two NADs from
 * the API and write the network-status annotation. Each iteration runs, in an order that
 * alternates: Manifold ADD + DEL, Multus ADD + DEL, and the three delegates run directly (the
 * floor, so each one's own overhead = total − the floor of the same iteration). Besides wall
 * time, each call's CPU time (user + system, its delegates included: getrusage(2) of the
 * waited-for children), which a loaded machine moves far less.
 *
 * Run as root: `MANIFOLD_KUBE_APISERVER=… deno run -A scripts/bench.ts --vs multus=PATH
 * [--iterations 30] [--manifold LAUNCHER[=DENO_DIR] …]` (several `--manifold`: each in the same
 * loop, e.g. the parent commit's worktree beside this one) [--api-latency MS] (both plugins
 * reach the server through a loopback TCP proxy adding MS to every chunk each way: a distant
 * API server, one round trip = 2 × MS).
 *
 * @module
 */

import { startKubeApiServer } from "../tests/support/kube_apiserver.ts";
import { done, networkStatus, POD, realWorld } from "../tests/realapi/cluster.ts";
import { MANIFOLD } from "../tests/support/plugin.ts";
import { startTcpProxy, type TcpProxy } from "../tests/support/tcp_proxy.ts";
import { childCpuMs, directFloor, SELECTION, stats } from "./bench_support.ts";

/** Options of {@link benchMultus}. */
export interface BenchMultusOptions {
  /** The Multus thin binary (`multus`, e.g. v4.2.2 built from source). */
  multus: string;
  /** Measured iterations (two warm-up rounds are run before them). */
  iterations: number;
  /**
   * Manifold plugin executables to run, each in the same loop (e.g. scripts/manifold of another
   * worktree beside this one's), as `PATH` or `PATH=DENO_DIR` (that DENO_DIR for its calls: two
   * launchers with different V8 flags would otherwise rewrite each other's code cache entries);
   * default this tree's scripts/manifold.
   */
  manifold?: string[];
  /**
   * Also record each Manifold call's timeline (its `timeline` log line at `info`, ms since the
   * runtime started) and print the median of every mark for ADD and DEL. Logging at `info`
   * costs each call a few lines of stderr; compare figures only between runs with the same
   * setting.
   */
  timeline?: boolean;
  /**
   * Delay added by a loopback TCP proxy between both plugins and the server, ms per chunk each
   * way (a round trip gains twice it; connection set-up and TLS too); default 0 (no proxy).
   */
  apiLatencyMs?: number;
}

/** Min / median / max of a sample, ms, as printed. */
function mmm(xs: number[]): string {
  const s = [...xs].sort((a, b) => a - b);
  return `${s[0].toFixed(1)} / ${s[s.length >> 1].toFixed(1)} / ${s[s.length - 1].toFixed(1)}`;
}

/**
 * Runs the interleaved comparison and prints min / median / max of each and the ratios of the
 * medians (Manifold / Multus) for ADD and DEL.
 * @param opts the Multus binary and the number of iterations
 * @throws Error when kube-apiserver cannot start or a call fails (its output in the message)
 */
export async function benchMultus(opts: BenchMultusOptions): Promise<void> {
  const api = await startKubeApiServer();
  try {
    const w = await realWorld(api, {
      annotations: { "k8s.v1.cni.cncf.io/networks": JSON.stringify(SELECTION) },
      // Both plugins log errors only, to stderr.
      conf: { logLevel: opts.timeline ? "info" : "error", logToStderr: true },
    });
    let proxy: TcpProxy | undefined;
    try {
      if (opts.apiLatencyMs) {
        proxy = startTcpProxy({ hostname: "127.0.0.1", port: api.ports.api }, {
          delayMs: opts.apiLatencyMs,
        });
        const text = await Deno.readTextFile(w.kubeconfig);
        await Deno.writeTextFile(
          w.kubeconfig,
          text.replaceAll(api.server, `https://127.0.0.1:${proxy.port}`),
        );
      }
      const defaultList = JSON.parse(await Deno.readTextFile(`${w.dirs.conf}/10-default.conflist`));
      const multusConf = {
        cniVersion: defaultList.cniVersion ?? "1.0.0",
        name: "multus-cni-network",
        type: "multus",
        kubeconfig: w.kubeconfig,
        cniDir: `${await w.scratch.dir()}/multus-cache`,
        binDir: "/usr/lib/cni",
        logLevel: "error",
        logToStderr: true,
        delegates: [defaultList],
      };
      const { direct, runDirect } = await directFloor(w);
      /** Who is measured: each Manifold launcher, then Multus. */
      const subjects = [
        ...(opts.manifold?.length ? opts.manifold : [MANIFOLD]).map((spec) => {
          const [plugin, denoDir] = spec.split(/=(.*)/s);
          return {
            label: `Manifold ${plugin}`,
            plugin,
            env: (denoDir ? { DENO_DIR: denoDir } : {}) as Record<string, string>,
            config: w.conf,
          };
        }),
        {
          label: "Multus thin",
          plugin: opts.multus,
          env: {} as Record<string, string>,
          config: multusConf as Record<string, unknown>,
        },
      ].map((x) => ({
        ...x,
        add: [] as number[],
        del: [] as number[],
        addCpu: [] as number[],
        delCpu: [] as number[],
        marks: { ADD: [] as Record<string, number>[], DEL: [] as Record<string, number>[] },
      }));
      /** The `timeline` log line of one call's stderr, if any. */
      const timelineOf = (stderr: string): Record<string, number> | undefined => {
        for (const line of stderr.split("\n")) {
          if (!line.includes('"timeline"')) continue;
          try {
            const o = JSON.parse(line.slice(line.indexOf("{")));
            if (o.msg === "timeline") return o;
          } catch { /* not this line */ }
        }
        return undefined;
      };
      const floor = { add: [] as number[], del: [] as number[] };
      const pair = async (subject: typeof subjects[number]) => {
        const id = `vs${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`;
        const extra = {
          containerId: id,
          config: subject.config,
          plugin: subject.plugin,
          env: subject.env,
        };
        // Each ADD must write the status itself: remove the previous one (untimed).
        await w.api.admin.patch(
          { apiVersion: "v1", kind: "Pod", namespace: w.ns, name: POD },
          { metadata: { annotations: { "k8s.v1.cni.cncf.io/network-status": null } } },
        );
        let cpu = childCpuMs();
        const a = await w.call("ADD", extra);
        const addCpu = childCpuMs() - cpu;
        if (a.code !== 0) throw new Error(`${subject.label} ADD: ${a.stdout} ${a.stderr}`);
        const status = networkStatus(await w.pod());
        if (status?.length !== 3) {
          throw new Error(`${subject.label} ADD: network-status ${JSON.stringify(status)}`);
        }
        cpu = childCpuMs();
        const d = await w.call("DEL", extra);
        const delCpu = childCpuMs() - cpu;
        if (d.code !== 0) throw new Error(`${subject.label} DEL: ${d.stdout} ${d.stderr}`);
        return {
          add: a.ms,
          del: d.ms,
          addCpu,
          delCpu,
          addMarks: timelineOf(a.stderr),
          delMarks: timelineOf(d.stderr),
        };
      };
      for (let i = 0; i < opts.iterations + 2; i++) {
        const steps = [
          ...subjects.map((subject) => async () => {
            const r = await pair(subject);
            if (i < 2) return;
            subject.add.push(r.add), subject.del.push(r.del);
            subject.addCpu.push(r.addCpu), subject.delCpu.push(r.delCpu);
            if (r.addMarks) subject.marks.ADD.push(r.addMarks);
            if (r.delMarks) subject.marks.DEL.push(r.delMarks);
          }),
          async () => {
            const r = await runDirect(`vsd${crypto.randomUUID().slice(0, 8)}`, direct);
            if (i >= 2) floor.add.push(r.add), floor.del.push(r.del);
          },
        ];
        if (i % 2 === 1) steps.reverse();
        for (const step of steps) await step();
      }
      const load = (await Deno.readTextFile("/proc/loadavg")).split(" ").slice(0, 3).join(" ");
      const own = (xs: number[], fs: number[]) => xs.map((x, k) => x - fs[k]);
      const row = (name: string, xs: number[]) =>
        console.log(`${name.padEnd(60)} ${mmm(xs).padStart(26)}`);
      console.log(
        `\nManifold per call vs Multus thin: default + 2 NADs, real kube-apiserver, ` +
          `${opts.iterations} interleaved iterations, ` +
          (opts.apiLatencyMs ? `API round trip + ${2 * opts.apiLatencyMs} ms, ` : "") +
          `load average ${load}\n`,
      );
      console.log(`${"".padEnd(60)} ${"min / median / max, ms".padStart(26)}`);
      row("the 3 delegates alone, ADD", floor.add);
      row("the 3 delegates alone, DEL", floor.del);
      for (const x of subjects) {
        row(`${x.label} ADD`, x.add);
        row(`  own overhead (paired)`, own(x.add, floor.add));
        row(`  CPU (with its delegates)`, x.addCpu);
        row(`${x.label} DEL`, x.del);
        row(`  own overhead (paired)`, own(x.del, floor.del));
        row(`  CPU (with its delegates)`, x.delCpu);
      }
      const med = (xs: number[]) => stats(xs).p50;
      for (const x of subjects) {
        for (const verb of ["ADD", "DEL"] as const) {
          const ms = x.marks[verb];
          if (!ms.length) continue;
          const names = Object.keys(ms[0]).filter((k) =>
            k !== "epochMs" && k !== "msg" &&
            typeof ms[0][k] === "number"
          );
          console.log(
            `${x.label} ${verb} timeline, median ms since the runtime started: ` +
              names.map((k) =>
                `${k} ${med(ms.map((m) => m[k]).filter(Number.isFinite)).toFixed(1)}`
              )
                .join(", "),
          );
        }
      }
      const multus = subjects[subjects.length - 1];
      console.log();
      for (const x of subjects.slice(0, -1)) {
        console.log(
          `${x.label} / Multus thin, medians: ADD ${(med(x.add) / med(multus.add)).toFixed(2)}× ` +
            `(goal ≤ 1.6×), DEL ${(med(x.del) / med(multus.del)).toFixed(2)}× (goal ≤ 1.3×); ` +
            `CPU time: ADD ${(med(x.addCpu) / med(multus.addCpu)).toFixed(2)}×, ` +
            `DEL ${(med(x.delCpu) / med(multus.delCpu)).toFixed(2)}×`,
        );
      }
    } finally {
      await proxy?.close();
      await done(w);
    }
  } finally {
    await api.stop();
  }
}
