/**
 * lib/k8s/resource.ts: ResourceClaim / ResourceSlice parsing (the shapes kube-apiserver
 * v1.32.13 returned, captured in tests/fixtures/k8s/dra/, and the v1 shapes), and the
 * `v1` → `v1beta1` fallback against the stand-in, whose answers are checked against the same
 * captures.
 */

import assert from "node:assert/strict";
import {
  getResourceClaim,
  KubeClient,
  KubeError,
  listResourceSlices,
  loadKubeconfig,
  parseResourceClaim,
  parseResourceSlice,
  resetResourceVersion,
  servedResourceVersion,
} from "../../lib/k8s/mod.ts";
import { type KubeApiStandIn, startKubeApi } from "../support/kube_api.ts";

const FIXTURES = new URL("../fixtures/k8s/dra/", import.meta.url);

interface Capture {
  request: string;
  status: number;
  body: Record<string, unknown>;
}

async function capture(name: string): Promise<Capture> {
  return JSON.parse(await Deno.readTextFile(new URL(name, FIXTURES)));
}

Deno.test("parseResourceClaim: captured v1beta1 claims, allocated and not", async () => {
  const allocated = parseResourceClaim((await capture("claim-allocated-v1beta1.json")).body);
  assert.deepEqual(allocated, {
    name: "nic-claim",
    namespace: "t1",
    allocated: true,
    results: [
      { request: "vf", driver: "sriov.example.com", pool: "node-a", device: "vf-5" },
      { request: "vf", driver: "sriov.example.com", pool: "node-a", device: "gpu-0" },
    ],
  });
  const pending = parseResourceClaim((await capture("claim-unallocated-v1beta1.json")).body);
  assert.equal(pending.allocated, false);
  assert.deepEqual(pending.results, []);
});

Deno.test("parseResourceSlice: captured v1beta1 (basic.attributes) and v1 (attributes) agree", async () => {
  const list = (await capture("slices-v1beta1.json")).body as { items: unknown[] };
  const beta = parseResourceSlice(list.items[0]);
  assert.deepEqual(beta, {
    name: "node-a-sriov",
    driver: "sriov.example.com",
    pool: "node-a",
    generation: 1,
    nodeName: "node-a",
    devices: [
      {
        name: "vf-5",
        attributes: {
          "k8s.cni.cncf.io/deviceID": { string: "0000:18:02.5" },
          "k8s.cni.cncf.io/resourceName": { string: "example.com/sriov_vf" },
          vfIndex: { int: 2 },
        },
      },
      { name: "gpu-0", attributes: { model: { string: "a100" } } },
    ],
  });
  // The same slice in resource.k8s.io/v1 (Kubernetes 1.34): attributes directly on the device.
  const v1 = structuredClone(list.items[0]) as {
    spec: { devices: { name: string; basic?: unknown; attributes?: unknown }[] };
  };
  v1.spec.devices = v1.spec.devices.map((d) => ({
    name: d.name,
    ...(d.basic as Record<string, unknown>),
  }));
  assert.deepEqual(parseResourceSlice(v1), beta);
});

Deno.test("parse: bad shapes are decoding errors naming the object", () => {
  for (
    const [fn, raw, what] of [
      [parseResourceClaim, { metadata: {} }, "ResourceClaim"],
      [
        parseResourceClaim,
        { metadata: { name: "c" }, status: { allocation: { devices: { results: [{}] } } } },
        "ResourceClaim",
      ],
      [parseResourceSlice, { metadata: { name: "s" }, spec: { driver: "d" } }, "ResourceSlice"],
      [
        parseResourceSlice,
        {
          metadata: { name: "s" },
          spec: {
            driver: "d",
            pool: { name: "p", generation: 1 },
            devices: [{ name: "x", attributes: { a: "plain" } }],
          },
        },
        "ResourceSlice",
      ],
    ] as const
  ) {
    assert.throws(
      () => (fn as (r: unknown) => unknown)(raw),
      (e: unknown) => e instanceof KubeError && e.kind === "decoding" && e.msg.includes(what),
    );
  }
});

/** A stand-in serving `versions` of resource.k8s.io, one claim and one slice; a client. */
async function withDra(
  versions: ("v1" | "v1beta1")[],
  fn: (kube: KubeClient, seen: () => string[], api: KubeApiStandIn) => Promise<void>,
): Promise<void> {
  resetResourceVersion();
  const api = await startKubeApi({ resourceVersions: versions });
  let kube: KubeClient | undefined;
  try {
    const list = (await capture("slices-v1beta1.json")).body as {
      items: Record<string, unknown>[];
    };
    api.putDra({
      ...list.items[0],
      apiVersion: "resource.k8s.io/v1beta1",
      kind: "ResourceSlice",
    } as never);
    const claim = (await capture("claim-allocated-v1beta1.json")).body;
    api.putDra({ ...claim, metadata: { name: "nic-claim", namespace: "t1" } } as never);
    await api.writeKubeconfig(`${api.dir}/kubeconfig`);
    kube = new KubeClient({ connection: await loadKubeconfig(`${api.dir}/kubeconfig`) });
    const mark = api.requests.length;
    await fn(
      kube,
      () => api.requests.slice(mark).map((r) => `${r.status} ${r.path}${r.query}`),
      api,
    );
  } finally {
    kube?.close();
    await api.stop();
    resetResourceVersion();
  }
}

