/**
 * The policy agent at (CI) cluster scale against a real kube-apiserver (root): 500 pods over
 * 10 nodes and 40 policies over three secondary networks (tests/policy/support/scale.ts), a
 * real `manifold daemon` with `"multiNetworkPolicy": true`, and one pod attached through it
 * (tests/policy/support/daemon_lab.ts). Label changes of pods of other nodes that no policy
 * refers to run no sync and leave the pod's nftables state as it was; a peer's label change
 * reaches its set; the agent keeps a bounded heap per pod of the cluster
 * (tests/policy/support/agent_heap.ts, with 500 and 2,000 pods). The 20,000-pod figures come from
 * scripts/scale_policy.ts.
 */

import assert from "node:assert/strict";
import { libnftablesRunner, readRules } from "../../lib/policy/mod.ts";
import { realApiSuite } from "../support/kube_apiserver.ts";
import { until } from "../support/wait.ts";
import { DaemonLab, NODE, WEB_TO_DB_80 } from "../policy/support/daemon_lab.ts";
import {
  createPods,
  createRemotePod,
  fillCluster,
  QUIET_NAMESPACES,
  relabel,
  type ScalePodRef,
} from "../policy/support/scale.ts";

const suite = realApiSuite({ root: true });

/**
 * Heap bytes per pod of the cluster the agent may keep. Measured between two cluster sizes:
 * 640–840 B (1,310 B with the trimmed API objects kept before; 4–5 KiB for a whole pod).
 */
const MAX_BYTES_PER_POD = 1100;

suite.test("policy agent at scale: unrelated pod changes run no sync, peers still reach the set, bounded heap per pod", async (server) => {
  const lab = new DaemonLab();
  const runner = libnftablesRunner();
  let refs: ScalePodRef[] = [];
  try {
    await lab.start({
      server,
      readyTimeoutMs: 60_000,
      beforeDaemon: async () => {
        refs = await fillCluster(server, { pods: 500, policies: 40, nodes: 10, node: NODE });
      },
    });
    await lab.api.createPolicy(WEB_TO_DB_80);
    const srv = await lab.pod("a", "server", { app: "db" }, 10);
    const peer = { namespace: "a", name: "peer", nodeName: "node-3" };
    await createRemotePod(server, { ...peer, labels: { app: "idle" } }, [
      "10.201.0.1",
      "10.99.0.1",
      "10.99.1.1",
      "10.99.2.1",
    ]);
    const state = async () =>
      JSON.stringify(
        await readRules(srv.path, { runner }),
        (k, v) => k === "handle" ? undefined : v,
      );
    const elements = async () =>
      (await readRules(srv.path, { runner }))?.flatMap((o) =>
        (o as { set?: { elem?: unknown[] } }).set?.elem?.map(String) ?? []
      ) ?? [];
    await until(async () => (await elements()).length > 0, "the server's set", 20_000);
    const ignored = async () =>
      Number(
        /^manifold_policy_pod_changes_total\{effect="ignored"\} (\S+)$/m
          .exec((await lab.http("/metrics")).text)?.[1] ?? 0,
      );

    // Pods of other nodes no policy refers to: taken in without a sync, nothing changes.
    const quiet = refs.filter((r) => QUIET_NAMESPACES.includes(r.namespace) && r.nodeName !== NODE)
      .slice(0, 20);
    assert.equal(quiet.length, 20);
    const before = await state();
    const ignored0 = await ignored();
    for (const [i, p] of quiet.entries()) await relabel(server, p, { app: "web", rev: String(i) });
    await until(async () => (await ignored()) >= ignored0 + 20, "20 ignored pod changes", 10_000);
    assert.equal(await state(), before, "the pod's nftables state did not change");

    // A peer of the policy: its address enters and leaves the set.
    await relabel(server, peer, { app: "web" });
    await until(
      async () => (await elements()).includes("10.99.0.1"),
      "the peer in the set",
      10_000,
    );
    await relabel(server, peer, { app: "idle" });
    await until(
      async () => !(await elements()).includes("10.99.0.1"),
      "the peer out of the set",
      10_000,
    );

    // The heap the agent keeps per pod of the cluster, after a full collection: measured with
    // the cluster's pods and with 1,500 more, so what does not grow with the pods cancels out.
    const probe = async () => {
      const out = await new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "-A",
          "--v8-flags=--expose-gc",
          new URL("../policy/support/agent_heap.ts", import.meta.url).pathname,
          `${lab.dir}/kubeconfig`,
          NODE,
        ],
        stderr: "inherit",
      }).output();
      assert.equal(out.code, 0);
      return JSON.parse(new TextDecoder().decode(out.stdout)) as {
        pods: number;
        heapBytes: number;
      };
    };
    const small = await probe();
    await createPods(server, 500, 2000, { nodes: 10, node: NODE });
    const large = await probe();
    assert.ok(large.pods - small.pods >= 1500, `pods listed: ${small.pods}, ${large.pods}`);
    const perPod = (large.heapBytes - small.heapBytes) / (large.pods - small.pods);
    console.log(`agent heap: ${Math.round(perPod)} B per pod of the cluster`);
    assert.ok(
      perPod < MAX_BYTES_PER_POD,
      `heap per pod ${Math.round(perPod)} B (limit ${MAX_BYTES_PER_POD})`,
    );
  } finally {
    await runner.close();
    await lab.cleanup();
  }
});

suite.end();
