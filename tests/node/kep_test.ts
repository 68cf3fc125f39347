/**
 * Issue 27 §2, per call and daemon: a KEP-3698 pod (`multinetwork.manifold.dev/networks`) on a
 * real node. `manifold controller` runs as a process (creates the "default" PodNetwork, makes
 * the PodNetworks and the PodNetworkAttachment Ready); the pod lists "default" on eth0, a
 * PodNetwork on net1 and a PodNetworkAttachment on data2. It reaches Running, its netns holds
 * exactly eth0, net1 and data2 with the addresses `multinetwork.manifold.dev/networks-status`
 * lists, in list order, the default gateway on eth0.
 */
import assert from "node:assert/strict";
import {
  NETCHECK_IMAGE,
  type NodeCluster,
  type NodeMode,
  nodeTest,
  poll,
  startNodeCluster,
} from "../support/node_cluster.ts";
import { bridgeNad } from "../support/node/workloads.ts";
import { Proc } from "../support/node/procs.ts";

const NS = "kep";
const GV = "multinetwork.manifold.dev/v1alpha1";
const REPO = new URL("../../", import.meta.url).pathname.replace(/\/$/, "");

function podNetwork(name: string, nad: string) {
  return {
    apiVersion: GV,
    kind: "PodNetwork",
    metadata: { name },
    spec: {
      provider: "manifold.dev/cni",
      parametersRefs: [{
        group: "k8s.cni.cncf.io",
        kind: "network-attachment-definitions",
        name: nad,
        namespace: NS,
      }],
    },
  };
}

async function ready(node: NodeCluster, path: string): Promise<boolean> {
  const o = await node.admin.request("GET", path);
  // deno-lint-ignore no-explicit-any
  return o.status?.conditions?.some((c: any) => c.type === "Ready" && c.status === "True");
}

function scenario(mode: NodeMode) {
  nodeTest(
    `node (${mode}): a KEP-3698 PodNetwork pod is Running on its networks`,
    async () => {
      const node = await startNodeCluster({ mode });
      const tag = crypto.randomUUID().slice(0, 4);
      const brA = `mka${tag}`, brB = `mkb${tag}`;
      // PodNetworks are cluster-scoped: unique names per run (nodes may share nothing, but be safe).
      const pnA = `dp-${tag}`, pnB = `fast-${tag}`;
      let controller: Proc | undefined;
      try {
        controller = new Proc("manifold-controller", `${REPO}/scripts/manifold`, [
          "controller",
          "--kubeconfig",
          `${node.layout.dir}/admin.kubeconfig`,
        ], node.logPath("manifold-controller"));
        await node.createNamespace(NS);
        await node.createNad(NS, "dataplane1", bridgeNad(node, "dataplane1", brA, "10.38.1.0/24"));
        await node.createNad(NS, "fast-net", bridgeNad(node, "fast-net", brB, "10.38.2.0/24"));
        await node.apply(podNetwork(pnA, "dataplane1"));
        await node.apply(podNetwork(pnB, "fast-net"));
        await node.apply({
          apiVersion: GV,
          kind: "PodNetworkAttachment",
          metadata: { name: "my-fast", namespace: NS },
          spec: { podNetworkName: pnB },
        });
        await poll(
          "PodNetworks and the attachment Ready",
          async () =>
            await ready(node, `/apis/${GV}/podnetworks/default`) &&
            await ready(node, `/apis/${GV}/podnetworks/${pnA}`) &&
            await ready(node, `/apis/${GV}/podnetworks/${pnB}`) &&
            await ready(node, `/apis/${GV}/namespaces/${NS}/podnetworkattachments/my-fast`),
          60_000,
        );

        await node.apply({
          apiVersion: "v1",
          kind: "Pod",
          metadata: {
            name: "pod1",
            namespace: NS,
            labels: { app: "kep" },
            annotations: {
              "multinetwork.manifold.dev/networks": JSON.stringify([
                { name: "default", interfaceName: "eth0", isDefaultGW: true },
                { name: pnA, interfaceName: "net1" },
                { attachmentName: "my-fast", interfaceName: "data2" },
              ]),
            },
          },
          spec: {
            terminationGracePeriodSeconds: 1,
            containers: [{ name: "c", image: NETCHECK_IMAGE.ref, imagePullPolicy: "Never" }],
          },
        });
        const [pod] = await node.waitPodsRunning(NS, "app=kep", 1);
        const status: { name: string; interfaceName: string; ip: string; isDefaultGW?: boolean }[] =
          JSON.parse(
            pod.metadata.annotations?.["multinetwork.manifold.dev/networks-status"] ?? "[]",
          );
        assert.deepEqual(
          status.map((s) => [s.name, s.interfaceName, s.isDefaultGW ?? false]),
          [["default", "eth0", true], [pnA, "net1", false], [pnB, "data2", false]],
        );
        const snap = await node.podNetns(pod);
        assert.deepEqual(
          snap.interfaces.map((i) => i.name).filter((n) => n !== "lo").sort(),
          ["data2", "eth0", "net1"],
        );
        for (const s of status) {
          const link = snap.interfaces.find((i) => i.name === s.interfaceName)!;
          assert.ok(
            link.addresses.some((a) => a.split("/")[0] === s.ip),
            `${s.interfaceName}: ${s.ip} in ${link.addresses}`,
          );
        }
        assert.ok(status[1].ip.startsWith("10.38.1."), status[1].ip);
        assert.ok(status[2].ip.startsWith("10.38.2."), status[2].ip);
        const eth0 = snap.interfaces.find((i) => i.name === "eth0")!.index;
        const def = snap.routes.filter((r) => r.dst === undefined || r.dst === "0.0.0.0/0");
        assert.ok(def.length > 0 && def.every((r) => r.oif === eth0), JSON.stringify(def));
      } finally {
        await controller?.stop().catch(() => {});
        // Cluster-scoped objects go with the API server (node.stop); the bridges are ours.
        await node.stop();
        for (const b of [brA, brB]) {
          await new Deno.Command("ip", { args: ["link", "del", b], stderr: "null" }).output();
        }
      }
    },
  );
}

scenario("per-call");
scenario("daemon");
