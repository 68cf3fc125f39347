/**
 * Devices from DRA ResourceClaims end to end, through the plugin process as a runtime calls it
 * (root: real netns, real bridge delegates wrapped by a recording script), against the HTTPS
 * API stand-in serving `resource.k8s.io` (`v1`, or `v1beta1` only as kube-apiserver 1.32):
 *
 * - a pod with a direct claim and a template-generated one: each attachment of a NAD annotated
 *   `k8s.v1.cni.cncf.io/resourceName` gets the PCI address of an allocated device whose slice
 *   entry carries that resource (`deviceID`/`pciBusID` in the config, runtimeConfig `deviceID`);
 *   a GPU in the same claim without the attributes is skipped; device-info (from a fixture
 *   sysfs tree) is in network-status; DEL gets the same deviceID;
 * - `v1` not served: the `v1beta1` fallback (both calls seen), and the version remembered;
 * - a pod with claims whose NAD's resource no claim carries falls back to kubelet's devices;
 * - every error: code 7 before any delegate runs, naming pod, claim, NAD and device;
 * - a pod without claims never reads `resource.k8s.io`;
 * - `manifold daemon` serves the same, asking for the served version once per process.
 */

import assert from "node:assert/strict";
import { isRoot, linkNames } from "../support/netns.ts";
import type { DraObject } from "../support/kube_api.ts";
import { done, expectOk, NS, POD, podStatus, type World, world } from "../support/world.ts";
import { recordedCalls, writeRecordingDelegate } from "../support/recording_delegate.ts";
import { startDaemon } from "../support/daemon.ts";
import { until } from "../support/wait.ts";
import {
  type PodResourcesServer,
  startPodResourcesServer,
} from "../devices/pod_resources_server.ts";

const root = { ignore: !isRoot(), sanitizeResources: false, sanitizeOps: false };
const SYSFS = new URL("../fixtures/sysfs/vf-rdma", import.meta.url).pathname;
const RESOURCE = "example.com/sriov_vf";
const DRIVER = "sriov.example.com";
const NODE = "node-a";

type Version = "v1" | "v1beta1";

/** A ResourceSlice of {@link DRIVER} on {@link NODE} in `version`'s shape. */
function slice(
  version: Version,
  devices: { name: string; attributes: Record<string, unknown> }[],
): DraObject {
  return {
    apiVersion: `resource.k8s.io/${version}`,
    kind: "ResourceSlice",
    metadata: { name: `${NODE}-${DRIVER}` },
    spec: {
      driver: DRIVER,
      nodeName: NODE,
      pool: { name: NODE, generation: 1, resourceSliceCount: 1 },
      devices: version === "v1"
        ? devices
        : devices.map((d) => ({ name: d.name, basic: { attributes: d.attributes } })),
    },
  };
}

/** Multus attributes of a VF (either may be left out). */
function vf(deviceId?: string, resourceName: string | undefined = RESOURCE) {
  const a: Record<string, unknown> = { vfIndex: { int: 2 } };
  if (deviceId) a["k8s.cni.cncf.io/deviceID"] = { string: deviceId };
  if (resourceName) a["k8s.cni.cncf.io/resourceName"] = { string: resourceName };
  return a;
}

/** A ResourceClaim in {@link NS}; `devices` allocated (status) unless undefined. */
function claim(version: Version, name: string, devices?: string[]): DraObject {
  const request = version === "v1"
    ? { name: "vf", exactly: { deviceClassName: "sriov-vf", allocationMode: "ExactCount" } }
    : { name: "vf", deviceClassName: "sriov-vf", allocationMode: "ExactCount" };
  const obj: DraObject = {
    apiVersion: `resource.k8s.io/${version}`,
    kind: "ResourceClaim",
    metadata: { name, namespace: NS },
    spec: { devices: { requests: [request] } },
    status: {},
  };
  if (devices) {
    obj.status = {
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
    };
  }
  return obj;
}

interface Setup {
  versions?: Version[];
  /** Pod `spec.resourceClaims`; default none. */
  claims?: Record<string, unknown>[];
  /** Pod `status.resourceClaimStatuses`. */
  statuses?: Record<string, unknown>[];
  /** The selection annotation. */
  networks: string[];
  /** Extra NADs: name → resourceName. */
  nads?: Record<string, string>;
  conf?: Record<string, unknown>;
}

