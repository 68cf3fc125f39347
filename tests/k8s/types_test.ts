import assert from "node:assert/strict";
import { kubeErrorCode } from "../../lib/multinet/api_errors.ts";
import {
  KubeError,
  parseList,
  parseNetworkAttachmentDefinition,
  parsePod,
} from "../../lib/k8s/mod.ts";

// Shaped like the captured kube-apiserver answer 01-get-pod.http (trimmed).
const POD = {
  kind: "Pod",
  apiVersion: "v1",
  metadata: {
    name: "api-sample",
    namespace: "default",
    uid: "a8e03aef-a89e-4908-a904-78d095570e2a",
    resourceVersion: "994",
    creationTimestamp: "2026-11-22T04:43:13Z",
    annotations: {
      "k8s.v1.cni.cncf.io/networks": '[{"name":"macvlan-conf","interface":"net5"}]',
    },
    managedFields: [{ manager: "kubectl-client-side-apply" }],
  },
  spec: { containers: [{ name: "c", image: "example.invalid/none" }] },
  status: { phase: "Pending", qosClass: "BestEffort" },
};

function code(fn: () => unknown): number {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof KubeError);
    return kubeErrorCode(err);
  }
  throw new Error("expected a KubeError");
}

Deno.test("parsePod keeps the raw object and validates the metadata it reads", () => {
  const pod = parsePod(POD);
  assert.deepEqual(pod.metadata, {
    name: "api-sample",
    namespace: "default",
    uid: "a8e03aef-a89e-4908-a904-78d095570e2a",
    resourceVersion: "994",
    annotations: { "k8s.v1.cni.cncf.io/networks": '[{"name":"macvlan-conf","interface":"net5"}]' },
  });
  assert.equal(pod.raw, POD);
  assert.deepEqual(parsePod({ metadata: { name: "p", namespace: "n" } }).metadata, {
    name: "p",
    namespace: "n",
  });
});

Deno.test("parsePod rejects bad shapes with code 6", () => {
  for (
    const bad of [
      null,
      "pod",
      {},
      { metadata: { name: "p" } },
      { metadata: { name: "", namespace: "n" } },
      { metadata: { name: "p", namespace: "n", annotations: { a: 1 } } },
      { metadata: { name: "p", namespace: "n", annotations: ["a"] } },
    ]
  ) {
    assert.equal(code(() => parsePod(bad)), 6, JSON.stringify(bad));
  }
});

Deno.test("parseNetworkAttachmentDefinition reads spec.config and tolerates a missing spec", () => {
  const config = '{"cniVersion":"1.0.0","name":"macvlan-conf","type":"macvlan"}';
  const nad = parseNetworkAttachmentDefinition({
    apiVersion: "k8s.cni.cncf.io/v1",
    kind: "NetworkAttachmentDefinition",
    metadata: { name: "macvlan-conf", namespace: "default", resourceVersion: "203" },
    spec: { config, extra: true },
  });
  assert.equal(nad.spec.config, config);
  assert.equal(nad.metadata.resourceVersion, "203");
  assert.deepEqual(
    parseNetworkAttachmentDefinition({ metadata: { name: "a", namespace: "b" } }).spec,
    {},
  );
  assert.equal(
    code(() =>
      parseNetworkAttachmentDefinition({
        metadata: { name: "a", namespace: "b" },
        spec: { config: { type: "x" } },
      })
    ),
    6,
  );
});

Deno.test("parseList parses each item and names the bad one", () => {
  assert.deepEqual(parseList({ items: null }, parsePod), []);
  assert.equal(parseList({ items: [POD, POD] }, parsePod).length, 2);
  try {
    parseList({ items: [POD, { metadata: {} }] }, parsePod);
    assert.fail("expected an error");
  } catch (err) {
    assert.ok(err instanceof KubeError);
    assert.equal(kubeErrorCode(err), 6);
    assert.match(err.msg, /items\[1\]/);
  }
  assert.equal(code(() => parseList({ items: "x" }, parsePod)), 6);
});
