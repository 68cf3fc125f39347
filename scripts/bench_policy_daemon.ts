/**
 * MultiNetworkPolicy end to end through a real `manifold daemon` (root): the time from an API
 * write (to the stand-in of tests/support/kube_api.ts) to the kernel state in the pod's netns,
 * polled every ~0.5 ms through libnftables. Three kinds of change, `--n` each (default 20):
 *
 * - pod label change moving a peer in / out of a policy's peer set (→ set elements);
 * - namespace label change moving its pods in / out (→ set elements);
 * - policy create / delete (→ table present / absent);
 * - a new pod the policy selects: from its ADD returning to the runtime to its table present.
 *
 * Prints p50, p90 and max per kind, in ms. Includes the watch delivery, the daemon's debounce
 * (5 ms), the engine and the nftables batch.
 *
 * Usage: deno run -A scripts/bench_policy_daemon.ts [--n 20]
 */

import { libnftablesRunner, readRules } from "../lib/policy/mod.ts";
import { DaemonLab } from "../tests/policy/support/daemon_lab.ts";

const n = (() => {
  const i = Deno.args.indexOf("--n");
  return i >= 0 ? Number(Deno.args[i + 1]) : 20;
})();

const POLICY = {
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

function stats(xs: number[]): string {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p: number) => s[Math.min(s.length - 1, Math.floor(p * s.length))];
  return `p50 ${q(0.5).toFixed(1)} ms, p90 ${q(0.9).toFixed(1)} ms, max ${
    s.at(-1)!.toFixed(1)
  } ms (n=${s.length})`;
}

const lab = new DaemonLab();
const runner = libnftablesRunner();
try {
  await lab.start();
  const srv = await lab.pod("a", "server", { app: "db" }, 10);
  const oth = await lab.pod("a", "other", {}, 12);
  const nsb = await lab.pod("b", "fromb", {}, 13);
  const elements = async () => {
    const t = await readRules(srv.path, { runner });
    if (!t) return null;
    return t.flatMap((o) => {
      const s = (o as { set?: { elem?: unknown[] } }).set;
      return s?.elem?.map(String) ?? [];
    });
  };
  const waitFor = async (cond: () => Promise<boolean>): Promise<number> => {
    const t0 = performance.now();
    while (!await cond()) {
      if (performance.now() - t0 > 5000) throw new Error("no kernel change within 5 s");
      await new Promise((r) => setTimeout(r, 0.5));
    }
    return performance.now() - t0;
  };
  const timed = async (write: () => Promise<void>, cond: () => Promise<boolean>) => {
    const t0 = performance.now();
    await write();
    await waitFor(cond);
    return performance.now() - t0;
  };

  await lab.api.createPolicy(POLICY);
  await waitFor(async () => (await elements())?.includes(nsb.ip) ?? false);

  const pod: number[] = [];
  for (let i = 0; i < n; i++) {
    pod.push(
      await timed(
        () => lab.api.setPodLabels("a", "other", { app: "web" }),
        async () => (await elements())?.includes(oth.ip) ?? false,
      ),
    );
    pod.push(
      await timed(
        () => lab.api.setPodLabels("a", "other", {}),
        async () => !((await elements())?.includes(oth.ip) ?? true),
      ),
    );
  }
  const ns: number[] = [];
  for (let i = 0; i < n; i++) {
    ns.push(
      await timed(
        () => lab.api.putNamespace("b", { team: "x" }),
        async () => !((await elements())?.includes(nsb.ip) ?? true),
      ),
    );
    ns.push(
      await timed(
        () => lab.api.putNamespace("b", { team: "b" }),
        async () => (await elements())?.includes(nsb.ip) ?? false,
      ),
    );
  }
  const pol: number[] = [];
  for (let i = 0; i < n; i++) {
    pol.push(
      await timed(
        () => lab.api.deletePolicy("a", "db"),
        async () => (await readRules(srv.path, { runner })) === null,
      ),
    );
    pol.push(
      await timed(
        () => lab.api.createPolicy(POLICY),
        async () => (await elements())?.includes(nsb.ip) ?? false,
      ),
    );
  }
  // A new pod a policy selects: ADD returned (to the runtime) → its table present.
  const added: number[] = [];
  for (let i = 0; i < n; i++) {
    const p = await lab.pod("a", `new${i}`, { app: "db" }, 40 + i);
    const t0 = performance.now();
    await waitFor(async () => (await readRules(p.path, { runner })) !== null);
    added.push(performance.now() - t0);
  }
  console.log(`API write → kernel state in the pod's netns, through manifold daemon:`);
  console.log(`  pod label change (peer in/out):       ${stats(pod)}`);
  console.log(`  namespace label change (peers in/out): ${stats(ns)}`);
  console.log(`  policy delete/create (table):          ${stats(pol)}`);
  console.log(`  new selected pod, ADD returned → table: ${stats(added)}`);
  // The daemon's own share, from its metrics: mean sync (cache scan, engine, nftables batches).
  const metrics = (await lab.http("/metrics")).text;
  const num = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, "m").exec(metrics)?.[1]);
  const sum = num("manifold_policy_sync_duration_seconds_sum");
  const count = num("manifold_policy_sync_duration_seconds_count");
  console.log(
    `  of which the daemon's syncs: mean ${(sum / count * 1000).toFixed(2)} ms (${count} syncs)`,
  );
} finally {
  await runner.close();
  await lab.cleanup();
}
