import assert from "node:assert/strict";
import { CniError } from "../../../lib/cni/errors.ts";
import {
  attachmentContext,
  isStaticPod,
  planPodOf,
  podRefFromArgs,
  runtimePodAnnotations,
} from "../../../lib/multinet/plan/pod.ts";

Deno.test("pod identity from CNI_ARGS in any order, as containerd sends it", () => {
  const pod = podRefFromArgs([
    ["K8S_POD_UID", "u1"],
    ["IgnoreUnknown", "1"],
    ["K8S_POD_NAME", "web"],
    ["K8S_POD_INFRA_CONTAINER_ID", "infra"],
    ["K8S_POD_NAMESPACE", "ns"],
  ], "cid");
  assert.deepEqual(pod, { namespace: "ns", name: "web", uid: "u1", infraContainerId: "infra" });
});

Deno.test("no pod args → undefined (non-Kubernetes runtime); half of them → code 4", () => {
  assert.equal(podRefFromArgs([["IgnoreUnknown", "1"]], "cid"), undefined);
  assert.throws(() => podRefFromArgs([["K8S_POD_NAME", "web"]], "cid"), (e) => {
    assert.ok(e instanceof CniError);
    assert.equal(e.code, 4);
    return true;
  });
  assert.equal(
    podRefFromArgs([["K8S_POD_NAMESPACE", "n"], ["K8S_POD_NAME", "p"]], "cid")!.infraContainerId,
    "cid",
  );
});

Deno.test("runtime pod annotations only with the declared capability; wrong shapes are code 6", () => {
  const cap = { "io.kubernetes.cri.pod-annotations": true };
  const rc = { "io.kubernetes.cri.pod-annotations": { a: "1" } };
  assert.deepEqual(runtimePodAnnotations(cap, rc), { a: "1" });
  assert.equal(runtimePodAnnotations({}, rc), undefined);
  assert.equal(runtimePodAnnotations(cap, {}), undefined);
  for (const bad of ["x", [1], { a: 1 }]) {
    assert.throws(
      () => runtimePodAnnotations(cap, { "io.kubernetes.cri.pod-annotations": bad }),
      (e) => e instanceof CniError && e.code === 6,
    );
  }
});

Deno.test("static pods are recognised; context prefix", () => {
  assert.equal(isStaticPod({ "kubernetes.io/config.source": "file" }), true);
  assert.equal(isStaticPod({ "kubernetes.io/config.mirror": "abc" }), true);
  assert.equal(isStaticPod({ "kubernetes.io/config.source": "api" }), false);
  assert.equal(isStaticPod({}), false);
  assert.equal(
    attachmentContext({ namespace: "n", name: "p", uid: "", infraContainerId: "c" }, "n/net"),
    "[n/p:n/net]",
  );
  assert.equal(attachmentContext(undefined, "cbr0"), "[-:cbr0]");
});

Deno.test("planPodOf: the runtime's pod, or empty fields with the container ID as infra ID", () => {
  const pod = { namespace: "n", name: "p", uid: "u", infraContainerId: "infra" };
  assert.deepEqual(planPodOf(pod, "c1"), pod);
  assert.deepEqual(planPodOf(undefined, "c1"), {
    namespace: "",
    name: "",
    uid: "",
    infraContainerId: "c1",
  });
});
