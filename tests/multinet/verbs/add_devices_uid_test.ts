/**
 * DRA device planning (lib/multinet/verbs/add_devices.ts `planDevices`) reads the pod with the
 * runtime's UID: in `manifold daemon` the pod source is the node's informer, which may still
 * hold the previous pod of the same name (a StatefulSet pod recreated on this node before the
 * watch caught up); its claims are not the new pod's. Real PodStore; the API and DRA are fakes.
 */

import assert from "node:assert/strict";
import { PodStore } from "../../../lib/daemon/pod_informer.ts";
import type { Pod } from "../../../lib/k8s/mod.ts";
import { nullLogger } from "../../../lib/log/mod.ts";
import { deviceContext, planDevices } from "../../../lib/multinet/verbs/add_devices.ts";
import type { ManifoldDeps, PodInfo } from "../../../lib/multinet/deps.ts";
import type { AttachmentPlan } from "../../../lib/multinet/types.ts";

function raw(uid: string, claim: string): Record<string, unknown> {
  return {
    metadata: { namespace: "ns", name: "web-0", uid, resourceVersion: uid },
    spec: { nodeName: "n1", resourceClaims: [{ name: "nic", resourceClaimName: claim }] },
  };
}

Deno.test("planDevices: a pod recreated under the same name is read with its own UID", async () => {
  const store = new PodStore();
  const old = raw("uid-old", "web-0-nic-old");
  await store.replace([{ metadata: old.metadata as Pod["metadata"], raw: old }], "1");
  const asked: (string | undefined)[] = [];
  const fresh = raw("uid-new", "web-0-nic-new");
  const api = {
    get: (_ns: string, _name: string, uid?: string): Promise<PodInfo | undefined> => {
      asked.push(uid);
      return Promise.resolve({ uid: "uid-new", annotations: {}, withResourceClaims: fresh });
    },
  };
  const claimsRead: string[] = [];
  const deps = {
    pods: store.source(api),
    dra: {
      claim: (_ns: string, name: string) => {
        claimsRead.push(name);
        return Promise.resolve(undefined); // not found: planning fails, after the read
      },
      slices: () => Promise.resolve([]),
    },
  } as unknown as ManifoldDeps;
  const pod = { namespace: "ns", name: "web-0", uid: "uid-new", infraContainerId: "c1" };
  const ctx = deviceContext(deps, pod, pod, nullLogger);
  const plan = [{
    ifName: "net1",
    delegate: { statusName: "ns/vf-net", resourceName: "example.com/vf" },
  }] as unknown as AttachmentPlan[];
  await assert.rejects(planDevices(ctx, plan, undefined), /web-0-nic-new/);
  assert.deepEqual(claimsRead, ["web-0-nic-new"], "the new pod's claim, not the old pod's");
  assert.deepEqual(asked, ["uid-new"]);
});