Deno.test("getResourceClaim: v1 not served → v1beta1, remembered for the next calls", async () => {
  await withDra(["v1beta1"], async (kube, seen) => {
    const c = await getResourceClaim(kube, "t1", "nic-claim");
    assert.equal(c?.results.length, 2);
    assert.equal(servedResourceVersion(), "v1beta1");
    assert.equal(await getResourceClaim(kube, "t1", "nope"), undefined);
    const slices = await listResourceSlices(kube, {
      driver: "sriov.example.com",
      nodeName: "node-a",
    });
    assert.deepEqual(slices.map((s) => s.name), ["node-a-sriov"]);
    assert.deepEqual(seen(), [
      "404 /apis/resource.k8s.io/v1/namespaces/t1/resourceclaims/nic-claim",
      "200 /apis/resource.k8s.io/v1beta1/namespaces/t1/resourceclaims/nic-claim",
      "404 /apis/resource.k8s.io/v1beta1/namespaces/t1/resourceclaims/nope",
      "200 /apis/resource.k8s.io/v1beta1/resourceslices?fieldSelector=spec.driver%3Dsriov.example.com%2Cspec.nodeName%3Dnode-a",
    ]);
  });
});

Deno.test("getResourceClaim: v1 served → v1 only; a missing claim is undefined, not a fallback", async () => {
  await withDra(["v1", "v1beta1"], async (kube, seen) => {
    assert.equal(await getResourceClaim(kube, "t1", "nope"), undefined);
    assert.equal(servedResourceVersion(), "v1");
    const slices = await listResourceSlices(kube, { driver: "other.example.com" });
    assert.deepEqual(slices, []);
    const [slice] = await listResourceSlices(kube, { driver: "sriov.example.com" });
    assert.deepEqual(slice.devices[0].attributes["k8s.cni.cncf.io/deviceID"], {
      string: "0000:18:02.5",
    });
    assert.deepEqual(seen(), [
      "404 /apis/resource.k8s.io/v1/namespaces/t1/resourceclaims/nope",
      "200 /apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.driver%3Dother.example.com",
      "200 /apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.driver%3Dsriov.example.com",
    ]);
  });
});

Deno.test("getResourceClaim: a plain-text 404 (a proxy) is an unserved version, not a missing claim", async () => {
  await withDra(["v1", "v1beta1"], async (kube, seen, api) => {
    api.fault({
      path: /^\/apis\/resource\.k8s\.io\/v1\//,
      status: 404,
      body: "404 page not found\n",
      contentType: "text/plain; charset=utf-8",
    });
    const c = await getResourceClaim(kube, "t1", "nic-claim");
    assert.equal(c?.name, "nic-claim");
    assert.equal(servedResourceVersion(), "v1beta1");
    assert.deepEqual(seen(), [
      "404 /apis/resource.k8s.io/v1/namespaces/t1/resourceclaims/nic-claim",
      "200 /apis/resource.k8s.io/v1beta1/namespaces/t1/resourceclaims/nic-claim",
    ]);
  });
});

Deno.test("getResourceClaim: no version served → the 404 KubeError, nothing remembered", async () => {
  await withDra([], async (kube) => {
    await assert.rejects(
      getResourceClaim(kube, "t1", "nic-claim"),
      (e: unknown) =>
        e instanceof KubeError && e.status === 404 &&
        e.details === "the server could not find the requested resource",
    );
    assert.equal(servedResourceVersion(), undefined);
    await assert.rejects(listResourceSlices(kube, { driver: "d" }), KubeError);
  });
});

Deno.test("stand-in: resource.k8s.io answers match the kube-apiserver v1.32 captures", async () => {
  resetResourceVersion();
  const api = await startKubeApi({ resourceVersions: ["v1beta1"] });
  try {
    const list = (await capture("slices-v1beta1.json")).body as {
      items: Record<string, unknown>[];
    };
    api.putDra(
      { ...list.items[0], apiVersion: "resource.k8s.io/v1beta1", kind: "ResourceSlice" } as never,
    );
    const claim = (await capture("claim-allocated-v1beta1.json")).body;
    api.putDra({ ...claim, metadata: { name: "nic-claim", namespace: "t1" } } as never);
    for (
      const file of [
        "claim-allocated-v1beta1.json",
        "claim-v1-unserved-404.json",
        "claim-missing-404.json",
        "slices-v1beta1.json",
        "slices-bad-selector-400.json",
        "slices-v1-unserved-404.json",
      ]
    ) {
      const want = await capture(file);
      const path = want.request.split(" ")[1];
      const res = await fetch(`${api.url}${path}`, {
        headers: { authorization: `Bearer ${api.token}` },
        client: Deno.createHttpClient({ caCerts: [api.caCertPem] }),
      });
      const body = await res.json();
      assert.equal(res.status, want.status, file);
      const volatile = (o: unknown): unknown =>
        JSON.parse(
          JSON.stringify(o, (k, v) =>
            ["uid", "resourceVersion", "creationTimestamp", "generation"].includes(k)
              ? undefined
              : v),
        );
      assert.deepEqual(volatile(body), volatile(want.body), file);
    }
  } finally {
    await api.stop();
  }
});
