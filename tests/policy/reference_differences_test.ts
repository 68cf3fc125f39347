/**
 * Where Manifold deliberately reads a MultiNetworkPolicy as NetworkPolicy does and the reference
 * enforcer (multi-networkpolicy-iptables) does not (docs: "Differences from
 * multi-networkpolicy-iptables"), with real traffic (root): pod namespaces on a bridge
 * (tests/policy/support/lab.ts), rulesets programmed through libnftables, TCP connects.
 */

import assert from "node:assert/strict";
import {
  computeDesiredPolicies,
  parseMultiNetworkPolicy,
  parseNamespace,
  parsePod,
} from "../../lib/policy/mod.ts";
import { type LabPod, labTest } from "./support/lab.ts";

const namespaces = ["a", "b"].map((name) => parseNamespace({ metadata: { name } }));

/** A pod on node1 whose `net1` is attached to `a/net1`. */
function podObject(ns: string, name: string, labels: Record<string, string>, pod: LabPod) {
  return parsePod({
    metadata: {
      name,
      namespace: ns,
      labels,
      annotations: {
        "k8s.v1.cni.cncf.io/network-status": JSON.stringify([
          { name: "cbr0", interface: "eth0", ips: ["10.244.0.9"], default: true },
          { name: "a/net1", interface: "net1", ips: [pod.ip4, pod.ip6] },
        ]),
      },
    },
    spec: { nodeName: "node1" },
  });
}

function policy(name: string, spec: unknown) {
  return parseMultiNetworkPolicy({
    metadata: {
      name,
      namespace: "a",
      annotations: { "k8s.v1.cni.cncf.io/policy-for": "a/net1" },
    },
    spec,
  });
}

labTest(
  "NetworkPolicy meaning where the reference differs: except, podSelector peers, policyTypes",
  async (lab, applier, t) => {
    const srv = await lab.pod("srv", 10);
    const web = await lab.pod("web", 11);
    const exc = await lab.pod("exc", 12);
    const webB = await lab.pod("wbb", 13);
    await srv.listen(80);
    await web.listen(80);
    const pods: [ReturnType<typeof parsePod>, LabPod][] = [
      [podObject("a", "server", { app: "db" }, srv), srv],
      [podObject("a", "web", { app: "web" }, web), web],
      [podObject("a", "excepted", {}, exc), exc],
      [podObject("b", "web", { app: "web" }, webB), webB],
    ];
    const enforce = async (...policies: ReturnType<typeof policy>[]) => {
      const desired = computeDesiredPolicies(
        { namespaces, pods: pods.map(([p]) => p), policies },
        { nodeName: "node1" },
      );
      assert.deepEqual(desired.problems, []);
      for (const [info, lab] of pods) {
        const want = desired.pods.get(`${info.namespace}/${info.name}`);
        if (want) await applier.apply(lab.path, want.ruleset);
        else await applier.remove(lab.path);
      }
    };
    const db = { matchLabels: { app: "db" } };

    await t.step("an except narrows its own peer only: another policy still allows", async () => {
      await enforce(
        policy("block", {
          podSelector: db,
          ingress: [{ from: [{ ipBlock: { cidr: "10.99.0.0/24", except: [exc.ip4] } }] }],
        }),
      );
      assert.ok(await web.connects(srv.ip4, 80, 1000), "in the block");
      assert.ok(!(await exc.connects(srv.ip4, 80)), "the except alone: dropped");
      await enforce(
        policy("block", {
          podSelector: db,
          ingress: [{ from: [{ ipBlock: { cidr: "10.99.0.0/24", except: [exc.ip4] } }] }],
        }),
        policy("host", {
          podSelector: db,
          ingress: [{ from: [{ ipBlock: { cidr: exc.ip4 } }] }],
        }),
      );
      assert.ok(await exc.connects(srv.ip4, 80), "allowed by the other policy: passes");
    });

    await t.step("a podSelector peer is in the policy's namespace only", async () => {
      await enforce(policy("web", {
        podSelector: db,
        ingress: [{ from: [{ podSelector: { matchLabels: { app: "web" } } }] }],
      }));
      assert.ok(await web.connects(srv.ip4, 80), "app: web of namespace a");
      assert.ok(!(await webB.connects(srv.ip4, 80)), "app: web of namespace b: dropped");
    });

    await t.step("no policyTypes, egress rules only: Ingress is isolated too", async () => {
      await enforce(policy("egress", {
        podSelector: db,
        egress: [{ to: [{ ipBlock: { cidr: "10.99.0.0/24" } }] }],
      }));
      assert.ok(await srv.connects(web.ip4, 80), "egress allowed by its rule");
      assert.ok(!(await web.connects(srv.ip4, 80)), "ingress isolated, nothing allowed");
    });
  },
);
