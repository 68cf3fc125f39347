/**
 * The KEP-3698 front end without a kernel: the `multinetwork.manifold.dev/networks` annotation
 * (static validations), and `buildPodPlan` resolving entries through a static PodNetwork
 * source to NAD delegates, composed with the NPWG annotation.
 */

import assert from "node:assert/strict";
import { CniError } from "../../../lib/cni/errors.ts";
import {
  parsePodNetwork,
  parsePodNetworkAttachment,
  type PodNetwork,
  type PodNetworkAttachment,
} from "../../../lib/k8s/multinetwork.ts";
import type { NetworkAttachmentDefinition } from "../../../lib/k8s/types.ts";
import { parseManifoldConf } from "../../../lib/multinet/config.ts";
import { StaticNadSource } from "../../../lib/multinet/nad/source.ts";
import { parsePodNetworkAnnotation } from "../../../lib/multinet/plan/pod_network_annotation.ts";
import {
  defaultGatewaysOf,
  type PodNetworkSource,
} from "../../../lib/multinet/plan/pod_networks.ts";
import { buildPodPlan, type PodPlanInput } from "../../../lib/multinet/plan/pod_plan.ts";

const KEP = "multinetwork.manifold.dev/networks";
const NETWORKS = "k8s.v1.cni.cncf.io/networks";
const POD = { namespace: "ns1", name: "web", uid: "u1", infraContainerId: "c1" };
const READY = { conditions: [{ type: "Ready", status: "True", reason: "Ready", message: "" }] };

const nad = (namespace: string, name: string): NetworkAttachmentDefinition => ({
  metadata: { namespace, name },
  spec: { config: JSON.stringify({ cniVersion: "1.0.0", name, type: "bridge" }) },
});

const ref = (name: string, namespace?: string) => ({
  group: "k8s.cni.cncf.io",
  kind: "network-attachment-definitions",
  name,
  ...(namespace ? { namespace } : {}),
});

function pn(name: string, spec: Record<string, unknown> = {}, status: unknown = READY): PodNetwork {
  return parsePodNetwork({
    metadata: { name },
    spec: { provider: "manifold.dev/cni", parametersRefs: [ref("dp", "ns1")], ...spec },
    status,
  });
}

function source(pns: PodNetwork[], pnas: PodNetworkAttachment[] = []): PodNetworkSource & {
  reads: string[];
} {
  const reads: string[] = [];
  return {
    reads,
    podNetwork(name) {
      reads.push(`pn:${name}`);
      return Promise.resolve(pns.find((p) => p.metadata.name === name));
    },
    attachment(namespace, name) {
      reads.push(`pna:${namespace}/${name}`);
      return Promise.resolve(
        pnas.find((p) => p.metadata.namespace === namespace && p.metadata.name === name),
      );
    },
  };
}

function input(
  annotations: Record<string, string>,
  podNetworks: PodNetworkSource | undefined,
  extra: Omit<Partial<PodPlanInput>, "conf"> & { conf?: Record<string, unknown> } = {},
): PodPlanInput {
  const { conf, ...rest } = extra;
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
    runtimeArgs: [],
    annotations,
    nads: new StaticNadSource([nad("ns1", "dp"), nad("ns1", "other"), nad("ns2", "far")]),
    podNetworks,
    ...rest,
  };
}

async function rejects7(p: Promise<unknown>, re: RegExp): Promise<void> {
  await assert.rejects(p, (e) => {
    assert.ok(e instanceof CniError, String(e));
    assert.equal(e.code, 7, e.message);
    assert.match(e.message, re);
    return true;
  });
}

Deno.test("annotation: entries parsed, isDefaultGW defaults to false", () => {
  assert.deepEqual(
    parsePodNetworkAnnotation(
      '[{"podNetworkName":"a","interfaceName":"dp0","isDefaultGW":true},{"podNetworkAttachmentName":"b"}]',
    ),
    [
      { podNetworkName: "a", interfaceName: "dp0", isDefaultGW: true },
      { podNetworkAttachmentName: "b", isDefaultGW: false },
    ],
  );
  assert.deepEqual(parsePodNetworkAnnotation("[]"), []);
  // The KEP's own field names (its Network type), the same entries.
  assert.deepEqual(
    parsePodNetworkAnnotation(
      '[{"name":"a","interfaceName":"dp0","isDefaultGW":true},{"attachmentName":"b"}]',
    ),
    [
      { podNetworkName: "a", interfaceName: "dp0", isDefaultGW: true },
      { podNetworkAttachmentName: "b", isDefaultGW: false },
    ],
  );
});

