/**
 * MultiNetworkPolicy at cluster scale (root, a real kube-apiserver: `MANIFOLD_KUBE_APISERVER`
 * and `etcd` on PATH): fills the server with `--pods` N pods (network-status annotations,
 * Deployment-like labels, `spec.nodeName` spread over `--nodes` M nodes, one of them this
 * node) and `--policies` P policies over three secondary networks
 * (tests/policy/support/scale.ts), then starts a real `manifold daemon` with
 * `"multiNetworkPolicy": true` (tests/policy/support/daemon_lab.ts) and prints:
 *
 * - list time (daemon start → `/readyz`, which waits for the policy agent's three lists);
 * - the daemon's peak RSS during the list (`VmHWM` of /proc/<pid>/status at `/readyz`) and
 *   its RSS once settled after the list;
 * - after a pod `server` (app=db, namespace `a`) is attached through the daemon and selected by
 *   the policy `a/db`: `--updates` K label changes of pods no policy refers to (namespaces
 *   `s38`…`s47`): the nftables state of `server`'s netns before and after (must be equal) and
 *   the syncs the daemon ran meanwhile; the RSS after them;
 * - `--samples` S label changes of a peer pod of another node (app idle ↔ web) → its address
 *   in / out of the set in `server`'s netns, polled every ~0.5 ms: p50, p90, p99, max.
 *
 * etcd and kube-apiserver run on the same machine: their memory is not the daemon's.
 *
 * Usage: sudo -E deno run -A scripts/scale_policy.ts [--pods 20000] [--nodes 200]
 *   [--policies 40] [--updates 2000] [--samples 100] [--concurrency 24] [--settle-ms 5000]
 *
 * @module
 */

import { libnftablesRunner, readRules } from "../lib/policy/mod.ts";
import { startKubeApiServer } from "../tests/support/kube_apiserver.ts";
import { DaemonLab, NODE } from "../tests/policy/support/daemon_lab.ts";
import { parseArgs } from "node:util";
import {
  createRemotePod,
  fillCluster,
  pool,
  QUIET_NAMESPACES,
  relabel,
  type ScalePodRef,
} from "../tests/policy/support/scale.ts";

// Unknown flags are refused (a typo must not run a 20-minute benchmark with the defaults).
const { values: flags } = parseArgs({
  args: Deno.args,
  options: {
    pods: { type: "string" },
    nodes: { type: "string" },
    policies: { type: "string" },
    updates: { type: "string" },
    samples: { type: "string" },
    concurrency: { type: "string" },
    "settle-ms": { type: "string" },
  },
  strict: true,
  allowPositionals: false,
});

/** A whole-number flag, or its default; exits 2 for anything else. */
function flag(name: keyof typeof flags, fallback: number): number {
  const v = flags[name];
  if (v === undefined) return fallback;
  if (!/^\d+$/.test(v)) {
    console.error(`scale_policy: --${name} must be a whole number, got ${JSON.stringify(v)}`);
    Deno.exit(2);
  }
  return Number(v);
}
const nPods = flag("pods", 20_000), nodes = flag("nodes", 200), nPolicies = flag("policies", 40);
const updates = flag("updates", 2000), samples = flag("samples", 100);
const concurrency = flag("concurrency", 24), settleMs = flag("settle-ms", 5000);

/** The policy the measured pod is selected by (ingress on `a/net1` from app=web and team=b). */
const DB_POLICY = {
  metadata: {
    name: "db",
    namespace: "a",
    annotations: { "k8s.v1.cni.cncf.io/policy-for": "net1" },
  },
  spec: {
    podSelector: { matchLabels: { app: "db" } },
    ingress: [
      { from: [{ podSelector: { matchLabels: { app: "web" } } }], ports: [{ port: 80 }] },
      { from: [{ namespaceSelector: { matchLabels: { team: "b" } } }], ports: [{ port: 9000 }] },
    ],
  },
};

/** VmRSS and VmHWM of a process, MiB. */
async function vm(pid: number): Promise<{ rss: number; hwm: number }> {
  const text = await Deno.readTextFile(`/proc/${pid}/status`);
  const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, "m").exec(text)![1]);
  return { rss: kb("VmRSS") / 1024, hwm: kb("VmHWM") / 1024 };
}

function quantiles(xs: number[]): string {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p: number) => s[Math.min(s.length - 1, Math.ceil(p * s.length) - 1)];
  return `p50 ${q(0.5).toFixed(1)} ms, p90 ${q(0.9).toFixed(1)} ms, p99 ${
    q(0.99).toFixed(1)
  } ms, max ${s.at(-1)!.toFixed(1)} ms (n=${s.length})`;
}

