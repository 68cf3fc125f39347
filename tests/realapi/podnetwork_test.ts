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
import { parseAllDocuments } from "yaml";
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
  withController,
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
  await withController(api, [], async ({ ns }) => {
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
  });
});

suite.test("controller: the InUse finalizer blocks deletion while a pod or attachment references the PodNetwork", async (api) => {
  await withController(api, [], async ({ ns }) => {
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
  });
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

function withDataDir(config: KubeObject, dataDir: string): KubeObject {
  return { ...config, ipam: { ...config.ipam, dataDir } };
}

/** The YAML and JSON blocks of the KEP-3698 page (docs/kep-3698.md once merged). */
async function docBlocks(): Promise<{ yaml: KubeObject[]; json: unknown[] }> {
  const root = new URL("../../docs/", import.meta.url);
  let text = "";
  for (const page of ["kep-3698.md", "_incoming/kep.md"]) {
    try {
      text = await Deno.readTextFile(new URL(page, root));
      if (text.includes("The KEP's example pod")) break;
    } catch { /* next */ }
  }
  const blocks = (lang: string) =>
    [...text.matchAll(new RegExp("```" + lang + "\\n([\\s\\S]*?)```", "g"))].map((m) => m[1]);
  return {
    yaml: blocks("yaml").flatMap((b) => parseAllDocuments(b).map((d) => d.toJS() as KubeObject)),
    json: blocks("json").map((b) => JSON.parse(b)),
  };
}

suite.test("docs: the KEP's example pod, its annotation as written, attached as the page shows", async (api) => {
  if (Deno.uid() !== 0) return; // real netns and delegates
  await install(api);
  const { yaml, json } = await docBlocks();
  const pod = yaml.find((o) => o.kind === "Pod")!;
  assert.ok(pod, "the page has the example pod");
  const dir = await Deno.makeTempDir({ prefix: "mft-kep-" });
  const ctl = await startController(api, dir);
  let w: Awaited<ReturnType<typeof realWorld>> | undefined;
  const made: KubeObject[] = [];
  try {
    w = await realWorld(api, { annotations: pod.metadata.annotations });
    for (const bridge of ["kepdp1", "kepfast"]) w.scratch.trackLink(bridge);
    for (const o of yaml) {
      if (o.kind === "Pod") continue;
      // Namespaced objects go to the test's namespace; PodNetworks keep their refs.
      // NADs' leases in the world's directory (removed with it), not /var/lib/cni.
      const spec = o.kind === "NetworkAttachmentDefinition"
        ? { config: JSON.stringify(withDataDir(JSON.parse(o.spec.config), w.dirs.ipam)) }
        : o.spec;
      const obj = o.kind === "PodNetworkAttachment" || o.kind === "NetworkAttachmentDefinition"
        ? { ...o, metadata: { ...o.metadata, namespace: w.ns }, spec }
        : o.kind === "PodNetwork"
        ? {
          ...o,
          spec: {
            ...o.spec,
            parametersRefs: o.spec.parametersRefs.map((r: KubeObject) => ({
              ...r,
              namespace: w!.ns,
            })),
          },
        }
        : o;
      made.push(await api.admin.create(obj));
    }
    for (const name of ["default", "dataplane1", "fast-net"]) {
      await until(
        async () => condText(await getPn(api, name)).endsWith("True/Ready"),
        `${name} Ready`,
        10_000,
      );
    }
    await until(
      async () =>
        condText(await api.admin.get(GV, "PodNetworkAttachment", w!.ns, "my-interface-fast-net"))
          .endsWith("True/Ready"),
      "attachment Ready",
      10_000,
    );
    expectOk(await w.call("ADD"), "ADD");
    assert.deepEqual(await linkNames(w.podNetns), ["eth0", "net1", "net2"]);
    const kep = JSON.parse((await w.pod()).metadata.annotations[`${KEP}-status`]);
    // The page's status, but for the addresses this machine handed out.
    const shown = json.find((j) => Array.isArray(j)) as KubeObject[];
    const shape = (l: KubeObject[]) => l.map((e) => ({ ...e, ip: typeof e.ip }));
    assert.deepEqual(shape(kep), shape(shown));
    assert.match(kep[1].ip, /^10\.0\.0\./);
    assert.match(kep[2].ip, /^2011::/);
    expectOk(await w.call("DEL"), "DEL");
  } finally {
    if (w) await done(w);
    for (const o of made.reverse()) {
      await api.admin.delete(o.apiVersion, o.kind, o.metadata.namespace, o.metadata.name)
        .catch(() => {});
    }
    await until(async () => (await getPn(api, "fast-net")) === undefined, "gone", 10_000)
      .catch(() => {});
    await ctl.stop();
    await Deno.remove(dir, { recursive: true });
  }
});

suite.end();
