/**
 * Memory soak of `manifold daemon` (issue 12's budget: RSS with 1,000 NADs and 110 pods cached,
 * flat across a 10,000-request ADD/DEL soak). Not a test: it prints figures.
 *
 * A real daemon process (scripts/manifold, the binary's permissions and V8 flags, metrics on as
 * the DaemonSet runs it) against the HTTPS API stand-in holding `--nads` extra
 * NetworkAttachmentDefinitions; `--pods` pods are ADDed and stay cached; then `--requests`
 * ADD/DEL requests (pairs, `--lanes` pods at a time, each lane in its own netns) for a pod with
 * the cluster default network (bridge + host-local) and a bridge NAD: real delegates from
 * /usr/lib/cni. Requests go over the daemon socket with the forwarder's own client
 * (`forward()` of lib/daemon/forward.ts), not through a `manifold` process per request: the soak
 * measures the daemon, and spares the machine 10,000 process starts.
 *
 * Prints the daemon's memory (RSS from /proc, V8 heap and external memory from `/metrics`) at
 * start, with the pods cached, every `--every` requests (with p50/p99 request time of that
 * block) and at the end, then the leases left once everything is DELeted (must be 0).
 *
 * ```sh
 * deno run -A scripts/soak_daemon.ts                       # 10,000 requests, 1,000 NADs, 110 pods
 * deno run -A scripts/soak_daemon.ts --requests 2000 --lanes 2
 * deno run -A scripts/soak_daemon.ts --v8-flags=--optimize-for-size   # compare daemon V8 flags
 * deno run -A scripts/soak_daemon.ts --daemon-env GLIBC_TUNABLES=glibc.malloc.arena_max=2
 * ```
 *
 * Needs root (network namespaces).
 *
 * @module
 */

import { parseArgs } from "node:util";
import { forward } from "../lib/daemon/forward.ts";
import { k8sArgs } from "../tests/support/plugin.ts";
import { startDaemon } from "../tests/support/daemon.ts";
import { until } from "../tests/support/wait.ts";
import { done, NS, POD, world } from "../tests/support/world.ts";
import { daemonMemory, freePort } from "./bench_daemon.ts";
import { stats } from "./bench_support.ts";

const ANNOTATIONS = "io.kubernetes.cri.pod-annotations";

/** Options of {@link soakDaemon}. */
export interface SoakOptions {
  /** ADD and DEL requests of the soak (pairs: rounded up to even). */
  requests: number;
  /** Pods soaked at once, each in its own netns. */
  lanes: number;
  /** Pods ADDed before the soak and kept cached. */
  pods: number;
  /** Extra NADs in the API (the daemon lists and watches them all). */
  nads: number;
  /** Print a line every this many requests. */
  every: number;
  /** Extra V8 flags of the daemon (`DENO_V8_FLAGS`, on top of scripts/runtime-flags), to compare. */
  v8Flags?: string;
  /** Extra environment of the daemon (`NAME=VALUE` each), to compare e.g. allocator tunables. */
  daemonEnv?: string[];
}

/** A pod the soak runs requests for. */
interface SoakPod {
  netns: string;
  containerId: string;
}

