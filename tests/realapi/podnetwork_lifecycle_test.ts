/**
 * KEP-3698 objects that can always be deleted, and the KEP's rules at `kubectl apply` time,
 * against a real kube-apiserver with deploy/'s CRDs and `manifold controller` running with its
 * ServiceAccount's token: the spec-level immutability rule (provider and parametersRefs can be
 * neither added, removed nor changed); a network whose provider changed still has its
 * finalizer released; the finalizer added when the controller first sees a network;
 * hostNetwork pods never users; an attachment whose PodNetwork is missing left to its
 * provider; the "default" PodNetwork created, Ready, recreated when deleted (not with
 * `--no-default-podnetwork`); the CRDs' static validations. Skipped (one line) without
 * `MANIFOLD_KUBE_APISERVER`.
 */

import assert from "node:assert/strict";
import { realApiSuite } from "../support/kube_apiserver.ts";
import type { KubeObject } from "../support/kube_rest.ts";
import { linkNames } from "../support/netns.ts";
import { until } from "../support/wait.ts";
import { done, POD, realWorld } from "./cluster.ts";
import {
  condText,
  FINALIZER,
  getKep,
  getPn,
  GV,
  hasFinalizer,
  install,
  KEP,
  NAD_CONFIG,
  pn,
  startController,
  waitConditions,
} from "./kep.ts";

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

suite.test("controller: a network whose provider changed has its finalizer released (kept while a pod uses it)", async (api) => {
  await install(api);
  const dir = await Deno.makeTempDir({ prefix: "mft-kep-" });
  const ns = `mfk-${crypto.randomUUID().slice(0, 8)}`;
  await api.admin.createNamespace(ns);
  const ctl = await startController(api, dir, ["--no-default-podnetwork"]);
  try {
    // What an older CRD (per-field rules) allowed: our finalizer on another provider's network.
    await api.admin.create({
      apiVersion: GV,
      kind: "PodNetwork",
      metadata: { name: "handed-over", finalizers: [FINALIZER] },
      spec: { provider: "example.com/other" },
    });
    await api.admin.createPod(ns, "user", {
      annotations: { [KEP]: JSON.stringify([{ name: "handed-over" }]) },
    });
    await new Promise((r) => setTimeout(r, 300)); // the controller's pod watch sees it
    await api.admin.delete(GV, "PodNetwork", undefined, "handed-over");
    await new Promise((r) => setTimeout(r, 500));
    assert.ok(await getPn(api, "handed-over"), "a pod still uses it: kept");
    await api.admin.delete("v1", "Pod", ns, "user");
    await until(
      async () => (await getPn(api, "handed-over")) === undefined,
      "deleted once unused",
      10_000,
    );
  } finally {
    await ctl.stop();
    await api.admin.delete("v1", "Namespace", undefined, ns);
    await Deno.remove(dir, { recursive: true });
  }
});

suite.test("controller: finalizer from first sight; hostNetwork pods are no users", async (api) => {
  await install(api);
  const dir = await Deno.makeTempDir({ prefix: "mft-kep-" });
  const ns = `mfk-${crypto.randomUUID().slice(0, 8)}`;
  await api.admin.createNamespace(ns);
  const ctl = await startController(api, dir, ["--no-default-podnetwork"]);
  try {
    await api.admin.createNad(ns, "dp-net", NAD_CONFIG);
    await api.admin.create(pn("early", { namespace: ns, name: "dp-net" }));
    // No user yet: the finalizer is there anyway, so a pod created right now is protected.
    await until(() => hasFinalizer(api, "early"), "finalizer on first sight", 10_000);

    // A hostNetwork pod listing it never gets an ADD: it does not hold the network.
    await api.admin.create({
      apiVersion: "v1",
      kind: "Pod",
      metadata: {
        name: "hostnet",
        namespace: ns,
        annotations: { [KEP]: JSON.stringify([{ name: "early" }]) },
      },
      spec: {
        nodeName: "envtest-node",
        hostNetwork: true,
        automountServiceAccountToken: false,
        containers: [{ name: "app", image: "registry.k8s.io/pause:3.10" }],
      },
    });
    await api.admin.delete(GV, "PodNetwork", undefined, "early");
    await until(
      async () => (await getPn(api, "early")) === undefined,
      "deleted: the hostNetwork pod is no user",
      10_000,
    );
  } finally {
    await ctl.stop();
    await api.admin.delete("v1", "Namespace", undefined, ns);
    await Deno.remove(dir, { recursive: true });
  }
});