Deno.test("annotation: the KEP's static validations fail with code 7", () => {
  const bad: [string, RegExp][] = [
    ["not json", /invalid multinetwork/],
    ["{}", /invalid multinetwork/],
    ['[{"podNetworkName":"a","podNetworkAttachmentName":"b"}]', /exactly one/],
    ['[{"interfaceName":"x"}]', /exactly one/],
    ['[{"podNetworkName":"A_b"}]', /DNS-1123/],
    ['[{"podNetworkName":"a","interfaceName":"way-too-long-ifname"}]', /interface/],
    ['[{"podNetworkName":"a","name":"x"}]', /name and its alias podNetworkName are both set/],
    [
      '[{"attachmentName":"a","podNetworkAttachmentName":"a"}]',
      /attachmentName and its alias podNetworkAttachmentName/,
    ],
    ['[{"name":"a","attachmentName":"b"}]', /exactly one of name and attachmentName/],
    ['[{"name":"a","extra":1}]', /Unrecognized key/],
    [
      '[{"podNetworkName":"a","interfaceName":"x"},{"podNetworkName":"b","interfaceName":"x"}]',
      /used twice/,
    ],
    [
      '[{"podNetworkName":"a","isDefaultGW":true},{"podNetworkName":"b","isDefaultGW":true}]',
      /already true on \[0\]/,
    ],
    [JSON.stringify(Array.from({ length: 33 }, (_, i) => ({ podNetworkName: `n${i}` }))), /32/],
  ];
  for (const [text, re] of bad) {
    assert.throws(() => parsePodNetworkAnnotation(text), (e) => {
      assert.ok(e instanceof CniError);
      assert.equal(e.code, 7);
      assert.match(`${e.message} ${e.details}`, re, text);
      return true;
    });
  }
});

const DEFAULT_PN = () => pn("default", { parametersRefs: [] });

Deno.test("plan: NPWG selections first, then KEP entries, as NAD delegates with interface and isDefaultGW", async () => {
  const src = source([pn("dataplane"), DEFAULT_PN()]);
  const plan = await buildPodPlan(input({
    [NETWORKS]: "other",
    [KEP]: JSON.stringify([{ name: "default" }, {
      name: "dataplane",
      interfaceName: "dp0",
      isDefaultGW: true,
    }]),
  }, src));
  assert.deepEqual(plan.attachments.map((a) => [a.delegate.statusName, a.ifName]), [
    ["cbr0", "eth0"],
    ["ns1/other", "net1"],
    ["ns1/dp", "dp0"],
  ]);
  assert.deepEqual(plan.attachments[2].selection?.podNetwork, {
    name: "dataplane",
    isDefaultGW: true,
  });
  assert.deepEqual(src.reads.sort(), ["pn:dataplane", "pn:default"]);
  assert.equal(plan.podNetworks, true);
});

