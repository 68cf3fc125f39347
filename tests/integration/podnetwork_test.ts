/**
 * KEP-3698 front end through the real plugin process and real delegates, against the API
 * stand-in serving PodNetwork/PodNetworkAttachment: a pod's `multinetwork.manifold.dev/networks`
 * entry (the KEP's `name`/`attachmentName`, or the `podNetwork…` aliases) resolved through a
 * Ready PodNetwork to its NAD, attached with `interfaceName`, with the pod's default route
 * moved to it (`isDefaultGW`), composed with the NPWG annotation in one plan; the KEP's example
 * pod; an explicit list without "default" putting its entry on CNI_IFNAME instead of the
 * cluster network; a disabled, not-Ready, missing or foreign PodNetwork refused with code 7
 * before any delegate runs; the KEP's per-network status
 * (`multinetwork.manifold.dev/networks-status`, the KEP's `NetworkStatus` shape), also for a
 * pod listing only "default"; a pod without the annotation reads no PodNetwork and gets no KEP
 * status. Needs root.
 */

import assert from "node:assert/strict";
import { ipJson, linkNames } from "../support/netns.ts";
import { expectOk, NS, podStatus, type World, worldTest } from "../support/world.ts";

const KEP = "multinetwork.manifold.dev/networks";
const NETWORKS = "k8s.v1.cni.cncf.io/networks";
const PROVIDER = "manifold.dev/cni";

const ready = (ok = true, reason = "Ready", message = "") => ({
  conditions: [{
    type: "Ready",
    status: ok ? "True" : "False",
    reason,
    message,
    lastTransitionTime: "2026-11-24T22:00:00Z",
  }],
});

/** A PodNetwork → `<NS>/<nad>`, Ready unless `status` says otherwise. */
function podNetwork(
  w: World,
  name: string,
  opts: { nad?: string; enabled?: boolean; provider?: string; status?: unknown } = {},
) {
  w.api.putObject({
    kind: "PodNetwork",
    metadata: { name },
    spec: {
      ...(opts.enabled === undefined ? {} : { enabled: opts.enabled }),
      provider: opts.provider ?? PROVIDER,
      parametersRefs: [{
        group: "k8s.cni.cncf.io",
        kind: "network-attachment-definitions",
        name: opts.nad ?? "dp-net",
        namespace: NS,
      }],
    },
    status: opts.status ?? ready(),
  });
}

/** The "default" PodNetwork as `manifold controller` creates it, Ready. */
function defaultPodNetwork(w: World) {
  w.api.putObject({
    kind: "PodNetwork",
    metadata: { name: "default" },
    spec: { enabled: true, provider: PROVIDER },
    status: ready(),
  });
}

/** A second bridge network with a gateway (host-local gives 10.240.5.1). */
function dpNad(w: World) {
  const bridge = w.scratch.trackLink(`mfp${w.scratch.id}`);
  w.api.addNad({
    namespace: NS,
    name: "dp-net",
    config: JSON.stringify({
      cniVersion: "1.0.0",
      type: "bridge",
      bridge,
      isGateway: true,
      ipam: { type: "host-local", dataDir: w.dirs.ipam, subnet: "10.240.5.0/24" },
    }),
  });
}

async function defaultRoutes(w: World): Promise<string[][]> {
  const routes = await ipJson<{ gateway?: string; dev: string }[]>(
    w.podNetns,
    "-4",
    "route",
    "show",
    "default",
  );
  return routes.map((r) => [r.gateway ?? "", r.dev]);
}

/** The pod's `multinetwork.manifold.dev/networks-status` annotation, parsed. */
function kepStatus(w: World): Record<string, unknown>[] {
  const pod = w.api.getPod(NS, "web-0") as { metadata: { annotations: Record<string, string> } };
  const text = pod.metadata.annotations[`${KEP}-status`];
  assert.ok(text, "networks-status annotation written");
  return JSON.parse(text);
}

/** The first address of a network-status entry, without its prefix length. */
function bare(s: Record<string, unknown>): string {
  return String((s.ips as string[])[0]).replace(/\/\d+$/, "");
}

function multinetRequests(w: World): string[] {
  return w.api.requests.filter((r) => r.path.includes("multinetwork.manifold.dev")).map((r) =>
    `${r.method} ${r.path} ${r.status}`
  );
}

/** CHECK passes, DEL removes every interface, a second DEL succeeds, no lease is left. */
async function checkThenTearDown(w: World): Promise<void> {
  expectOk(await w.call("CHECK"), "CHECK");
  expectOk(await w.call("DEL"), "DEL");
  assert.deepEqual(await linkNames(w.podNetns), []);
  expectOk(await w.call("DEL"), "second DEL");
  assert.deepEqual(await w.leases(), []);
}

/** Runs ADD and checks that it failed with code 7 before any delegate ran. */
async function refused(w: World, pattern: RegExp): Promise<string> {
  const add = await w.call("ADD");
  assert.notEqual(add.code, 0, "ADD must fail");
  assert.equal(add.json?.code, 7, add.stdout);
  assert.match(String(add.json?.msg), pattern);
  assert.deepEqual(await linkNames(w.podNetns), [], "no delegate ran: no interface");
  assert.deepEqual(await w.leases(), [], "no delegate ran: no lease");
  return String(add.json?.msg);
}

