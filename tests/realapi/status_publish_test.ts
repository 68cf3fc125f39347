/**
 * network-status against a real kube-apiserver: the pod's UID is the PATCH's precondition (a
 * pod deleted and recreated under the same name is never written), and `"statusPublish":
 * "async"` in `manifold daemon` — ADD returns before the PATCH, a daemon killed before
 * publishing publishes after its restart (level-triggered from the cache), a replaced pod is
 * not written, a device-backed pod is published synchronously. The API is reached through a
 * loopback TCP proxy (tests/support/tcp_proxy.ts) that the tests pause to hold the PATCH.
 * Needs root and `MANIFOLD_KUBE_APISERVER` (else skipped with one line).
 */

import assert from "node:assert/strict";
import { isUidMismatch, KubeClient, KubeError, loadKubeconfig } from "../../lib/k8s/mod.ts";
import { realApiSuite } from "../support/kube_apiserver.ts";
import { linkNames } from "../support/netns.ts";
import { startDaemon } from "../support/daemon.ts";
import { loopbackPort } from "../support/ports.ts";
import { startTcpProxy, type TcpProxy } from "../support/tcp_proxy.ts";
import { until } from "../support/wait.ts";
import { expectOk } from "../support/world.ts";
import { k8sArgs } from "../support/plugin.ts";
import { deployObjects, done, networkStatus, POD, type RealWorld, realWorld } from "./cluster.ts";

const NO_STATUS_USER = "node-without-pods-status";
const suite = realApiSuite({ root: true, users: [{ name: NO_STATUS_USER }] });
const NETS = "k8s.v1.cni.cncf.io/networks";
const STATUS = "k8s.v1.cni.cncf.io/network-status";
const ANNOTATIONS = "io.kubernetes.cri.pod-annotations";
const NODE = "envtest-node"; // kube_rest's createPod binds pods there

/** Deletes the test's pod (grace 0) and creates it again: same name, new UID. */
async function recreatePod(w: RealWorld, annotations: Record<string, string> = {}) {
  await w.api.admin.delete("v1", "Pod", w.ns, POD);
  await until(
    async () => !(await w.api.admin.getPod(w.ns, POD).then(() => true, () => false)),
    "the old pod gone",
  );
  const pod = await w.api.admin.createPod(w.ns, POD, { annotations });
  const uid = pod.metadata.uid as string;
  assert.notEqual(uid, w.uid);
  return uid;
}

/** A kubeconfig for the API through `proxy` (the node's, with the server replaced). */
async function proxiedKubeconfig(w: RealWorld, proxy: TcpProxy): Promise<string> {
  const path = `${await w.scratch.dir()}/proxied.kubeconfig`;
  const doc = JSON.parse(await Deno.readTextFile(w.kubeconfig));
  doc.clusters[0].cluster.server = `https://127.0.0.1:${proxy.port}`;
  await Deno.writeTextFile(path, JSON.stringify(doc), { mode: 0o600 });
  return path;
}

/** The daemon with `conf`, its API through `kubeconfig`, ready (lists received). */
async function readyDaemon(dir: string, conf: Record<string, unknown>) {
  const port = loopbackPort();
  // The daemon's --config is the runtime's config file: the pod-annotations capability the
  // runtime honours is declared there (a request's own keys are not read in daemon mode).
  const capabilities = { ...(conf.capabilities as object | undefined), [ANNOTATIONS]: true };
  const d = await startDaemon(dir, { ...conf, capabilities }, {
    flags: ["--node-name", NODE, "--metrics-address", `127.0.0.1:${port}`],
    env: { CNI_PATH: "/usr/lib/cni" },
  });
  await until(
    async () => {
      const res = await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined);
      await res?.body?.cancel();
      return res?.status === 200;
    },
    "the daemon ready (NAD and pod lists received)",
    20_000,
  );
  const metric = async (name: string) => {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const m = new RegExp(`^${name} (\\S+)$`, "m").exec(text);
    return m ? Number(m[1]) : undefined;
  };
  return { ...d, metric };
}

/** The runtime passes the pod's annotations (containerd's pod-annotations capability). */
function withRuntimeAnnotations(
  conf: Record<string, unknown>,
  annotations: Record<string, string>,
) {
  return {
    ...conf,
    capabilities: { [ANNOTATIONS]: true },
    runtimeConfig: { [ANNOTATIONS]: annotations },
  };
}

