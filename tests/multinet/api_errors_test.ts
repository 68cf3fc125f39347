/** The one mapping of lib/k8s failures to CNI codes (lib/multinet/api_errors.ts). */
import assert from "node:assert/strict";
import { CniError } from "../../lib/cni/errors.ts";
import { KubeError } from "../../lib/k8s/mod.ts";
import { cniErrorFromKube, kubeErrorCode, withCniErrors } from "../../lib/multinet/api_errors.ts";

const call = (status: number, transient: boolean, reason = "") =>
  new KubeError("request", `Kubernetes API GET /x failed with ${status}`, {
    status,
    reason,
    transient,
    details: "from the Status",
  });

Deno.test("kubeErrorCode: transient calls 11, other calls 7, decoding 6, config 7, credentials 5", () => {
  assert.equal(kubeErrorCode(call(503, true)), 11);
  assert.equal(kubeErrorCode(call(429, true)), 11);
  assert.equal(kubeErrorCode(call(401, true)), 11);
  assert.equal(kubeErrorCode(call(0, true, "Timeout")), 11);
  assert.equal(kubeErrorCode(call(0, false, "TlsVerification")), 7);
  assert.equal(kubeErrorCode(call(404, false, "NotFound")), 7);
  assert.equal(kubeErrorCode(call(403, false, "Forbidden")), 7);
  assert.equal(kubeErrorCode(new KubeError("decoding", "Invalid Pod object")), 6);
  assert.equal(kubeErrorCode(new KubeError("config", "Kubeconfig x has no server")), 7);
  assert.equal(kubeErrorCode(new KubeError("credentials", "Cannot read token file t")), 5);
});

Deno.test("cniErrorFromKube keeps msg and details; other values pass through", async () => {
  const e = cniErrorFromKube(call(500, true));
  assert.ok(e instanceof CniError);
  assert.equal(e.code, 11);
  assert.equal(e.msg, "Kubernetes API GET /x failed with 500");
  assert.equal(e.details, "from the Status");
  const other = new Error("not kube");
  assert.equal(cniErrorFromKube(other), other);
  await assert.rejects(
    withCniErrors(() => Promise.reject(new KubeError("decoding", "bad"))),
    (err) => err instanceof CniError && err.code === 6 && err.msg === "bad",
  );
  assert.equal(await withCniErrors(() => Promise.resolve(3)), 3);
});
