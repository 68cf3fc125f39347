/**
 * PolicyAgent against the API stand-in with a recording nftables runner (no root, no kernel):
 * a label change of another node's pod that no policy's peer names is taken in without a sync
 * (`policyPodChange("ignored")`), one that makes or unmakes a peer schedules one and reaches the
 * programmed set, and a change of this node's pods always does. The real-server, real-kernel
 * version is tests/realapi/policy_scale_test.ts.
 */

import assert from "node:assert/strict";
import { KubeClient, loadKubeconfig } from "../../../lib/k8s/mod.ts";
import { nullLogger } from "../../../lib/log/mod.ts";
import { AttachmentCache, CACHE_SCHEMA_VERSION } from "../../../lib/multinet/mod.ts";
import { type NftRunner, PolicyApplier } from "../../../lib/policy/mod.ts";
import { PolicyAgent } from "../../../lib/daemon/policy/agent.ts";
import { NO_OBSERVER } from "../../../lib/daemon/observer.ts";
import { startKubeApi } from "../../support/kube_api.ts";
import { until } from "../../support/wait.ts";

class Recorder implements NftRunner {
  readonly name = "recorder";
  batches: string[] = [];
  close(): Promise<void> {
    return Promise.resolve();
  }
  run(netns: string, text: string): Promise<string> {
    this.batches.push(`${netns} ${text}`);
    return Promise.resolve("");
  }
}

const status = (ip: string) =>
  JSON.stringify([
    { name: "cbr0", interface: "eth0", ips: ["10.244.0.9"], default: true },
    { name: "a/net1", interface: "net1", ips: [ip] },
  ]);

Deno.test("PolicyAgent: changes of pods no policy names run no sync; peers and local pods do", async () => {
  const api = await startKubeApi({ clientCertAuth: false });
  const dir = await Deno.makeTempDir();
  const runner = new Recorder();
  const effects: string[] = [];
  let syncs = 0;
  let agent: PolicyAgent | undefined;
  let kube: KubeClient | undefined;
  try {
    api.putNamespace("a", { team: "a" });
    api.putNamespace("quiet", { team: "none" });
    const pod = (namespace: string, name: string, nodeName: string, ip: string) =>
      api.addPod({
        namespace,
        name,
        uid: `u-${name}`,
        labels: { app: "idle" },
        nodeName,
        annotations: { "k8s.v1.cni.cncf.io/network-status": status(ip) },
      });
    pod("a", "server", "n1", "10.98.0.10");
    pod("a", "peer", "n2", "10.98.0.20");
    pod("quiet", "other", "n2", "10.98.0.30");
    pod("a", "neighbour", "n1", "10.98.0.40");
    api.setPodLabels("a", "server", { app: "db" });
    api.putMultiNetworkPolicy({
      metadata: {
        name: "db",
        namespace: "a",
        annotations: { "k8s.v1.cni.cncf.io/policy-for": "net1" },
      },
      spec: {
        podSelector: { matchLabels: { app: "db" } },
        ingress: [{ from: [{ podSelector: { matchLabels: { app: "web" } } }] }],
      },
    });
    await new AttachmentCache(`${dir}/cache`).write({
      schemaVersion: CACHE_SCHEMA_VERSION,
      containerId: "c1",
      netns: "/var/run/netns/server",
      ifName: "eth0",
      pod: { namespace: "a", name: "server", uid: "u-server" },
      cniVersion: "1.0.0",
      createdAt: new Date().toISOString(),
      attachments: [],
    });
    await api.writeKubeconfig(`${dir}/kc`);
    kube = new KubeClient({ connection: await loadKubeconfig(`${dir}/kc`) });
    agent = PolicyAgent.start({
      kube,
      cniDir: `${dir}/cache`,
      nodeName: "n1",
      events: { emit() {}, flush: () => Promise.resolve() },
      observer: {
        ...NO_OBSERVER,
        policySync: () => syncs++,
        policyPodChange: (e) => effects.push(e),
      },
      logger: nullLogger,
      applier: new PolicyApplier(runner),
    });
    await until(() => agent!.synced && syncs > 0 && runner.batches.length > 0, "the first sync");
    await agent.idle();
    const settled = async (n: number) => {
      await until(() => effects.length === n, `${n} pod changes`);
      await new Promise((r) => setTimeout(r, 30)); // a scheduled sync would have started
      await agent!.idle();
    };
    const batches = runner.batches.length;

    // Another node's pod in a namespace no policy's peer covers, and one in `a` that stays
    // unnamed (app idle → cache): no sync, nothing programmed.
    const s0 = syncs;
    api.setPodLabels("quiet", "other", { app: "web" });
    api.setPodLabels("a", "peer", { app: "cache" });
    await settled(2);
    assert.deepEqual(effects, ["ignored", "ignored"]);
    assert.equal(syncs, s0);
    assert.equal(runner.batches.length, batches);

    // It becomes a peer (app=web): a sync, its address in the set; and leaves again.
    api.setPodLabels("a", "peer", { app: "web" });
    await settled(3);
    assert.equal(effects[2], "sync");
    assert.ok(syncs > s0);
    await until(() => runner.batches.at(-1)!.includes("10.98.0.20"), "the peer in the set");
    api.setPodLabels("a", "peer", { app: "idle" });
    await settled(4);
    assert.equal(effects[3], "sync", "named before the change");

    // A pod of this node always counts (it may become selected).
    api.setPodLabels("a", "neighbour", { app: "other" });
    await settled(5);
    assert.equal(effects[4], "sync");
  } finally {
    await agent?.stop();
    kube?.close();
    await api.stop();
    await Deno.remove(dir, { recursive: true });
  }
});
