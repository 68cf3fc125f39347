/**
 * The node harness itself: a node starts, one pod runs through Manifold, teardown leaves
 * nothing of the node's processes.
 */
import assert from "node:assert/strict";
import { NETCHECK_IMAGE, nodeTest, startNodeCluster } from "../support/node_cluster.ts";

nodeTest("node harness: a node starts and runs one pod through Manifold (per call)", async () => {
  const node = await startNodeCluster();
  try {
    console.log(`node started in ${node.startMs} ms`);
    await node.createNamespace("smoke");
    await node.apply({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "one", namespace: "smoke", labels: { app: "one" } },
      spec: {
        containers: [{ name: "c", image: NETCHECK_IMAGE.ref, imagePullPolicy: "Never" }],
        terminationGracePeriodSeconds: 1,
      },
    });
    const [pod] = await node.waitPodsRunning("smoke", "app=one", 1);
    const ns = await node.podNetns(pod);
    const eth0 = ns.interfaces.find((i) => i.name === "eth0");
    assert.ok(eth0, `eth0 in ${JSON.stringify(ns.interfaces.map((i) => i.name))}`);
    const status = node.networkStatus(pod);
    assert.equal(status[0]?.interface, "eth0");
    assert.ok(
      eth0.addresses.includes(status[0].ips[0]),
      `${JSON.stringify(status)} vs ${JSON.stringify(eth0.addresses)}`,
    );
  } finally {
    await node.stop();
  }
});
