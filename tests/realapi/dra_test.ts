/**
 * Devices from DRA ResourceClaims against a real kube-apiserver v1.32 with the
 * `DynamicResourceAllocation` feature gate and `resource.k8s.io/v1beta1` (v1 is not served
 * there, so the fallback runs for real). The test creates the DeviceClass, the ResourceSlice,
 * the ResourceClaims (allocation written through the `status` subresource: no scheduler runs)
 * and a pod with `spec.resourceClaims` (one direct, one template-generated named in
 * `status.resourceClaimStatuses`); the plugin process, with deploy/'s ServiceAccount token
 * bound only to deploy/'s ClusterRole, runs ADD: each delegate gets its device's PCI address
 * and network-status carries device-info. A claim that is not allocated fails ADD with code 7.
 * Needs root and `MANIFOLD_KUBE_APISERVER` (else skipped with one line).
 */

import assert from "node:assert/strict";
import { type KubeApiServer, realApiSuite } from "../support/kube_apiserver.ts";
import type { KubeObject } from "../support/kube_rest.ts";
import { k8sArgs } from "../support/plugin.ts";
import { linkNames } from "../support/netns.ts";
import { recordedCalls, writeRecordingDelegate } from "../support/recording_delegate.ts";
import { expectOk } from "../support/world.ts";
import { deployObjects, done, networkStatus, POD, type RealWorld, realWorld } from "./cluster.ts";

const suite = realApiSuite({
  root: true,
  extraArgs: [
    "--feature-gates=DynamicResourceAllocation=true",
    "--runtime-config=resource.k8s.io/v1beta1=true",
  ],
});

const SYSFS = new URL("../fixtures/sysfs/vf-rdma", import.meta.url).pathname;
const RESOURCE = "example.com/sriov_vf";
const DRIVER = "sriov.example.com";
const NODE = "envtest-node";
const BETA = "/apis/resource.k8s.io/v1beta1";

/** deploy/'s ServiceAccount, ClusterRole and binding (idempotent); a token of the account. */
async function deployToken(api: KubeApiServer): Promise<string> {
  for (const o of await deployObjects()) {
    if (o.metadata?.name !== "manifold") continue;
    if (["ServiceAccount", "ClusterRole", "ClusterRoleBinding"].includes(o.kind)) {
      await api.admin.ensure(o);
    }
  }
  return await api.admin.serviceAccountToken("kube-system", "manifold");
}

/** POST to a resource.k8s.io v1beta1 collection (ignores "already exists"). */
async function create(api: KubeApiServer, path: string, body: KubeObject): Promise<void> {
  const r = await api.admin.raw("POST", `${BETA}/${path}`, { body });
  if (r.status >= 400 && r.status !== 409) {
    throw new Error(`POST ${path}: ${r.status} ${JSON.stringify(r.body)}`);
  }
}

/** The node's slice: two VFs with Multus's attributes and a GPU without them. */
async function createSlice(api: KubeApiServer): Promise<void> {
  await create(api, "deviceclasses", {
    apiVersion: "resource.k8s.io/v1beta1",
    kind: "DeviceClass",
    metadata: { name: "sriov-vf" },
    spec: { selectors: [{ cel: { expression: `device.driver == "${DRIVER}"` } }] },
  });
  const vf = (id: string) => ({
    "k8s.cni.cncf.io/deviceID": { string: id },
    "k8s.cni.cncf.io/resourceName": { string: RESOURCE },
  });
  await create(api, "resourceslices", {
    apiVersion: "resource.k8s.io/v1beta1",
    kind: "ResourceSlice",
    metadata: { name: `${NODE}-sriov` },
    spec: {
      driver: DRIVER,
      nodeName: NODE,
      pool: { name: NODE, generation: 1, resourceSliceCount: 1 },
      devices: [
        { name: "vf-5", basic: { attributes: vf("0000:18:02.5") } },
        { name: "vf-6", basic: { attributes: vf("0000:18:02.6") } },
        { name: "gpu-0", basic: { attributes: { model: { string: "a100" } } } },
      ],
    },
  });
}

/** A claim in `ns`; `devices` written as its allocation through `/status` unless undefined. */
async function createClaim(api: KubeApiServer, ns: string, name: string, devices?: string[]) {
  await create(api, `namespaces/${ns}/resourceclaims`, {
    apiVersion: "resource.k8s.io/v1beta1",
    kind: "ResourceClaim",
    metadata: { name, namespace: ns },
    spec: { devices: { requests: [{ name: "vf", deviceClassName: "sriov-vf" }] } },
  });
  if (!devices) return;
  await api.admin.request("PATCH", `${BETA}/namespaces/${ns}/resourceclaims/${name}/status`, {
    contentType: "application/merge-patch+json",
    body: {
      status: {
        allocation: {
          devices: {
            results: devices.map((device) => ({
              request: "vf",
              driver: DRIVER,
              pool: NODE,
              device,
            })),
          },
          nodeSelector: {
            nodeSelectorTerms: [{
              matchFields: [{ key: "metadata.name", operator: "In", values: [NODE] }],
            }],
          },
        },
      },
    },
  });
}

/**
 * Replaces the world's pod by one with `spec.resourceClaims` (and the generated claims' names
 * in its status); returns the new pod's UID.
 */
async function podWithClaims(
  w: RealWorld,
  claims: KubeObject[],
  statuses: KubeObject[] = [],
): Promise<string> {
  const old = await w.pod();
  await w.api.admin.delete("v1", "Pod", w.ns, POD);
  const pod = await w.api.admin.create({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: POD, namespace: w.ns, annotations: old.metadata.annotations },
    spec: {
      nodeName: NODE,
      automountServiceAccountToken: false,
      resourceClaims: claims,
      containers: [{
        name: "app",
        image: "registry.k8s.io/pause:3.10",
        resources: { claims: claims.map((c) => ({ name: c.name })) },
      }],
    },
  });
  if (statuses.length) {
    await w.api.admin.patch(
      { apiVersion: "v1", kind: "Pod", namespace: w.ns, name: POD },
      { status: { resourceClaimStatuses: statuses } },
      "status",
    );
  }
  return pod.metadata.uid;
}

