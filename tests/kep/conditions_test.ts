/**
 * The KEP-3698 life cycle as pure functions: conditions and reasons for PodNetworks and
 * PodNetworkAttachments, InUse, and the minimal writes of one pass (a recording fake client).
 */

import assert from "node:assert/strict";
import {
  parsePodNetwork,
  parsePodNetworkAttachment,
  type PodNetwork,
} from "../../lib/k8s/multinetwork.ts";
import type { NetworkAttachmentDefinition } from "../../lib/k8s/types.ts";
import {
  conditionUpdate,
  desiredAttachment,
  desiredPodNetwork,
  finalizerUpdate,
  type LifecyclePolicy,
  type PodReferences,
  reconcileAll,
  type Snapshot,
} from "../../lib/kep/mod.ts";
import { nullLogger } from "../../lib/log/mod.ts";

const POLICY: LifecyclePolicy = {
  provider: "manifold.dev/cni",
  namespaceIsolation: false,
  globalNamespaces: ["default"],
  createDefault: false,
};
const ref = (name: string, namespace = "ns1") => ({
  group: "k8s.cni.cncf.io",
  kind: "network-attachment-definitions",
  name,
  namespace,
});
const nad = (namespace: string, name: string, config?: string): NetworkAttachmentDefinition => ({
  metadata: { namespace, name },
  spec: config === undefined ? {} : { config },
});
const GOOD = '{"cniVersion":"1.0.0","type":"bridge"}';

function pn(name: string, spec: Record<string, unknown> = {}, meta: Record<string, unknown> = {}) {
  return parsePodNetwork({
    metadata: { name, resourceVersion: "7", generation: 2, ...meta },
    spec: { provider: "manifold.dev/cni", parametersRefs: [ref("dp")], ...spec },
  });
}

function snapshot(o: {
  pns?: PodNetwork[];
  nads?: NetworkAttachmentDefinition[];
  pnas?: ReturnType<typeof parsePodNetworkAttachment>[];
  pods?: (Omit<PodReferences, "phase"> & { phase?: string })[];
} = {}): Snapshot {
  return {
    podNetworks: new Map((o.pns ?? []).map((p) => [p.metadata.name, p])),
    attachments: new Map(
      (o.pnas ?? []).map((p) => [`${p.metadata.namespace}/${p.metadata.name}`, p]),
    ),
    nads: new Map(
      (o.nads ?? [nad("ns1", "dp", GOOD)]).map((
        n,
      ) => [`${n.metadata.namespace}/${n.metadata.name}`, n]),
    ),
    pods: new Map(
      (o.pods ?? []).map((p) => [`${p.namespace}/${p.name}`, { phase: "Running", ...p }]),
    ),
  };
}

const text = (d: { conditions: { type: string; status: string; reason?: string }[] }) =>
  d.conditions.map((c) => `${c.type}=${c.status}/${c.reason}`).join(" ");

Deno.test("PodNetwork: Ready, and each KEP reason", async () => {
  const cases: [PodNetwork, Snapshot | undefined, string][] = [
    [pn("a"), undefined, "ParamsReady=True/ParamsReady Ready=True/Ready"],
    [
      pn("a", { enabled: false }),
      undefined,
      "ParamsReady=True/ParamsReady Ready=False/AdministrativelyDisabled",
    ],
    [
      pn("a"),
      snapshot({ nads: [] }),
      "ParamsReady=False/NetworkAttachmentDefinitionNotFound Ready=False/ParamsNotReady",
    ],
    [
      pn("a"),
      snapshot({ nads: [nad("ns1", "dp", "{")] }),
      "ParamsReady=False/InvalidConfig Ready=False/ParamsNotReady",
    ],
    [
      pn("a"),
      snapshot({ nads: [nad("ns1", "dp", '{"cniVersion":"1.0.0","type":"manifold"}')] }),
      "ParamsReady=False/InvalidConfig Ready=False/ParamsNotReady",
    ],
    [
      pn("a"),
      snapshot({ nads: [nad("ns1", "dp")] }),
      "ParamsReady=True/ParamsReady Ready=True/Ready",
    ],
    [
      pn("a", { parametersRefs: [] }),
      undefined,
      "ParamsReady=False/InvalidParametersRefs Ready=False/ParamsNotReady",
    ],
    [
      pn("a", { parametersRefs: [ref("dp"), ref("dp2")] }),
      undefined,
      "ParamsReady=False/InvalidParametersRefs Ready=False/ParamsNotReady",
    ],
  ];
  for (const [p, snap, want] of cases) {
    assert.equal(text(await desiredPodNetwork(snap ?? snapshot(), POLICY, p)), want);
  }
  // Isolation: a cluster-scoped network's NAD must be in a global namespace.
  const iso = { ...POLICY, namespaceIsolation: true };
  assert.equal(
    text(await desiredPodNetwork(snapshot(), iso, pn("a"))),
    "ParamsReady=False/NamespaceIsolation Ready=False/ParamsNotReady",
  );
  const global = snapshot({ nads: [nad("default", "dp", GOOD)] });
  assert.equal(
    text(await desiredPodNetwork(global, iso, pn("a", { parametersRefs: [ref("dp", "default")] }))),
    "ParamsReady=True/ParamsReady Ready=True/Ready",
  );
});

