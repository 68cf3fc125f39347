/**
 * `manifold daemon`'s node-scoped pod informer end to end (issue 12): a real daemon process
 * with `--node-name` against the API stand-in, the real binary forwarding to it exactly as a
 * runtime runs it, with NO runtime pod annotations: the ADD reads the pod from the informer
 * and sends 0 GETs (the stand-in's request log); a pod the informer does not hold is read
 * with one GET; `/readyz` waits for the pod list. Needs root.
 */

import { loopbackPort } from "../support/ports.ts";
import assert from "node:assert/strict";
import { done, expectOk, podStatus, world } from "../support/world.ts";
import { isRoot, linkNames } from "../support/netns.ts";
import { startDaemon } from "../support/daemon.ts";
import { until } from "../support/wait.ts";

const root = { ignore: !isRoot(), sanitizeResources: false, sanitizeOps: false };
const NETS = { "k8s.v1.cni.cncf.io/networks": "bridge-net" };

/** Both watches of the daemon are open (its pod informer and its NAD store are synced). */
function watchesOpen(requests: { path: string; query: string }[]): boolean {
  const open = (path: string) => requests.some((r) => r.path === path && r.query.includes("watch"));
  return open("/api/v1/pods") && open("/apis/k8s.cni.cncf.io/v1/network-attachment-definitions");
}

Deno.test(
  "daemon: ADD without runtime annotations reads the pod from the informer: 0 GETs",
  root,
  async () => {
    const w = await world({ annotations: NETS, nodeName: "node-a" });
    const d = await startDaemon(await w.scratch.dir(), w.conf, {
      flags: ["--node-name", "node-a"],
    });
    try {
      await until(() => watchesOpen(w.api.requests), "the watches");
      const seen = w.api.requests.length;
      const add = await w.call("ADD", { config: d.conf });
      expectOk(add, "daemon ADD");
      const during = w.api.requests.slice(seen);
      assert.deepEqual(during.map((r) => r.method), ["PATCH"], "one status PATCH, no GET");
      assert.deepEqual(podStatus(w).map((s) => s.interface), ["eth0", "net1"]);
      assert.deepEqual((await linkNames(w.podNetns)).sort(), ["eth0", "net1"]);
      expectOk(await w.call("DEL", { config: d.conf }), "daemon DEL");
      assert.deepEqual(await w.leases(), []);
    } finally {
      d.kill("SIGKILL");
      await d.exited();
      await done(w);
    }
  },
);

Deno.test(
  "daemon: a pod the informer does not hold (watch lagging, other node) is read with one GET",
  root,
  async () => {
    const w = await world({ annotations: NETS, nodeName: "node-b" });
    const d = await startDaemon(await w.scratch.dir(), w.conf, {
      flags: ["--node-name", "node-a"],
    });
    try {
      await until(() => watchesOpen(w.api.requests), "the watches");
      const seen = w.api.requests.length;
      expectOk(await w.call("ADD", { config: d.conf }), "daemon ADD");
      const during = w.api.requests.slice(seen).map((r) => `${r.method} ${r.path}`);
      assert.deepEqual(during, [
        "GET /api/v1/namespaces/tenant-a/pods/web-0",
        "PATCH /api/v1/namespaces/tenant-a/pods/web-0/status",
      ]);
      assert.deepEqual(podStatus(w).map((s) => s.interface), ["eth0", "net1"]);
      expectOk(await w.call("DEL", { config: d.conf }), "daemon DEL");
    } finally {
      d.kill("SIGKILL");
      await d.exited();
      await done(w);
    }
  },
);

Deno.test("daemon: /readyz waits for the pod list", root, async () => {
  const w = await world({ annotations: NETS, nodeName: "node-a" });
  // The first pod lists fail: readiness must say why until one succeeds.
  w.api.fault({ method: "GET", path: /^\/api\/v1\/pods$/, status: 500, times: 2 });
  const port = loopbackPort();
  const d = await startDaemon(await w.scratch.dir(), w.conf, {
    flags: ["--node-name", "node-a", "--metrics-address", `127.0.0.1:${port}`],
  });
  try {
    const ready = async () => {
      const res = await fetch(`http://127.0.0.1:${port}/readyz`);
      return { status: res.status, body: await res.text() };
    };
    const first = await ready();
    assert.equal(first.status, 503);
    assert.match(first.body, /pods/);
    await until(async () => (await ready()).status === 200, "ready", 15_000);
  } finally {
    d.kill("SIGKILL");
    await d.exited();
    await done(w);
  }
});
