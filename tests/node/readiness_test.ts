/**
 * Issue 27 §2, per call and daemon: Manifold's config is written at node start while the
 * cluster default network is not ready yet (`readinessindicatorfile` names a file that does
 * not exist). Pods wait — each ADD waits `readinessTimeoutMs` and fails with CNI code 11, kubelet
 * retries the sandbox, no delegate runs (no lease, no veth) — and once the file appears every pod
 * starts; none ends Failed.
 */
import assert from "node:assert/strict";
import {
  type NodeCluster,
  type NodeMode,
  nodeTest,
  startNodeCluster,
} from "../support/node_cluster.ts";
import { bridgeNad, deployment } from "../support/node/workloads.ts";

const NS = "ready";
const PODS = 3;

async function leaseFiles(node: NodeCluster): Promise<string[]> {
  const out: string[] = [];
  for await (const d of Deno.readDir(node.layout.ipamDir)) {
    if (!d.isDirectory) continue;
    for await (const e of Deno.readDir(`${node.layout.ipamDir}/${d.name}`)) {
      if (/^[0-9.]+$/.test(e.name)) out.push(`${d.name}/${e.name}`);
    }
  }
  return out;
}

async function sandboxFailures(node: NodeCluster): Promise<string[]> {
  const r = await node.admin.request("GET", `/api/v1/namespaces/${NS}/events`);
  // deno-lint-ignore no-explicit-any
  return (r.items ?? []).filter((e: any) => e.reason === "FailedCreatePodSandBox")
    // deno-lint-ignore no-explicit-any
    .map((e: any) => e.message as string);
}

function scenario(mode: NodeMode) {
  nodeTest(
    `node (${mode}): pods wait for the readiness indicator file, then start once it appears`,
    async () => {
      const flagDir = await Deno.makeTempDir({ prefix: "manifold-ready-" });
      const flag = `${flagDir}/cluster-ready`;
      const node = await startNodeCluster({
        mode,
        pluginConf: { readinessindicatorfile: flag, readinessTimeoutMs: 3000 },
      });
      const br = `mrd${crypto.randomUUID().slice(0, 5)}`;
      try {
        await node.createNamespace(NS);
        await node.createNad(NS, "net-a", bridgeNad(node, "net-a", br, "10.37.0.0/24"));
        await node.apply(deployment(NS, "web", PODS, "net-a"));
        // While the file is missing: sandboxes fail with "not ready" and are retried; nothing
        // is attached (ADD waits before any delegate).
        let failures: string[] = [];
        const end = Date.now() + 60_000;
        while (Date.now() < end) {
          failures = await sandboxFailures(node);
          if (failures.length > 0) break;
          await new Promise((r) => setTimeout(r, 500));
        }
        assert.ok(
          failures.some((m) => m.includes("not ready")),
          `FailedCreatePodSandBox naming readiness: ${failures}`,
        );
        const pods = await node.listPods(NS, "app=web");
        assert.equal(pods.filter((p) => p.status?.phase === "Running").length, 0);
        assert.deepEqual(await leaseFiles(node), [], "no lease before the network is ready");

        await Deno.writeTextFile(flag, "");
        const running = await node.waitPodsRunning(NS, "app=web", PODS, 180_000);
        for (const p of running) {
          assert.deepEqual(
            node.networkStatus(p).map((s) => s.interface),
            ["eth0", "net1"],
            p.metadata.name,
          );
        }
        // The same pods (none replaced after failing), none Failed.
        assert.deepEqual(
          running.map((p) => p.metadata.name).sort(),
          pods.map((p) => p.metadata.name).sort(),
        );
      } finally {
        await node.stop();
        await new Deno.Command("ip", { args: ["link", "del", br], stderr: "null" }).output();
        await Deno.remove(flagDir, { recursive: true }).catch(() => {});
      }
    },
  );
}

scenario("per-call");
scenario("daemon");