/** A world with NAD `vf-net` (resourceName {@link RESOURCE}, recording delegate `rec-vf`). */
async function draWorld(api: KubeApiServer, base: string, networks: string) {
  const token = await deployToken(api);
  const w = await realWorld(api, {
    annotations: { "k8s.v1.cni.cncf.io/networks": networks },
    conf: {
      podResourcesSocket: `${base}/absent.sock`,
      deviceCheckpointFile: `${base}/absent-checkpoint`,
      deviceInfoDir: `${base}/devinfo`,
      sysfsRoot: SYSFS,
    },
    token,
  });
  const log = `${base}/calls.jsonl`;
  await writeRecordingDelegate(w.dirs.bin, "rec-vf", log);
  await api.admin.create({
    apiVersion: "k8s.cni.cncf.io/v1",
    kind: "NetworkAttachmentDefinition",
    metadata: {
      name: "vf-net",
      namespace: w.ns,
      annotations: { "k8s.v1.cni.cncf.io/resourceName": RESOURCE },
    },
    spec: {
      config: JSON.stringify({
        cniVersion: "1.0.0",
        name: "vf-net",
        plugins: [{
          type: "rec-vf",
          bridge: w.br.sec,
          ipam: { type: "host-local", dataDir: w.dirs.ipam, subnet: "10.240.30.0/24" },
          capabilities: { deviceID: true },
        }],
      }),
    },
  });
  await createSlice(api);
  return { w, log };
}

suite.test("DRA on kube 1.32 (v1beta1): claims' PCI addresses reach the delegates, device-info in network-status", async (api) => {
  const base = await Deno.makeTempDir({ prefix: "mfdra-real-" });
  let w: RealWorld | undefined;
  try {
    const made = await draWorld(api, base, "vf-net, vf-net");
    w = made.w;
    await createClaim(api, w.ns, "nic-claim", ["gpu-0", "vf-5"]);
    await createClaim(api, w.ns, `${POD}-more-x7k2q`, ["vf-6"]);
    const uid = await podWithClaims(
      w,
      [{ name: "nic", resourceClaimName: "nic-claim" }, {
        name: "more",
        resourceClaimTemplateName: "vf-template",
      }],
      [{ name: "more", resourceClaimName: `${POD}-more-x7k2q` }],
    );
    const args = k8sArgs(w.ns, POD, w.containerId, uid);

    expectOk(await w.call("ADD", { args }), "ADD");
    const adds = await recordedCalls(made.log, "ADD");
    assert.deepEqual(
      adds.map((
        r,
      ) => [r.env.CNI_IFNAME, r.config.deviceID, r.config.pciBusID, r.config.runtimeConfig]),
      [
        ["net1", "0000:18:02.5", "0000:18:02.5", { deviceID: "0000:18:02.5" }],
        ["net2", "0000:18:02.6", "0000:18:02.6", { deviceID: "0000:18:02.6" }],
      ],
    );
    const status = networkStatus(await w.pod());
    assert.ok(status, "network-status written");
    const net1 = status.find((s) => s.interface === "net1");
    assert.deepEqual(net1?.["device-info"], {
      type: "pci",
      version: "1.1.0",
      pci: {
        "pci-address": "0000:18:02.5",
        "rdma-device": "mlx5_3",
        "pf-pci-address": "0000:18:00.0",
      },
    });
    const net2 = status.find((s) => s.interface === "net2");
    assert.equal(
      (net2?.["device-info"] as { pci?: Record<string, unknown> } | undefined)?.pci
        ?.["pci-address"],
      "0000:18:02.6",
    );

    expectOk(await w.call("DEL", { args }), "DEL");
    assert.deepEqual(
      (await recordedCalls(made.log, "DEL")).map((r) => r.config.deviceID),
      ["0000:18:02.6", "0000:18:02.5"],
    );
    assert.deepEqual(await linkNames(w.podNetns), []);
  } finally {
    if (w) await done(w);
    await Deno.remove(base, { recursive: true }).catch(() => {});
  }
});

suite.test("DRA on kube 1.32: a claim not allocated yet fails ADD with code 7 before any delegate", async (api) => {
  const base = await Deno.makeTempDir({ prefix: "mfdra-real-" });
  let w: RealWorld | undefined;
  try {
    const made = await draWorld(api, base, "vf-net");
    w = made.w;
    await createClaim(api, w.ns, "pending-claim");
    const uid = await podWithClaims(w, [{ name: "nic", resourceClaimName: "pending-claim" }]);
    const add = await w.call("ADD", { args: k8sArgs(w.ns, POD, w.containerId, uid) });
    assert.equal(add.code, 1, add.stdout);
    const err = JSON.parse(add.stdout) as { code: number; msg: string };
    assert.equal(err.code, 7);
    assert.match(
      err.msg,
      new RegExp(`pod ${w.ns}/${POD}: ResourceClaim ${w.ns}/pending-claim is not allocated yet`),
    );
    assert.match(err.msg, new RegExp(`${w.ns}/vf-net`));
    assert.deepEqual(await recordedCalls(made.log, "ADD"), []);
    assert.deepEqual(await linkNames(w.podNetns), []);
  } finally {
    if (w) await done(w);
    await Deno.remove(base, { recursive: true }).catch(() => {});
  }
});

suite.end();
