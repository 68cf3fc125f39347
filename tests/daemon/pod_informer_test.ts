/**
 * The daemon's node-scoped pod informer (issue 12) against the HTTPS API stand-in: list and
 * watch with `fieldSelector=spec.nodeName=…`, pods of other nodes never held, a pod binding to
 * the node (ADDED) or being deleted (DELETED), re-list after 410, the store as a pod source
 * (memory first; the API for a pod not held yet or held with another UID), change listeners.
 */

import assert from "node:assert/strict";
import { KubeClient, loadKubeconfig } from "../../lib/k8s/mod.ts";
import { apiPodSource } from "../../lib/multinet/nad/api_sources.ts";
import { type PodChange, PodStore, startPodInformer } from "../../lib/daemon/pod_informer.ts";
import { nullLogger } from "../../lib/log/mod.ts";
import { startKubeApi } from "../support/kube_api.ts";
import { until } from "../support/wait.ts";

const NODE = "node-a";
const NETS = "k8s.v1.cni.cncf.io/networks";

async function withInformer(
  fn: (
    ctx: {
      api: Awaited<ReturnType<typeof startKubeApi>>;
      kube: KubeClient;
      store: PodStore;
      changes: PodChange[];
    },
  ) => Promise<void>,
) {
  const api = await startKubeApi();
  const stop = new AbortController();
  let kube: KubeClient | undefined;
  let done: Promise<void> | undefined;
  try {
    api.addPod({ namespace: "ns", name: "mine", uid: "u-1", nodeName: NODE });
    api.addPod({ namespace: "ns", name: "other", nodeName: "node-b" });
    api.addPod({ namespace: "ns", name: "pending" });
    await api.writeKubeconfig(`${api.dir}/kubeconfig`);
    kube = new KubeClient({ connection: await loadKubeconfig(`${api.dir}/kubeconfig`) });
    const informer = startPodInformer(kube, NODE, { signal: stop.signal, logger: nullLogger });
    done = informer.done;
    const changes: PodChange[] = [];
    informer.store.onChange((c) => changes.push(c));
    await until(() => api.podWatchCount === 1, "the pod watch");
    await fn({ api, kube, store: informer.store, changes });
  } finally {
    stop.abort();
    kube?.close();
    await done;
    await api.stop();
  }
}

Deno.test("pod informer: lists and watches only this node's pods", async () => {
  await withInformer(async ({ api, store, changes }) => {
    assert.equal(store.synced, true);
    assert.deepEqual(store.pods().map((p) => p.metadata.name), ["mine"]);
    const list = api.requests.find((r) => r.path === "/api/v1/pods" && !r.query.includes("watch"));
    assert.ok(list, "a cluster-wide list");
    assert.equal(new URLSearchParams(list!.query).get("fieldSelector"), `spec.nodeName=${NODE}`);
    const watch = api.requests.find((r) => r.path === "/api/v1/pods" && r.query.includes("watch"));
    assert.equal(new URLSearchParams(watch!.query).get("fieldSelector"), `spec.nodeName=${NODE}`);

    api.patchPod("ns", "mine", { metadata: { annotations: { [NETS]: "bridge-net" } } });
    api.patchPod("ns", "other", { metadata: { annotations: { [NETS]: "x" } } });
    api.patchPod("ns", "pending", { spec: { nodeName: NODE } }); // bound to this node: ADDED
    await until(() => store.size === 2, "the bound pod");
    await until(
      () => store.get("ns", "mine")?.metadata.annotations?.[NETS] === "bridge-net",
      "the annotation change",
    );
    assert.equal(store.get("ns", "other"), undefined);
    api.deletePod("ns", "pending");
    await until(() => store.size === 1, "the deleted pod gone");
    assert.deepEqual(
      changes.map((c) => `${c.name}:${c.pod ? "set" : "gone"}`),
      ["mine:set", "mine:set", "pending:set", "pending:gone"], // the list, then the watch
    );
  });
});

Deno.test("pod informer: a 410 Expired watch re-lists and catches up", async () => {
  await withInformer(async ({ api, store }) => {
    const lists = () =>
      api.requests.filter((r) => r.path === "/api/v1/pods" && !r.query.includes("watch")).length;
    assert.equal(lists(), 1);
    api.endPodWatches({ clean: false }); // the stream breaks …
    api.addPod({ namespace: "ns", name: "late", nodeName: NODE });
    api.compactPodHistory(); // … and its resourceVersion falls out of the history
    await until(() => store.get("ns", "late") !== undefined, "the pod after the re-list", 10_000);
    assert.equal(lists(), 2, "listed again");
  });
});

Deno.test("pod informer: the store answers from memory, the API for pods not held", async () => {
  await withInformer(async ({ api, kube, store }) => {
    const source = store.source(apiPodSource(kube));
    const gets = () => api.requests.filter((r) => r.path.startsWith("/api/v1/namespaces/")).length;
    assert.deepEqual(await source.get("ns", "mine", "u-1"), { uid: "u-1", annotations: {} });
    assert.deepEqual(await source.get("ns", "mine"), { uid: "u-1", annotations: {} });
    assert.equal(gets(), 0, "no GET for a pod held");
    // Held with another UID (recreated under the same name): the API answers.
    const pod = await source.get("ns", "mine", "u-2");
    assert.equal(pod?.uid, "u-1");
    assert.equal(gets(), 1);
    // Not held (another node's, or not seen yet): the API answers.
    assert.equal((await source.get("ns", "other"))?.uid !== undefined, true);
    assert.equal(await source.get("ns", "nope"), undefined);
    assert.equal(gets(), 3);
  });
});

Deno.test("pod store: a re-list tells what changed, appeared and left", async () => {
  const store = new PodStore();
  const seen: string[] = [];
  store.onChange((c) => seen.push(`${c.name}:${c.pod?.metadata.resourceVersion ?? "gone"}`));
  const pod = (name: string, rv: string) => ({
    metadata: { namespace: "ns", name, resourceVersion: rv },
    raw: {},
  });
  assert.equal(store.synced, false);
  await store.replace([pod("a", "1"), pod("b", "1")], "1");
  await store.replace([pod("a", "1"), pod("b", "2"), pod("c", "3")], "3");
  await store.replace([pod("c", "3")], "4");
  assert.equal(store.synced, true);
  assert.deepEqual(seen, ["a:1", "b:1", "b:2", "c:3", "a:gone", "b:gone"]);
});
