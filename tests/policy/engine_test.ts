/**
 * The pure engine: which pods get rules, which sets hold which peers (same network only),
 * policy types, ports × peers, fail-closed cases, determinism.
 */

import assert from "node:assert/strict";
import {
  computeDesiredPolicies,
  parseMultiNetworkPolicy,
  parseNamespace,
  parsePod,
  type PodRuleset,
  type PolicyWorld,
} from "../../lib/policy/mod.ts";

type Att = { net: string; ifName: string; ips: string[] };

function pod(ns: string, name: string, labels: Record<string, string>, atts: Att[], node = "n1") {
  const status = [
    { name: "cbr0", interface: "eth0", ips: ["10.244.0.1"], default: true },
    ...atts.map((a) => ({ name: a.net, interface: a.ifName, ips: a.ips })),
  ];
  return parsePod({
    metadata: {
      name,
      namespace: ns,
      labels,
      annotations: { "k8s.v1.cni.cncf.io/network-status": JSON.stringify(status) },
    },
    spec: { nodeName: node, containers: [{ ports: [{ name: "http", containerPort: 8080 }] }] },
  });
}

function policy(ns: string, name: string, spec: unknown, policyFor: string | null = "net1") {
  return parseMultiNetworkPolicy({
    metadata: {
      name,
      namespace: ns,
      annotations: policyFor === null ? {} : { "k8s.v1.cni.cncf.io/policy-for": policyFor },
    },
    spec,
  });
}

const net1 = (ip: string, extra: string[] = []): Att => ({
  net: "a/net1",
  ifName: "net1",
  ips: [ip, ...extra],
});
const net2 = (ip: string): Att => ({ net: "a/net2", ifName: "net2", ips: [ip] });

const namespaces = [
  parseNamespace({ metadata: { name: "a", labels: { team: "a" } } }),
  parseNamespace({ metadata: { name: "b", labels: { team: "b" } } }),
];

function basePods() {
  return [
    pod("a", "db", { app: "db" }, [net1("10.1.0.10", ["fd01::10"]), net2("10.2.0.10")]),
    pod("a", "web", { app: "web" }, [net1("10.1.0.11"), net2("10.2.0.11")]),
    pod("a", "web2", { app: "web" }, [net2("10.2.0.12")]), // not on net1
    pod("a", "other", { app: "other" }, [net1("10.1.0.13")]),
    pod("b", "client", { app: "web" }, [net1("10.1.0.14")], "n2"),
    pod("a", "nonet", { app: "db" }, []),
  ];
}

const set = (rs: PodRuleset, name: string) => rs.sets.find((s) => s.name === name)?.elements;

Deno.test("only selected pods attached to the policy's network get rules; nodeName filters", () => {
  const w: PolicyWorld = {
    namespaces,
    pods: basePods(),
    policies: [policy("a", "p", { podSelector: { matchLabels: { app: "db" } } })],
  };
  const out = computeDesiredPolicies(w, { nodeName: "n1" });
  assert.deepEqual([...out.pods.keys()], ["a/db"], "nonet is selected but not on net1");
  const rs = out.pods.get("a/db")!.ruleset;
  assert.deepEqual(rs.interfaces, [{ ifName: "net1", network: "a/net1", ingress: [] }]);
  assert.deepEqual(rs.sets, []);
  assert.deepEqual(out.problems, []);
  assert.equal(computeDesiredPolicies(w, { nodeName: "n2" }).pods.size, 0);
});