suite.test("status PATCH carries the pod's UID: a recreated same-name pod is not written (422 on metadata.uid)", async (api) => {
  const w = await realWorld(api);
  const kube = new KubeClient({ connection: await loadKubeconfig(w.kubeconfig), retries: 0 });
  try {
    const newUid = await recreatePod(w);
    const err = await kube.patchPodStatusAnnotations(w.ns, POD, { [STATUS]: "[]" }, {
      uid: w.uid,
    }).then(() => undefined, (e) => e);
    assert.ok(err instanceof KubeError, `a KubeError, got ${err}`);
    // Not the 409 a failed UID precondition of an update gets: a merge patch's uid is
    // validated as an immutable field.
    assert.equal(err.status, 422);
    assert.equal(err.reason, "Invalid");
    assert.match(err.details, /metadata\.uid: Invalid value: ".*": field is immutable/);
    assert.ok(isUidMismatch(err));
    assert.equal(networkStatus(await w.pod()), undefined, "nothing written on the new pod");
    await kube.patchPodStatusAnnotations(w.ns, POD, { [STATUS]: "[]" }, { uid: newUid });
    assert.deepEqual(networkStatus(await w.pod()), [], "the right UID writes");
  } finally {
    kube.close();
    await done(w);
  }
});

suite.test("sync ADD for a replaced pod (runtime annotations, no GET): code 3, status not written, rolled back", async (api) => {
  const w = await realWorld(api);
  try {
    await recreatePod(w); // the runtime still has the old pod's sandbox and UID
    const r = await w.call("ADD", {
      config: withRuntimeAnnotations(w.conf, { [NETS]: "bridge-net" }),
    });
    assert.notEqual(r.code, 0, `ADD must fail: ${r.stdout}`);
    const out = JSON.parse(r.stdout);
    assert.equal(out.code, 3, r.stdout);
    assert.match(out.msg, new RegExp(`pod ${w.ns}/${POD} was replaced`));
    assert.equal(networkStatus(await w.pod()), undefined, "the new pod has no network-status");
    assert.deepEqual(await linkNames(w.podNetns), []);
    assert.deepEqual(await w.leases(), [], "the failed ADD was rolled back");
  } finally {
    await done(w);
  }
});

suite.test("async: a daemon killed after ADD returned and before the PATCH publishes after its restart", async (api) => {
  const w = await realWorld(api, { conf: { statusPublish: "async" } });
  const proxy = startTcpProxy({ hostname: "127.0.0.1", port: api.ports.api });
  const dir = await w.scratch.dir();
  const conf = { ...w.conf, kubeconfig: await proxiedKubeconfig(w, proxy) };
  let d = await readyDaemon(dir, conf);
  try {
    proxy.pause(); // the API stops answering; ADD needs it no more (pods and NADs in memory)
    const add = await w.call("ADD", {
      config: withRuntimeAnnotations(d.conf, { [NETS]: "bridge-net" }),
    });
    expectOk(add, "async ADD while the API does not answer");
    assert.deepEqual(await linkNames(w.podNetns), ["eth0", "net1"]);
    assert.equal(await d.metric("manifold_status_pending"), 1, "one status pending");
    assert.equal(networkStatus(await w.pod()), undefined, "not written yet");
    d.kill("SIGKILL");
    await d.exited();
    proxy.resume();
    d = await readyDaemon(dir, conf);
    await until(
      async () => networkStatus(await w.pod())?.map((s) => s.interface).join() === "eth0,net1",
      "the status written by the restarted daemon",
      20_000,
    );
    await until(async () => (await d.metric("manifold_status_pending")) === 0, "none pending");
    expectOk(await w.call("DEL", { config: d.conf }), "DEL");
    assert.deepEqual(await w.leases(), []);
  } finally {
    d.kill("SIGKILL");
    await d.exited();
    await proxy.close();
    await done(w);
  }
});

suite.test("async: the pod replaced before the queued PATCH is not written (UID precondition, not retried)", async (api) => {
  const w = await realWorld(api, { conf: { statusPublish: "async" } });
  const proxy = startTcpProxy({ hostname: "127.0.0.1", port: api.ports.api });
  const dir = await w.scratch.dir();
  const conf = { ...w.conf, kubeconfig: await proxiedKubeconfig(w, proxy) };
  const d = await readyDaemon(dir, conf);
  try {
    proxy.pause();
    expectOk(
      await w.call("ADD", { config: withRuntimeAnnotations(d.conf, { [NETS]: "bridge-net" }) }),
      "async ADD",
    );
    await recreatePod(w); // through the admin client, not the proxy
    proxy.resume();
    await until(async () => (await d.metric("manifold_status_pending")) === 0, "the queue empty");
    assert.equal(networkStatus(await w.pod()), undefined, "the new pod has no network-status");
    expectOk(await w.call("DEL", { config: d.conf }), "DEL");
    d.kill("SIGTERM");
    const { stderr } = await d.exited();
    assert.match(stderr, /pod gone before its network-status was written; dropped/);
    assert.match(stderr, /"gone":"replaced"/);
  } finally {
    d.kill("SIGKILL");
    await d.exited();
    await proxy.close();
    await done(w);
  }
});

