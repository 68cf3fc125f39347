/** Parsing the watched objects: policies (invalid spec kept), policy-for, pods, namespaces. */

import assert from "node:assert/strict";
import { isValidPortName, salvageIsolation } from "../../lib/policy/spec.ts";
import {
  parseAttachments,
  parseMultiNetworkPolicy,
  parseNamespace,
  parsePod,
  parsePolicyFor,
  PolicyParseError,
} from "../../lib/policy/types.ts";

Deno.test("policy-for: bare names in the policy's namespace, ns/name kept, sorted, unique", () => {
  assert.deepEqual(parsePolicyFor("net1", "a"), ["a/net1"]);
  assert.deepEqual(parsePolicyFor(" other/net2 , net1,a/net1", "a"), ["a/net1", "other/net2"]);
  for (const bad of ["", "a/b/c", "net1,", "Net1", "a b", "/net1"]) {
    assert.equal(parsePolicyFor(bad, "a"), null, JSON.stringify(bad));
  }
});

Deno.test("a valid MultiNetworkPolicy", () => {
  const p = parseMultiNetworkPolicy({
    apiVersion: "k8s.cni.cncf.io/v1beta1",
    kind: "MultiNetworkPolicy",
    metadata: {
      name: "p",
      namespace: "a",
      annotations: { "k8s.v1.cni.cncf.io/policy-for": "net1" },
    },
    spec: {
      podSelector: { matchLabels: { app: "db" } },
      policyTypes: ["Ingress", "Egress"],
      ingress: [{
        from: [
          { ipBlock: { cidr: "172.17.0.0/16", except: ["172.17.1.0/24"] } },
          { namespaceSelector: { matchLabels: { project: "x" } }, podSelector: {} },
        ],
        ports: [{ protocol: "TCP", port: 6379 }, { port: "http" }, { port: 8000, endPort: 8010 }],
      }],
      egress: [{ to: [{ ipBlock: { cidr: "fd00::/64" } }] }],
    },
  });
  assert.equal(p.policyFor, "net1");
  assert.equal(p.specError, undefined);
  assert.equal(p.spec?.ingress?.[0].from?.length, 2);
});

Deno.test("an invalid spec is kept with its error (the engine fails closed)", () => {
  const specs = [
    {
      podSelector: { matchLabels: { a: "b" } },
      ingress: [{ from: [{ ipBlock: { cidr: "10.0.0.0/33" } }] }],
    },
    { podSelector: {}, ingress: [{ ports: [{ port: 80, endPort: 79 }] }] },
    { podSelector: {}, ingress: [{ ports: [{ port: "http", endPort: 90 }] }] },
    { podSelector: {}, ingress: [{ ports: [{ protocol: "ICMP" }] }] },
    { podSelector: {}, ingress: [{ from: [{ ipBlock: { cidr: "10.0.0.300" } }] }] },
    { podSelector: {}, ingress: [{ from: [{ ipBlock: { cidr: "fe80::1%eth0/64" } }] }] },
    { podSelector: {}, ingress: [{ ports: [{ port: "0" }] }] },
    { podSelector: {}, ingress: [{ ports: [{ port: "65536" }] }] },
    { podSelector: {}, ingress: [{ ports: [{ port: "-http" }] }] },
    { podSelector: {}, ingress: [{ ports: [{ port: "h--p" }] }] },
    { podSelector: {}, ingress: [{ ports: [{ port: "a-very-long-name" }] }] },
    { podSelector: {}, ingress: [{ from: [{}] }] },
    { podSelector: {}, policyTypes: ["Both"] },
    { podSelector: "all" },
  ];
  for (const spec of specs) {
    const p = parseMultiNetworkPolicy({ metadata: { name: "p", namespace: "a" }, spec });
    assert.equal(p.spec, null, JSON.stringify(spec));
    assert.ok(p.specError, JSON.stringify(spec));
  }
  assert.throws(() => parseMultiNetworkPolicy({ metadata: { name: "p" } }), PolicyParseError);
  const noSpec = parseMultiNetworkPolicy({ metadata: { name: "p", namespace: "a" } });
  assert.equal(noSpec.spec, null, "no spec at all: invalid");
  // An absent podSelector is the empty selector, as in NetworkPolicy.
  const all = parseMultiNetworkPolicy({ metadata: { name: "p", namespace: "a" }, spec: {} });
  assert.deepEqual(all.spec, { podSelector: {} });
  assert.throws(() => parseMultiNetworkPolicy(null), PolicyParseError);
});

Deno.test("network-status: interfaces, bare canonical addresses, default flag", () => {
  assert.deepEqual(
    parseAttachments(JSON.stringify([
      { name: "cbr0", interface: "eth0", ips: ["10.244.0.5"], default: true },
      { name: "a/net1", interface: "net1", ips: ["10.1.0.2/24", "FD00::2/64"], mac: "x" },
      { name: "a/noif", ips: ["10.2.0.1"] },
    ])),
    [
      { network: "cbr0", ifName: "eth0", ips: ["10.244.0.5"], isDefault: true },
      { network: "a/net1", ifName: "net1", ips: ["10.1.0.2", "fd00::2"], isDefault: false },
    ],
  );
  for (const bad of ["{", "{}", '[{"interface":"x"}]', '[{"name":"a","ips":"1.2.3.4"}]']) {
    assert.throws(() => parseAttachments(bad), PolicyParseError, bad);
  }
});

