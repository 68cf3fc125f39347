/**
 * KEP-3698 validations against a real kube-apiserver with deploy/'s CRDs: the spec-level
 * immutability rule (provider and parametersRefs can be neither added, removed nor changed;
 * enabled can), the CRDs' static validations at `kubectl apply` time, the pod-side static
 * checks failing the ADD with an event naming the field, and Manifold's `allowedNamespaces`
 * extension (attachment not Ready, pod refused). Skipped (one line) without
 * `MANIFOLD_KUBE_APISERVER`; the plugin parts need root.
 */

import assert from "node:assert/strict";
import { realApiSuite } from "../support/kube_apiserver.ts";
import type { KubeObject } from "../support/kube_rest.ts";
import { linkNames } from "../support/netns.ts";
import { until } from "../support/wait.ts";
import { done, POD, realWorld } from "./cluster.ts";
import { getPn, GV, install, KEP, NAD_CONFIG, pn, startController, waitConditions } from "./kep.ts";

const suite = realApiSuite();
const MERGE = "application/merge-patch+json";

/** The answer of a merge patch of the PodNetwork's spec (status code and body text). */
async function patchSpec(api: Parameters<typeof install>[0], name: string, spec: KubeObject) {
  const r = await api.admin.raw("PATCH", `/apis/${GV}/podnetworks/${name}`, {
    body: { spec },
    contentType: MERGE,
  });
  return { status: r.status, text: JSON.stringify(r.body) };
}

suite.test("CRD: provider and parametersRefs can be neither added, removed nor changed (one spec rule); enabled can", async (api) => {
  await install(api);
  const ref = {
    group: "k8s.cni.cncf.io",
    kind: "network-attachment-definitions",
    name: "x",
    namespace: "default",
  };
  await api.admin.create(pn("imm-full", { namespace: "default", name: "x" }));
  await api.admin.create({
    apiVersion: GV,
    kind: "PodNetwork",
    metadata: { name: "imm-bare" },
    spec: { enabled: true },
  });
  try {
    const refused: [string, string, KubeObject][] = [
      ["remove provider", "imm-full", { provider: null }],
      ["change provider", "imm-full", { provider: "example.com/other" }],
      ["remove parametersRefs", "imm-full", { parametersRefs: null }],
      ["change parametersRefs", "imm-full", { parametersRefs: [{ ...ref, name: "y" }] }],
      ["add provider", "imm-bare", { provider: "manifold.dev/cni" }],
      ["add parametersRefs", "imm-bare", { parametersRefs: [ref] }],
    ];
    for (const [what, name, spec] of refused) {
      const r = await patchSpec(api, name, spec);
      assert.equal(r.status, 422, `${what}: ${r.text}`);
      assert.match(r.text, /spec is immutable but for enabled/, what);
    }
    for (const name of ["imm-full", "imm-bare"]) {
      const r = await patchSpec(api, name, { enabled: false });
      assert.equal(r.status, 200, `enabled stays mutable: ${r.text}`);
    }
    const full = await getPn(api, "imm-full");
    assert.equal(full!.spec.provider, "manifold.dev/cni");
    assert.equal(full!.spec.parametersRefs[0].name, "x");
  } finally {
    for (const n of ["imm-full", "imm-bare"]) {
      await api.admin.delete(GV, "PodNetwork", undefined, n);
    }
  }
});

suite.test("CRD: the KEP's static validations at apply time (refs, podNetworkName, allowedNamespaces)", async (api) => {
  await install(api);
  const ns = `mfk-${crypto.randomUUID().slice(0, 8)}`;
  await api.admin.createNamespace(ns);
  const ref = {
    group: "k8s.cni.cncf.io",
    kind: "network-attachment-definitions",
    name: "x",
    namespace: "default",
  };
  const post = async (path: string, body: KubeObject) => {
    const r = await api.admin.raw("POST", path, { body });
    return { status: r.status, text: JSON.stringify(r.body) };
  };
  const bad: [string, string, KubeObject, RegExp][] = [
    [
      "ref namespace not a DNS label",
      `/apis/${GV}/podnetworks`,
      pn("v1", { ...ref, namespace: "Not_A_Namespace" }),
      /parametersRefs\[0\]\.namespace/,
    ],
    [
      "ref kind empty",
      `/apis/${GV}/podnetworks`,
      { ...pn("v2", ref), spec: { parametersRefs: [{ ...ref, kind: "" }] } },
      /parametersRefs\[0\]\.kind/,
    ],
    [
      "ref group not a DNS subdomain",
      `/apis/${GV}/podnetworks`,
      { ...pn("v3", ref), spec: { parametersRefs: [{ ...ref, group: "Bad Group" }] } },
      /parametersRefs\[0\]\.group/,
    ],
    [
      "allowedNamespaces In without values",
      `/apis/${GV}/podnetworks`,
      pn("v4", ref, {
        allowedNamespaces: { matchExpressions: [{ key: "team", operator: "In" }] },
      }),
      /In and NotIn need values/,
    ],
    [
      "attachment podNetworkName not an object name",
      `/apis/${GV}/namespaces/${ns}/podnetworkattachments`,
      {
        apiVersion: GV,
        kind: "PodNetworkAttachment",
        metadata: { name: "a1", namespace: ns },
        spec: { podNetworkName: "Data_Plane" },
      },
      /spec\.podNetworkName/,
    ],
    [
      "attachment ref namespace not a DNS label",
      `/apis/${GV}/namespaces/${ns}/podnetworkattachments`,
      {
        apiVersion: GV,
        kind: "PodNetworkAttachment",
        metadata: { name: "a2", namespace: ns },
        spec: { podNetworkName: "dp", parametersRefs: [{ ...ref, namespace: "UPPER" }] },
      },
      /parametersRefs\[0\]\.namespace/,
    ],
  ];
  try {
    for (const [what, path, body, re] of bad) {
      const r = await post(path, body);
      assert.equal(r.status, 422, `${what}: ${r.status} ${r.text}`);
      assert.match(r.text, re, what);
    }
    // The KEP's own examples still apply (their ref names are not DNS names: not checked).
    const kepExample = await post(`/apis/${GV}/podnetworks`, {
      apiVersion: GV,
      kind: "PodNetwork",
      metadata: { name: "kep-example" },
      spec: {
        enabled: true,
        provider: "k8s.cni.cncf.io/multus",
        parametersRefs: [
          { ...ref, name: "parametersA" },
          { ...ref, name: "complementaryParametersB" },
        ],
        allowedNamespaces: { matchLabels: { team: "a" } },
      },
    });
    assert.equal(kepExample.status, 201, kepExample.text);
    await api.admin.delete(GV, "PodNetwork", undefined, "kep-example");
  } finally {
    await api.admin.delete("v1", "Namespace", undefined, ns);
  }
});