Deno.test("peers resolve to their addresses on the same network, per family", () => {
  const w: PolicyWorld = {
    namespaces,
    pods: basePods(),
    policies: [policy("a", "p", {
      podSelector: { matchLabels: { app: "db" } },
      ingress: [{
        from: [
          { podSelector: { matchLabels: { app: "web" } } },
          { namespaceSelector: { matchLabels: { team: "b" } } },
          { namespaceSelector: {}, podSelector: { matchLabels: { app: "web" } } },
        ],
      }],
    })],
  };
  const rs = computeDesiredPolicies(w).pods.get("a/db")!.ruleset;
  // web's net2 address and web2 (only on net2) are not peers on net1.
  assert.deepEqual(set(rs, "in_net1_0_v4"), ["10.1.0.11"]);
  assert.deepEqual(set(rs, "in_net1_0_v6"), []);
  assert.deepEqual(set(rs, "in_net1_1_v4"), ["10.1.0.14"], "every pod of namespace b");
  assert.deepEqual(set(rs, "in_net1_1_v6"), []);
  assert.deepEqual(set(rs, "in_net1_2_v4"), ["10.1.0.11", "10.1.0.14"], "web in any namespace");
  assert.equal(rs.interfaces[0].ingress!.length, 6, "3 peers × 2 families × any port");
  assert.deepEqual(rs.interfaces[0].ingress![0], {
    comment: "a/p ingress[0] from[0]",
    set: "in_net1_0_v4",
    port: null,
  });
});

Deno.test("ports × peers: the cartesian product; ipBlock sets hold the except split", () => {
  const w: PolicyWorld = {
    namespaces,
    pods: basePods(),
    policies: [policy("a", "p", {
      podSelector: { matchLabels: { app: "db" } },
      ingress: [{
        from: [
          { ipBlock: { cidr: "1.1.1.0/24", except: ["1.1.1.0/26"] } },
          { ipBlock: { cidr: "fd00::/64" } },
        ],
        ports: [{ port: 80 }, { protocol: "UDP", port: 5000, endPort: 5010 }, { port: "http" }],
      }],
    })],
  };
  const rs = computeDesiredPolicies(w).pods.get("a/db")!.ruleset;
  const rules = rs.interfaces[0].ingress!;
  assert.equal(rules.length, 2 * 3);
  assert.deepEqual(rs.sets, [
    {
      name: "in_net1_0_v4",
      family: "ipv4",
      interval: true,
      elements: ["1.1.1.64/26", "1.1.1.128/25"],
    },
    { name: "in_net1_1_v6", family: "ipv6", interval: true, elements: ["fd00::/64"] },
  ]);
  assert.deepEqual(rules.map((r) => [r.set, r.port]), [
    ["in_net1_0_v4", { protocol: "tcp", from: 80, to: 80 }],
    ["in_net1_0_v4", { protocol: "tcp", from: 8080, to: 8080 }],
    ["in_net1_0_v4", { protocol: "udp", from: 5000, to: 5010 }],
    ["in_net1_1_v6", { protocol: "tcp", from: 80, to: 80 }],
    ["in_net1_1_v6", { protocol: "tcp", from: 8080, to: 8080 }],
    ["in_net1_1_v6", { protocol: "udp", from: 5000, to: 5010 }],
  ]);
});

Deno.test("policyTypes: Ingress by default, Egress when egress rules exist, or as listed", () => {
  const dirs = (spec: unknown) => {
    const w = { namespaces, pods: basePods(), policies: [policy("a", "p", spec)] };
    const i = computeDesiredPolicies(w).pods.get("a/db")!.ruleset.interfaces[0];
    return [i.ingress !== undefined, i.egress !== undefined];
  };
  const sel = { matchLabels: { app: "db" } };
  assert.deepEqual(dirs({ podSelector: sel }), [true, false]);
  assert.deepEqual(dirs({ podSelector: sel, egress: [{}] }), [true, true]);
  assert.deepEqual(dirs({ podSelector: sel, policyTypes: ["Egress"] }), [false, true]);
  assert.deepEqual(dirs({ podSelector: sel, policyTypes: ["Ingress", "Egress"] }), [true, true]);
});

