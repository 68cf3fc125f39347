/**
 * What a real `manifold daemon` reports when a MultiNetworkPolicy cannot be enforced as written
 * (root; the lab of tests/policy/support/daemon_lab.ts: pods attached through the plugin
 * binary → daemon, the API stand-in, real TCP): a malformed `policy-for` closes what it selects
 * and posts a Warning on those pods; a selected pod whose sandbox is missing from the cache is
 * reported after the grace period (Warning + `manifold_policy_apply_failures_total`).
 */

import assert from "node:assert/strict";
import { until } from "../support/wait.ts";
import { DaemonLab, daemonLabTest } from "./support/daemon_lab.ts";

function policy(name: string, policyFor: string, spec: Record<string, unknown>) {
  return {
    metadata: { name, namespace: "a", annotations: { "k8s.v1.cni.cncf.io/policy-for": policyFor } },
    spec,
  };
}

/** The messages of the pod's MultiNetworkPolicyFailed Warnings. */
async function warnings(lab: DaemonLab, name: string): Promise<string[]> {
  return (await lab.api.events("a", name))
    .filter((e) => e.reason === "MultiNetworkPolicyFailed" && e.type === "Warning")
    .map((e) => String(e.message));
}

daemonLabTest(
  "manifold daemon: a malformed policy-for closes what it selects and warns those pods",
  async (lab) => {
    const srv = await lab.pod("a", "server", { app: "db" }, 10);
    const web = await lab.pod("a", "web", { app: "web" }, 11);
    await srv.agent.listen(80);
    assert.ok(await web.agent.connects(srv.ip, 80, 1000), "open before any policy");
    await lab.api.createPolicy(policy("bad", "net1,", {
      podSelector: { matchLabels: { app: "db" } },
      ingress: [{ from: [{ ipBlock: { cidr: "0.0.0.0/0" } }] }],
    }));
    await until(
      async () =>
        (await warnings(lab, "server")).some((m) => /^InvalidPolicyFor \(a\/bad\)/.test(m)),
      "the InvalidPolicyFor Warning on the server",
      3000,
    );
    assert.equal(await web.agent.connects(srv.ip, 80), false, "its allow-all allows nothing");
    assert.deepEqual(await warnings(lab, "web"), [], "web is not selected");
  },
);

daemonLabTest(
  "manifold daemon: a selected pod with no sandbox in the cache is reported after the grace",
  async (lab) => {
    const lost = await lab.pod("a", "lost", { app: "db" }, 10);
    // Its cache record damaged (as a disk error or a hand edit would): no netns to police.
    for await (const f of Deno.readDir(`${lab.dir}/cache`)) {
      if (f.name.startsWith(`${lost.containerId}@`)) {
        await Deno.writeTextFile(`${lab.dir}/cache/${f.name}`, "{ damaged");
      }
    }
    const t0 = performance.now();
    await lab.api.createPolicy(
      policy("db", "net1", { podSelector: { matchLabels: { app: "db" } } }),
    );
    await until(
      async () => (await warnings(lab, "lost")).some((m) => m.startsWith("NoSandbox")),
      "the NoSandbox Warning",
      5000,
    );
    const waited = performance.now() - t0;
    assert.ok(waited >= 500, `not before the grace period (${waited.toFixed(0)} ms)`);
    const metric = /^manifold_policy_apply_failures_total\{reason="no_sandbox"\} (\d+)$/m;
    await until(
      async () => metric.exec((await lab.http("/metrics")).text)?.[1] === "1",
      "no_sandbox counted once",
      2000,
    );
    // Later syncs (a label change) neither count it again nor post it again.
    await lab.api.setPodLabels("a", "lost", { app: "db", x: "y" });
    await new Promise((r) => setTimeout(r, 700));
    assert.equal(metric.exec((await lab.http("/metrics")).text)?.[1], "1");
    assert.equal(
      (await warnings(lab, "lost")).filter((m) => m.startsWith("NoSandbox")).length,
      1,
    );
  },
  { conf: { policyNoSandboxGraceMs: 500 } },
);