/** A world with a recording delegate `rec-vf` behind NAD `vf-net` (resource {@link RESOURCE}). */
async function draWorld(base: string, s: Setup): Promise<{ w: World; log: string }> {
  const w = await world({
    annotations: {
      "k8s.v1.cni.cncf.io/networks": JSON.stringify(s.networks.map((name) => ({ name }))),
    },
    conf: {
      podResourcesSocket: `${base}/absent.sock`,
      deviceCheckpointFile: `${base}/absent-checkpoint`,
      deviceInfoDir: `${base}/devinfo`,
      sysfsRoot: SYSFS,
      ...s.conf,
    },
    kubeApi: { resourceVersions: s.versions ?? ["v1"] },
  });
  const log = `${base}/calls.jsonl`;
  await writeRecordingDelegate(w.dirs.bin, "rec-vf", log);
  const nads = { "vf-net": RESOURCE, ...s.nads };
  for (const [i, [name, resourceName]] of Object.entries(nads).entries()) {
    w.api.addNad({
      namespace: NS,
      name,
      annotations: { "k8s.v1.cni.cncf.io/resourceName": resourceName },
      config: JSON.stringify({
        cniVersion: "1.0.0",
        name,
        plugins: [{
          type: "rec-vf",
          bridge: w.br.sec,
          ipam: { type: "host-local", dataDir: w.dirs.ipam, subnet: `10.240.${20 + i}.0/24` },
          capabilities: { deviceID: true },
        }],
      }),
    });
  }
  const pod = w.api.getPod(NS, POD) as {
    metadata: { uid: string; annotations: Record<string, string> };
  };
  w.api.addPod({
    namespace: NS,
    name: POD,
    uid: pod.metadata.uid,
    annotations: pod.metadata.annotations,
    spec: { nodeName: NODE, ...(s.claims ? { resourceClaims: s.claims } : {}) },
    status: s.statuses ? { resourceClaimStatuses: s.statuses } : {},
  });
  return { w, log };
}

function draRequests(w: World): string[] {
  return w.api.requests.filter((r) => r.path.startsWith("/apis/resource.k8s.io/"))
    .map((r) => `${r.status} ${r.path}${r.query}`);
}

/** Runs a DRA scenario in a temp dir; `fn` gets the world and the delegate log. */
async function scenario(s: Setup, fn: (w: World, log: string) => Promise<void>): Promise<void> {
  const base = await Deno.makeTempDir({ prefix: "mfdra-" });
  let w: World | undefined;
  try {
    const made = await draWorld(base, s);
    w = made.w;
    await fn(w, made.log);
  } finally {
    if (w) await done(w);
    await Deno.remove(base, { recursive: true }).catch(() => {});
  }
}

Deno.test({
  name: "DRA v1: claim devices' PCI addresses reach each delegate; device-info in network-status",
  ...root,
  async fn() {
    await scenario({
      networks: ["vf-net", "vf-net"],
      claims: [
        { name: "nic", resourceClaimName: "nic-claim" },
        { name: "more", resourceClaimTemplateName: "vf-template" },
      ],
      statuses: [{ name: "more", resourceClaimName: `${POD}-more-x7k2q` }],
    }, async (w, log) => {
      w.api.putDra(slice("v1", [
        { name: "vf-5", attributes: vf("0000:18:02.5") },
        { name: "vf-6", attributes: vf("0000:18:02.6") },
        { name: "gpu-0", attributes: { model: { string: "a100" } } },
        { name: "vf-9", attributes: vf("0000:18:02.7") }, // not allocated to this pod
      ]));
      w.api.putDra(claim("v1", "nic-claim", ["gpu-0", "vf-5"]));
      w.api.putDra(claim("v1", `${POD}-more-x7k2q`, ["vf-6"]));

      const add = await w.call("ADD");
      expectOk(add, "ADD");
      const adds = await recordedCalls(log, "ADD");
      assert.deepEqual(
        adds.map((r) => [
          r.env.CNI_IFNAME,
          r.config.deviceID,
          r.config.pciBusID,
          r.config.runtimeConfig,
        ]),
        [
          ["net1", "0000:18:02.5", "0000:18:02.5", { deviceID: "0000:18:02.5" }],
          ["net2", "0000:18:02.6", "0000:18:02.6", { deviceID: "0000:18:02.6" }],
        ],
      );
      const status = podStatus(w);
      const info = (ifName: string) => status.find((s) => s.interface === ifName)?.["device-info"];
      assert.deepEqual(info("net1"), {
        type: "pci",
        version: "1.1.0",
        pci: {
          "pci-address": "0000:18:02.5",
          "rdma-device": "mlx5_3",
          "pf-pci-address": "0000:18:00.0",
        },
      });
      assert.equal(
        (info("net2") as { pci?: Record<string, unknown> }).pci?.["pci-address"],
        "0000:18:02.6",
      );
      // Claims read in parallel, then the driver's slices of the node: v1 served, v1 used.
      assert.deepEqual(draRequests(w).sort(), [
        `200 /apis/resource.k8s.io/v1/namespaces/${NS}/resourceclaims/nic-claim`,
        `200 /apis/resource.k8s.io/v1/namespaces/${NS}/resourceclaims/${POD}-more-x7k2q`,
        `200 /apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.driver%3D${DRIVER}%2Cspec.nodeName%3D${NODE}`,
      ]);

      expectOk(await w.call("DEL"), "DEL");
      const dels = await recordedCalls(log, "DEL");
      assert.deepEqual(dels.map((r) => [r.env.CNI_IFNAME, r.config.deviceID]), [
        ["net2", "0000:18:02.6"],
        ["net1", "0000:18:02.5"],
      ]);
    });
  },
});

