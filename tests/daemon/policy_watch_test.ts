import assert from "node:assert/strict";
import { KubeError, parseWatchLine } from "../../lib/k8s/mod.ts";
import {
  MNP_LIST_WATCH,
  NAMESPACE_LIST_WATCH,
  POD_LIST_WATCH,
} from "../../lib/daemon/policy_watch.ts";

Deno.test("policy list/watch resources: paths, identity checked, content kept", () => {
  assert.equal(MNP_LIST_WATCH.path, "/apis/k8s.cni.cncf.io/v1beta1/multi-networkpolicies");
  assert.equal(POD_LIST_WATCH.path, "/api/v1/pods");
  assert.equal(NAMESPACE_LIST_WATCH.path, "/api/v1/namespaces");
  const pod = { metadata: { name: "p", namespace: "a", resourceVersion: "7" }, spec: { x: 1 } };
  assert.deepEqual(POD_LIST_WATCH.parse(pod), pod);
  assert.equal(POD_LIST_WATCH.resourceVersion(POD_LIST_WATCH.parse(pod)), "7");
  assert.throws(() => POD_LIST_WATCH.parse({ metadata: { name: "p" } }), KubeError);
  assert.throws(() => MNP_LIST_WATCH.parse({ metadata: {} }), KubeError);
  assert.deepEqual(NAMESPACE_LIST_WATCH.parse({ metadata: { name: "a" } }).metadata, { name: "a" });
  const line = parseWatchLine({ type: "MODIFIED", object: pod }, POD_LIST_WATCH);
  assert.equal(line.type, "MODIFIED");
});