Deno.test('plan: a list without "default" puts its isDefaultGW entry, else the first, on CNI_IFNAME', async () => {
  const src = source([pn("dataplane"), pn("second", { parametersRefs: [ref("other", "ns1")] })]);
  const plan = await buildPodPlan(input({
    [KEP]: JSON.stringify([{ name: "dataplane" }, { name: "second", isDefaultGW: true }]),
  }, src));
  assert.deepEqual(plan.attachments.map((a) => [a.delegate.statusName, a.ifName]), [
    ["ns1/other", "eth0"],
    ["ns1/dp", "net1"],
  ]);
  assert.equal(plan.attachments[0].delegate.isDefault, true);
  assert.deepEqual(plan.attachments[0].selection?.podNetwork, {
    name: "second",
    isDefaultGW: false,
  });
  const first = await buildPodPlan(input({
    [KEP]: JSON.stringify([{ name: "dataplane", interfaceName: "eth0" }, { name: "second" }]),
  }, src));
  assert.deepEqual(first.attachments.map((a) => [a.delegate.statusName, a.ifName]), [
    ["ns1/dp", "eth0"],
    ["ns1/other", "net1"],
  ]);
  // The "default" PodNetwork is not read: the list does not name it.
  assert.ok(!src.reads.includes("pn:default"), src.reads.join());
  await rejects7(
    buildPodPlan(
      input({ [KEP]: JSON.stringify([{ name: "dataplane", interfaceName: "dp0" }]) }, src),
    ),
    /\[0\]\.interfaceName: .*default network on "eth0" \(CNI_IFNAME\), not "dp0"/,
  );
  await rejects7(
    buildPodPlan(input({
      [KEP]: JSON.stringify([{ name: "dataplane" }]),
      "v1.multus-cni.io/default-network": "ns1/other",
    }, src)),
    /v1.multus-cni.io\/default-network names another/,
  );
});

Deno.test('plan: "default" is a PodNetwork checked like any other, referenced once', async () => {
  await rejects7(
    buildPodPlan(input({ [KEP]: '[{"name":"default"}]' }, source([]))),
    /PodNetwork "default" does not exist/,
  );
  await rejects7(
    buildPodPlan(input(
      { [KEP]: '[{"name":"default"}]' },
      source([
        pn("default", { parametersRefs: [], enabled: false }),
      ]),
    )),
    /PodNetwork "default" is disabled/,
  );
  await rejects7(
    buildPodPlan(input(
      { [KEP]: '[{"name":"default"},{"name":"default"}]' },
      source([
        DEFAULT_PN(),
      ]),
    )),
    /\[1\]\.name: PodNetwork "default" is already referenced by \[0\]/,
  );
  // "default" through an attachment keeps the cluster network on eth0 too.
  const viaAttachment = await buildPodPlan(input(
    { [KEP]: '[{"name":"dataplane"},{"attachmentName":"to-default"}]' },
    source([DEFAULT_PN(), pn("dataplane")], [
      parsePodNetworkAttachment({
        metadata: { name: "to-default", namespace: "ns1" },
        spec: { podNetworkName: "default" },
        status: READY,
      }),
    ]),
  ));
  assert.deepEqual(viaAttachment.attachments.map((a) => [a.delegate.statusName, a.ifName]), [
    ["cbr0", "eth0"],
    ["ns1/dp", "net1"],
  ]);
  const plan = await buildPodPlan(input({ [KEP]: '[{"name":"default"}]' }, source([DEFAULT_PN()])));
  assert.deepEqual(plan.attachments.map((a) => [a.delegate.statusName, a.ifName]), [
    ["cbr0", "eth0"],
  ]);
  assert.equal(plan.podNetworks, true, "networks-status is written for it");
});

Deno.test("plan: allowedNamespaces admits the namespaces it selects only (their labels read then)", async () => {
  const restricted = pn("dataplane", {
    allowedNamespaces: { matchExpressions: [{ key: "team", operator: "In", values: ["a"] }] },
  });
  const withLabels = (labels: Record<string, string> | undefined) => {
    const src = source([restricted]);
    return Object.assign(src, {
      namespaceLabels(name: string) {
        src.reads.push(`ns:${name}`);
        return Promise.resolve(labels);
      },
    });
  };
  const list = { [KEP]: '[{"name":"dataplane"}]' };
  const ok = withLabels({ team: "a" });
  await buildPodPlan(input(list, ok));
  assert.deepEqual(ok.reads.sort(), ["ns:ns1", "pn:dataplane"]);
  await rejects7(
    buildPodPlan(input(list, withLabels({ team: "b" }))),
    /namespace "ns1" is not allowed by PodNetwork "dataplane" \(spec.allowedNamespaces\)/,
  );
  // A source that cannot read namespaces: refused (fail closed).
  await rejects7(buildPodPlan(input(list, source([restricted]))), /could not be read/);
  // Without the field, no namespace is read.
  const open = source([pn("dataplane")]);
  await buildPodPlan(input(list, open));
  assert.deepEqual(open.reads, ["pn:dataplane"]);
});