suite.test("async: 403 on the status PATCH (RBAC) gives up after 5 attempts with a StatusPublishFailed Warning event", async (api) => {
  // deploy/'s node role without `patch pods/status`, for a user of its own: the server
  // itself answers 403 to every status PATCH.
  const role = (await deployObjects()).find((o) =>
    o.kind === "ClusterRole" && o.metadata?.name === "manifold"
  )!;
  const rules = (role.rules as { resources: string[] }[]).filter((r) =>
    !r.resources.includes("pods/status")
  );
  await api.admin.ensure({
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "ClusterRole",
    metadata: { name: NO_STATUS_USER },
    rules,
  });
  await api.admin.ensure({
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "ClusterRoleBinding",
    metadata: { name: NO_STATUS_USER },
    roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: NO_STATUS_USER },
    subjects: [{ apiGroup: "rbac.authorization.k8s.io", kind: "User", name: NO_STATUS_USER }],
  });
  const w = await realWorld(api, {
    token: api.token(NO_STATUS_USER),
    conf: { statusPublish: "async" },
  });
  const d = await readyDaemon(await w.scratch.dir(), w.conf);
  try {
    expectOk(
      await w.call("ADD", { config: withRuntimeAnnotations(d.conf, { [NETS]: "bridge-net" }) }),
      "async ADD",
    );
    await until(
      async () =>
        (await api.admin.events(w.ns, POD)).some((e) => e.reason === "StatusPublishFailed"),
      "the StatusPublishFailed event",
      60_000,
      500,
    );
    const ev = (await api.admin.events(w.ns, POD)).find((e) => e.reason === "StatusPublishFailed")!;
    assert.equal(ev.type, "Warning");
    assert.match(ev.message, /after 5 attempts: HTTP 403/);
    assert.equal(await d.metric("manifold_status_publish_gave_up_total"), 1);
    assert.equal(await d.metric("manifold_status_pending"), 0, "given up, not pending");
    assert.equal(networkStatus(await w.pod()), undefined);
    expectOk(await w.call("DEL", { config: d.conf }), "DEL");
    d.kill("SIGTERM");
    const { stderr } = await d.exited();
    assert.match(stderr, /network-status given up after permanent failures.*"status":403/);
  } finally {
    d.kill("SIGKILL");
    await d.exited();
    await done(w);
  }
});

suite.test("async: a device-backed pod is published synchronously, a plain pod is not", async (api) => {
  const w = await realWorld(api, { conf: { statusPublish: "async" } });
  // A device-backed network: its NAD names a device-plugin resource (kubelet has no device
  // for it here, so the delegate runs without one and a Warning says so).
  await api.admin.create({
    apiVersion: "k8s.cni.cncf.io/v1",
    kind: "NetworkAttachmentDefinition",
    metadata: {
      name: "sriov-net",
      namespace: w.ns,
      annotations: { "k8s.v1.cni.cncf.io/resourceName": "example.com/sriov" },
    },
    spec: {
      config: JSON.stringify({ ...JSON.parse(w.nadConfigs["bridge-net"]), name: "sriov-net" }),
    },
  });
  const proxy = startTcpProxy({ hostname: "127.0.0.1", port: api.ports.api });
  const dir = await w.scratch.dir();
  const conf = { ...w.conf, kubeconfig: await proxiedKubeconfig(w, proxy) };
  const d = await readyDaemon(dir, conf);
  try {
    proxy.delayMs = 400; // from now on a PATCH takes ≥ 800 ms
    // Plain pod first: its ADD returns before the PATCH is answered.
    const plain = await w.call("ADD", {
      config: withRuntimeAnnotations(d.conf, { [NETS]: "bridge-net" }),
    });
    expectOk(plain, "plain async ADD");
    assert.equal(networkStatus(await w.pod()), undefined, "plain pod: not written at ADD's return");
    await until(async () => networkStatus(await w.pod()) !== undefined, "plain pod's status");
    expectOk(await w.call("DEL", { config: d.conf }), "DEL");
    // Device-backed: same pod, a new sandbox (devices from a checkpoint the node holds).
    const id = `${w.containerId}x`;
    const device = await w.call("ADD", {
      containerId: id,
      args: k8sArgs(w.ns, POD, id, w.uid),
      config: withRuntimeAnnotations(d.conf, { [NETS]: "sriov-net" }),
    });
    expectOk(device, "device-backed ADD");
    assert.deepEqual(
      networkStatus(await w.pod())?.map((s) => s.name),
      ["cbr0", `${w.ns}/sriov-net`],
      "device-backed pod: written before ADD returned",
    );
    expectOk(
      await w.call("DEL", { containerId: id, args: k8sArgs(w.ns, POD, id, w.uid), config: d.conf }),
      "DEL",
    );
  } finally {
    d.kill("SIGKILL");
    await d.exited();
    await proxy.close();
    await done(w);
  }
});

suite.end();
