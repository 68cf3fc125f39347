/**
 * Issue 27 §2, MultiNetworkPolicy on a real node (daemon mode, `"multiNetworkPolicy": true`):
 * real TCP between real pods over a secondary network (netcheck `connect` run in the client
 * pod's container with `ctr task exec`, to netcheck `echo-server` in the server pod), allowed
 * and denied as the policy says, changed by a pod label edit, and in force on a recreated pod.
 */
import assert from "node:assert/strict";
import {
  NETCHECK_IMAGE,
  type NodeCluster,
  nodeTest,
  poll,
  startNodeCluster,
} from "../support/node_cluster.ts";
import { bridgeNad } from "../support/node/workloads.ts";
import type { KubeObject } from "../support/kube_rest.ts";

const NS = "mnp";
const PORT = 7000;

function pod(name: string, app: string): KubeObject {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name,
      namespace: NS,
      labels: { app, role: "mnp" },
      annotations: { "k8s.v1.cni.cncf.io/networks": "net-a" },
    },
    spec: {
      terminationGracePeriodSeconds: 1,
      containers: [{
        name: "netcheck",
        image: NETCHECK_IMAGE.ref,
        imagePullPolicy: "Never",
        args: ["echo-server", String(PORT)],
      }],
    },
  };
}

/** `netcheck connect host PORT` in the pod's app container; true when the echo came back. */
async function connects(node: NodeCluster, from: KubeObject, host: string): Promise<boolean> {
  const ids = (await node.ctr(
    "containers",
    "ls",
    "-q",
    `labels."io.kubernetes.pod.uid"==${from.metadata.uid},labels."io.cri-containerd.kind"==container`,
  )).split("\n").filter(Boolean);
  assert.equal(ids.length, 1, `one container of ${from.metadata.name}: ${ids}`);
  const out = await new Deno.Command("ctr", {
    args: [
      "--address",
      node.layout.containerdSocket,
      "-n",
      "k8s.io",
      "task",
      "exec",
      "--exec-id",
      `c${crypto.randomUUID().slice(0, 8)}`,
      ids[0],
      "/netcheck",
      "connect",
      host,
      String(PORT),
    ],
    stdin: "null",
  }).output();
  return out.success && new TextDecoder().decode(out.stdout).trim() === "ping";
}

/** Polls until `from` → `host` connects (`want` true) or is refused/dropped (`want` false). */
function expectReach(
  node: NodeCluster,
  from: KubeObject,
  host: string,
  want: boolean,
): Promise<boolean> {
  return poll(
    `${from.metadata.name} → ${host}:${PORT} ${want ? "allowed" : "denied"}`,
    async () => (await connects(node, from, host)) === want,
    60_000,
    500,
  );
}

function net1Ip(node: NodeCluster, p: KubeObject): string {
  const s = node.networkStatus(p).find((x) => x.interface === "net1");
  assert.ok(s?.ips?.[0], `${p.metadata.name} net1 in network-status`);
  return s.ips[0].replace(/\/\d+$/, "");
}

function relabel(node: NodeCluster, p: KubeObject, app: string): Promise<KubeObject> {
  return node.admin.patch(
    { apiVersion: "v1", kind: "Pod", namespace: NS, name: p.metadata.name },
    { metadata: { labels: { app } } },
  );
}

