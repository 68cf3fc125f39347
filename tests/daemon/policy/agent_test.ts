/**
 * PolicyAgent against the API stand-in with a recording nftables runner (no root, no kernel):
 * readiness until the three lists arrive, a sync after each change and after `kick()`, the
 * Warning event posted once per distinct problem, apply failures counted for the metrics.
 */

import assert from "node:assert/strict";
import { KubeClient, loadKubeconfig } from "../../../lib/k8s/mod.ts";
import { nullLogger } from "../../../lib/log/mod.ts";
import { AttachmentCache, CACHE_SCHEMA_VERSION } from "../../../lib/multinet/mod.ts";
import { KubeEventSink } from "../../../lib/multinet/status/sinks.ts";
import { NftablesError, type NftRunner, PolicyApplier } from "../../../lib/policy/mod.ts";
import { POLICY_FAILED_REASON, PolicyAgent } from "../../../lib/daemon/policy/agent.ts";
import { NO_OBSERVER } from "../../../lib/daemon/observer.ts";
import { startKubeApi } from "../../support/kube_api.ts";
import { until } from "../../support/wait.ts";

class FakeRunner implements NftRunner {
  readonly name = "fake";
  batches: string[] = [];
  refuse = false;
  closed = 0;
  close(): Promise<void> {
    this.closed++;
    return Promise.resolve();
  }
  run(netns: string, text: string): Promise<string> {
    if (this.refuse && text.includes('"add"')) {
      return Promise.reject(new NftablesError("refused", "Invalid argument"));
    }
    this.batches.push(`${netns} ${text}`);
    return Promise.resolve("");
  }
}

const STATUS = JSON.stringify([
  { name: "cbr0", interface: "eth0", ips: ["10.244.0.1"], default: true },
  { name: "a/net1", interface: "net1", ips: ["10.98.0.10"] },
]);

Deno.test("PolicyAgent: readiness, syncs on changes and kicks, one Warning per problem", async () => {
  const api = await startKubeApi({ clientCertAuth: false });
  const dir = await Deno.makeTempDir();
  const runner = new FakeRunner();
  const syncs: number[] = [];
  let agent: PolicyAgent | undefined;
  let kube: KubeClient | undefined;
  try {
    api.putNamespace("a");
    api.addPod({
      namespace: "a",
      name: "server",
      uid: "u1",
      labels: { app: "db" },
      nodeName: "n1",
      annotations: { "k8s.v1.cni.cncf.io/network-status": STATUS },
    });
    await api.writeKubeconfig(`${dir}/kc`);
    kube = new KubeClient({ connection: await loadKubeconfig(`${dir}/kc`) });
    agent = PolicyAgent.start({
      kube,
      cniDir: `${dir}/cache`,
      nodeName: "n1",
      events: new KubeEventSink(kube, nullLogger),
      observer: {
        ...NO_OBSERVER,
        policySync: (_s, failures) =>
          syncs.push(Object.values(failures).reduce((a, b) => a + (b ?? 0), 0)),
      },
      logger: nullLogger,
      applier: new PolicyApplier(runner),
    });
    assert.deepEqual(agent.notReady().length, 1, "not ready before the lists");
    await until(() => agent!.synced, "the three lists");
    assert.deepEqual(agent.notReady(), []);
    await agent.idle();

    // A policy selecting the pod, but no sandbox in the cache yet: nothing programmed.
    api.putMultiNetworkPolicy({
      metadata: {
        name: "db",
        namespace: "a",
        annotations: { "k8s.v1.cni.cncf.io/policy-for": "net1" },
      },
      spec: { podSelector: { matchLabels: { app: "db" } }, ingress: [{ ports: [{ port: 0 }] }] },
    });
    await until(() => syncs.length >= 2, "a sync after the policy");
    await agent.idle();
    assert.equal(runner.batches.length, 0);

    // The sandbox appears (as after an ADD) and the daemon kicks: programmed closed.
    await new AttachmentCache(`${dir}/cache`).write({
      schemaVersion: CACHE_SCHEMA_VERSION,
      containerId: "c1",
      netns: "/var/run/netns/fake",
      ifName: "eth0",
      pod: { namespace: "a", name: "server", uid: "u1" },
      cniVersion: "1.0.0",
      createdAt: new Date().toISOString(),
      attachments: [],
    });
    agent.kick();
    await until(() => runner.batches.length === 1, "the table programmed after the kick");
    assert.match(runner.batches[0], /^\/var\/run\/netns\/fake .*manifold_mnp/);
    await until(
      () => api.events.filter((e) => e.reason === POLICY_FAILED_REASON).length === 1,
      "the Warning event",
    );
    const ev = api.events.find((e) => e.reason === POLICY_FAILED_REASON)!;
    assert.equal(ev.type, "Warning");
    assert.match(String(ev.message), /a\/db/);
    assert.equal((ev.involvedObject as Record<string, unknown>).uid, "u1");

    // The same problem on later syncs: no second event.
    agent.kick();
    await until(() => syncs.length >= 4, "another sync");
    await agent.idle();
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(api.events.filter((e) => e.reason === POLICY_FAILED_REASON).length, 1);

    // A refused batch closes the pod and counts as a failure; a new pod label change re-syncs.
    runner.refuse = true;
    api.putMultiNetworkPolicy({
      metadata: {
        name: "db",
        namespace: "a",
        annotations: { "k8s.v1.cni.cncf.io/policy-for": "net1" },
      },
      spec: { podSelector: { matchLabels: { app: "db" } }, ingress: [{ ports: [{ port: 80 }] }] },
    });
    await until(() => syncs.some((f) => f > 0), "a sync with an apply failure");
    // Stopping frees the runner's contexts (each keeps a pod's netns alive).
    await agent.stop();
    assert.equal(runner.closed, 1);
    await agent.stop();
  } finally {
    await agent?.stop();
    kube?.close();
    await api.stop();
    await Deno.remove(dir, { recursive: true });
  }
});
