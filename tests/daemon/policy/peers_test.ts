/**
 * Which pod changes can change this node's MultiNetworkPolicy rules
 * (lib/daemon/policy/peers.ts): local pods and pods a policy's selector peer names, before or
 * after the change; nothing else.
 */

import assert from "node:assert/strict";
import { parsePod, type PodInfo } from "../../../lib/policy/mod.ts";
import { PolicyPeers } from "../../../lib/daemon/policy/peers.ts";

const pod = (namespace: string, labels: Record<string, string>, nodeName = "n2"): PodInfo =>
  parsePod({ metadata: { name: "p", namespace, labels }, spec: { nodeName } });

function policy(
  namespace: string,
  spec: Record<string, unknown>,
  policyFor: string | null = "net1",
) {
  return {
    metadata: {
      name: "p",
      namespace,
      annotations: policyFor === null ? {} : { "k8s.v1.cni.cncf.io/policy-for": policyFor },
    },
    spec: { podSelector: {}, ...spec },
  };
}

Deno.test("PolicyPeers: local pods and peers named by a selector, before or after", () => {
  const peers = new PolicyPeers();
  peers.upsertNamespace({ metadata: { name: "b", labels: { team: "b" } } });
  peers.upsertNamespace({ metadata: { name: "c", labels: { team: "c" } } });
  const m = (before?: PodInfo, after?: PodInfo) => peers.matters("n1", before, after);
  // No policy: only this node's pods matter.
  assert.equal(m(pod("a", {}), pod("a", { app: "web" })), false);
  assert.equal(m(pod("a", {}, "n1")), true);
  assert.equal(m(undefined, pod("c", {}, "n1")), true);
  assert.equal(
    peers.matters(undefined, pod("a", {})),
    true,
    "no node name: every pod may be local",
  );

  peers.upsertPolicy(policy("a", {
    ingress: [{ from: [{ podSelector: { matchLabels: { app: "web" } } }] }],
    egress: [{
      to: [
        { namespaceSelector: { matchLabels: { team: "b" } } },
        { ipBlock: { cidr: "10.0.0.0/8" } },
      ],
    }],
  }));
  assert.equal(m(pod("a", {}), pod("a", { app: "web" })), true, "becomes a peer");
  assert.equal(m(pod("a", { app: "web" }), pod("a", {})), true, "stops being one");
  assert.equal(m(pod("a", { app: "db" }), pod("a", { app: "x" })), false);
  assert.equal(m(pod("c", { app: "web" })), false, "podSelector alone: the policy's namespace");
  assert.equal(m(pod("b", {})), true, "namespaceSelector");
  assert.equal(m(pod("zz", {})), false, "unknown namespace");
  peers.upsertNamespace({ metadata: { name: "b", labels: { team: "x" } } });
  assert.equal(m(pod("b", {})), false, "namespace relabelled");
  peers.deletePolicy("a", "p");
  assert.equal(m(pod("a", { app: "web" })), false, "policy deleted");

  // Policies the engine gives no allows name nobody: no policy-for, an invalid spec.
  peers.upsertPolicy(policy("a", { ingress: [{ from: [{ podSelector: {} }] }] }, null));
  assert.equal(m(pod("a", {})), false);
  peers.upsertPolicy(policy("a", { ingress: [{ from: [{}] }] }));
  assert.equal(m(pod("a", {})), false);
  peers.upsertPolicy(policy("a", { ingress: [{ from: [{ podSelector: {} }] }] }));
  assert.equal(m(pod("a", {})), true, "an empty podSelector names every pod of the namespace");
});