worldTest(
  "PodNetwork → NAD: interfaceName and isDefaultGW, composed with the NPWG annotation",
  {
    annotations: {
      [NETWORKS]: JSON.stringify([{ name: "bridge-net" }]),
      // The KEP's own field names (its `Network` type).
      [KEP]: JSON.stringify([{ name: "default" }, {
        name: "dataplane",
        interfaceName: "dp0",
        isDefaultGW: true,
      }]),
    },
  },
  async (w) => {
    dpNad(w);
    podNetwork(w, "dataplane");
    defaultPodNetwork(w);
    const add = await w.call("ADD");
    expectOk(add, "ADD");
    assert.deepEqual(await linkNames(w.podNetns), ["dp0", "eth0", "net1"]);
    // The default route left eth0 (the cluster network's host-local route) for dp0's gateway.
    assert.deepEqual(await defaultRoutes(w), [["10.240.5.1", "dp0"]]);
    const status = podStatus(w);
    assert.deepEqual(status.map((s) => [s.name, s.interface]), [
      ["cbr0", "eth0"],
      [`${NS}/bridge-net`, "net1"],
      [`${NS}/dp-net`, "dp0"],
    ]);
    assert.deepEqual(status[2]["default-route"], ["10.240.5.1"]);
    // The KEP's per-network status, in the same write: PodNetworks only (not NPWG's net1).
    assert.deepEqual(kepStatus(w), [
      { name: "default", interfaceName: "eth0", ip: bare(status[0]) },
      { name: "dataplane", interfaceName: "dp0", ip: bare(status[2]), isDefaultGW: true },
    ]);
    assert.deepEqual(multinetRequests(w).sort(), [
      "GET /apis/multinetwork.manifold.dev/v1alpha1/podnetworks/dataplane 200",
      "GET /apis/multinetwork.manifold.dev/v1alpha1/podnetworks/default 200",
    ]);
    await checkThenTearDown(w);
  },
);

worldTest(
  "the KEP's example pod: name/attachmentName, interfaceName, the KEP's NetworkStatus",
  {
    annotations: {
      [KEP]: JSON.stringify([
        { name: "default", interfaceName: "eth0", isDefaultGW: true },
        { name: "dataplane1", interfaceName: "net1" },
        { attachmentName: "my-interface-fast-net", interfaceName: "net2" },
      ]),
    },
  },
  async (w) => {
    // KEP-3698 "Status" example, spec.networks as the annotation (only the names of our
    // objects differ from nothing: the KEP's own list, unchanged).
    dpNad(w);
    defaultPodNetwork(w);
    podNetwork(w, "dataplane1");
    podNetwork(w, "fast-net");
    w.api.putObject({
      kind: "PodNetworkAttachment",
      metadata: { name: "my-interface-fast-net", namespace: NS },
      spec: { podNetworkName: "fast-net" },
      status: ready(),
    });
    expectOk(await w.call("ADD"), "ADD");
    assert.deepEqual(await linkNames(w.podNetns), ["eth0", "net1", "net2"]);
    const status = podStatus(w);
    assert.deepEqual(kepStatus(w), [
      { name: "default", interfaceName: "eth0", ip: bare(status[0]), isDefaultGW: true },
      { name: "dataplane1", interfaceName: "net1", ip: bare(status[1]) },
      { name: "fast-net", interfaceName: "net2", ip: bare(status[2]) },
    ]);
    expectOk(await w.call("DEL"), "DEL");
  },
);

worldTest(
  'a list without "default": its entry takes CNI_IFNAME, the cluster network is not attached',
  {
    annotations: { [KEP]: JSON.stringify([{ podNetworkAttachmentName: "fast" }]) },
  },
  async (w) => {
    // KEP: "only the listed PodNetworks will be attached". The alias key still works.
    dpNad(w);
    podNetwork(w, "dataplane");
    w.api.putObject({
      kind: "PodNetworkAttachment",
      metadata: { name: "fast", namespace: NS },
      spec: { podNetworkName: "dataplane" },
      status: ready(),
    });
    const add = await w.call("ADD");
    expectOk(add, "ADD");
    assert.deepEqual(await linkNames(w.podNetns), ["eth0"]);
    const status = podStatus(w);
    assert.deepEqual(status.map((s) => [s.name, s.interface, s.default]), [
      [`${NS}/dp-net`, "eth0", true],
    ]);
    assert.match(bare(status[0]), /^10\.240\.5\./, "eth0 is on the PodNetwork's NAD");
    assert.deepEqual(kepStatus(w), [
      { name: "dataplane", interfaceName: "eth0", ip: bare(status[0]), isDefaultGW: true },
    ]);
    await checkThenTearDown(w);
  },
);

