/**
 * Issue 27 §2, first scenario, per call and daemon: a Deployment of pods selecting NADs
 * (comma form) and a pod selecting one by JSON (`ips`, `mac`, `interface`, `default-route`)
 * reach Running on a real node; each pod's network-status agrees with its netns as the kernel
 * holds it; scaling 10 → 0 → 10 leaves no lease, host interface or live cache record of the
 * first ten sandboxes.
 */
import assert from "node:assert/strict";
import { findLeaks } from "../support/leaks.ts";
import { ipJson } from "../support/netns.ts";
import {
  type NodeCluster,
  type NodeMode,
  nodeTest,
  startNodeCluster,
} from "../support/node_cluster.ts";
import { bridgeNad, deployment, staticNad } from "../support/node/workloads.ts";
import type { KubeObject } from "../support/kube_rest.ts";

const NS = "dep";

/** Asserts the pod's network-status names exactly the interfaces and addresses its netns has. */
async function assertStatusMatchesKernel(node: NodeCluster, pod: KubeObject): Promise<void> {
  const status = node.networkStatus(pod);
  const snap = await node.podNetns(pod);
  const names = snap.interfaces.map((i) => i.name).filter((n) => n !== "lo").sort();
  assert.deepEqual(
    status.map((s) => s.interface).sort(),
    names,
    `${pod.metadata.name}: interfaces`,
  );
  for (const s of status) {
    const link = snap.interfaces.find((i) => i.name === s.interface)!;
    assert.equal(link.mac, s.mac, `${pod.metadata.name} ${s.interface}: mac`);
    for (const ip of s.ips ?? []) {
      assert.ok(
        link.addresses.includes(ip),
        `${pod.metadata.name} ${s.interface}: ${ip} in ${link.addresses}`,
      );
    }
  }
}

async function bridgePorts(bridge: string): Promise<string[]> {
  const links = await ipJson<{ ifname: string }[]>(undefined, "link", "show", "master", bridge)
    .catch(() => []);
  return links.map((l) => l.ifname);
}

function scenario(mode: NodeMode) {
  nodeTest(
    `node (${mode}): Deployment with NADs Running, status = kernel, 10 → 0 → 10 leaves nothing`,
    async () => {
      const node = await startNodeCluster({ mode });
      const tag = crypto.randomUUID().slice(0, 4);
      const brA = `mfa${tag}`, brB = `mfb${tag}`, brS = `mfs${tag}`;
      try {
        console.log(`node started in ${node.startMs} ms`);
        await node.createNamespace(NS);
        await node.createNad(NS, "net-a", bridgeNad(node, "net-a", brA, "10.31.1.0/24"));
        await node.createNad(NS, "net-b", bridgeNad(node, "net-b", brB, "10.31.2.0/24"));
        await node.createNad(NS, "net-s", staticNad("net-s", brS));
        // JSON form: ips, mac, interface, default-route on the selected network.
        const json = JSON.stringify([{
          name: "net-s",
          interface: "data1",
          ips: ["10.31.3.5/24"],
          mac: "02:aa:bb:cc:dd:01",
          "default-route": ["10.31.3.1"],
        }]);
        await node.apply(deployment(NS, "web", 10, "net-a,net-b"));
        await node.apply(deployment(NS, "pinned", 1, json));

        const [pinned] = await node.waitPodsRunning(NS, "app=pinned", 1);
        await assertStatusMatchesKernel(node, pinned);
        const data1 = node.networkStatus(pinned).find((s) => s.interface === "data1");
        assert.equal(data1?.mac, "02:aa:bb:cc:dd:01");
        assert.deepEqual(data1?.ips, ["10.31.3.5/24"]);
        const snap = await node.podNetns(pinned);
        const def = snap.routes.filter((r) => r.dst === undefined || r.dst === "0.0.0.0/0");
        const data1Index = snap.interfaces.find((i) => i.name === "data1")!.index;
        assert.ok(
          def.length > 0 && def.every((r) => r.oif === data1Index),
          `default route only via data1: ${JSON.stringify(def)}`,
        );

        const first = await node.waitPodsRunning(NS, "app=web", 10, 180_000);
        const firstIds: string[] = [];
        for (const pod of first) {
          await assertStatusMatchesKernel(node, pod);
          assert.deepEqual(node.networkStatus(pod).map((s) => s.interface), [
            "eth0",
            "net1",
            "net2",
          ]);
          firstIds.push((await node.podSandbox(pod)).id);
        }
        assert.equal((await bridgePorts(brA)).length, 10);

        await node.scale(NS, "web", 0);
        await node.waitPodsGone(NS, "app=web");
        // kubelet removes the sandboxes (StopPodSandbox → CNI DEL) right after the pods go.
        const leaks = await pollLeaks(node, firstIds);
        assert.deepEqual(leaks, { interfaces: [], leases: [], cache: [], files: [] });
        assert.deepEqual(await bridgePorts(brA), [], "host veths of net-a");
        assert.deepEqual(await bridgePorts(brB), [], "host veths of net-b");

        await node.scale(NS, "web", 10);
        const again = await node.waitPodsRunning(NS, "app=web", 10, 180_000);
        for (const pod of again) await assertStatusMatchesKernel(node, pod);
        assert.deepEqual(await findLeaks(scope(node, firstIds)), {
          interfaces: [],
          leases: [],
          cache: [],
          files: [],
        });
      } finally {
        await node.stop();
        for (const b of [brA, brB, brS]) {
          await new Deno.Command("ip", { args: ["link", "del", b], stderr: "null" }).output();
        }
      }
    },
  );
}

function scope(node: NodeCluster, ids: string[]) {
  return { containerIds: ids, ipamDir: node.layout.ipamDir, cacheDir: node.layout.cacheDir };
}

/** The leak report once it is empty, or the last one after 60 s. */
async function pollLeaks(node: NodeCluster, ids: string[]) {
  const end = Date.now() + 60_000;
  for (;;) {
    const r = await findLeaks(scope(node, ids));
    if (Object.values(r).every((v) => v.length === 0) || Date.now() > end) return r;
    await new Promise((res) => setTimeout(res, 500));
  }
}

scenario("per-call");
scenario("daemon");