Deno.test({
  name: "DRA v1beta1 (kube 1.32): v1 is not served, the fallback reads v1beta1 shapes",
  ...root,
  async fn() {
    await scenario({
      versions: ["v1beta1"],
      networks: ["vf-net"],
      claims: [{ name: "nic", resourceClaimName: "nic-claim" }],
    }, async (w, log) => {
      w.api.putDra(slice("v1beta1", [{ name: "vf-5", attributes: vf("0000:18:02.5") }]));
      w.api.putDra(claim("v1beta1", "nic-claim", ["vf-5"]));
      expectOk(await w.call("ADD"), "ADD");
      const adds = await recordedCalls(log, "ADD");
      assert.deepEqual(adds.map((r) => r.config.deviceID), ["0000:18:02.5"]);
      const seen = draRequests(w);
      assert.deepEqual(seen, [
        `404 /apis/resource.k8s.io/v1/namespaces/${NS}/resourceclaims/nic-claim`,
        `200 /apis/resource.k8s.io/v1beta1/namespaces/${NS}/resourceclaims/nic-claim`,
        // The version that answered is used alone from then on.
        `200 /apis/resource.k8s.io/v1beta1/resourceslices?fieldSelector=spec.driver%3D${DRIVER}%2Cspec.nodeName%3D${NODE}`,
      ]);
      expectOk(await w.call("DEL"), "DEL");
    });
  },
});

Deno.test({
  name: "DRA: a resource no claim carries comes from kubelet's device plugins",
  ...root,
  async fn() {
    const base = await Deno.makeTempDir({ prefix: "mfdra-pr-" });
    let server: PodResourcesServer | undefined;
    try {
      server = await startPodResourcesServer(base, {
        pods: [{
          name: POD,
          namespace: NS,
          containers: [{
            name: "app",
            devices: [{ resourceName: "example.com/legacy", deviceIds: ["0000:18:02.6"] }],
          }],
        }],
      });
      await scenario({
        networks: ["vf-net", "legacy-net"],
        nads: { "legacy-net": "example.com/legacy" },
        claims: [{ name: "nic", resourceClaimName: "nic-claim" }],
        conf: { podResourcesSocket: server.socket },
      }, async (w, log) => {
        w.api.putDra(slice("v1", [{ name: "vf-5", attributes: vf("0000:18:02.5") }]));
        w.api.putDra(claim("v1", "nic-claim", ["vf-5"]));
        expectOk(await w.call("ADD"), "ADD");
        const adds = await recordedCalls(log, "ADD");
        assert.deepEqual(adds.map((r) => [r.env.CNI_IFNAME, r.config.deviceID]), [
          ["net1", "0000:18:02.5"],
          ["net2", "0000:18:02.6"],
        ]);
        expectOk(await w.call("DEL"), "DEL");
      });
    } finally {
      await server?.stop();
      await Deno.remove(base, { recursive: true }).catch(() => {});
    }
  },
});

