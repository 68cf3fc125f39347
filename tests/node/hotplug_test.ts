/**
 * Issue 27 §2, hot-plug on a real node (daemon mode, `"hotPlug": true`): an edit of a Running
 * pod's `k8s.v1.cni.cncf.io/networks` adds an interface the kernel shows in the pod's netns and
 * network-status lists; removing the element again removes both (and its host-local lease).
 * Hot-plugged once more (JSON form, named interface), the pod's deletion (sandbox DEL) removes
 * the hot-plugged attachment with the rest: no lease, no live cache record.
 */
import assert from "node:assert/strict";
import { type NodeCluster, nodeTest, poll, startNodeCluster } from "../support/node_cluster.ts";
import { bridgeNad, deployment } from "../support/node/workloads.ts";
import type { KubeObject } from "../support/kube_rest.ts";

const NS = "hp";

async function fresh(node: NodeCluster, pod: KubeObject): Promise<KubeObject> {
  return await node.admin.get("v1", "Pod", NS, pod.metadata.name);
}

async function kernelNames(node: NodeCluster, pod: KubeObject): Promise<string[]> {
  return (await node.podNetns(pod)).interfaces.map((i) => i.name).filter((n) => n !== "lo")
    .sort();
}

function annotate(node: NodeCluster, pod: KubeObject, networks: string): Promise<KubeObject> {
  return node.admin.patch(
    { apiVersion: "v1", kind: "Pod", namespace: NS, name: pod.metadata.name },
    { metadata: { annotations: { "k8s.v1.cni.cncf.io/networks": networks } } },
  );
}

/** Names of host-local lease files (addresses) under the node's ipam dir for `network`. */
async function leases(node: NodeCluster, network: string): Promise<string[]> {
  const res: string[] = [];
  try {
    for await (const e of Deno.readDir(`${node.layout.ipamDir}/${network}`)) {
      if (/^\d+\.\d+\.\d+\.\d+$/.test(e.name)) res.push(e.name);
    }
  } catch { /* no dir yet */ }
  return res;
}

nodeTest(
  "node (daemon): hot-plug adds and removes an interface of a Running pod (kernel + status)",
  async () => {
    const node = await startNodeCluster({ mode: "daemon", pluginConf: { hotPlug: true } });
    const tag = crypto.randomUUID().slice(0, 4);
    const brA = `mha${tag}`, brB = `mhb${tag}`;
    try {
      console.log(`node started in ${node.startMs} ms`);
      await node.createNamespace(NS);
      await node.createNad(NS, "net-a", bridgeNad(node, "net-a", brA, "10.32.1.0/24"));
      await node.createNad(NS, "net-b", bridgeNad(node, "net-b", brB, "10.32.2.0/24"));
      // A bare pod (no Deployment: a template edit would replace the pod instead).
      const template = deployment(NS, "hp", 1, "net-a").spec.template;
      await node.apply({
        apiVersion: "v1",
        kind: "Pod",
        metadata: { ...template.metadata, name: "hp-0", namespace: NS },
        spec: template.spec,
      });
      let [pod] = await node.waitPodsRunning(NS, "app=hp", 1);
      const sandbox = (await node.podSandbox(pod)).id;
      assert.deepEqual(await kernelNames(node, pod), ["eth0", "net1"]);
      assert.deepEqual(await leases(node, "net-b"), []);

      // Add net-b: net2 appears in the kernel and in network-status.
      await annotate(node, pod, "net-a,net-b");
      pod = await poll(
        "net2 in network-status",
        async () => {
          const p = await fresh(node, pod);
          return node.networkStatus(p).some((s) => s.interface === "net2") ? p : undefined;
        },
        60_000,
        500,
      );
      assert.deepEqual(await kernelNames(node, pod), ["eth0", "net1", "net2"]);
      const net2 = node.networkStatus(pod).find((s) => s.interface === "net2");
      assert.equal(net2.name, `${NS}/net-b`);
      const snap = await node.podNetns(pod);
      const link = snap.interfaces.find((i) => i.name === "net2")!;
      assert.equal(link.mac, net2.mac);
      assert.ok(link.addresses.includes(net2.ips[0]), `${net2.ips} in ${link.addresses}`);
      assert.equal((await leases(node, "net-b")).length, 1, "net-b lease");
      // Same sandbox: the pod was not restarted.
      assert.equal((await node.podSandbox(pod)).id, sandbox);

      // Remove it again: gone from the kernel, network-status and the lease file.
      await annotate(node, pod, "net-a");
      pod = await poll(
        "net2 gone from network-status",
        async () => {
          const p = await fresh(node, pod);
          return node.networkStatus(p).some((s) => s.interface === "net2") ? undefined : p;
        },
        60_000,
        500,
      );
      assert.deepEqual(await kernelNames(node, pod), ["eth0", "net1"]);
      assert.deepEqual(
        node.networkStatus(pod).map((s) => s.interface),
        ["eth0", "net1"],
      );
      assert.deepEqual(await leases(node, "net-b"), [], "net-b lease released");
      assert.equal((await node.podSandbox(pod)).id, sandbox);

      // Hot-plugged again (JSON form, named interface), then the pod deleted: the sandbox's DEL
      // removes the hot-plugged attachment too (lease, cache record).
      await annotate(
        node,
        pod,
        JSON.stringify([{ name: "net-a" }, { name: "net-b", interface: "data9" }]),
      );
      pod = await poll(
        "data9 in network-status",
        async () => {
          const p = await fresh(node, pod);
          return node.networkStatus(p).some((s) => s.interface === "data9") ? p : undefined;
        },
        60_000,
        500,
      );
      assert.deepEqual(await kernelNames(node, pod), ["data9", "eth0", "net1"]);
      await node.admin.request("DELETE", `/api/v1/namespaces/${NS}/pods/${pod.metadata.name}`);
      await node.waitPodsGone(NS, "app=hp");
      const leaks = await poll(
        "the sandbox's traces gone",
        async () => {
          const r = await node.leaks([sandbox]);
          return Object.values(r).every((v) => v.length === 0) ? r : undefined;
        },
        60_000,
        500,
      ).catch(() => node.leaks([sandbox]));
      assert.deepEqual(leaks, { interfaces: [], leases: [], cache: [], files: [] });
      assert.deepEqual(await leases(node, "net-b"), [], "hot-plugged lease released by DEL");
    } finally {
      await node.stop();
      for (const b of [brA, brB]) {
        await new Deno.Command("ip", { args: ["link", "del", b], stderr: "null" }).output();
      }
    }
  },
);

