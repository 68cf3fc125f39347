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
 * [--iterations 30]`.
 *
 * @module
 */

import { startKubeApiServer } from "../tests/support/kube_apiserver.ts";
import { done, networkStatus, POD, realWorld } from "../tests/realapi/cluster.ts";
import { childCpuMs, directFloor, SELECTION, stats } from "./bench_support.ts";

/** Options of {@link benchMultus}. */
export interface BenchMultusOptions {
  /** The Multus thin binary (`multus`, e.g. v4.2.2 built from source). */
  multus: string;
  /** Measured iterations (two warm-up rounds are run before them). */
  iterations: number;
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
      conf: { logLevel: "error", logToStderr: true },
    });
    try {
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
      const t = {
        add: [] as number[],
        del: [] as number[],
        mAdd: [] as number[],
        mDel: [] as number[],
        cpuAdd: [] as number[],
        cpuDel: [] as number[],
        mCpuAdd: [] as number[],
        mCpuDel: [] as number[],
        fAdd: [] as number[],
        fDel: [] as number[],
      };
      const pair = async (plugin: string | undefined, config: Record<string, unknown>) => {
        const id = `vs${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`;
        const extra = { containerId: id, config, ...(plugin ? { plugin } : {}) };
        // Each ADD must write the status itself: remove the previous one (untimed).
        await w.api.admin.patch(
          { apiVersion: "v1", kind: "Pod", namespace: w.ns, name: POD },
          { metadata: { annotations: { "k8s.v1.cni.cncf.io/network-status": null } } },
        );
        let cpu = childCpuMs();
        const a = await w.call("ADD", extra);
        const addCpu = childCpuMs() - cpu;
        if (a.code !== 0) throw new Error(`${plugin ?? "Manifold"} ADD: ${a.stdout} ${a.stderr}`);
        const status = networkStatus(await w.pod());
        if (status?.length !== 3) {
          throw new Error(`${plugin ?? "Manifold"} ADD: network-status ${JSON.stringify(status)}`);
        }
        cpu = childCpuMs();
        const d = await w.call("DEL", extra);
        const delCpu = childCpuMs() - cpu;
        if (d.code !== 0) throw new Error(`${plugin ?? "Manifold"} DEL: ${d.stdout} ${d.stderr}`);
        return { add: a.ms, del: d.ms, addCpu, delCpu };
      };
      for (let i = 0; i < opts.iterations + 2; i++) {
        const steps = [
          async () => {
            const r = await pair(undefined, w.conf);
            if (i >= 2) {
              t.add.push(r.add),
                t.del.push(r.del),
                t.cpuAdd.push(r.addCpu),
                t.cpuDel.push(r.delCpu);
            }
          },
          async () => {
            const r = await pair(opts.multus, multusConf);
            if (i >= 2) {
              t.mAdd.push(r.add), t.mDel.push(r.del);
              t.mCpuAdd.push(r.addCpu), t.mCpuDel.push(r.delCpu);
            }
          },
          async () => {
            const r = await runDirect(`vsd${crypto.randomUUID().slice(0, 8)}`, direct);
            if (i >= 2) t.fAdd.push(r.add), t.fDel.push(r.del);
          },
        ];
        if (i % 2 === 1) steps.reverse();
        for (const step of steps) await step();
      }
      const load = (await Deno.readTextFile("/proc/loadavg")).split(" ").slice(0, 3).join(" ");
      const own = (xs: number[], fs: number[]) => xs.map((x, k) => x - fs[k]);
      const row = (name: string, xs: number[]) =>
        console.log(`${name.padEnd(44)} ${mmm(xs).padStart(26)}`);
      console.log(
        `\nManifold per call vs Multus thin (${opts.multus}): default + 2 NADs, real ` +
          `kube-apiserver, ${opts.iterations} interleaved iterations, load average ${load}\n`,
      );
      console.log(`${"".padEnd(44)} ${"min / median / max, ms".padStart(26)}`);
      row("Manifold ADD", t.add);
      row("Multus thin ADD", t.mAdd);
      row("the 3 delegates alone, ADD", t.fAdd);
      row("Manifold ADD own overhead (paired)", own(t.add, t.fAdd));
      row("Multus ADD own overhead (paired)", own(t.mAdd, t.fAdd));
      row("Manifold DEL", t.del);
      row("Multus thin DEL", t.mDel);
      row("the 3 delegates alone, DEL", t.fDel);
      row("Manifold DEL own overhead (paired)", own(t.del, t.fDel));
      row("Multus DEL own overhead (paired)", own(t.mDel, t.fDel));
      row("Manifold ADD CPU (with its delegates)", t.cpuAdd);
      row("Multus thin ADD CPU (with its delegates)", t.mCpuAdd);
      row("Manifold DEL CPU (with its delegates)", t.cpuDel);
      row("Multus thin DEL CPU (with its delegates)", t.mCpuDel);
      const med = (xs: number[]) => stats(xs).p50;
      console.log(
        `\nManifold / Multus thin, medians: ADD ${(med(t.add) / med(t.mAdd)).toFixed(2)}× ` +
          `(goal ≤ 1.6×), DEL ${(med(t.del) / med(t.mDel)).toFixed(2)}× (goal ≤ 1.3×); ` +
          `CPU time: ADD ${(med(t.cpuAdd) / med(t.mCpuAdd)).toFixed(2)}×, ` +
          `DEL ${(med(t.cpuDel) / med(t.mCpuDel)).toFixed(2)}×`,
      );
    } finally {
      await done(w);
    }
  } finally {
    await api.stop();
  }
}