Deno.test("plan: a PodNetwork or PodNetworkAttachment being deleted accepts no new pods", async () => {
  const gone = parsePodNetwork({
    metadata: { name: "dataplane", deletionTimestamp: "2026-11-27T10:00:00Z" },
    spec: { provider: "manifold.dev/cni", parametersRefs: [ref("dp", "ns1")] },
    status: READY,
  });
  await rejects7(
    buildPodPlan(input({ [KEP]: '[{"name":"dataplane"}]' }, source([gone]))),
    /PodNetwork "dataplane" is being deleted .*accepts no new pods/,
  );
});

Deno.test("plan: a pod without the annotation reads no PodNetwork; the annotation without an API is code 7", async () => {
  const src = source([]);
  await buildPodPlan(input({ [NETWORKS]: "other" }, src));
  assert.deepEqual(src.reads, []);
  await rejects7(
    buildPodPlan(input({ [KEP]: '[{"podNetworkName":"x"}]' }, undefined)),
    /no Kubernetes API/,
  );
});

Deno.test("plan: unusable PodNetworks and parameters are refused, naming why", async () => {
  const cases: [PodNetwork[], RegExp][] = [
    [[], /PodNetwork "dataplane" does not exist/],
    [[pn("dataplane", { enabled: false })], /disabled.*AdministrativelyDisabled/],
    [[pn("dataplane", { provider: "x.io/y" })], /provider "x.io\/y"/],
    [[pn("dataplane", {}, {})], /no Ready condition yet/],
    [[pn("dataplane", {}, {
      conditions: [{ type: "Ready", status: "False", reason: "ParamsNotReady", message: "m" }],
    })], /Ready=False, reason ParamsNotReady: m/],
    [[pn("dataplane", { parametersRefs: [] })], /has no parametersRefs/],
    [[pn("dataplane", { parametersRefs: [ref("dp", "ns1"), ref("other", "ns1")] })], /2 refs/],
    [
      [pn("dataplane", { parametersRefs: [{ group: "x.io", kind: "things", name: "t" }] })],
      /x.io\/things/,
    ],
    [[pn("dataplane", { parametersRefs: [ref("dp")] })], /names no namespace/],
  ];
  for (const [pns, re] of cases) {
    await rejects7(
      buildPodPlan(input({ [KEP]: '[{"podNetworkName":"dataplane"}]' }, source(pns))),
      re,
    );
  }
});

Deno.test("plan: a PodNetworkAttachment's own ref wins; one PodNetwork per pod; isolation applies", async () => {
  const pna = (name: string, spec: Record<string, unknown>, status: unknown = READY) =>
    parsePodNetworkAttachment({ metadata: { name, namespace: "ns1" }, spec, status });
  const src = source([pn("dataplane")], [
    pna("own", { podNetworkName: "dataplane", parametersRefs: [ref("other")] }),
    pna("inherit", { podNetworkName: "dataplane" }),
    pna("pending", { podNetworkName: "dataplane" }, {}),
  ]);
  const plan = await buildPodPlan(
    input({ [KEP]: '[{"podNetworkAttachmentName":"own"}]' }, src),
  );
  // Alone in the list: it is the pod's default network, on eth0.
  assert.equal(plan.attachments[0].delegate.statusName, "ns1/other");
  assert.deepEqual(plan.attachments[0].selection?.podNetwork, {
    name: "dataplane",
    attachment: "own",
    isDefaultGW: false,
  });
  await rejects7(
    buildPodPlan(input({
      [KEP]: '[{"podNetworkName":"dataplane"},{"podNetworkAttachmentName":"inherit"}]',
    }, src)),
    /\[1\]: PodNetwork "dataplane" is already referenced by \[0\]/,
  );
  await rejects7(
    buildPodPlan(input({ [KEP]: '[{"podNetworkAttachmentName":"pending"}]' }, src)),
    /PodNetworkAttachment "ns1\/pending" is not Ready/,
  );
  await rejects7(
    buildPodPlan(input({ [KEP]: '[{"podNetworkAttachmentName":"gone"}]' }, src)),
    /PodNetworkAttachment "ns1\/gone" does not exist/,
  );
  const far = source([pn("far", { parametersRefs: [ref("far", "ns2")] })]);
  await rejects7(
    buildPodPlan(input({ [KEP]: '[{"podNetworkName":"far"}]' }, far, {
      conf: { namespaceIsolation: true },
    })),
    /namespace isolation/,
  );
});

