/**
 * The policy agent's compact pods (lib/daemon/policy/pods.ts): what the engine reads, nothing
 * else; label maps shared between pods; ports only for this node's pods; an undecodable pod
 * kept as an error; the interning tables bounded.
 */

import assert from "node:assert/strict";
import { KubeError } from "../../../lib/k8s/mod.ts";
import { parsePod } from "../../../lib/policy/mod.ts";
import { Interner, PodTable, policyPodsListWatch } from "../../../lib/daemon/policy/pods.ts";
import { trimPod } from "../../../lib/daemon/policy/watch.ts";

const STATUS = JSON.stringify([
  { name: "cbr0", interface: "eth0", ips: ["10.244.0.1"], default: true },
  { name: "a/net1", interface: "net1", ips: ["10.98.0.10/24"], mac: "0a:58:0a:62:00:0a" },
]);

function apiPod(name: string, nodeName: string, labels: Record<string, unknown>) {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name,
      namespace: "a",
      uid: `uid-${name}`,
      resourceVersion: "42",
      labels,
      annotations: {
        "k8s.v1.cni.cncf.io/network-status": STATUS,
        "kubectl.kubernetes.io/last-applied-configuration": "{}".padEnd(2000, " "),
      },
      managedFields: [{ manager: "kubectl", fieldsV1: { "f:metadata": {} } }],
    },
    spec: {
      nodeName,
      containers: [{
        name: "app",
        image: "x",
        env: [{ name: "A", value: "b" }],
        ports: [{ name: "http", containerPort: 8080 }],
      }],
    },
    status: { phase: "Running", conditions: [{ type: "Ready", status: "True" }] },
  };
}

Deno.test("policyPodsListWatch: the engine's PodInfo, shared labels, ports of local pods only", () => {
  const r = policyPodsListWatch({ nodeName: "n1" });
  assert.equal(r.path, "/api/v1/pods");
  const local = apiPod("l", "n1", { app: "db", tier: "x" });
  const p = r.parse(local);
  assert.equal(r.resourceVersion(p), "42");
  assert.deepEqual(
    { ...p, pod: { ...p.pod, labels: { ...p.pod!.labels } } },
    { namespace: "a", name: "l", resourceVersion: "42", pod: parsePod(trimPod(local)) },
  );
  assert.deepEqual(p.pod!.ports, [{ name: "http", port: 8080, protocol: "TCP" }]);
  assert.deepEqual(p.pod!.attachments![1].ips, ["10.98.0.10"]);

  // Same labels in another key order → the very same frozen map.
  // Another node's pod: what makes it a peer only (no ports, uid, default-network entry).
  const remote = r.parse(apiPod("r", "n2", { tier: "x", app: "db" })).pod!;
  assert.deepEqual(remote.ports, []);
  assert.equal(remote.uid, undefined);
  assert.deepEqual(remote.attachments, [
    { network: "a/net1", ifName: "net1", ips: ["10.98.0.10"], isDefault: false },
  ]);
  assert.equal(remote.labels, p.pod!.labels);
  assert.ok(Object.isFrozen(remote.labels));
  assert.deepEqual(Object.keys(remote), [
    "namespace",
    "name",
    "uid",
    "nodeName",
    "labels",
    "ports",
    "attachments",
    "finished",
  ]);

  // Without a node name every pod keeps its ports.
  assert.equal(policyPodsListWatch().parse(apiPod("r", "n2", {})).pod!.ports.length, 1);
});

Deno.test("policyPodsListWatch: undecodable content is an error entry, no identity a KubeError", () => {
  const r = policyPodsListWatch({ nodeName: "n1" });
  const bad = r.parse(apiPod("b", "n2", { app: 7 }));
  assert.equal(bad.pod, undefined);
  assert.match(bad.error!, /Invalid Pod object/);
  assert.equal(bad.name, "b");
  assert.throws(() => r.parse({ metadata: { name: "p" } }), KubeError);
  assert.throws(() => r.parse("x"), KubeError);
  const unreadable = apiPod("u", "n2", {});
  unreadable.metadata.annotations["k8s.v1.cni.cncf.io/network-status"] = "{";
  const u = r.parse(unreadable).pod!;
  assert.equal(u.attachments, null);
  assert.match(u.statusError!, /network-status/);
  assert.equal(u.uid, "uid-u", "kept: the Warning event about it names it");
});

Deno.test("PodTable: by namespace and name, size kept", () => {
  const r = policyPodsListWatch();
  const t = new PodTable();
  const a = r.parse(apiPod("x", "n1", {})).pod!;
  t.set(a);
  t.set(a);
  t.set({ ...a, name: "y" });
  assert.equal(t.size, 2);
  assert.equal(t.get("a", "x"), a);
  assert.equal(t.delete("a", "x"), true);
  assert.equal(t.delete("a", "x"), false);
  assert.deepEqual([...t.values()].map((p) => p.name), ["y"]);
  assert.equal(t.size, 1);
});

Deno.test("Interner: equal strings and label maps shared, tables bounded", () => {
  const i = new Interner(3);
  const a = i.labels({ x: "1", y: "2" });
  assert.equal(i.labels({ y: "2", x: "1" }), a);
  assert.notEqual(i.labels({ x: "1" }), a);
  assert.equal(i.labels({}), i.labels({}));
  for (let n = 0; n < 50; n++) i.string(`s${n}`);
  for (let n = 0; n < 50; n++) i.labels({ k: `v${n}` });
  assert.ok(i.size <= 6, `bounded: ${i.size}`);
  assert.deepEqual(i.labels({ k: "v1" }), { k: "v1" }, "a value never changes");
});
