/**
 * The planning module without a kernel or a process: a static NAD source, inline default
 * network. What ADD, DEL's rebuild, GC/STATUS and explain all get from `buildPodPlan`.
 */

import assert from "node:assert/strict";
import { CniError, CniErrorCode } from "../../../lib/cni/errors.ts";
import type { NetworkAttachmentDefinition } from "../../../lib/k8s/types.ts";
import { parseManifoldConf } from "../../../lib/multinet/config.ts";
import { type NadSource, StaticNadSource } from "../../../lib/multinet/nad/source.ts";
import { buildPodPlan, type PodPlanInput } from "../../../lib/multinet/plan/pod_plan.ts";

const POD = { namespace: "ns1", name: "web", uid: "u1", infraContainerId: "c1" };
const NETWORKS = "k8s.v1.cni.cncf.io/networks";
const DEFAULT_NETWORK = "v1.multus-cni.io/default-network";

function nad(namespace: string, name: string, plugins: Record<string, unknown>[]) {
  return {
    metadata: { namespace, name },
    spec: { config: JSON.stringify({ cniVersion: "1.0.0", name, plugins }) },
  } satisfies NetworkAttachmentDefinition;
}

const NADS = [
  nad("ns1", "plain", [{ type: "bridge" }]),
  nad("ns1", "static", [{ type: "macvlan", capabilities: { ips: true, mac: true } }]),
  nad("kube-system", "blue", [
    { type: "bridge", capabilities: { ips: true } },
    { type: "tuning", capabilities: { mac: true } },
  ]),
  nad("other", "plain", [{ type: "bridge" }]),
];

function input(
  annotations: Record<string, string>,
  conf: Record<string, unknown> = {},
  extra: Partial<PodPlanInput> = {},
): PodPlanInput {
  return {
    conf: parseManifoldConf({
      cniVersion: "1.0.0",
      name: "manifold",
      type: "manifold",
      delegates: [{ cniVersion: "1.0.0", name: "cbr0", type: "bridge" }],
      confDir: "/nonexistent",
      ...conf,
    }),
    pod: POD,
    containerId: "c1",
    ifName: "eth0",
    runtimeArgs: [["IgnoreUnknown", "1"], ["K8S_POD_NAMESPACE", "ns1"], ["K8S_POD_NAME", "web"]],
    annotations,
    nads: new StaticNadSource(NADS),
    ...extra,
  };
}

async function rejectsWith(p: Promise<unknown>, code: number, re: RegExp): Promise<void> {
  await assert.rejects(p, (e) => {
    assert.ok(e instanceof CniError, String(e));
    assert.equal(e.code, code);
    assert.match(e.message, re);
    return true;
  });
}

Deno.test("buildPodPlan: default network first, selections in order, parsed lists kept", async () => {
  const plan = await buildPodPlan(input({ [NETWORKS]: "plain,static@data0" }));
  assert.deepEqual(plan.attachments.map((a) => [a.delegate.statusName, a.ifName]), [
    ["cbr0", "eth0"],
    ["ns1/plain", "net1"],
    ["ns1/static", "data0"],
  ]);
  for (const a of plan.attachments) {
    assert.equal(a.delegate.list.raw, a.delegate.conflist, "the parsed list is the conflist");
  }
  assert.deepEqual(plan.pod, POD);
});

Deno.test("buildPodPlan: the default-network override keeps every key of its element", async () => {
  const plan = await buildPodPlan(input({
    [DEFAULT_NETWORK]: JSON.stringify([{
      name: "blue",
      interface: "pod0",
      ips: ["10.1.0.5/24", "fd00::5/64"],
      mac: "02:00:00:00:00:05",
      "cni-args": { k: "v" },
      "default-route": ["10.1.0.1"],
    }]),
  }, { runtimeConfig: { portMappings: [] } }));
  const [def] = plan.attachments;
  assert.equal(def.delegate.statusName, "kube-system/blue");
  assert.equal(def.delegate.isDefault, true);
  assert.equal(def.ifName, "pod0");
  assert.deepEqual(def.capabilityArgs, {
    portMappings: [],
    ips: ["10.1.0.5/24", "fd00::5/64"],
    mac: "02:00:00:00:00:05",
  });
  assert.deepEqual(def.cniArgs.slice(-2), [["MAC", "02:00:00:00:00:05"], [
    "IP",
    "10.1.0.5/24,fd00::5/64",
  ]]);
  assert.deepEqual(def.selection?.["default-route"], ["10.1.0.1"]);
  const plugins = def.delegate.list.plugins as { args?: { cni?: unknown } }[];
  assert.deepEqual(plugins.map((p) => p.args?.cni), [{ k: "v" }, { k: "v" }]);
  assert.equal(def.delegate.list.raw, def.delegate.conflist);
});