Deno.test("PodNetwork in use: by a live pod, directly or through an attachment, or by an attachment", async () => {
  const pnaOf = (name: string, network: string) =>
    parsePodNetworkAttachment({
      metadata: { name, namespace: "ns1" },
      spec: { podNetworkName: network },
    });
  const p = pn("a");
  const inUse = async (s: Snapshot) => (await desiredPodNetwork(s, POLICY, p)).inUse;
  assert.equal(await inUse(snapshot()), false);
  assert.equal(
    await inUse(
      snapshot({
        pods: [{
          namespace: "x",
          name: "p",
          entries: [{ podNetworkName: "a", isDefaultGW: false }],
        }],
      }),
    ),
    true,
  );
  assert.equal(
    await inUse(
      snapshot({
        pods: [{
          namespace: "x",
          name: "p",
          phase: "Succeeded",
          entries: [{ podNetworkName: "a", isDefaultGW: false }],
        }],
      }),
    ),
    false,
  );
  assert.equal(await inUse(snapshot({ pnas: [pnaOf("f", "a")] })), true);
  assert.equal(await inUse(snapshot({ pnas: [pnaOf("f", "b")] })), false);
});

Deno.test("PodNetworkAttachment: PodNetworkNotReady, ParamsNotReady, Ready; in use by a pod of its namespace", async () => {
  const pna = (spec: Record<string, unknown>) =>
    parsePodNetworkAttachment({ metadata: { name: "f", namespace: "ns1" }, spec });
  const readyPn = parsePodNetwork({
    metadata: { name: "a" },
    spec: { provider: "manifold.dev/cni" },
    status: { conditions: [{ type: "Ready", status: "True" }] },
  });
  const s = snapshot({ pns: [readyPn] });
  assert.equal(
    text(await desiredAttachment(snapshot(), POLICY, pna({ podNetworkName: "a" }))),
    "ParamsReady=True/PodNetworkParameters Ready=False/PodNetworkNotReady",
  );
  assert.equal(
    text(await desiredAttachment(s, POLICY, pna({ podNetworkName: "a" }))),
    "ParamsReady=True/PodNetworkParameters Ready=True/Ready",
  );
  assert.equal(
    text(
      await desiredAttachment(
        s,
        POLICY,
        pna({ podNetworkName: "a", parametersRefs: [ref("nope")] }),
      ),
    ),
    "ParamsReady=False/NetworkAttachmentDefinitionNotFound Ready=False/ParamsNotReady",
  );
  const used = snapshot({
    pns: [readyPn],
    pods: [{
      namespace: "ns1",
      name: "p",
      entries: [{ podNetworkAttachmentName: "f", isDefaultGW: false }],
    }],
  });
  assert.equal((await desiredAttachment(used, POLICY, pna({ podNetworkName: "a" }))).inUse, true);
  const otherNs = snapshot({
    pods: [{
      namespace: "ns2",
      name: "p",
      entries: [{ podNetworkAttachmentName: "f", isDefaultGW: false }],
    }],
  });
  assert.equal(
    (await desiredAttachment(otherNs, POLICY, pna({ podNetworkName: "a" }))).inUse,
    false,
  );
});

Deno.test("PodNetworkAttachment outside the PodNetwork's allowedNamespaces: Ready=False NamespaceNotAllowed", async () => {
  const restricted = parsePodNetwork({
    metadata: { name: "a", generation: 1 },
    spec: {
      provider: "manifold.dev/cni",
      parametersRefs: [ref("dp")],
      allowedNamespaces: { matchLabels: { team: "a" } },
    },
    status: { conditions: [{ type: "Ready", status: "True" }] },
  });
  const pna = parsePodNetworkAttachment({
    metadata: { name: "fast", namespace: "ns1" },
    spec: { podNetworkName: "a" },
  });
  const snap = snapshot({ pns: [restricted], pnas: [pna] });
  snap.namespaces = new Map([["ns1", { team: "b" }]]);
  assert.match(
    text(await desiredAttachment(snap, POLICY, pna)),
    /Ready=False\/NamespaceNotAllowed/,
  );
  snap.namespaces.set("ns1", { team: "a" });
  assert.match(text(await desiredAttachment(snap, POLICY, pna)), /Ready=True\/Ready/);
});