suite.test("plugin: a pod-side static check fails the ADD (code 7) and posts an event naming the field", async (api) => {
  if (Deno.uid() !== 0) return; // real netns and delegates
  await install(api);
  let w: Awaited<ReturnType<typeof realWorld>> | undefined;
  try {
    w = await realWorld(api, {
      annotations: {
        [KEP]: JSON.stringify([
          { podNetworkName: "a", interfaceName: "dp0" },
          { podNetworkName: "b", interfaceName: "dp0" },
        ]),
      },
    });
    const add = await w.call("ADD");
    assert.equal(add.json?.code, 7, add.stdout);
    let events: KubeObject[] = [];
    await until(
      async () => (events = await api.admin.events(w!.ns, POD)).length > 0,
      "an event",
      10_000,
    ).catch(() => {});
    const ev = events.find((e) => e.reason === "InvalidPodNetworks");
    assert.ok(ev, JSON.stringify(events.map((e) => e.reason)));
    assert.equal(ev.type, "Warning");
    assert.match(
      ev.message,
      /multinetwork\.manifold\.dev\/networks\[1\]\.interfaceName: "dp0" is used twice/,
    );
  } finally {
    if (w) await done(w);
  }
});

suite.test("allowedNamespaces: an attachment outside is not Ready (NamespaceNotAllowed); a pod outside is refused at ADD (code 7)", async (api) => {
  await install(api);
  const dir = await Deno.makeTempDir({ prefix: "mft-kep-" });
  const inside = `mfk-${crypto.randomUUID().slice(0, 8)}`;
  const outside = `mfk-${crypto.randomUUID().slice(0, 8)}`;
  const label = (ns: string, team: string) =>
    api.admin.patch({ apiVersion: "v1", kind: "Namespace", name: ns }, {
      metadata: { labels: { team } },
    });
  await api.admin.createNamespace(inside);
  await api.admin.createNamespace(outside);
  await label(inside, "a");
  const ctl = await startController(api, dir, ["--no-default-podnetwork"]);
  let w: Awaited<ReturnType<typeof realWorld>> | undefined;
  try {
    // With root, the plugin part's world (its own bridge NAD and IPAM directory).
    if (Deno.uid() === 0) {
      w = await realWorld(api, {
        annotations: { [KEP]: JSON.stringify([{ podNetworkName: "restricted" }]) },
      });
    } else await api.admin.createNad(inside, "dp-net", NAD_CONFIG);
    const nad = w ? { namespace: w.ns, name: "bridge-net" } : { namespace: inside, name: "dp-net" };
    await api.admin.create(
      pn("restricted", nad, { allowedNamespaces: { matchLabels: { team: "a" } } }),
    );
    await waitConditions(api, "restricted", "True/ParamsReady True/Ready");
    for (const ns of [inside, outside]) {
      await api.admin.create({
        apiVersion: GV,
        kind: "PodNetworkAttachment",
        metadata: { name: "fast", namespace: ns },
        spec: { podNetworkName: "restricted" },
      });
    }
    await waitConditions(api, "fast", "True/PodNetworkParameters True/Ready", inside);
    await waitConditions(
      api,
      "fast",
      "True/PodNetworkParameters False/NamespaceNotAllowed",
      outside,
    );
    await label(outside, "a");
    await waitConditions(api, "fast", "True/PodNetworkParameters True/Ready", outside);
    await label(outside, "b");
    await waitConditions(
      api,
      "fast",
      "True/PodNetworkParameters False/NamespaceNotAllowed",
      outside,
    );

    if (!w) return; // the plugin part: real netns and delegates
    const add = await w.call("ADD");
    assert.equal(add.json?.code, 7, add.stdout);
    assert.match(
      String(add.json?.msg),
      new RegExp(`namespace "${w.ns}" is not allowed by PodNetwork "restricted"`),
    );
    assert.deepEqual(await linkNames(w.podNetns), [], "no delegate ran");
    await label(w.ns, "a");
    const ok = await w.call("ADD");
    assert.equal(ok.code, 0, ok.stdout + ok.stderr.slice(-2000));
    assert.deepEqual(await linkNames(w.podNetns), ["eth0"]);
    assert.equal((await w.call("DEL")).code, 0);
  } finally {
    if (w) await done(w);
    for (const ns of [inside, outside]) await api.admin.delete("v1", "Namespace", undefined, ns);
    await api.admin.delete(GV, "PodNetwork", undefined, "restricted");
    await until(async () => (await getPn(api, "restricted")) === undefined, "gone", 10_000)
      .catch(() => {});
    await ctl.stop();
    await Deno.remove(dir, { recursive: true });
  }
});

suite.end();