nodeTest(
  "node (daemon): MultiNetworkPolicy allows and denies real TCP on a secondary network, label edit",
  async () => {
    const node = await startNodeCluster({
      mode: "daemon",
      pluginConf: { multiNetworkPolicy: true },
    });
    const br = `mmp${crypto.randomUUID().slice(0, 4)}`;
    try {
      console.log(`node started in ${node.startMs} ms`);
      await node.createNamespace(NS);
      await node.createNad(NS, "net-a", bridgeNad(node, "net-a", br, "10.33.1.0/24"));
      for (const [n, app] of [["db", "db"], ["web", "web"], ["other", "other"]]) {
        await node.apply(pod(n, app));
      }
      const pods = await node.waitPodsRunning(NS, "role=mnp", 3);
      const by = (n: string) => pods.find((p) => p.metadata.name === n)!;
      const db = net1Ip(node, by("db"));

      // No policy yet: both clients reach db over net1.
      await expectReach(node, by("web"), db, true);
      await expectReach(node, by("other"), db, true);

      await node.apply({
        apiVersion: "k8s.cni.cncf.io/v1beta1",
        kind: "MultiNetworkPolicy",
        metadata: {
          name: "db",
          namespace: NS,
          annotations: { "k8s.v1.cni.cncf.io/policy-for": "net-a" },
        },
        spec: {
          podSelector: { matchLabels: { app: "db" } },
          policyTypes: ["Ingress"],
          ingress: [{
            from: [{ podSelector: { matchLabels: { app: "web" } } }],
            ports: [{ protocol: "TCP", port: PORT }],
          }],
        },
      });
      // web allowed, other denied.
      await expectReach(node, by("other"), db, false);
      assert.ok(await connects(node, by("web"), db), "web → db allowed by the policy");
      // The policy isolates db only: db still reaches other (no egress policy, other unselected).
      assert.ok(await connects(node, by("db"), net1Ip(node, by("other"))), "db → other");

      // Label edits move the peers: other becomes web (allowed), web becomes other (denied).
      await relabel(node, by("other"), "web");
      await expectReach(node, by("other"), db, true);
      await relabel(node, by("web"), "other");
      await expectReach(node, by("web"), db, false);
      assert.ok(await connects(node, by("other"), db), "relabelled other still allowed");

      // db recreated (new sandbox, new address): policed from its start, the peers as labelled.
      await node.admin.request("DELETE", `/api/v1/namespaces/${NS}/pods/db`);
      await poll("db gone", async () => (await node.listPods(NS, "app=db")).length === 0, 60_000);
      await node.apply(pod("db", "db"));
      const [db2] = await node.waitPodsRunning(NS, "app=db", 1);
      const db2Ip = net1Ip(node, db2);
      await expectReach(node, by("other"), db2Ip, true);
      assert.equal(await connects(node, by("web"), db2Ip), false, "web (now app=other) → new db");
    } finally {
      await node.stop();
      await new Deno.Command("ip", { args: ["link", "del", br], stderr: "null" }).output();
    }
  },
);

nodeTest(
  "node (daemon): MultiNetworkPolicy on a network hot-plugged into running pods",
  async () => {
    const node = await startNodeCluster({
      mode: "daemon",
      pluginConf: { multiNetworkPolicy: true, hotPlug: true },
    });
    const tag = crypto.randomUUID().slice(0, 4);
    const brA = `mpa${tag}`, brB = `mpb${tag}`;
    try {
      await node.createNamespace(NS);
      await node.createNad(NS, "net-a", bridgeNad(node, "net-a", brA, "10.33.1.0/24"));
      await node.createNad(NS, "net-b", bridgeNad(node, "net-b", brB, "10.33.2.0/24"));
      for (const [n, app] of [["db", "db"], ["other", "other"]]) await node.apply(pod(n, app));
      await node.waitPodsRunning(NS, "role=mnp", 2);
      // The policy names net-b, which no pod has yet.
      await node.apply({
        apiVersion: "k8s.cni.cncf.io/v1beta1",
        kind: "MultiNetworkPolicy",
        metadata: {
          name: "db",
          namespace: NS,
          annotations: { "k8s.v1.cni.cncf.io/policy-for": "net-b" },
        },
        spec: {
          podSelector: { matchLabels: { app: "db" } },
          policyTypes: ["Ingress"],
          ingress: [{
            from: [{ podSelector: { matchLabels: { app: "web" } } }],
            ports: [{ protocol: "TCP", port: PORT }],
          }],
        },
      });
      for (const n of ["db", "other"]) {
        await node.admin.patch(
          { apiVersion: "v1", kind: "Pod", namespace: NS, name: n },
          { metadata: { annotations: { "k8s.v1.cni.cncf.io/networks": "net-a,net-b" } } },
        );
      }
      const pods = await poll(
        "net-b hot-plugged into both pods",
        async () => {
          const ps = await node.listPods(NS, "role=mnp");
          return ps.every((p) => node.networkStatus(p).some((s) => s.interface === "net2"))
            ? ps
            : undefined;
        },
        60_000,
        500,
      );
      const by = (n: string) => pods.find((p) => p.metadata.name === n)!;
      const dbB = node.networkStatus(by("db")).find((s) => s.interface === "net2").ips[0]
        .replace(/\/\d+$/, "");
      // net-a is not policed; on the hot-plugged net-b, other is not a peer.
      assert.ok(await connects(node, by("other"), net1Ip(node, by("db"))), "net-a open");
      await expectReach(node, by("other"), dbB, false);
      await node.admin.patch(
        { apiVersion: "v1", kind: "Pod", namespace: NS, name: "other" },
        { metadata: { labels: { app: "web" } } },
      );
      await expectReach(node, by("other"), dbB, true);
    } finally {
      await node.stop();
      for (const b of [brA, brB]) {
        await new Deno.Command("ip", { args: ["link", "del", b], stderr: "null" }).output();
      }
    }
  },
);