/** One error case: ADD fails with code 7 before any delegate ran; `msg` matches every pattern. */
async function expectPlanError(s: Setup, put: (w: World) => void, patterns: RegExp[]) {
  await scenario(s, async (w, log) => {
    put(w);
    const add = await w.call("ADD");
    assert.equal(add.code, 1, `ADD must fail: ${add.stdout}`);
    const err = JSON.parse(add.stdout) as { code: number; msg: string; details?: string };
    assert.equal(err.code, 7, add.stdout);
    for (const p of patterns) assert.match(err.msg, p);
    assert.deepEqual(await recordedCalls(log, "ADD"), [], "no NAD delegate ran");
    assert.deepEqual(await linkNames(w.podNetns), [], "not even the default network");
    const ev = w.api.events.find((e) => (e as { reason?: string }).reason === "ErrorAddingNetwork");
    assert.ok(ev, "ErrorAddingNetwork event");
    expectOk(await w.call("DEL"), "DEL after the refused ADD");
  });
}

const ONE_CLAIM = {
  networks: ["vf-net"],
  claims: [{ name: "nic", resourceClaimName: "nic-claim" }],
};
const POD_RE = new RegExp(`pod ${NS}/${POD}`);

Deno.test({
  name: "DRA error: the claim is not allocated yet",
  ...root,
  async fn() {
    await expectPlanError(ONE_CLAIM, (w) => {
      w.api.putDra(slice("v1", [{ name: "vf-5", attributes: vf("0000:18:02.5") }]));
      w.api.putDra(claim("v1", "nic-claim"));
    }, [POD_RE, /ResourceClaim tenant-a\/nic-claim is not allocated yet/, /tenant-a\/vf-net/]);
  },
});

Deno.test({
  name: "DRA error: the claim does not exist; a template's claim is not generated yet",
  ...root,
  async fn() {
    await expectPlanError(ONE_CLAIM, () => {}, [
      POD_RE,
      /ResourceClaim tenant-a\/nic-claim does not exist/,
      /tenant-a\/vf-net/,
    ]);
    await expectPlanError(
      {
        networks: ["vf-net"],
        claims: [{ name: "nic", resourceClaimTemplateName: "vf-template" }],
      },
      () => {},
      [POD_RE, /claim "nic" \(template vf-template\) is not generated yet/, /vf-net/],
    );
  },
});

Deno.test({
  name: "DRA error: the allocated device has no k8s.cni.cncf.io/deviceID",
  ...root,
  async fn() {
    await expectPlanError(ONE_CLAIM, (w) => {
      w.api.putDra(slice("v1", [{ name: "vf-5", attributes: vf(undefined) }]));
      w.api.putDra(claim("v1", "nic-claim", ["vf-5"]));
    }, [
      POD_RE,
      /device sriov\.example\.com\/node-a\/vf-5 of ResourceClaim nic-claim/,
      /tenant-a\/vf-net/,
      /no k8s\.cni\.cncf\.io\/deviceID attribute/,
    ]);
  },
});

Deno.test({
  name: "DRA error: no allocated device carries the NAD's resourceName (and no device plugin)",
  ...root,
  async fn() {
    await expectPlanError(ONE_CLAIM, (w) => {
      w.api.putDra(slice("v1", [
        { name: "vf-5", attributes: vf("0000:18:02.5", "example.com/other") },
      ]));
      w.api.putDra(claim("v1", "nic-claim", ["vf-5"]));
    }, [
      POD_RE,
      /no allocated device matches resource "example\.com\/sriov_vf" of tenant-a\/vf-net/,
      /ResourceClaims: nic-claim/,
    ]);
  },
});

Deno.test({
  name: "DRA error: two attachments compete for one device",
  ...root,
  async fn() {
    await expectPlanError({
      networks: ["vf-net", "vf-net2"],
      nads: { "vf-net2": RESOURCE },
      claims: [{ name: "nic", resourceClaimName: "nic-claim" }],
    }, (w) => {
      w.api.putDra(slice("v1", [{ name: "vf-5", attributes: vf("0000:18:02.5") }]));
      w.api.putDra(claim("v1", "nic-claim", ["vf-5"]));
    }, [
      POD_RE,
      /2 attachments \(tenant-a\/vf-net, tenant-a\/vf-net2\) compete for 1 device/,
      /sriov\.example\.com\/node-a\/vf-5 of ResourceClaim nic-claim/,
    ]);
  },
});

