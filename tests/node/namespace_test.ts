/**
 * Issue 27 §2, per call and daemon: deleting a namespace holding 20 Running pods on secondary
 * networks completes (the namespace is gone) and leaves nothing on the node: no host-local
 * lease, no live cache record of the 20 sandboxes, no host veth on the network's bridge.
 */
import assert from "node:assert/strict";
import { ipJson } from "../support/netns.ts";
import {
  type NodeCluster,
  type NodeMode,
  nodeTest,
  poll,
  startNodeCluster,
} from "../support/node_cluster.ts";
import { bridgeNad, deployment } from "../support/node/workloads.ts";

const NS = "doomed";
const PODS = 20;

async function bridgePorts(bridge: string): Promise<string[]> {
  const links = await ipJson<{ ifname: string }[]>(undefined, "link", "show", "master", bridge)
    .catch(() => []);
  return links.map((l) => l.ifname);
}

async function namespaceGone(node: NodeCluster): Promise<boolean> {
  const r = await node.admin.raw("GET", `/api/v1/namespaces/${NS}`);
  return r.status === 404;
}

function scenario(mode: NodeMode) {
  nodeTest(
    `node (${mode}): deleting a namespace with ${PODS} pods completes and leaves nothing`,
    async () => {
      const node = await startNodeCluster({ mode });
      const br = `mns${crypto.randomUUID().slice(0, 5)}`;
      try {
        await node.createNamespace(NS);
        await node.createNad(NS, "net-a", bridgeNad(node, "net-a", br, "10.34.0.0/24"));
        await node.apply(deployment(NS, "web", PODS, "net-a"));
        const pods = await node.waitPodsRunning(NS, "app=web", PODS, 240_000);
        const ids: string[] = [];
        for (const p of pods) ids.push((await node.podSandbox(p)).id);
        assert.equal((await bridgePorts(br)).length, PODS);

        const began = performance.now();
        await node.admin.request("DELETE", `/api/v1/namespaces/${NS}`);
        await poll(`namespace ${NS} gone`, () => namespaceGone(node), 180_000, 500);
        console.log(
          `namespace with ${PODS} pods deleted in ${Math.round(performance.now() - began)} ms`,
        );
        // kubelet's StopPodSandbox (→ CNI DEL) runs as the pods go; give it its minute.
        const leaks = await poll(
          "nothing left",
          async () => {
            const r = await node.leaks(ids);
            const ports = await bridgePorts(br);
            const empty = Object.values(r).every((v) => v.length === 0) && ports.length === 0;
            return empty ? { ...r, ports } : undefined;
          },
          60_000,
          500,
        ).catch(async () => ({ ...(await node.leaks(ids)), ports: await bridgePorts(br) }));
        assert.deepEqual(leaks, { interfaces: [], leases: [], cache: [], files: [], ports: [] });
      } finally {
        await node.stop();
        await new Deno.Command("ip", { args: ["link", "del", br], stderr: "null" }).output();
      }
    },
  );
}

scenario("per-call");
scenario("daemon");