Deno.test("an empty rule allows everything; policies on one interface are unioned", () => {
  const w: PolicyWorld = {
    namespaces,
    pods: basePods(),
    policies: [
      policy("a", "open", { podSelector: { matchLabels: { app: "db" } }, ingress: [{}] }),
      policy("a", "deny", { podSelector: {} }),
      policy("a", "on-net2", {
        podSelector: { matchLabels: { app: "db" } },
        policyTypes: ["Egress"],
      }, "a/net2"),
    ],
  };
  const out = computeDesiredPolicies(w);
  const rs = out.pods.get("a/db")!.ruleset;
  assert.deepEqual(rs.interfaces, [
    { ifName: "net1", network: "a/net1", ingress: [{ comment: "a/open ingress[0]", port: null }] },
    { ifName: "net2", network: "a/net2", egress: [] },
  ]);
  assert.deepEqual([...out.pods.keys()], ["a/db", "a/other", "a/web"], "deny selects all on net1");
});

Deno.test("fail closed: an invalid spec isolates only what its podSelector selects, no allows", () => {
  const w: PolicyWorld = {
    namespaces,
    pods: basePods(),
    policies: [
      policy("a", "ok", { podSelector: { matchLabels: { app: "db" } }, ingress: [{}] }),
      policy("a", "broken", {
        podSelector: { matchLabels: { app: "web" } },
        ingress: [{ ports: [{ port: 0 }] }],
      }),
    ],
  };
  const out = computeDesiredPolicies(w);
  // Old behaviour: every pod of the namespace (db, other, web), both directions.
  assert.deepEqual([...out.pods.keys()], ["a/db", "a/web"], "other is not selected by broken");
  assert.deepEqual(out.pods.get("a/web")!.ruleset.interfaces, [
    { ifName: "net1", network: "a/net1", ingress: [] },
  ], "web: its ingress closed, its egress untouched (the policy is ingress-only)");
  // The valid policy's allows still apply to db.
  assert.equal(out.pods.get("a/db")!.ruleset.interfaces[0].ingress!.length, 1);
  assert.deepEqual(out.problems.map((p) => [p.pod, p.policy, p.reason]), [
    ["a/web", "a/broken", "InvalidPolicy"],
  ]);
  // Only a selector that itself cannot be read leaves the namespace as the selection.
  const blind = computeDesiredPolicies({
    ...w,
    policies: [policy("a", "blind", { podSelector: { matchLabels: { app: 7 } } })],
  });
  assert.deepEqual([...blind.pods.keys()], ["a/db", "a/other", "a/web"]);
  assert.deepEqual(blind.pods.get("a/db")!.ruleset.interfaces[0], {
    ifName: "net1",
    network: "a/net1",
    ingress: [],
  });
});

Deno.test("the reference's inputs are enforced as it means them, not closed", () => {
  const out = computeDesiredPolicies({
    namespaces,
    pods: basePods(),
    policies: [policy("a", "p", {
      podSelector: { matchLabels: { app: "db" } },
      policyTypes: ["ingress"],
      ingress: [{
        from: [{
          ipBlock: { cidr: "10.1.0.0/24", except: ["10.1.0.11"] },
          podSelector: {},
        }],
        ports: [{ protocol: "tcp", port: "8080" }],
      }],
    })],
  });
  assert.deepEqual(out.problems, []);
  assert.deepEqual([...out.pods.keys()], ["a/db"]);
  const rs = out.pods.get("a/db")!.ruleset;
  assert.deepEqual(rs.sets, [{
    name: "in_net1_0_v4",
    family: "ipv4",
    interval: true,
    elements: [
      "10.1.0.0/29",
      "10.1.0.8/31",
      "10.1.0.10/32",
      "10.1.0.12/30",
      "10.1.0.16/28",
      "10.1.0.32/27",
      "10.1.0.64/26",
      "10.1.0.128/25",
    ],
  }], "ipBlock wins over podSelector {}, the bare except is a /32");
  assert.deepEqual(rs.interfaces[0].ingress, [{
    comment: "a/p ingress[0] from[0]",
    set: "in_net1_0_v4",
    port: { protocol: "tcp", from: 8080, to: 8080 },
  }]);
});

