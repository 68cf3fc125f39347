import assert from "node:assert/strict";
import { KubeError, parseWatchLine } from "../../../lib/k8s/mod.ts";
import {
  MNP_LIST_WATCH,
  NAMESPACE_LIST_WATCH,
  POD_LIST_WATCH,
  trimPod,
} from "../../../lib/daemon/policy/watch.ts";
import { parsePod } from "../../../lib/policy/types.ts";

Deno.test("policy list/watch resources: paths, identity checked, content kept", () => {
  assert.equal(MNP_LIST_WATCH.path, "/apis/k8s.cni.cncf.io/v1beta1/multi-networkpolicies");
  assert.equal(POD_LIST_WATCH.path, "/api/v1/pods");
  assert.equal(NAMESPACE_LIST_WATCH.path, "/api/v1/namespaces");
  const pod = { metadata: { name: "p", namespace: "a", resourceVersion: "7" }, spec: { x: 1 } };
  assert.deepEqual(POD_LIST_WATCH.parse(pod), { ...pod, spec: {} }, "trimmed (trimPod)");
  assert.equal(POD_LIST_WATCH.resourceVersion(POD_LIST_WATCH.parse(pod)), "7");
  assert.throws(() => POD_LIST_WATCH.parse({ metadata: { name: "p" } }), KubeError);
  assert.throws(() => MNP_LIST_WATCH.parse({ metadata: {} }), KubeError);
  assert.deepEqual(NAMESPACE_LIST_WATCH.parse({ metadata: { name: "a" } }).metadata, { name: "a" });
  const line = parseWatchLine({ type: "MODIFIED", object: pod }, POD_LIST_WATCH);
  assert.equal(line.type, "MODIFIED");
});

Deno.test("trimPod keeps what the policy engine reads, nothing else", () => {
  const status = JSON.stringify([{ name: "a/net1", interface: "net1", ips: ["10.1.0.5"] }]);
  const pod = {
    kind: "Pod",
    apiVersion: "v1",
    metadata: {
      name: "p",
      namespace: "a",
      uid: "u1",
      resourceVersion: "7",
      labels: { app: "db" },
      deletionTimestamp: "2026-11-25T00:00:00Z",
      annotations: {
        "k8s.v1.cni.cncf.io/network-status": status,
        "kubectl.kubernetes.io/last-applied-configuration": "x".repeat(4096),
      },
      managedFields: [{ manager: "kubectl" }],
      ownerReferences: [{ kind: "ReplicaSet", name: "p-1" }],
    },
    spec: {
      nodeName: "n1",
      containers: [
        {
          name: "c",
          image: "i",
          env: [{ name: "A", value: "1" }],
          ports: [{ name: "http", containerPort: 80 }],
        },
        { name: "d", image: "j" },
      ],
      volumes: [{ name: "v", emptyDir: {} }],
    },
    status: {
      phase: "Running",
      conditions: [{ type: "Ready", status: "True" }],
      podIP: "10.0.0.1",
    },
  };
  const trimmed = POD_LIST_WATCH.parse(pod);
  assert.deepEqual(trimmed, {
    metadata: {
      name: "p",
      namespace: "a",
      uid: "u1",
      resourceVersion: "7",
      labels: { app: "db" },
      deletionTimestamp: "2026-11-25T00:00:00Z",
      annotations: { "k8s.v1.cni.cncf.io/network-status": status },
    },
    spec: { nodeName: "n1", containers: [{ ports: [{ name: "http", containerPort: 80 }] }, {}] },
    status: { phase: "Running" },
  });
  assert.ok(JSON.stringify(trimmed).length < JSON.stringify(pod).length / 10);
  // The engine sees the same pod either way.
  assert.deepEqual(parsePod(trimmed), parsePod(pod));
  assert.deepEqual(
    parsePod(trimPod({ metadata: { name: "q", namespace: "b" } })),
    parsePod({
      metadata: { name: "q", namespace: "b" },
    }),
  );
  // Invalid shapes stay invalid for the engine (it refuses them, not this trim).
  const bad = { metadata: { name: "r", namespace: "b" }, spec: { containers: "nope" } };
  assert.throws(() => parsePod(POD_LIST_WATCH.parse(bad)));
  assert.throws(() => parsePod(bad));
});