suite.test("plugin: a PodNetwork being deleted accepts no new pod (code 7 naming it)", async (api) => {
  if (Deno.uid() !== 0) return; // real netns and delegates
  await install(api);
  let w: Awaited<ReturnType<typeof realWorld>> | undefined;
  try {
    w = await realWorld(api, {
      annotations: { [KEP]: JSON.stringify([{ podNetworkName: "leaving" }]) },
    });
    // Ready, in use elsewhere (the finalizer holds it), deletion requested.
    await api.admin.create({
      ...pn("leaving", { namespace: w.ns, name: "bridge-net" }),
      metadata: { name: "leaving", finalizers: [FINALIZER] },
    });
    await api.admin.raw("PATCH", `/apis/${GV}/podnetworks/leaving/status`, {
      body: {
        status: {
          conditions: [{
            type: "Ready",
            status: "True",
            reason: "Ready",
            message: "",
            lastTransitionTime: "2026-11-27T10:00:00Z",
          }],
        },
      },
      contentType: MERGE,
    });
    await api.admin.delete(GV, "PodNetwork", undefined, "leaving");
    const add = await w.call("ADD");
    assert.equal(add.json?.code, 7, add.stdout);
    assert.match(
      String(add.json?.msg),
      /PodNetwork "leaving" is being deleted .*accepts no new pods/,
    );
    assert.deepEqual(await linkNames(w.podNetns), [], "no delegate ran");
  } finally {
    if (w) await done(w);
    await api.admin.patch({ apiVersion: GV, kind: "PodNetwork", name: "leaving" }, {
      metadata: { finalizers: null },
    }).catch(() => {});
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

suite.test("controller: an attachment whose PodNetwork is missing is left to its provider", async (api) => {
  await install(api);
  const dir = await Deno.makeTempDir({ prefix: "mft-kep-" });
  const ns = `mfk-${crypto.randomUUID().slice(0, 8)}`;
  await api.admin.createNamespace(ns);
  const ctl = await startController(api, dir, ["--no-default-podnetwork"]);
  try {
    await api.admin.createNad(ns, "dp-net", NAD_CONFIG);
    await api.admin.create({
      apiVersion: GV,
      kind: "PodNetworkAttachment",
      metadata: { name: "orphan", namespace: ns },
      spec: { podNetworkName: "not-here" },
    });
    // A later object of ours gets its conditions: a pass ran after the orphan was listed.
    await api.admin.create(pn("marker", { namespace: ns, name: "dp-net" }));
    await waitConditions(api, "marker", "True/ParamsReady True/Ready");
    const orphan = await getKep(api, "orphan", ns);
    assert.equal(condText(orphan), "-/- -/-", "no conditions written");
    assert.deepEqual(orphan!.metadata.finalizers ?? [], []);
    await api.admin.delete(GV, "PodNetwork", undefined, "marker");
    await until(async () => (await getPn(api, "marker")) === undefined, "marker gone", 10_000);
  } finally {
    await ctl.stop();
    await api.admin.delete("v1", "Namespace", undefined, ns);
    await Deno.remove(dir, { recursive: true });
  }
});

suite.test('controller: the "default" PodNetwork is created, Ready, recreated when deleted; not with --no-default-podnetwork', async (api) => {
  await install(api);
  const dir = await Deno.makeTempDir({ prefix: "mft-kep-" });
  let ctl = await startController(api, dir);
  try {
    await waitConditions(api, "default", "True/ClusterDefaultNetwork True/Ready");
    const first = (await getPn(api, "default"))!;
    assert.equal(first.spec.provider, "manifold.dev/cni");
    assert.equal(first.spec.enabled, true);
    assert.deepEqual(first.spec.parametersRefs, undefined);

    await api.admin.delete(GV, "PodNetwork", undefined, "default");
    let again: KubeObject | undefined;
    await until(
      async () => {
        again = await getPn(api, "default");
        return again !== undefined && again.metadata.uid !== first.metadata.uid &&
          !again.metadata.deletionTimestamp;
      },
      "recreated",
      10_000,
    );
    await waitConditions(api, "default", "True/ClusterDefaultNetwork True/Ready");
    await ctl.stop();

    ctl = await startController(api, dir, ["--no-default-podnetwork"]);
    await api.admin.delete(GV, "PodNetwork", undefined, "default");
    await until(async () => (await getPn(api, "default")) === undefined, "deleted", 10_000);
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(await getPn(api, "default"), undefined, "not recreated");
  } finally {
    await ctl.stop();
    await Deno.remove(dir, { recursive: true });
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

suite.end();