Deno.test("fail closed: a malformed policy-for allows nothing anywhere, isolates what it selects", () => {
  // Policy A closes db's net2; policy B's policy-for cannot be parsed ("net1,"): before, it
  // covered every secondary network *with* its allow-all, opening net2 again.
  const a = policy("a", "a-net2", { podSelector: { matchLabels: { app: "db" } } }, "a/net2");
  const b = policy("a", "b-bad", {
    podSelector: { matchLabels: { app: "db" } },
    ingress: [{ from: [{ ipBlock: { cidr: "0.0.0.0/0" } }] }],
  }, "net1,");
  const out = computeDesiredPolicies({ namespaces, pods: basePods(), policies: [a, b] });
  assert.deepEqual(out.pods.get("a/db")!.ruleset, {
    interfaces: [
      { ifName: "net1", network: "a/net1", ingress: [] },
      { ifName: "net2", network: "a/net2", ingress: [] },
    ],
    sets: [],
  });
  // Reported on each pod it selects (a Warning there), and once without a pod (the log).
  assert.deepEqual(out.problems.map((p) => [p.pod, p.policy, p.reason]), [
    [undefined, "a/b-bad", "InvalidPolicyFor"],
    ["a/db", "a/b-bad", "InvalidPolicyFor"],
    ["a/nonet", "a/b-bad", "InvalidPolicyFor"],
  ]);
  const none = computeDesiredPolicies({
    namespaces,
    pods: basePods(),
    policies: [policy("a", "x", { podSelector: {} }, null)],
  });
  assert.equal(none.pods.size, 0, "no policy-for: not for any secondary network");
});

Deno.test("an unreadable peer is reported by its own node only", () => {
  const remote = parsePod({
    metadata: {
      name: "far",
      namespace: "a",
      labels: { app: "web" },
      annotations: { "k8s.v1.cni.cncf.io/network-status": "{" },
    },
    spec: { nodeName: "n2" },
  });
  const w: PolicyWorld = {
    namespaces,
    pods: [...basePods(), remote],
    policies: [policy("a", "p", {
      podSelector: { matchLabels: { app: "db" } },
      ingress: [{ from: [{ podSelector: { matchLabels: { app: "web" } } }] }],
    })],
  };
  assert.deepEqual(computeDesiredPolicies(w, { nodeName: "n1" }).problems, []);
  assert.deepEqual(
    computeDesiredPolicies(w, { nodeName: "n2" }).problems.map((p) => [p.pod, p.reason]),
    [["a/far", "UnreadableNetworkStatus"]],
  );
});

Deno.test("fail closed: a selected pod with unreadable network-status is locked down", () => {
  const broken = parsePod({
    metadata: {
      name: "db",
      namespace: "a",
      labels: { app: "db" },
      annotations: { "k8s.v1.cni.cncf.io/network-status": "[" },
    },
  });
  const out = computeDesiredPolicies({
    namespaces,
    pods: [broken, ...basePods().slice(1)],
    policies: [
      policy("a", "p", {
        podSelector: { matchLabels: { app: "db" } },
        egress: [{ to: [{ podSelector: {} }] }],
      }),
      policy("a", "q", {
        podSelector: { matchLabels: { app: "web" } },
        ingress: [{ from: [{ podSelector: {} }] }],
      }),
    ],
  });
  assert.deepEqual(out.pods.get("a/db")!.ruleset, {
    interfaces: [],
    sets: [],
    lockdown: { keep: ["eth0", "lo"] },
  });
  // As a peer it is simply not allowed (and reported once).
  assert.deepEqual(set(out.pods.get("a/web")!.ruleset, "in_net1_0_v4"), ["10.1.0.11", "10.1.0.13"]);
  assert.deepEqual(out.problems.map((p) => [p.pod, p.reason]), [
    ["a/db", "UnreadableNetworkStatus"],
    ["a/db", "UnreadableNetworkStatus"],
  ]);
});

