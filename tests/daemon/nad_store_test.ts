/**
 * The daemon's NAD store (lib/daemon/nad_store.ts) holds what requests read, as a mirror file
 * does: not the API object (`raw`, `managedFields`, the `last-applied-configuration` copy).
 */

import assert from "node:assert/strict";
import { NadStore } from "../../lib/daemon/nad_store.ts";
import { parseNetworkAttachmentDefinition } from "../../lib/k8s/types.ts";
import type { NadSource } from "../../lib/multinet/nad/source.ts";

const CONFIG = JSON.stringify({ cniVersion: "1.0.0", type: "bridge", bridge: "br1" });

/** A NAD as `kubectl apply` leaves it in the API. */
function applied(name: string, resourceVersion: string) {
  const object = {
    apiVersion: "k8s.cni.cncf.io/v1",
    kind: "NetworkAttachmentDefinition",
    metadata: {
      name,
      namespace: "tenant-a",
      uid: `uid-${name}`,
      resourceVersion,
      generation: 1,
      creationTimestamp: "2026-11-25T03:00:00Z",
      annotations: {
        "k8s.v1.cni.cncf.io/resourceName": "example.com/sriov",
        "kubectl.kubernetes.io/last-applied-configuration": "{...the whole object...}",
      },
      managedFields: [{ manager: "kubectl", operation: "Update", fieldsV1: { "f:spec": {} } }],
    },
    spec: { config: CONFIG },
  };
  return parseNetworkAttachmentDefinition(object);
}

const noApi: NadSource = { get: () => Promise.reject(new Error("no API here")) };

Deno.test("NadStore: a listed or watched NAD is held as requests read it, without the API object", async () => {
  const store = new NadStore();
  const told: string[] = [];
  store.onChange((ns, name) => told.push(`${ns}/${name}`));
  await store.replace([applied("a", "1")], "10");
  await store.apply({ type: "ADDED", object: applied("b", "2"), resourceVersion: "2" });
  assert.equal(store.size, 2);
  assert.deepEqual(told, ["tenant-a/a", "tenant-a/b"]);
  const source = store.source(noApi);
  for (const [name, rv] of [["a", "1"], ["b", "2"]]) {
    assert.deepEqual(await source.get("tenant-a", name), {
      metadata: {
        name,
        namespace: "tenant-a",
        uid: `uid-${name}`,
        resourceVersion: rv,
        annotations: { "k8s.v1.cni.cncf.io/resourceName": "example.com/sriov" },
      },
      spec: { config: CONFIG },
    });
  }
  // Unchanged resourceVersion on a re-list: nothing told; a deletion is gone from memory.
  await store.replace([applied("a", "1"), applied("b", "2")], "11");
  assert.equal(told.length, 2);
  await store.apply({ type: "DELETED", object: applied("a", "1"), resourceVersion: "12" });
  await assert.rejects(source.get("tenant-a", "a"), /no API here/);
});
