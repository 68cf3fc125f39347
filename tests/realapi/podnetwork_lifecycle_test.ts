/**
 * KEP-3698 objects that can always be deleted, against a real kube-apiserver with deploy/'s
 * CRDs and `manifold controller` running with its ServiceAccount's token:
 * a network whose provider changed still has its finalizer released; the finalizer added when
 * the controller first sees a network; hostNetwork pods never users; a network being deleted
 * refused at ADD; an attachment whose PodNetwork is missing left to its provider; the
 * "default" PodNetwork created, Ready, recreated when deleted (not with
 * `--no-default-podnetwork`, where the operator's "default" is kept while in use); a pod whose
 * list was edited after its ADD still holds what its networks-status names. Skipped (one line) without `MANIFOLD_KUBE_APISERVER`; the plugin
 * parts need root.
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
  withController,
} from "./kep.ts";

const suite = realApiSuite();
const MERGE = "application/merge-patch+json";

suite.test("controller: a network whose provider changed has its finalizer released (kept while a pod uses it)", async (api) => {
  await withController(api, ["--no-default-podnetwork"], async ({ ns }) => {
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
  });
});

suite.test("controller: finalizer from first sight; hostNetwork pods are no users", async (api) => {
  await withController(api, ["--no-default-podnetwork"], async ({ ns }) => {
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
  });
});

suite.test("controller: a pod whose list was edited after its ADD still holds the PodNetwork it got (networks-status)", async (api) => {
  if (Deno.uid() !== 0) return; // real netns and delegates
  await install(api);
  const dir = await Deno.makeTempDir({ prefix: "mft-kep-" });
  const ctl = await startController(api, dir, ["--no-default-podnetwork"]);
  let w: Awaited<ReturnType<typeof realWorld>> | undefined;
  try {
    w = await realWorld(api, { annotations: { [KEP]: JSON.stringify([{ name: "held" }]) } });
    await api.admin.create(pn("held", { namespace: w.ns, name: "bridge-net" }));
    await waitConditions(api, "held", "True/ParamsReady True/Ready");
    const add = await w.call("ADD");
    assert.equal(add.code, 0, add.stdout + add.stderr.slice(-2000));
    assert.deepEqual(await linkNames(w.podNetns), ["eth0"]);
    // Pod.spec.networks would be immutable; the annotation is not. The interface stays.
    await api.admin.patch({ apiVersion: "v1", kind: "Pod", namespace: w.ns, name: POD }, {
      metadata: { annotations: { [KEP]: null } },
    });
    await new Promise((r) => setTimeout(r, 300)); // the controller's pod watch sees it
    await api.admin.delete(GV, "PodNetwork", undefined, "held");
    await new Promise((r) => setTimeout(r, 500));
    assert.ok((await getPn(api, "held"))?.metadata.deletionTimestamp, "attached: kept");
    assert.equal((await w.call("DEL")).code, 0);
    await api.admin.delete("v1", "Pod", w.ns, POD);
    await until(async () => (await getPn(api, "held")) === undefined, "gone with its pod", 10_000);
  } finally {
    if (w) await done(w);
    await api.admin.patch({ apiVersion: GV, kind: "PodNetwork", name: "held" }, {
      metadata: { finalizers: null },
    }).catch(() => {});
    await ctl.stop();
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

suite.test("controller: an attachment whose PodNetwork is missing is left to its provider", async (api) => {
  await withController(api, ["--no-default-podnetwork"], async ({ ns }) => {
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
  });
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

suite.test('controller --no-default-podnetwork: the operator\'s "default" is kept while a pod lists it (KEP "InUse state", "Network Migration")', async (api) => {
  await install(api);
  const dir = await Deno.makeTempDir({ prefix: "mft-kep-" });
  const ns = `mfk-${crypto.randomUUID().slice(0, 8)}`;
  await api.admin.createNamespace(ns);
  const ctl = await startController(api, dir, ["--no-default-podnetwork"]);
  try {
    await until(async () => (await getPn(api, "default")) === undefined, "no default", 10_000);
    // The operator's object (nobody recreates it): an ordinary PodNetwork of ours.
    await api.admin.create({
      apiVersion: GV,
      kind: "PodNetwork",
      metadata: { name: "default" },
      spec: { enabled: true, provider: "manifold.dev/cni" },
    });
    await waitConditions(api, "default", "True/ClusterDefaultNetwork True/Ready");
    await until(() => hasFinalizer(api, "default"), "finalizer", 10_000);
    await api.admin.createPod(ns, "user", {
      annotations: { [KEP]: JSON.stringify([{ name: "default" }]) },
    });
    // An empty list is the KEP's auto-population: it lists "default" too.
    await api.admin.createPod(ns, "empty", { annotations: { [KEP]: "[]" } });
    await new Promise((r) => setTimeout(r, 300)); // the controller's pod watch sees them
    await api.admin.delete(GV, "PodNetwork", undefined, "default");
    await new Promise((r) => setTimeout(r, 500));
    assert.ok((await getPn(api, "default"))?.metadata.deletionTimestamp, "in use: kept");
    await api.admin.delete("v1", "Pod", ns, "user");
    await new Promise((r) => setTimeout(r, 500));
    assert.ok(await getPn(api, "default"), "[] lists it: kept");
    await api.admin.delete("v1", "Pod", ns, "empty");
    await until(async () => (await getPn(api, "default")) === undefined, "unused: gone", 10_000);
  } finally {
    await ctl.stop();
    await api.admin.delete("v1", "Namespace", undefined, ns);
    await api.admin.patch({ apiVersion: GV, kind: "PodNetwork", name: "default" }, {
      metadata: { finalizers: null },
    }).catch(() => {});
    await Deno.remove(dir, { recursive: true });
  }
});

suite.end();
