/**
 * `manifold daemon` end to end (issue 12): a real daemon process against the API stand-in,
 * the real binary (scripts/manifold) forwarding to it exactly as a runtime runs it, real
 * delegates in a real netns. Needs root.
 */

import assert from "node:assert/strict";
import { done, expectOk, podStatus, world } from "../support/world.ts";
import { isRoot } from "../support/netns.ts";
import { startDaemon } from "../support/daemon.ts";

const root = { ignore: !isRoot(), sanitizeResources: false, sanitizeOps: false };

Deno.test("daemon: ADD, CHECK, DEL, DEL through the daemon", root, async () => {
  const w = await world({ annotations: { "k8s.v1.cni.cncf.io/networks": "bridge-net" } });
  const dir = await w.scratch.dir();
  const d = await startDaemon(dir, w.conf);
  try {
    const add = await w.call("ADD", { config: d.conf });
    expectOk(add, "ADD");
    console.log(add.stdout, add.ms);
    console.log(JSON.stringify(podStatus(w)));
    expectOk(await w.call("CHECK", { config: d.conf }), "CHECK");
    expectOk(await w.call("DEL", { config: d.conf }), "DEL");
    expectOk(await w.call("DEL", { config: d.conf }), "DEL 2");
    console.log(w.api.requests.map((r) => `${r.method} ${r.path}`).join("\n"));
  } finally {
    d.kill("SIGTERM");
    const e = await d.exited();
    console.log(e.code, e.stderr.slice(-2000));
    await done(w);
  }
});
