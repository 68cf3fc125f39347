/**
 * `manifold daemon`'s pod informer and hot-plug against a real kube-apiserver: an ADD whose
 * runtime passes no pod annotations sends no GET (the server's audit log), and a network added
 * to and removed from a running pod's annotation appears in and leaves its netns, with
 * network-status and Events read back from the server. Needs root and `MANIFOLD_KUBE_APISERVER`
 * (else skipped with one line).
 */

import { loopbackPort } from "../support/ports.ts";
import assert from "node:assert/strict";
import { realApiSuite } from "../support/kube_apiserver.ts";
import { linkNames } from "../support/netns.ts";
import { startDaemon } from "../support/daemon.ts";
import { until } from "../support/wait.ts";
import { expectOk } from "../support/world.ts";
import { done, networkStatus, POD, type RealWorld, realWorld } from "./cluster.ts";

const suite = realApiSuite({ audit: true, root: true });
const NETS = "k8s.v1.cni.cncf.io/networks";
const NODE = "envtest-node"; // kube_rest's createPod binds pods there

async function startReadyDaemon(w: RealWorld) {
  const port = loopbackPort();
  const d = await startDaemon(await w.scratch.dir(), w.conf, {
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
  return d;
}

suite.test("daemon ADD without runtime annotations: no GET reaches the server (audit log)", async (api) => {
  const w = await realWorld(api, { annotations: { [NETS]: "bridge-net" } });
  const d = await startReadyDaemon(w);
  try {
    const from = (await api.auditEvents()).length;
    expectOk(await w.call("ADD", { config: d.conf }), "daemon ADD");
    const ours = async () =>
      (await api.auditEvents()).slice(from).filter((e) =>
        e.objectRef?.namespace === w.ns && e.objectRef?.resource === "pods"
      );
    await until(async () => (await ours()).some((e) => e.verb === "patch"), "the status PATCH");
    assert.deepEqual(
      (await ours()).map((e) => `${e.verb} ${e.objectRef?.subresource ?? ""}`),
      ["patch status"],
      "one status PATCH, no GET",
    );
    assert.deepEqual(
      networkStatus(await w.pod())?.map((s) => s.interface),
      ["eth0", "net1"],
    );
    expectOk(await w.call("DEL", { config: d.conf }), "daemon DEL");
  } finally {
    d.kill("SIGKILL");
    await d.exited();
    await done(w);
  }
});

suite.test("hot-plug: a NAD added to and removed from a running pod's annotation", async (api) => {
  // Default `events` ("warnings"): hot-plug posts AddedInterface/RemovedInterface all the same.
  const w = await realWorld(api, { conf: { hotPlug: true } });
  const d = await startReadyDaemon(w);
  const setNetworks = (v: string | null) =>
    api.admin.patch(
      { apiVersion: "v1", kind: "Pod", namespace: w.ns, name: POD },
      { metadata: { annotations: { [NETS]: v } } },
    );
  const statusIfs = async () => networkStatus(await w.pod())?.map((s) => s.interface) ?? [];
  try {
    expectOk(await w.call("ADD"), "sandbox ADD");
    await setNetworks("bridge-net");
    await until(async () => (await linkNames(w.podNetns)).includes("net1"), "net1", 20_000);
    await until(async () => (await statusIfs()).join() === "eth0,net1", "status with net1");
    await until(
      async () =>
        (await api.admin.events(w.ns, POD)).some((e) =>
          e.reason === "AddedInterface" && String(e.message).startsWith("Add net1 ")
        ),
      "AddedInterface for net1",
    );
    assert.equal((await w.leases()).length, 2);
    assert.ok(
      !(await api.admin.events(w.ns, POD)).some((e) => String(e.message).startsWith("Add eth0 ")),
      "the sandbox ADD posts no AddedInterface with the default events setting",
    );

    await setNetworks(null);
    await until(async () => !(await linkNames(w.podNetns)).includes("net1"), "net1 gone");
    await until(async () => (await statusIfs()).join() === "eth0", "status without net1");
    assert.equal((await w.leases()).length, 1, "the bridge-net lease is released");
    await until(
      async () => (await api.admin.events(w.ns, POD)).some((e) => e.reason === "RemovedInterface"),
      "RemovedInterface",
    );
    expectOk(await w.call("DEL"), "sandbox DEL");
    assert.deepEqual(await w.leases(), []);
  } finally {
    d.kill("SIGKILL");
    await d.exited();
    await done(w);
  }
});

suite.end();
