/**
 * MultiNetworkPolicy translation benchmark (no kernel): a synthetic cluster of
 * `--pods` pods (default 2000) in 20 namespaces on 2 secondary networks, `--policies`
 * policies (default 40) mixing pod/namespace selectors, ipBlocks with except and port
 * ranges, `--local` pods on this node (default 100). Prints the p50 of the engine (all
 * local pods) and of rendering their libnftables batches over 21 runs.
 *
 * Usage: deno run scripts/bench_policy.ts [--pods N] [--policies N] [--local N]
 */

import {
  computeDesiredPolicies,
  parseMultiNetworkPolicy,
  parseNamespace,
  parsePod,
  renderRuleset,
} from "../lib/policy/mod.ts";

function flag(name: string, fallback: number): number {
  const i = Deno.args.indexOf(`--${name}`);
  return i >= 0 ? Number(Deno.args[i + 1]) : fallback;
}
const nPods = flag("pods", 2000), nPolicies = flag("policies", 40), nLocal = flag("local", 100);
const apps = ["web", "db", "cache", "api", "batch"];

const namespaces = Array.from(
  { length: 20 },
  (_, i) =>
    parseNamespace({ metadata: { name: `ns${i}`, labels: { tier: i % 2 ? "prod" : "dev" } } }),
);
const pods = Array.from({ length: nPods }, (_, i) => {
  const status = [
    { name: "cbr0", interface: "eth0", ips: [`10.244.${i >> 8}.${i & 255}`], default: true },
    {
      name: `ns${i % 20}/net1`,
      interface: "net1",
      ips: [`10.1.${i >> 8}.${i & 255}`, `fd01::${i.toString(16)}`],
    },
    { name: `ns${i % 20}/net2`, interface: "net2", ips: [`10.2.${i >> 8}.${i & 255}`] },
  ];
  return parsePod({
    metadata: {
      name: `p${i}`,
      namespace: `ns${i % 20}`,
      labels: { app: apps[i % apps.length], shard: String(i % 7) },
      annotations: { "k8s.v1.cni.cncf.io/network-status": JSON.stringify(status) },
    },
    spec: { nodeName: i < nLocal ? "local" : `n${i % 50}` },
  });
});
const policies = Array.from({ length: nPolicies }, (_, i) =>
  parseMultiNetworkPolicy({
    metadata: {
      name: `pol${i}`,
      namespace: `ns${i % 20}`,
      annotations: { "k8s.v1.cni.cncf.io/policy-for": i % 3 ? "net1" : "net1,net2" },
    },
    spec: {
      podSelector: { matchLabels: { app: apps[i % apps.length] } },
      policyTypes: i % 2 ? ["Ingress", "Egress"] : ["Ingress"],
      ingress: [{
        from: [
          {
            podSelector: {
              matchExpressions: [{ key: "shard", operator: "In", values: ["1", "2"] }],
            },
          },
          { namespaceSelector: { matchLabels: { tier: "prod" } } },
          { ipBlock: { cidr: "172.16.0.0/12", except: ["172.16.5.0/24", "172.20.0.0/16"] } },
        ],
        ports: [{ port: 80 }, { protocol: "UDP", port: 5000, endPort: 5100 }],
      }],
      egress: [{ to: [{ podSelector: {} }], ports: [{ port: 443 }] }],
    },
  }));

const p50 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const engine: number[] = [], render: number[] = [];
let selected = 0, rules = 0, elements = 0;
for (let run = 0; run < 21; run++) {
  let t = performance.now();
  const out = computeDesiredPolicies({ policies, pods, namespaces }, { nodeName: "local" });
  engine.push(performance.now() - t);
  t = performance.now();
  for (const { ruleset } of out.pods.values()) JSON.stringify(renderRuleset(ruleset));
  render.push(performance.now() - t);
  selected = out.pods.size;
  rules = [...out.pods.values()].reduce(
    (n, d) =>
      n +
      d.ruleset.interfaces.reduce(
        (m, i) => m + (i.ingress?.length ?? 0) + (i.egress?.length ?? 0),
        0,
      ),
    0,
  );
  elements = [...out.pods.values()].reduce(
    (n, d) => n + d.ruleset.sets.reduce((m, s) => m + s.elements.length, 0),
    0,
  );
}
console.log(
  `${nPods} pods, ${nPolicies} policies, ${nLocal} local → ${selected} selected pods, ${rules} rules, ${elements} set elements`,
);
console.log(
  `engine p50 ${p50(engine).toFixed(1)} ms, render p50 ${
    p50(render).toFixed(1)
  } ms (all local pods)`,
);