nodeTest(
  "node (daemon): a hot-plugged network survives a node reboot; the dead sandbox leaves nothing",
  async () => {
    const node = await startNodeCluster({ mode: "daemon", pluginConf: { hotPlug: true } });
    const tag = crypto.randomUUID().slice(0, 4);
    const brA = `mra${tag}`, brB = `mrb${tag}`;
    try {
      await node.createNamespace(NS);
      await node.createNad(NS, "net-a", bridgeNad(node, "net-a", brA, "10.32.1.0/24"));
      await node.createNad(NS, "net-b", bridgeNad(node, "net-b", brB, "10.32.2.0/24"));
      const template = deployment(NS, "hp", 1, "net-a").spec.template;
      await node.apply({
        apiVersion: "v1",
        kind: "Pod",
        metadata: { ...template.metadata, name: "hp-0", namespace: NS },
        spec: template.spec,
      });
      let [pod] = await node.waitPodsRunning(NS, "app=hp", 1);
      const sandbox = (await node.podSandbox(pod)).id;
      await annotate(node, pod, "net-a,net-b");
      pod = await poll(
        "net2 in network-status",
        async () => {
          const p = await fresh(node, pod);
          return node.networkStatus(p).some((s) => s.interface === "net2") ? p : undefined;
        },
        60_000,
        500,
      );
      const [before] = await leases(node, "net-b");

      // Power cut and boot: kubelet recreates the sandbox from the pod as it is now (the
      // edited annotation), and the dead sandbox's DEL releases the hot-plugged attachment.
      await node.reboot();
      pod = await poll(
        "the pod Running on a new sandbox",
        async () => {
          const p = await fresh(node, pod);
          const sb = await node.podSandbox(p).catch(() => undefined);
          return sb && sb.id !== sandbox && p.status?.phase === "Running" &&
              node.networkStatus(p).some((s) => s.interface === "net2")
            ? p
            : undefined;
        },
        120_000,
        1000,
      );
      assert.deepEqual(await kernelNames(node, pod), ["eth0", "net1", "net2"]);
      const leaks = await poll(
        "the dead sandbox's traces gone",
        async () => {
          const r = await node.leaks([sandbox]);
          return Object.values(r).every((v) => v.length === 0) ? r : undefined;
        },
        60_000,
        1000,
      ).catch(() => node.leaks([sandbox]));
      assert.deepEqual(leaks, { interfaces: [], leases: [], cache: [], files: [] });
      const after = await leases(node, "net-b");
      assert.equal(after.length, 1, `one net-b lease: ${after}`);
      // The old lease (named by the dead sandbox) is gone; the new sandbox holds its own.
      const holder = (await Deno.readTextFile(`${node.layout.ipamDir}/net-b/${after[0]}`)).split(
        /\r?\n/,
      )[0];
      assert.notEqual(holder, sandbox, `${before} → ${after}`);
    } finally {
      await node.stop();
      for (const b of [brA, brB]) {
        await new Deno.Command("ip", { args: ["link", "del", b], stderr: "null" }).output();
      }
    }
  },
);