Deno.test("buildPodPlan: every check fails before anything runs, in attachment order", async () => {
  await rejectsWith(
    buildPodPlan(input({ [NETWORKS]: JSON.stringify([{ name: "plain", ips: ["10.0.0.1/24"] }]) })),
    CniErrorCode.InvalidNetworkConfig,
    /"ips" was requested but no plugin declares capability "ips"/,
  );
  await rejectsWith(
    buildPodPlan(input({ [NETWORKS]: JSON.stringify([{ name: "plain", interface: "eth0" }]) })),
    CniErrorCode.InvalidNetworkConfig,
    /interface "eth0" is already used/,
  );
  await rejectsWith(
    buildPodPlan(input({ [NETWORKS]: "other/plain" }, { namespaceIsolation: true })),
    CniErrorCode.InvalidNetworkConfig,
    /namespace isolation/,
  );
  // The override's capability keys have the same MUST.
  await rejectsWith(
    buildPodPlan(
      input({ [DEFAULT_NETWORK]: '[{"name":"plain","namespace":"ns1","ips":["10.0.0.1/24"]}]' }),
    ),
    CniErrorCode.InvalidNetworkConfig,
    /network "ns1\/plain": "ips" was requested/,
  );
  // Two missing NADs: the first in list order is reported, whichever answers first.
  await rejectsWith(
    buildPodPlan(input({ [NETWORKS]: "gone-a,gone-b" })),
    CniErrorCode.InvalidNetworkConfig,
    /"ns1\/gone-a" not found/,
  );
});

Deno.test("buildPodPlan: one default-route across the override and the selection", async () => {
  const annotations = {
    [DEFAULT_NETWORK]: '[{"name":"blue","default-route":["10.1.0.1"]}]',
    [NETWORKS]: JSON.stringify([{ name: "plain", "default-route": [] }]),
  };
  await rejectsWith(
    buildPodPlan(input(annotations)),
    CniErrorCode.InvalidNetworkConfig,
    /"default-route": may be set on only one attachment/,
  );
  // With "ignore", the selection annotation is the invalid one: the override stays.
  const plan = await buildPodPlan(input(annotations, { invalidNetworkSelection: "ignore" }));
  assert.deepEqual(plan.attachments.map((a) => a.delegate.statusName), ["kube-system/blue"]);
  assert.match(plan.ignoredSelection!.message, /default-route/);
});

Deno.test('buildPodPlan: invalidNetworkSelection "ignore" plans the default network only', async () => {
  const plan = await buildPodPlan(
    input({ [NETWORKS]: "[{" }, { invalidNetworkSelection: "ignore" }),
  );
  assert.deepEqual(plan.attachments.map((a) => a.ifName), ["eth0"]);
  assert.equal(plan.ignoredSelection?.code, CniErrorCode.InvalidNetworkConfig);
  // A missing NAD is not an invalid annotation: it still fails.
  await rejectsWith(
    buildPodPlan(input({ [NETWORKS]: "gone" }, { invalidNetworkSelection: "ignore" })),
    CniErrorCode.InvalidNetworkConfig,
    /not found/,
  );
});

Deno.test("buildPodPlan: NADs are requested concurrently, each distinct NAD once", async () => {
  const asked: string[] = [];
  let release!: () => void;
  const gate = new Promise<void>((r) => release = r);
  const inner = new StaticNadSource(NADS);
  const slow: NadSource = {
    async get(namespace, name) {
      asked.push(`${namespace}/${name}`);
      await gate;
      return await inner.get(namespace, name);
    },
  };
  const p = buildPodPlan(input({ [NETWORKS]: "plain,static,plain" }, {}, { nads: slow }));
  await new Promise((r) => setTimeout(r, 10));
  assert.deepEqual(asked.sort(), ["ns1/plain", "ns1/static"], "all asked before any answered");
  release();
  assert.equal((await p).attachments.length, 4);
});

Deno.test("buildPodPlan rebuild mode: what cannot be resolved is noted, the rest planned", async () => {
  const transient: NadSource = {
    get: (namespace, name) =>
      name === "static"
        ? Promise.reject(new CniError(CniErrorCode.TryAgainLater, "API unreachable"))
        : new StaticNadSource(NADS).get(namespace, name),
  };
  const plan = await buildPodPlan(
    input({ [NETWORKS]: "plain,static,gone" }, {}, { nads: transient, mode: "rebuild" }),
  );
  assert.deepEqual(plan.attachments.map((a) => a.delegate.statusName), ["cbr0", "ns1/plain"]);
  assert.equal(plan.missing.length, 2);
  assert.match(plan.missing[0], /^ns1\/static: API unreachable/);
  assert.match(plan.missing[1], /^ns1\/gone: /);
  assert.equal(plan.transient, true);
  // A plan failing its checks falls back to the default network (ADD attached nothing else).
  const doomed = await buildPodPlan(
    input({ [NETWORKS]: JSON.stringify([{ name: "plain", mac: "02:00:00:00:00:01" }]) }, {}, {
      mode: "rebuild",
    }),
  );
  assert.deepEqual(doomed.attachments.map((a) => a.ifName), ["eth0"]);
  assert.match(doomed.missing[0], /^plan: /);
});

Deno.test("buildPodPlan: no pod (GC, STATUS, a non-Kubernetes runtime) plans the defaults", async () => {
  const plan = await buildPodPlan(
    input({ [NETWORKS]: "plain", [DEFAULT_NETWORK]: "blue" }, {}, { pod: undefined }),
  );
  assert.deepEqual(plan.attachments.map((a) => a.delegate.statusName), ["cbr0"]);
  assert.equal(plan.pod.infraContainerId, "c1");
});