const mib = (x: number) => `${x.toFixed(1)} MiB`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const server = await startKubeApiServer({ readyTimeoutMs: 120_000 });
const lab = new DaemonLab();
const runner = libnftablesRunner();
try {
  let refs: ScalePodRef[] = [];
  let started = 0;
  let sampling: Promise<void> | undefined;
  let maxSampled = 0;
  let ready = false;
  await lab.start({
    server,
    conf: { logLevel: "info" },
    readyTimeoutMs: 600_000,
    beforeDaemon: async () => {
      const t0 = performance.now();
      refs = await fillCluster(server, {
        pods: nPods,
        policies: nPolicies,
        nodes,
        node: NODE,
        concurrency,
        onProgress: (n) => console.error(`  ${n} pods created`),
      });
      console.log(
        `${nPods} pods over ${nodes} nodes (${refs.filter((r) => r.nodeName === NODE).length} ` +
          `on ${NODE}), ${nPolicies} policies over 3 networks: created in ${
            ((performance.now() - t0) / 1000).toFixed(0)
          } s`,
      );
      started = performance.now();
      // VmRSS sampled while the daemon lists (VmHWM is the kernel's exact peak).
      sampling = (async () => {
        while (!ready) {
          const pid = lab.daemon?.child.pid;
          if (pid) maxSampled = Math.max(maxSampled, (await vm(pid).catch(() => ({ rss: 0 }))).rss);
          await sleep(50);
        }
      })();
    },
  });
  ready = true;
  await sampling;
  const listMs = performance.now() - started;
  const pid = lab.daemon.child.pid;
  const atReady = await vm(pid);
  console.log(
    `list (daemon start → /readyz): ${(listMs / 1000).toFixed(1)} s; peak RSS during it ${
      mib(atReady.hwm)
    } (VmHWM; sampled max ${mib(maxSampled)})`,
  );
  await sleep(settleMs);
  const settled = await vm(pid);
  console.log(`RSS after the list (settled ${settleMs} ms): ${mib(settled.rss)}`);

  // The measured pod and its peers.
  await lab.api.createPolicy(DB_POLICY);
  const srv = await lab.pod("a", "server", { app: "db" }, 10);
  const peers: ScalePodRef[] = [];
  for (let k = 0; k < 4; k++) {
    const p = { namespace: "a", name: `peer-${k}`, nodeName: "node-7" };
    await createRemotePod(server, { ...p, labels: { app: "idle" } }, [
      `10.201.0.${k}`,
      `10.99.0.${k + 1}`,
      `10.99.1.${k + 1}`,
      `10.99.2.${k + 1}`,
    ]);
    peers.push(p);
  }
  const elements = async () =>
    (await readRules(srv.path, { runner }))?.flatMap((o) =>
      (o as { set?: { elem?: unknown[] } }).set?.elem?.map(String) ?? []
    ) ?? [];
  const waitFor = async (cond: () => Promise<boolean>, ms = 10_000) => {
    const t0 = performance.now();
    while (!await cond()) {
      if (performance.now() - t0 > ms) throw new Error(`no kernel change within ${ms} ms`);
      await sleep(0.5);
    }
  };
  await waitFor(async () => (await elements()).length > 0, 30_000);
  // The netns's tables without the kernel's object handles (a full resync recreates the
  // table with the same content and new handles).
  const kernelState = async () =>
    JSON.stringify(
      await readRules(srv.path, { runner }),
      (k, v) => (k === "handle" ? undefined : v),
    );
  const metric = async (name: string) =>
    Number(
      new RegExp(`^${name.replace(/[{}]/g, "\\$&")} (\\S+)$`, "m")
        .exec((await lab.http("/metrics")).text)?.[1] ?? NaN,
    );
  const IGNORED = 'manifold_policy_pod_changes_total{effect="ignored"}';

  // Label changes of pods no policy refers to: nothing may change in the kernel.
  const quiet = refs.filter((r) => QUIET_NAMESPACES.includes(r.namespace) && r.nodeName !== NODE);
  const before = await kernelState();
  const syncs0 = await metric("manifold_policy_sync_duration_seconds_count");
  const ignored0 = await metric(IGNORED);
  const t1 = performance.now();
  await pool(
    updates,
    concurrency,
    (i) => relabel(server, quiet[i % quiet.length], { rev: String(i), app: i % 2 ? "web" : "db" }),
  );
  const updMs = performance.now() - t1;
  await sleep(settleMs);
  const after = await kernelState();
  const syncs1 = await metric("manifold_policy_sync_duration_seconds_count");
  const ignored1 = await metric(IGNORED);
  const churned = await vm(pid);
  console.log(
    `${updates} label updates of pods no policy refers to (${
      (updates / updMs * 1000).toFixed(0)
    }/s):` +
      ` kernel state of the pod's netns ${before === after ? "unchanged" : "CHANGED"}; ` +
      `syncs run meanwhile: ${syncs1 - syncs0} (pod changes ignored: ${
        ignored1 - ignored0
      }); RSS after them (settled): ${mib(churned.rss)}, ` +
      `peak so far ${mib(churned.hwm)}`,
  );

  // A peer's label change → its address in / out of the set.
  const lat: number[] = [];
  for (let i = 0; i < samples; i++) {
    const peer = peers[i % peers.length];
    const ip = `10.99.0.${(i % peers.length) + 1}`;
    const join = Math.floor(i / peers.length) % 2 === 0;
    const t0 = performance.now();
    await relabel(server, peer, { app: join ? "web" : "idle" });
    await waitFor(async () => (await elements()).includes(ip) === join);
    lat.push(performance.now() - t0);
  }
  console.log(`peer label change → set in the pod's netns: ${quantiles(lat)}`);
  const sum = await metric("manifold_policy_sync_duration_seconds_sum");
  const count = await metric("manifold_policy_sync_duration_seconds_count");
  const final = await vm(pid);
  console.log(
    `daemon syncs: ${count}, mean ${(sum / count * 1000).toFixed(1)} ms; RSS at the end ${
      mib(final.rss)
    }, peak ${mib(final.hwm)}`,
  );
} finally {
  await runner.close();
  await lab.cleanup();
  await server.stop();
}
