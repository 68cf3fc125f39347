/**
 * The stand-in's pod, Namespace and MultiNetworkPolicy list + watch (kube_api_feeds.ts), as
 * kube-apiserver serves them: list shapes, selectors, watch from a resourceVersion, 410 after
 * compaction, and lib/k8s's list/watch loop re-listing through it.
 */

import assert from "node:assert/strict";
import { KubeClient, listWatch, loadKubeconfig, type WatchChange } from "../../lib/k8s/mod.ts";
import { type KubeObject, POD_LIST_WATCH } from "../../lib/daemon/policy/watch.ts";
import { startKubeApi } from "./kube_api.ts";
import { until } from "./wait.ts";

type Json = Record<string, unknown>;

async function withApi(
  fn: (
    api: Awaited<ReturnType<typeof startKubeApi>>,
    get: (p: string) => Promise<{ status: number; body: Json }>,
    lines: (p: string, n: number) => Promise<Json[]>,
  ) => Promise<void>,
) {
  const api = await startKubeApi({ clientCertAuth: false });
  const client = Deno.createHttpClient({ caCerts: [api.caCertPem] });
  const headers = { authorization: `Bearer ${api.token}` };
  const get = async (p: string) => {
    const r = await fetch(`${api.url}${p}`, { headers, client });
    return { status: r.status, body: await r.json() as Json };
  };
  const lines = async (p: string, n: number) => {
    const r = await fetch(`${api.url}${p}`, { headers, client });
    assert.equal(r.status, 200);
    const out: Json[] = [];
    let buf = "";
    const reader = r.body!.pipeThrough(new TextDecoderStream()).getReader();
    while (out.length < n) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += value;
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        out.push(JSON.parse(buf.slice(0, i)));
        buf = buf.slice(i + 1);
      }
    }
    await reader.cancel();
    return out;
  };
  try {
    await fn(api, get, lines);
  } finally {
    client.close();
    await api.stop();
  }
}

Deno.test("stand-in: cluster-wide pod, namespace and MultiNetworkPolicy lists with selectors", async () => {
  await withApi(async (api, get) => {
    api.putNamespace("a", { team: "a" });
    api.addPod({ namespace: "a", name: "p1", labels: { app: "db" }, nodeName: "n1" });
    api.addPod({ namespace: "b", name: "p2", labels: { app: "web" }, nodeName: "n2" });
    api.putMultiNetworkPolicy({
      metadata: { name: "m", namespace: "a" },
      spec: { podSelector: {} },
    });
    const pods = await get("/api/v1/pods");
    assert.equal(pods.body.kind, "PodList");
    assert.deepEqual((pods.body.items as Json[]).map((p) => (p.metadata as Json).name), [
      "p1",
      "p2",
    ]);
    assert.equal((pods.body.items as Json[])[0].kind, undefined, "built-in list items lose kind");
    const byNode = await get("/api/v1/pods?fieldSelector=spec.nodeName%3Dn2");
    assert.deepEqual((byNode.body.items as Json[]).map((p) => (p.metadata as Json).name), ["p2"]);
    const byLabel = await get("/api/v1/pods?labelSelector=app%20in%20(db)");
    assert.deepEqual((byLabel.body.items as Json[]).map((p) => (p.metadata as Json).name), ["p1"]);
    assert.equal((await get("/api/v1/pods?fieldSelector=spec.bogus%3Dx")).status, 400);
    const paged = await get("/api/v1/pods?limit=1");
    assert.ok((paged.body.metadata as Json).continue);
    const ns = await get("/api/v1/namespaces");
    assert.equal(ns.body.kind, "NamespaceList");
    assert.deepEqual(((ns.body.items as Json[])[0].metadata as Json).labels, {
      "kubernetes.io/metadata.name": "a",
      team: "a",
    });
    const mnps = await get("/apis/k8s.cni.cncf.io/v1beta1/multi-networkpolicies");
    assert.equal(mnps.body.kind, "MultiNetworkPolicyList");
    assert.equal(
      (mnps.body.items as Json[])[0].kind,
      "MultiNetworkPolicy",
      "CR list items keep kind",
    );
    assert.equal(
      (await get("/apis/k8s.cni.cncf.io/v1beta1/namespaces/b/multi-networkpolicies")).body
        .items instanceof Array,
      true,
    );
  });
});

Deno.test("stand-in: pod watch from a resourceVersion, and 410 Expired after compaction", async () => {
  await withApi(async (api, get, lines) => {
    api.addPod({ namespace: "a", name: "p1", nodeName: "n1" });
    const rv = ((await get("/api/v1/pods")).body.metadata as Json).resourceVersion;
    api.setPodLabels("a", "p1", { app: "x" });
    api.deletePod("a", "p1");
    const events = await lines(`/api/v1/pods?watch=1&resourceVersion=${rv}`, 2);
    assert.deepEqual(events.map((e) => e.type), ["MODIFIED", "DELETED"]);
    assert.deepEqual(((events[0].object as Json).metadata as Json).labels, { app: "x" });
    api.compactPolicyHistory();
    const expired = await lines(`/api/v1/pods?watch=1&resourceVersion=${rv}`, 1);
    assert.equal(expired[0].type, "ERROR");
    assert.equal((expired[0].object as Json).code, 410);
  });
});

Deno.test("stand-in: lib/k8s listWatch re-lists pods after 410 and sees a change made meanwhile", async () => {
  await withApi(async (api) => {
    api.addPod({ namespace: "a", name: "p1", labels: { v: "1" } });
    const dir = await Deno.makeTempDir();
    await api.writeKubeconfig(`${dir}/kc`);
    const kube = new KubeClient({ connection: await loadKubeconfig(`${dir}/kc`) });
    const stop = new AbortController();
    const seen = new Map<string, string>();
    let lists = 0;
    const loop = listWatch<KubeObject>(kube, {
      replace: (items) => {
        lists++;
        for (const o of items) {
          seen.set(
            o.metadata.name,
            String((o.metadata as Json).labels && ((o.metadata as Json).labels as Json).v),
          );
        }
        return Promise.resolve();
      },
      apply: (c: WatchChange<KubeObject>) => {
        seen.set(
          c.object.metadata.name,
          String(((c.object.metadata as Json).labels as Json | undefined)?.v),
        );
        return Promise.resolve();
      },
      progress: () => Promise.resolve(),
    }, { resource: POD_LIST_WATCH, signal: stop.signal });
    try {
      await until(() => lists === 1 && api.policyWatchCount === 1, "the first list and the watch");
      // The watch drops, history is compacted and a change happens before it comes back.
      api.endPolicyWatches({ clean: false });
      api.setPodLabels("a", "p1", { v: "2" });
      api.compactPolicyHistory();
      await until(() => seen.get("p1") === "2", "the change seen through a re-list");
      assert.equal(lists, 2);
    } finally {
      stop.abort();
      kube.close();
      await loop;
      await Deno.remove(dir, { recursive: true });
    }
  });
});