worldTest(
  "networks-status reflects the list's order, not the interfaces' (\"default\" listed last)",
  {
    annotations: {
      [KEP]: JSON.stringify([{ name: "dataplane", interfaceName: "dp0" }, { name: "default" }]),
    },
  },
  async (w) => {
    dpNad(w);
    podNetwork(w, "dataplane");
    defaultPodNetwork(w);
    expectOk(await w.call("ADD"), "ADD");
    const status = podStatus(w);
    assert.deepEqual(status.map((s) => s.interface), ["eth0", "dp0"], "attached in plan order");
    // KEP "Status": "a list reflecting the spec section".
    assert.deepEqual(kepStatus(w), [
      { name: "dataplane", interfaceName: "dp0", ip: bare(status[1]) },
      { name: "default", interfaceName: "eth0", ip: bare(status[0]), isDefaultGW: true },
    ]);
    expectOk(await w.call("DEL"), "DEL");
  },
);

worldTest(
  'a pod listing only "default" gets the cluster network and its networks-status',
  { annotations: { [KEP]: '[{"podNetworkName":"default"}]' } },
  async (w) => {
    // The alias key: on the old code this fails for the missing status, not the key.
    defaultPodNetwork(w);
    expectOk(await w.call("ADD"), "ADD");
    assert.deepEqual(await linkNames(w.podNetns), ["eth0"]);
    const status = podStatus(w);
    assert.deepEqual(kepStatus(w), [
      { name: "default", interfaceName: "eth0", ip: bare(status[0]), isDefaultGW: true },
    ]);
    expectOk(await w.call("DEL"), "DEL");
  },
);

worldTest(
  'an empty list is the KEP\'s auto-population: [{"name":"default"}], its PodNetwork checked',
  { annotations: { [KEP]: "[]" } },
  async (w) => {
    await refused(w, /\[0\]: PodNetwork "default" does not exist/);
    defaultPodNetwork(w);
    expectOk(await w.call("ADD"), "ADD");
    assert.deepEqual(await linkNames(w.podNetns), ["eth0"]);
    assert.deepEqual(kepStatus(w), [
      { name: "default", interfaceName: "eth0", ip: bare(podStatus(w)[0]), isDefaultGW: true },
    ]);
    expectOk(await w.call("DEL"), "DEL");
  },
);

worldTest(
  "disabled, not Ready, missing, foreign PodNetworks: code 7 naming why, no delegate ran",
  {
    annotations: { [KEP]: JSON.stringify([{ podNetworkName: "dataplane" }]) },
  },
  async (w) => {
    dpNad(w);
    assert.match(await refused(w, /PodNetwork "dataplane" does not exist/), /\[0\]/);

    podNetwork(w, "dataplane", { enabled: false });
    await refused(w, /PodNetwork "dataplane" is disabled .*AdministrativelyDisabled/);

    podNetwork(w, "dataplane", {
      status: ready(false, "ParamsNotReady", 'network attachment definition "x/y" not found'),
    });
    await refused(w, /is not Ready \(Ready=False, reason ParamsNotReady: network attachment/);

    podNetwork(w, "dataplane", { status: {} });
    await refused(w, /is not Ready \(no Ready condition yet\)/);

    podNetwork(w, "dataplane", { provider: "example.com/other" });
    await refused(
      w,
      /provider "example.com\/other", not this installation's "manifold.dev\/cni"/,
    );

    // Ready again: the same pod attaches.
    podNetwork(w, "dataplane");
    expectOk(await w.call("ADD"), "ADD once Ready");
    expectOk(await w.call("DEL"), "DEL");
  },
);

worldTest(
  "one plan: a KEP interfaceName colliding with an NPWG one, or isDefaultGW with default-route",
  {
    annotations: {
      [NETWORKS]: JSON.stringify([{ name: "bridge-net", interface: "dp0" }]),
      [KEP]: JSON.stringify([{ name: "default" }, { name: "dataplane", interfaceName: "dp0" }]),
    },
  },
  async (w) => {
    dpNad(w);
    podNetwork(w, "dataplane");
    defaultPodNetwork(w);
    await refused(w, /interface "dp0" is already used by network "tenant-a\/bridge-net"/);
    w.api.addPod({
      namespace: NS,
      name: "web-0",
      uid: "0f3a2f4c-1111-4222-8333-444455556666",
      annotations: {
        [NETWORKS]: JSON.stringify([{ name: "bridge-net", "default-route": ["10.240.2.1"] }]),
        [KEP]: JSON.stringify([{ name: "default" }, { name: "dataplane", isDefaultGW: true }]),
      },
    });
    await refused(w, /isDefaultGW: the default route may be set on only one attachment/);
  },
);

worldTest(
  "a pod without the KEP annotation reads no PodNetwork",
  { annotations: { [NETWORKS]: "bridge-net" } },
  async (w) => {
    expectOk(await w.call("ADD"), "ADD");
    assert.deepEqual(multinetRequests(w), []);
    const pod = w.api.getPod(NS, "web-0") as {
      metadata: { annotations: Record<string, string> };
    };
    assert.equal(pod.metadata.annotations[`${KEP}-status`], undefined, "no KEP status");
    expectOk(await w.call("DEL"), "DEL");
  },
);
