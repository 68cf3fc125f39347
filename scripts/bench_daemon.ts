/**
 * `scripts/bench.ts --mode daemon`: the benchmark pod of scripts/bench.ts served by a real
 * `manifold daemon` through the forwarder (the binary with `daemonSocket`), annotations from
 * the runtime. Prints ADD/DEL wall time and own overhead (− the same delegates run directly,
 * paired), forwarder start → request sent beside an empty `deno run` measured in the same
 * run, forwarder peak RSS, API requests per ADD counted at the stand-in, daemon RSS at start
 * and end (with its anonymous and file-backed parts and the V8 heap from `/metrics`: the daemon
 * runs with `--metrics-address` as the DaemonSet runs it), and `concurrent` pods ADDed at once
 * (p50/p99, all must succeed, leases after DEL). The 10,000-request memory soak is
 * scripts/soak_daemon.ts.
 *
 * @module
 */

import { k8sArgs } from "../tests/support/plugin.ts";
import { startDaemon } from "../tests/support/daemon.ts";
import { NS, POD, world } from "../tests/support/world.ts";
import { apiLatencyProxy, directFloor, SELECTION, stats } from "./bench_support.ts";
import { until } from "../tests/support/wait.ts";

const NODE = "bench-node";

/** Options of {@link benchDaemon}. */
export interface BenchDaemonOptions {
  iterations: number;
  latencyMs: number;
  concurrent: number;
  /** ADD/DEL pairs of the RSS soak after the table (0: none). */
  soak: number;
  /** `--api-latency`: delay each way added by a TCP proxy in front of the API, ms (0: none). */
  apiLatencyMs?: number;
  /** The daemon's `statusPublish`; default `"sync"`. */
  statusPublish?: "sync" | "async";
}

const ANNOTATIONS = "io.kubernetes.cri.pod-annotations";

function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+)/.exec(Deno.readTextFileSync(`/proc/${pid}/status`));
  return m ? Number(m[1]) / 1024 : NaN;
}

/** A free TCP port on 127.0.0.1 (closed again at once). */
export function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = l.addr as Deno.NetAddr;
  l.close();
  return port;
}

/**
 * The daemon's memory, one line, MiB: RSS from /proc and its parts — anonymous (the process's
 * own) and file-backed (mostly the Deno executable's pages, shared with every other Deno
 * process of the node) — and V8 heap used/total and external memory from `/metrics`.
 */
export async function daemonMemory(pid: number, metricsPort: number): Promise<string> {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  const get = (name: string) => {
    const m = new RegExp(`^${name} (\\S+)$`, "m").exec(text);
    return m ? (Number(m[1]) / 2 ** 20).toFixed(1) : "?";
  };
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  const kib = (name: string) => {
    const m = new RegExp(`^${name}:\\s+(\\d+)`, "m").exec(status);
    return m ? (Number(m[1]) / 1024).toFixed(1) : "?";
  };
  return `RSS ${rssMiB(pid).toFixed(1)} MiB (anon ${kib("RssAnon")}, file ${kib("RssFile")}; ` +
    `V8 heap used ${get("nodejs_heap_size_used_bytes")}` +
    ` / total ${get("nodejs_heap_size_total_bytes")}, external ${
      get("nodejs_external_memory_bytes")
    })`;
}