Deno.test("pods: labels, node, named ports, phase; an unreadable status is kept as null", () => {
  const pod = parsePod({
    metadata: {
      name: "p",
      namespace: "a",
      uid: "u1",
      labels: { app: "web" },
      annotations: { "k8s.v1.cni.cncf.io/network-status": "not json" },
    },
    spec: {
      nodeName: "n1",
      containers: [{ ports: [{ name: "http", containerPort: 8080 }, { containerPort: 9 }] }],
    },
    status: { phase: "Running" },
  });
  assert.equal(pod.attachments, null);
  assert.match(pod.statusError!, /network-status/);
  assert.deepEqual(pod.ports, [{ name: "http", port: 8080, protocol: "TCP" }]);
  assert.equal(pod.nodeName, "n1");
  assert.equal(pod.finished, false);
  assert.deepEqual(parsePod({ metadata: { name: "q", namespace: "a" } }).attachments, []);
  assert.equal(
    parsePod({ metadata: { name: "q", namespace: "a" }, status: { phase: "Succeeded" } }).finished,
    true,
  );
  assert.throws(() => parsePod({ metadata: { name: "q" } }), PolicyParseError);
  assert.deepEqual(parseNamespace({ metadata: { name: "a" } }), { name: "a", labels: {} });
  assert.throws(() => parseNamespace({ metadata: { labels: {} } }), PolicyParseError);
});

Deno.test("what multi-networkpolicy-iptables accepts is accepted, with its meaning", () => {
  const p = parseMultiNetworkPolicy({
    metadata: { name: "p", namespace: "a" },
    spec: {
      podSelector: {},
      policyTypes: ["ingress", "EGRESS"],
      ingress: [{
        // Its own test input: ipBlock with selectors (ipBlock wins), a bare except address.
        from: [{
          ipBlock: { cidr: "1.1.1.0/16", except: ["1.1.1.1", "fd00::1"] },
          podSelector: { matchLabels: { tobe: "ignored" } },
          namespaceSelector: {},
        }],
        ports: [{ protocol: "tcp", port: "8080" }, { protocol: "Udp", port: "53", endPort: 54 }],
      }],
      egress: [{ to: [{ ipBlock: { cidr: "fd00::5" } }], ports: [{ port: "http-alt" }] }],
    },
  });
  assert.equal(p.specError, undefined);
  assert.deepEqual(p.spec, {
    podSelector: {},
    policyTypes: ["Ingress", "Egress"],
    ingress: [{
      from: [{ ipBlock: { cidr: "1.1.1.0/16", except: ["1.1.1.1/32", "fd00::1/128"] } }],
      ports: [{ protocol: "TCP", port: 8080 }, { protocol: "UDP", port: 53, endPort: 54 }],
    }],
    egress: [{ to: [{ ipBlock: { cidr: "fd00::5/128" } }], ports: [{ port: "http-alt" }] }],
  });
});

Deno.test("port names: Kubernetes IsValidPortName (a letter, no -- nor edge -, ≤ 15)", () => {
  for (const ok of ["http", "h2", "8080a", "a-b", "x".repeat(15)]) {
    assert.ok(isValidPortName(ok), ok);
  }
  for (const bad of ["", "8080", "-a", "a-", "a--b", "Http", "a_b", "x".repeat(16)]) {
    assert.ok(!isValidPortName(bad), bad);
  }
});

Deno.test("an invalid spec still says what it isolates: its podSelector and policyTypes", () => {
  const sel = { matchLabels: { app: "db" } };
  const bad = { ports: [{ port: 0 }] };
  const iso = (spec: unknown) =>
    parseMultiNetworkPolicy({ metadata: { name: "p", namespace: "a" }, spec }).isolation;
  assert.deepEqual(iso({ podSelector: sel, ingress: [bad] }), {
    podSelector: sel,
    policyTypes: ["Ingress"],
  });
  assert.deepEqual(iso({ podSelector: sel, egress: [bad] }), {
    podSelector: sel,
    policyTypes: ["Ingress", "Egress"],
  });
  assert.deepEqual(iso({ podSelector: sel, policyTypes: ["egress"], egress: [bad] }), {
    podSelector: sel,
    policyTypes: ["Egress"],
  });
  assert.deepEqual(iso({ podSelector: sel, policyTypes: ["Both"] }), {
    podSelector: sel,
    policyTypes: ["Ingress", "Egress"],
  }, "unreadable policyTypes: both directions");
  assert.deepEqual(iso({ podSelector: sel, policyTypes: [], ingress: [bad] }), {
    podSelector: sel,
    policyTypes: ["Ingress"],
  }, "[] is absent, as for a valid spec");
  assert.deepEqual(iso({ podSelector: sel, egress: { to: [] } }), {
    podSelector: sel,
    policyTypes: ["Ingress", "Egress"],
  }, "an egress that is not a list may hold rules: Egress too");
  assert.deepEqual(iso({ podSelector: sel, egress: [], ingress: [bad] }), {
    podSelector: sel,
    policyTypes: ["Ingress"],
  }, "an empty egress list has no rules");
  assert.deepEqual(iso({ podSelector: "all" }), {
    podSelector: null,
    policyTypes: ["Ingress"],
  }, "unreadable selector: null (the whole namespace)");
  assert.deepEqual(salvageIsolation(undefined), {
    podSelector: null,
    policyTypes: ["Ingress", "Egress"],
  });
  assert.equal(iso({ podSelector: sel }), undefined, "a valid spec has no isolation");
});