Deno.test("egress named ports match nothing and are reported", () => {
  const out = computeDesiredPolicies({
    namespaces,
    pods: basePods(),
    policies: [policy("a", "p", {
      podSelector: { matchLabels: { app: "db" } },
      policyTypes: ["Egress"],
      egress: [{ ports: [{ port: "http" }] }],
    })],
  });
  assert.deepEqual(out.pods.get("a/db")!.ruleset.interfaces[0].egress, []);
  assert.deepEqual(out.problems.map((p) => p.reason), ["UnresolvedNamedPort"]);
});

Deno.test("finished pods are neither targets nor peers", () => {
  const done = parsePod({
    metadata: {
      name: "old",
      namespace: "a",
      labels: { app: "web" },
      annotations: {
        "k8s.v1.cni.cncf.io/network-status": JSON.stringify([{
          name: "a/net1",
          interface: "net1",
          ips: ["10.1.0.99"],
        }]),
      },
    },
    status: { phase: "Failed" },
  });
  const out = computeDesiredPolicies({
    namespaces,
    pods: [...basePods(), done],
    policies: [
      policy("a", "p", {
        podSelector: {},
        ingress: [{ from: [{ podSelector: { matchLabels: { app: "web" } } }] }],
      }),
    ],
  });
  assert.ok(!out.pods.has("a/old"));
  assert.deepEqual(set(out.pods.get("a/db")!.ruleset, "in_net1_0_v4"), ["10.1.0.11"]);
});

Deno.test("deterministic: input order does not change the output", () => {
  const policies = [
    policy("a", "p1", {
      podSelector: {},
      ingress: [{ from: [{ podSelector: {} }], ports: [{ port: 1 }, { port: 2 }] }],
    }),
    policy("a", "p2", {
      podSelector: { matchLabels: { app: "db" } },
      egress: [{ to: [{ namespaceSelector: {} }] }],
    }),
  ];
  const a = computeDesiredPolicies({ namespaces, pods: basePods(), policies });
  const b = computeDesiredPolicies({
    namespaces: [...namespaces].reverse(),
    pods: basePods().reverse(),
    policies: [...policies].reverse(),
  });
  const dump = (o: typeof a) => JSON.stringify([...o.pods].map(([k, v]) => [k, v.ruleset]));
  assert.equal(dump(a), dump(b));
  assert.deepEqual([...a.pods.keys()], ["a/db", "a/other", "a/web"]);
});

Deno.test("fail closed: a rule that cannot be translated drops that policy's allows only", () => {
  const good = policy("a", "good", {
    podSelector: { matchLabels: { app: "db" } },
    ingress: [{ from: [{ ipBlock: { cidr: "10.9.0.0/16" } }] }],
  });
  // Built without the parser (as a future field or a parser gap would): a CIDR cidr.ts refuses.
  const bad = {
    ...good,
    name: "bad",
    spec: {
      podSelector: {},
      ingress: [
        { from: [{ podSelector: {} }] },
        { from: [{ ipBlock: { cidr: "fe80::1%eth0/64" } }] },
      ],
    },
  };
  const out = computeDesiredPolicies({ namespaces, pods: basePods(), policies: [good, bad] });
  const rs = out.pods.get("a/db")!.ruleset;
  assert.deepEqual(rs.interfaces[0].ingress!.map((r) => r.comment), ["a/good ingress[0] from[0]"]);
  assert.deepEqual(rs.sets.map((s) => s.name), ["in_net1_0_v4"]);
  assert.deepEqual(out.pods.get("a/web")!.ruleset.interfaces[0].ingress, [], "closed");
  assert.ok(
    out.problems.some((p) =>
      p.reason === "TranslationFailed" && p.pod === "a/db" && p.policy === "a/bad"
    ),
  );
});