/** Runs the daemon-mode benchmark and prints its table. */
export async function benchDaemon(opts: BenchDaemonOptions): Promise<void> {
  const N = opts.iterations;
  // The pod is bound to the daemon's node: its pod informer (needed by "statusPublish": "async")
  // holds it, in both modes alike.
  const w = await world({ conf: { logLevel: "error" }, nodeName: NODE });
  const proxy = await apiLatencyProxy(w, opts.apiLatencyMs ?? 0);
  try {
    if (opts.latencyMs > 0) w.api.fault({ delayMs: opts.latencyMs, times: Infinity });
    const conf = (networks: unknown) => ({
      ...w.conf,
      capabilities: { [ANNOTATIONS]: true },
      runtimeConfig: { [ANNOTATIONS]: { "k8s.v1.cni.cncf.io/networks": JSON.stringify(networks) } },
    });
    const dir = await w.scratch.dir();
    const metricsPort = freePort();
    const d = await startDaemon(
      dir,
      { ...conf(SELECTION), statusPublish: opts.statusPublish ?? "sync" },
      {
        flags: [
          "--log-level",
          "verbose",
          "--metrics-address",
          `127.0.0.1:${metricsPort}`,
          "--node-name",
          NODE,
        ],
      },
    );
    await until(
      async () => {
        const res = await fetch(`http://127.0.0.1:${metricsPort}/readyz`).catch(() => undefined);
        await res?.body?.cancel();
        return res?.status === 200;
      },
      "the daemon ready (NAD and pod lists)",
      30_000,
    );
    const memory = () => daemonMemory(d.child.pid, metricsPort);
    const memStart = await memory();
    const { direct, runDirect } = await directFloor(w);
    const podConf = { ...conf(SELECTION), daemonSocket: d.socket };
    const rssStart = rssMiB(d.child.pid);

    // Timed runs go without /usr/bin/time (its own fork + exec, ≈ 1 ms, is no part of the
    // forwarder); the peak RSS comes from separate runs under it.
    const measured = async (command: "ADD" | "DEL", containerId: string, rss = false) => {
      const rssFile = await Deno.makeTempFile();
      try {
        const spawnedAt = performance.timeOrigin + performance.now();
        const r = await w.call(command, {
          containerId,
          config: podConf,
          args: k8sArgs(NS, POD, containerId),
          env: { MANIFOLD_FORWARD_TIMING: "1" },
          launcher: rss ? ["/usr/bin/time", "-f", "%M", "-o", rssFile] : [],
        });
        if (r.code !== 0) throw new Error(`${command} failed: ${r.stdout}\n${r.stderr}`);
        const m = /forward sent at ([\d.]+)/.exec(r.stderr);
        return {
          ms: r.ms,
          rssKiB: rss ? Number((await Deno.readTextFile(rssFile)).trim().split("\n").pop()) : NaN,
          toSentMs: m ? Number(m[1]) - spawnedAt : NaN,
        };
      } finally {
        await Deno.remove(rssFile);
      }
    };
    const empty = `${dir}/empty.ts`;
    await Deno.writeTextFile(empty, "");
    const emptyRun = async () => {
      const s = performance.now();
      await new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "--quiet",
          "--no-prompt",
          "--cached-only",
          "--no-check",
          "--no-config",
          empty,
        ],
      }).output();
      return performance.now() - s;
    };

    const t = {
      add: [] as number[],
      del: [] as number[],
      addOver: [] as number[],
      delOver: [] as number[],
      sent: [] as number[],
      empty: [] as number[],
      rss: [] as number[],
      req: [] as number[],
      gets: [] as number[],
    };
    for (let i = 0; i < N + 2; i++) {
      const id = `dbench${i}${crypto.randomUUID().slice(0, 8)}`;
      const before = w.api.requests.length;
      const add = await measured("ADD", id);
      const seen = w.api.requests.slice(before).filter((r) => !r.path.endsWith("/events"));
      const del = await measured("DEL", id);
      const floor = await runDirect(`dfloor${i}${crypto.randomUUID().slice(0, 8)}`, direct);
      const e = await emptyRun();
      if (i < 2) continue; // warm-up
      t.add.push(add.ms);
      t.del.push(del.ms);
      t.addOver.push(add.ms - floor.add);
      t.delOver.push(del.ms - floor.del);
      t.sent.push(add.toSentMs, del.toSentMs);
      t.empty.push(e);
      t.req.push(seen.length);
      t.gets.push(seen.filter((r) => r.method === "GET").length);
    }
    for (let i = 0; i < Math.min(N, 10); i++) {
      const id = `drss${i}${crypto.randomUUID().slice(0, 8)}`;
      t.rss.push((await measured("ADD", id, true)).rssKiB / 1024);
      t.rss.push((await measured("DEL", id, true)).rssKiB / 1024);
    }
    const row = (name: string, xs: number[], unit = "ms") => {
      const { p50, p95, p99 } = stats(xs);
      console.log(
        `${name.padEnd(52)} ${p50.toFixed(1).padStart(8)} ${p95.toFixed(1).padStart(8)} ${
          p99.toFixed(1).padStart(8)
        }  ${unit}`,
      );
    };
    console.log(
      `\nManifold through the daemon: default (bridge) + bridge NAD + macvlan NAD, annotations ` +
        `from the runtime, statusPublish ${opts.statusPublish ?? "sync"}, API stand-in delay ` +
        `${opts.latencyMs} ms, proxy ${opts.apiLatencyMs ?? 0} ms each way (RTT ${
          2 * (opts.apiLatencyMs ?? 0)
        } ms), ${N} iterations\n`,
    );
    console.log(
      `${"".padEnd(52)} ${"p50".padStart(8)} ${"p95".padStart(8)} ${"p99".padStart(8)}`,
    );
    row("ADD through the daemon", t.add);
    row("ADD own overhead (− delegates, paired)", t.addOver);
    row("DEL through the daemon", t.del);
    row("DEL own overhead (− delegates, paired)", t.delOver);
    row("forwarder start → request sent", t.sent);
    row("empty `deno run` (start → exit), same run", t.empty);
    row("forwarder peak RSS (own runs, /usr/bin/time)", t.rss, "MiB");
    row("API requests per ADD (events left out)", t.req, "req");
    row("  of which GETs", t.gets, "req");

    if (opts.concurrent > 0) {
      const pods = await Promise.all(
        Array.from({ length: opts.concurrent }, async (_, k) => ({
          netns: `/var/run/netns/${await w.scratch.netns(`c${k}`)}`,
          id: `conc${k}${crypto.randomUUID().slice(0, 8)}`,
        })),
      );
      const one = { ...conf([{ name: "bridge-net" }]), daemonSocket: d.socket };
      const call = (command: "ADD" | "DEL", p: { netns: string; id: string }) =>
        w.call(command, {
          containerId: p.id,
          netns: p.netns,
          config: one,
          args: k8sArgs(NS, POD, p.id),
        });
      const adds = await Promise.all(pods.map((p) => call("ADD", p)));
      const failed = adds.filter((r) => r.code !== 0);
      const dels = await Promise.all(pods.map((p) => call("DEL", p)));
      const { p50, p99 } = stats(adds.map((r) => r.ms));
      console.log(
        `\n${opts.concurrent} concurrent pod ADDs (default + bridge NAD) through one daemon: ` +
          `p50 ${p50.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms, ${adds.length - failed.length}/` +
          `${adds.length} succeeded, DEL ${dels.filter((r) => r.code === 0).length}/` +
          `${dels.length}, leases left ${(await w.leases()).length}`,
      );
      if (failed.length > 0) console.log(`first failure: ${failed[0].stdout}`);
    }
    console.log(
      `daemon RSS: ${rssStart.toFixed(1)} MiB at start, ${
        rssMiB(d.child.pid).toFixed(1)
      } MiB at end`,
    );
    console.log(`daemon memory at start: ${memStart}\ndaemon memory now:      ${await memory()}`);
    if (opts.soak > 0) {
      const before = rssMiB(d.child.pid);
      for (let i = 0; i < opts.soak; i++) {
        const id = `soak${i}${crypto.randomUUID().slice(0, 8)}`;
        for (const command of ["ADD", "DEL"] as const) {
          const r = await w.call(command, { containerId: id, config: podConf });
          if (r.code !== 0) throw new Error(`soak ${command} ${i} failed: ${r.stdout}`);
        }
      }
      console.log(
        `soak of ${opts.soak} ADD/DEL pairs: daemon RSS ${before.toFixed(1)} → ` +
          `${rssMiB(d.child.pid).toFixed(1)} MiB, leases left ${(await w.leases()).length}`,
      );
    }
    d.kill("SIGTERM");
    const served = { ADD: [] as number[], DEL: [] as number[] };
    for (const line of (await d.exited()).stderr.split("\n")) {
      if (!line.includes('"served"')) continue;
      const e = JSON.parse(line) as { command: "ADD" | "DEL"; ms: number };
      served[e.command]?.push(e.ms);
    }
    console.log(
      `time inside the daemon per request (all requests), p50: ADD ` +
        `${stats(served.ADD).p50?.toFixed(1)} ms, DEL ${stats(served.DEL).p50?.toFixed(1)} ms`,
    );
  } finally {
    await proxy?.close();
    await w.api.stop();
    await w.scratch.cleanup();
  }
}