Deno.test("conditionUpdate keeps lastTransitionTime while the status holds; undefined when nothing changes", () => {
  const d = [{ type: "Ready", status: "True", reason: "Ready", message: "m" }];
  const first = conditionUpdate([], d, 2, "2026-01-01T00:00:00Z")!;
  assert.deepEqual(first, [{
    ...d[0],
    lastTransitionTime: "2026-01-01T00:00:00Z",
    observedGeneration: 2,
  }]);
  assert.equal(conditionUpdate(first, d, 2, "2026-02-02T00:00:00Z"), undefined);
  const msg = conditionUpdate(first, [{ ...d[0], message: "n" }], 2, "2026-02-02T00:00:00Z")!;
  assert.equal(msg[0].lastTransitionTime, "2026-01-01T00:00:00Z", "same status: time kept");
  const flip = conditionUpdate(first, [{ ...d[0], status: "False" }], 2, "2026-02-02T00:00:00Z")!;
  assert.equal(flip[0].lastTransitionTime, "2026-02-02T00:00:00Z");
  // Other condition types are kept.
  const other = [{ type: "Custom", status: "True", lastTransitionTime: "t" }];
  assert.deepEqual(conditionUpdate(other, d, undefined, "x")!.map((c) => c.type), [
    "Custom",
    "Ready",
  ]);
});

Deno.test("finalizerUpdate: added when first seen (not while deleting), removed when deleting and unused; not ours: never added, released alike", () => {
  const F = "multinetwork.manifold.dev/in-use";
  assert.deepEqual(finalizerUpdate({ name: "a", finalizers: ["x"] }, true), ["x", F]);
  assert.deepEqual(finalizerUpdate({ name: "a" }, false), [F], "before any user");
  assert.equal(finalizerUpdate({ name: "a", finalizers: [F] }, true), undefined);
  assert.equal(finalizerUpdate({ name: "a", finalizers: [F] }, false), undefined, "kept");
  assert.equal(finalizerUpdate({ name: "a", deletionTimestamp: "t" }, true), undefined);
  assert.equal(
    finalizerUpdate({ name: "a", finalizers: [F], deletionTimestamp: "t" }, true),
    undefined,
  );
  assert.deepEqual(
    finalizerUpdate({ name: "a", finalizers: ["x", F], deletionTimestamp: "t" }, false),
    ["x"],
  );
  // Not ours (provider changed): never added, released once deleting and unused.
  assert.equal(finalizerUpdate({ name: "a" }, false, false), undefined);
  assert.equal(finalizerUpdate({ name: "a", finalizers: [F] }, false, false), undefined);
  assert.equal(
    finalizerUpdate({ name: "a", finalizers: [F], deletionTimestamp: "t" }, true, false),
    undefined,
  );
  assert.deepEqual(
    finalizerUpdate({ name: "a", finalizers: [F], deletionTimestamp: "t" }, false, false),
    [],
  );
});

Deno.test("reconcileAll: writes only the difference, with resourceVersion on finalizer patches; other providers untouched", async () => {
  const writes: string[] = [];
  const kube = {
    send(method: string, path: string, body?: unknown) {
      writes.push(`${method} ${path} ${JSON.stringify(body)}`);
      return Promise.resolve({});
    },
  };
  const used = snapshot({
    pns: [pn("a"), pn("other", { provider: "x.io/y" })],
    pods: [{ namespace: "ns1", name: "p", entries: [{ podNetworkName: "a", isDefaultGW: false }] }],
  });
  const r = await reconcileAll(kube, used, POLICY, nullLogger);
  assert.deepEqual(r, { statusWrites: 1, finalizerWrites: 1, failures: 0 });
  assert.equal(writes.length, 2, "nothing written to the other provider's network");
  assert.match(
    writes[0],
    /^PATCH \/apis\/multinetwork.manifold.dev\/v1alpha1\/podnetworks\/a\/status /,
  );
  assert.equal(
    writes[1],
    'PATCH /apis/multinetwork.manifold.dev/v1alpha1/podnetworks/a {"metadata":{"finalizers":["multinetwork.manifold.dev/in-use"],"resourceVersion":"7"}}',
  );
  // The same state again, as the server now holds it: nothing to write.
  const conditions = JSON.parse(writes[0].slice(writes[0].indexOf("{"))).status.conditions;
  const settled = snapshot({
    pns: [parsePodNetwork({
      metadata: { name: "a", generation: 2, finalizers: ["multinetwork.manifold.dev/in-use"] },
      spec: { provider: "manifold.dev/cni", parametersRefs: [ref("dp")] },
      status: { conditions },
    })],
    pods: [{ namespace: "ns1", name: "p", entries: [{ podNetworkName: "a", isDefaultGW: false }] }],
  });
  writes.length = 0;
  assert.deepEqual(await reconcileAll(kube, settled, POLICY, nullLogger), {
    statusWrites: 0,
    finalizerWrites: 0,
    failures: 0,
  });
  assert.deepEqual(writes, []);
});