Deno.test({
  name: "DRA: a pod without resourceClaims keeps the kubelet path and never reads resource.k8s.io",
  ...root,
  async fn() {
    await scenario({ networks: ["vf-net"] }, async (w, log) => {
      w.api.putDra(slice("v1", [{ name: "vf-5", attributes: vf("0000:18:02.5") }]));
      expectOk(await w.call("ADD"), "ADD");
      assert.deepEqual(draRequests(w), []);
      // As before DRA: no kubelet device, a Warning, the delegate runs without deviceID.
      assert.deepEqual((await recordedCalls(log, "ADD")).map((r) => r.config.deviceID), [
        undefined,
      ]);
      assert.ok(
        w.api.events.some((e) => (e as { reason?: string }).reason === "DeviceNotAllocated"),
      );
      expectOk(await w.call("DEL"), "DEL");
    });
  },
});

Deno.test({
  name: "DRA through manifold daemon: the served version (v1beta1) is remembered across pods",
  ...root,
  async fn() {
    await scenario({
      versions: ["v1beta1"],
      networks: ["vf-net"],
      claims: [{ name: "nic", resourceClaimName: "nic-claim" }],
    }, async (w, log) => {
      w.api.putDra(slice("v1beta1", [{ name: "vf-5", attributes: vf("0000:18:02.5") }]));
      w.api.putDra(claim("v1beta1", "nic-claim", ["vf-5"]));
      const d = await startDaemon(await w.scratch.dir(), w.conf);
      try {
        for (const round of [1, 2]) {
          const seen = w.api.requests.length;
          const add = await w.call("ADD", { config: d.conf });
          expectOk(add, `daemon ADD ${round}`);
          assert.doesNotMatch(add.stderr, /in-process/, "served by the daemon");
          const claimReads = w.api.requests.slice(seen)
            .filter((r) => r.path.includes("/resourceclaims/"))
            .map((r) => `${r.status} ${r.path}`);
          assert.deepEqual(
            claimReads,
            round === 1
              ? [
                `404 /apis/resource.k8s.io/v1/namespaces/${NS}/resourceclaims/nic-claim`,
                `200 /apis/resource.k8s.io/v1beta1/namespaces/${NS}/resourceclaims/nic-claim`,
              ]
              : [`200 /apis/resource.k8s.io/v1beta1/namespaces/${NS}/resourceclaims/nic-claim`],
          );
          expectOk(await w.call("DEL", { config: d.conf }), `daemon DEL ${round}`);
        }
        assert.deepEqual(
          (await recordedCalls(log, "ADD")).map((r) => r.config.deviceID),
          ["0000:18:02.5", "0000:18:02.5"],
        );
      } finally {
        d.kill("SIGKILL");
        await d.exited();
      }
    });
  },
});

Deno.test({
  name:
    "DRA through manifold daemon --node-name: the pod read from the node's informer keeps its claims",
  ...root,
  async fn() {
    await scenario({
      networks: ["vf-net"],
      claims: [{ name: "nic", resourceClaimName: "nic-claim" }],
    }, async (w, log) => {
      w.api.putDra(slice("v1", [{ name: "vf-5", attributes: vf("0000:18:02.5") }]));
      w.api.putDra(claim("v1", "nic-claim", ["vf-5"]));
      const d = await startDaemon(await w.scratch.dir(), w.conf, { flags: ["--node-name", NODE] });
      try {
        await until(
          () => w.api.requests.some((r) => r.path === "/api/v1/pods" && r.query.includes("watch")),
          "the daemon's pod watch",
        );
        const seen = w.api.requests.length;
        const add = await w.call("ADD", { config: d.conf });
        expectOk(add, "daemon ADD");
        assert.deepEqual(
          w.api.requests.slice(seen).filter((r) =>
            r.path === `/api/v1/namespaces/${NS}/pods/${POD}`
          )
            .filter((r) => r.method === "GET"),
          [],
          "the pod came from the informer (no GET)",
        );
        assert.deepEqual(
          (await recordedCalls(log, "ADD")).map((r) => r.config.deviceID),
          ["0000:18:02.5"],
        );
        expectOk(await w.call("DEL", { config: d.conf }), "daemon DEL");
      } finally {
        d.kill("SIGKILL");
        await d.exited();
      }
    });
  },
});
