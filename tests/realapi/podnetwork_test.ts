/**
 * KEP-3698 against a real kube-apiserver: deploy/'s PodNetwork and PodNetworkAttachment CRDs
 * applied for real (schema, provider pattern, immutability, status subresource), and
 * `manifold controller` running with a token of deploy/'s `manifold-controller`
 * ServiceAccount (its ClusterRole only): conditions set with the KEP's reasons and flipped
 * when the NAD is deleted or the network disabled; the InUse finalizer blocks a PodNetwork's
 * deletion while a pod or PodNetworkAttachment references it, and is removed after. Then the
 * plugin process attaches a pod through the PodNetwork the controller made Ready. Skipped
 * (one line) without `MANIFOLD_KUBE_APISERVER`; the plugin part needs root.
 */

import assert from "node:assert/strict";
import { realApiSuite } from "../support/kube_apiserver.ts";
import type { KubeObject } from "../support/kube_rest.ts";
import { linkNames } from "../support/netns.ts";
import { until } from "../support/wait.ts";
import { expectOk } from "../support/world.ts";
import { done, networkStatus, realWorld } from "./cluster.ts";
import {
  condText,
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

suite.test("the CRDs enforce the KEP's schema: provider pattern, enabled default, immutable provider", async (api) => {
  await install(api);
  const bad = await api.admin.raw("POST", `/apis/${GV}/podnetworks`, {
    body: { ...pn("bad", { namespace: "default", name: "x" }), spec: { provider: "no-domain" } },
  });
  assert.equal(bad.status, 422, JSON.stringify(bad.body));
  const created = await api.admin.create(pn("immut", { namespace: "default", name: "x" }));
  assert.equal(created.spec.enabled, true, "enabled defaults to true");
  const changed = await api.admin.raw("PATCH", `/apis/${GV}/podnetworks/immut`, {
    body: { spec: { provider: "example.com/other" } },
    contentType: "application/merge-patch+json",
  });
  assert.equal(changed.status, 422, JSON.stringify(changed.body));
  assert.match(JSON.stringify(changed.body), /spec is immutable but for enabled/);
  // enabled stays mutable (KEP "Mutability").
  await api.admin.patch({ apiVersion: GV, kind: "PodNetwork", name: "immut" }, {
    spec: { enabled: false },
  });
  await api.admin.delete(GV, "PodNetwork", undefined, "immut");
});

suite.test("controller: conditions with the KEP's reasons, flipping with the NAD and enabled", async (api) => {
  await install(api);
  const dir = await Deno.makeTempDir({ prefix: "mft-kep-" });
  const ns = `mfk-${crypto.randomUUID().slice(0, 8)}`;
  await api.admin.createNamespace(ns);
  const ctl = await startController(api, dir);
  try {
    await api.admin.createNad(ns, "dp-net", NAD_CONFIG);
    await api.admin.create(pn("flip", { namespace: ns, name: "dp-net" }));
    // A foreign provider's PodNetwork is left alone.
    await api.admin.create({
      ...pn("foreign", { namespace: ns, name: "dp-net" }),
      spec: { provider: "example.com/other" },
    });
    // "default" is a global namespace: isolation is off, so any namespace is fine.
    await waitConditions(api, "flip", "True/ParamsReady True/Ready");

    await api.admin.delete("k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition", ns, "dp-net");
    await waitConditions(
      api,
      "flip",
      "False/NetworkAttachmentDefinitionNotFound False/ParamsNotReady",
    );

    await api.admin.createNad(ns, "dp-net", '{"cniVersion":"1.0.0","type":');
    await waitConditions(api, "flip", "False/InvalidConfig False/ParamsNotReady");

    await api.admin.delete("k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition", ns, "dp-net");
    await api.admin.createNad(ns, "dp-net", NAD_CONFIG);
    await waitConditions(api, "flip", "True/ParamsReady True/Ready");

    await api.admin.patch({ apiVersion: GV, kind: "PodNetwork", name: "flip" }, {
      spec: { enabled: false },
    });
    await waitConditions(api, "flip", "True/ParamsReady False/AdministrativelyDisabled");
    const flip = await getPn(api, "flip");
    const ready = flip!.status.conditions.find((c: KubeObject) => c.type === "Ready");
    assert.equal(ready.observedGeneration, flip!.metadata.generation);
    assert.match(ready.lastTransitionTime, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);

    assert.equal(condText(await getPn(api, "foreign")), "-/- -/-", "not ours: untouched");
    for (const n of ["flip", "foreign"]) await api.admin.delete(GV, "PodNetwork", undefined, n);
  } finally {
    await ctl.stop();
    await api.admin.delete("v1", "Namespace", undefined, ns);
    await Deno.remove(dir, { recursive: true });
  }
});

suite.test("controller: the InUse finalizer blocks deletion while a pod or attachment references the PodNetwork", async (api) => {
  await install(api);
  const dir = await Deno.makeTempDir({ prefix: "mft-kep-" });
  const ns = `mfk-${crypto.randomUUID().slice(0, 8)}`;
  await api.admin.createNamespace(ns);
  const ctl = await startController(api, dir);
  try {
    await api.admin.createNad(ns, "dp-net", NAD_CONFIG);
    await api.admin.create(pn("inuse", { namespace: ns, name: "dp-net" }));
    await waitConditions(api, "inuse", "True/ParamsReady True/Ready");
    // Added when the controller first sees the network, before any user.
    await until(() => hasFinalizer(api, "inuse"), "finalizer added", 10_000);

    await api.admin.createPod(ns, "user", {
      annotations: { [KEP]: JSON.stringify([{ podNetworkName: "inuse" }]) },
    });
    await api.admin.delete(GV, "PodNetwork", undefined, "inuse");
    const pending = await getPn(api, "inuse");
    assert.ok(pending?.metadata.deletionTimestamp, "deletion pending, blocked by the finalizer");

    // A PodNetworkAttachment referencing it keeps it too; it gets its own conditions.
    await api.admin.create({
      apiVersion: GV,
      kind: "PodNetworkAttachment",
      metadata: { name: "fast", namespace: ns },
      spec: { podNetworkName: "inuse" },
    });
    await until(
      async () => {
        const a = await api.admin.get(GV, "PodNetworkAttachment", ns, "fast");
        return condText(a) === "True/PodNetworkParameters True/Ready";
      },
      "attachment Ready",
      10_000,
    );
    await api.admin.delete("v1", "Pod", ns, "user");
    await new Promise((r) => setTimeout(r, 300));
    assert.ok(await getPn(api, "inuse"), "still referenced by the attachment");

    await api.admin.delete(GV, "PodNetworkAttachment", ns, "fast");
    await until(async () => (await getPn(api, "inuse")) === undefined, "PodNetwork gone", 10_000);
  } finally {
    await ctl.stop();
    await api.admin.delete("v1", "Namespace", undefined, ns);
    await Deno.remove(dir, { recursive: true });
  }
});

suite.test("plugin: a pod attaches through a PodNetwork the controller made Ready", async (api) => {
  if (Deno.uid() !== 0) return; // real netns and delegates
  await install(api);
  const dir = await Deno.makeTempDir({ prefix: "mft-kep-" });
  const ctl = await startController(api, dir);
  let w: Awaited<ReturnType<typeof realWorld>> | undefined;
  try {
    w = await realWorld(api, {
      annotations: {
        [KEP]: JSON.stringify([{ name: "default" }, { name: "real", interfaceName: "dp0" }]),
      },
    });
    // The world's own bridge NAD, through a PodNetwork; "default" is the controller's.
    await api.admin.create(pn("real", { namespace: w.ns, name: "bridge-net" }));
    await waitConditions(api, "real", "True/ParamsReady True/Ready");
    await waitConditions(api, "default", "True/ClusterDefaultNetwork True/Ready");
    expectOk(await w.call("ADD"), "ADD");
    assert.deepEqual(await linkNames(w.podNetns), ["dp0", "eth0"]);
    const status = networkStatus(await w.pod());
    assert.deepEqual(status?.map((s) => s.interface), ["eth0", "dp0"]);
    // The KEP's per-network status, written in the same pods/status PATCH.
    const kep = JSON.parse((await w.pod()).metadata.annotations[`${KEP}-status`]);
    assert.deepEqual(kep.map((e: KubeObject) => [e.name, e.interfaceName, e.isDefaultGW]), [
      ["default", "eth0", true],
      ["real", "dp0", undefined],
    ]);
    assert.equal(kep[1].ip, String((status![1].ips as string[])[0]).replace(/\/\d+$/, ""));
    assert.ok(await hasFinalizer(api, "real"));
    expectOk(await w.call("DEL"), "DEL");
  } finally {
    if (w) await done(w);
    await api.admin.delete(GV, "PodNetwork", undefined, "real");
    await until(async () => (await getPn(api, "real")) === undefined, "real gone", 10_000)
      .catch(() => {});
    await ctl.stop();
    await Deno.remove(dir, { recursive: true });
  }
});

suite.end();