Deno.test('plan: "default" is the cluster default network; rebuild follows refs of a network no longer Ready', async () => {
  const src = source([pn("dataplane", { enabled: false })]);
  const plan = await buildPodPlan(input(
    {
      [KEP]: '[{"podNetworkName":"default","interfaceName":"eth0"},{"podNetworkName":"dataplane"}]',
    },
    src,
    { mode: "rebuild" },
  ));
  assert.deepEqual(plan.attachments.map((a) => a.ifName), ["eth0", "net1"]);
  assert.deepEqual(plan.missing, []);
  await rejects7(
    buildPodPlan(input({ [KEP]: '[{"podNetworkName":"default","interfaceName":"net0"}]' }, src)),
    /cluster default network on "eth0"/,
  );
});

Deno.test("defaultGatewaysOf: ips gateways per family, else default routes' gw, else code 7", () => {
  assert.deepEqual(
    defaultGatewaysOf({
      cniVersion: "1.0.0",
      ips: [
        { address: "fd00::5/64", gateway: "fd00::1" },
        { address: "10.1.0.5/24", gateway: "10.1.0.1" },
      ],
    }, "n"),
    ["10.1.0.1", "fd00::1"],
  );
  assert.deepEqual(
    defaultGatewaysOf({
      cniVersion: "1.0.0",
      ips: [{ address: "10.1.0.5/24" }],
      routes: [{ dst: "10.9.0.0/16", gw: "10.1.0.9" }, { dst: "0.0.0.0/0", gw: "10.1.0.254" }],
    }, "n"),
    ["10.1.0.254"],
  );
  assert.throws(
    () => defaultGatewaysOf({ cniVersion: "1.0.0", ips: [{ address: "10.1.0.5/24" }] }, "ns/n"),
    (e) => e instanceof CniError && e.code === 7 && /no gateway/.test(e.message),
  );
});

Deno.test("buildPodNetworkStatus: default + PodNetwork attachments, one bare IP per family, isDefaultGW", async () => {
  const { buildPodNetworkStatus } = await import(
    "../../../lib/multinet/status/pod_network_status.ts"
  );
  const plan = await buildPodPlan(input({
    [NETWORKS]: "other",
    [KEP]: JSON.stringify([{ name: "default" }, {
      name: "dataplane",
      interfaceName: "dp0",
      isDefaultGW: true,
    }]),
  }, source([pn("dataplane"), DEFAULT_PN()])));
  const statuses = [
    {
      name: "cbr0",
      interface: "eth0",
      ips: ["10.1.0.5/24", "fd00::5/64", "10.1.0.6/24"],
      default: true,
    },
    { name: "ns1/other", interface: "net1", ips: ["10.3.0.2/24"], default: false },
    { name: "ns1/dp", interface: "dp0", ips: ["fd01::7/64"], default: false },
  ];
  // The KEP's NetworkStatus: one `ip` per entry, one entry per family, isDefaultGW omitempty.
  assert.deepEqual(buildPodNetworkStatus(plan.attachments, statuses), [
    { name: "default", interfaceName: "eth0", ip: "10.1.0.5" },
    { name: "default", interfaceName: "eth0", ip: "fd00::5" },
    { name: "dataplane", interfaceName: "dp0", ip: "fd01::7", isDefaultGW: true },
  ]);
});

Deno.test("plan: an NPWG error is reported before a KEP one (attachment order)", async () => {
  await rejects7(
    buildPodPlan(input({
      [NETWORKS]: "missing-nad",
      [KEP]: '[{"podNetworkName":"nope"}]',
    }, source([]))),
    /"ns1\/missing-nad" not found/,
  );
});