/** Runs the soak and prints its figures; throws on the first failed request. */
export async function soakDaemon(opts: SoakOptions): Promise<void> {
  const w = await world({ conf: { logLevel: "error" } });
  try {
    for (let i = 0; i < opts.nads; i++) {
      // Each a real-looking bridge NAD (≈ 250 bytes of config), never selected.
      w.api.addNad({
        namespace: `soak-ns-${i % 20}`,
        name: `soak-net-${i}`,
        config: JSON.stringify({
          cniVersion: "1.0.0",
          type: "bridge",
          bridge: `soakbr${i}`,
          ipam: { type: "host-local", subnet: `10.${100 + (i >> 8)}.${i & 255}.0/24` },
        }),
      });
    }
    const conf = {
      ...w.conf,
      capabilities: { [ANNOTATIONS]: true },
      runtimeConfig: {
        [ANNOTATIONS]: { "k8s.v1.cni.cncf.io/networks": JSON.stringify([{ name: "bridge-net" }]) },
      },
    };
    const port = freePort();
    const d = await startDaemon(await w.scratch.dir(), conf, {
      flags: ["--metrics-address", `127.0.0.1:${port}`, "--log-level", "error"],
      env: {
        ...Object.fromEntries(
          (opts.daemonEnv ?? []).map((
            kv,
          ) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)]),
        ),
        ...(opts.v8Flags ? { DENO_V8_FLAGS: opts.v8Flags } : {}),
      },
    });
    const memory = () => daemonMemory(d.child.pid, port);
    try {
      await until(async () => {
        const r = await fetch(`http://127.0.0.1:${port}/readyz`);
        await r.body?.cancel();
        return r.ok;
      }, `the daemon's list of ${opts.nads + 3} NADs`);
      const started = performance.now();
      console.log(
        `soak: ${opts.requests} requests, ${opts.lanes} lanes, ${opts.pods} pods cached, ` +
          `${opts.nads} extra NADs${opts.v8Flags ? `, daemon DENO_V8_FLAGS=${opts.v8Flags}` : ""}` +
          (opts.daemonEnv?.length ? `, daemon env ${opts.daemonEnv.join(" ")}` : ""),
      );
      console.log(`daemon at start (NADs listed):   ${await memory()}`);

      const request = async (command: "ADD" | "DEL", p: SoakPod): Promise<number> => {
        const env = {
          CNI_COMMAND: command,
          CNI_CONTAINERID: p.containerId,
          CNI_NETNS: p.netns,
          CNI_IFNAME: "eth0",
          CNI_ARGS: k8sArgs(NS, POD, p.containerId),
          CNI_PATH: "/usr/lib/cni",
        };
        const t = performance.now();
        const out = await forward(d.socket, env, new TextEncoder().encode(JSON.stringify(conf)));
        const ms = performance.now() - t;
        if (out.kind !== "answered" || out.answer.code !== 0) {
          throw new Error(`${command} ${p.containerId}: ${JSON.stringify(out)}`);
        }
        return ms;
      };
      const pod = async (name: string): Promise<SoakPod> => ({
        netns: `/var/run/netns/${await w.scratch.netns(name)}`,
        containerId: `${name}${crypto.randomUUID().slice(0, 8)}`,
      });

      const cached: SoakPod[] = [];
      for (let i = 0; i < opts.pods; i += opts.lanes) {
        const batch = await Promise.all(
          Array.from({ length: Math.min(opts.lanes, opts.pods - i) }, (_, k) => pod(`p${i + k}`)),
        );
        await Promise.all(batch.map((p) => request("ADD", p)));
        cached.push(...batch);
      }
      console.log(`daemon with ${opts.pods} pods cached:  ${await memory()}`);
      const first = await memory();

      const lanes = await Promise.all(Array.from({ length: opts.lanes }, (_, k) => pod(`s${k}`)));
      const pairs = Math.ceil(opts.requests / 2);
      let next = 0;
      let count = 0;
      let block: number[] = [];
      const all: number[] = [];
      const lane = async (p: SoakPod) => {
        while (next < pairs) {
          next++;
          const one = { ...p, containerId: `soak${next}x${crypto.randomUUID().slice(0, 8)}` };
          for (const command of ["ADD", "DEL"] as const) {
            const ms = await request(command, one);
            block.push(ms);
            all.push(ms);
            if (++count % opts.every === 0) {
              const s = stats(block);
              console.log(
                `${String(count).padStart(6)} requests: p50 ${s.p50.toFixed(1)} ms, p99 ` +
                  `${s.p99.toFixed(1)} ms; ${await memory()}`,
              );
              block = [];
            }
          }
        }
      };
      await Promise.all(lanes.map(lane));
      const s = stats(all);
      console.log(
        `\nall ${all.length} soak requests: p50 ${s.p50.toFixed(1)} ms, p99 ${
          s.p99.toFixed(1)
        } ms, ` +
          `${((performance.now() - started) / 1000).toFixed(0)} s in all`,
      );
      console.log(`daemon before the soak: ${first}`);
      await new Promise((r) => setTimeout(r, 2000)); // the daemon's idle reclaim (1 s)
      console.log(`daemon after the soak:  ${await memory()} (idle 2 s)`);
      for (let i = 0; i < cached.length; i += opts.lanes) {
        await Promise.all(cached.slice(i, i + opts.lanes).map((p) => request("DEL", p)));
      }
      console.log(`leases left after DEL of every pod: ${(await w.leases()).length}`);
    } finally {
      d.kill("SIGTERM");
      await d.exited();
    }
  } finally {
    await done(w);
  }
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: {
      requests: { type: "string", default: "10000" },
      lanes: { type: "string", default: "4" },
      pods: { type: "string", default: "110" },
      nads: { type: "string", default: "1000" },
      every: { type: "string", default: "1000" },
      "v8-flags": { type: "string" },
      "daemon-env": { type: "string", multiple: true },
    },
  });
  if (Deno.uid() !== 0) {
    console.error("soak_daemon: run as root (network namespaces)");
    Deno.exit(2);
  }
  await soakDaemon({
    requests: Number(values.requests),
    lanes: Math.max(1, Number(values.lanes)),
    pods: Number(values.pods),
    nads: Number(values.nads),
    every: Math.max(1, Number(values.every)),
    v8Flags: values["v8-flags"],
    daemonEnv: values["daemon-env"],
  });
}
