/**
 * deploy/'s MultiNetworkPolicy CRD validates at `kubectl apply` time what the enforcer would
 * otherwise only report later (a Warning, the pod closed): CIDR format (bare addresses
 * accepted, as multi-networkpolicy-iptables reads them), protocol and policyTypes in any case,
 * port range and port names, endPort, empty peers. Server-side dry runs (`?dryRun=All`) against
 * a real kube-apiserver; every object the server accepts is also one lib/policy parses as valid,
 * and every one it refuses is one lib/policy refuses too (no policy the API admits is closed
 * for a reason the API could have given). Needs `MANIFOLD_KUBE_APISERVER` (else skipped).
 */

import assert from "node:assert/strict";
import { parseMultiNetworkPolicy } from "../../lib/policy/mod.ts";
import { realApiSuite } from "../support/kube_apiserver.ts";
import { deployObjects } from "../realapi/cluster.ts";

const suite = realApiSuite();
const MNP_CRD = "multi-networkpolicies.k8s.cni.cncf.io";
const PATH = "/apis/k8s.cni.cncf.io/v1beta1/namespaces/default/multi-networkpolicies?dryRun=All";

type Json = Record<string, unknown>;

const peer = (p: Json) => ({ ingress: [{ from: [p] }] });
const ports = (...ps: Json[]) => ({ ingress: [{ ports: ps }] });

/** Specs the reference accepts, with the meaning lib/policy gives them. */
const ACCEPTED: [string, Json][] = [
  [
    "a bare IPv4 address as except (the reference's own test input)",
    peer({
      ipBlock: { cidr: "1.1.1.0/16", except: ["1.1.1.1"] },
    }),
  ],
  ["a bare IPv6 address as cidr", peer({ ipBlock: { cidr: "fd00::1" } })],
  ["an IPv6 CIDR with an IPv4 tail", peer({ ipBlock: { cidr: "::ffff:10.0.0.0/104" } })],
  [
    "ipBlock with selectors (ipBlock wins)",
    peer({
      ipBlock: { cidr: "10.0.0.0/8" },
      podSelector: {},
    }),
  ],
  ["protocol in lower case", ports({ protocol: "tcp", port: 80 })],
  ["protocol in mixed case", ports({ protocol: "Sctp" })],
  ["policyTypes in lower case", { policyTypes: ["ingress", "egress"] }],
  ["an all-digit string port", ports({ port: "8080" })],
  ["a port name", ports({ port: "http-alt" })],
  ["a port range", ports({ port: 8000, endPort: 8080 })],
  ["port 65535", ports({ port: 65535 })],
];

/**
 * Specs the API refuses though lib/policy would enforce them: a range from an all-digit string
 * (`endPort` needs an integer `port`, as in NetworkPolicy; CEL on an int-or-string costs too
 * much to check the string's digits).
 */
const STRICTER: [string, Json][] = [
  ["a port range from an all-digit string", ports({ port: "8000", endPort: 8080 })],
];

/** Specs the API refuses (lib/policy refuses them too: they would close the pods). */
const REFUSED: [string, Json, RegExp][] = [
  ["a CIDR with a bad address", peer({ ipBlock: { cidr: "10.0.0.300/8" } }), /cidr/],
  ["a CIDR with a bad length", peer({ ipBlock: { cidr: "10.0.0.0/33" } }), /cidr/],
  ["a word as CIDR", peer({ ipBlock: { cidr: "everything" } }), /cidr/],
  ["a bad except", peer({ ipBlock: { cidr: "10.0.0.0/8", except: ["10.1/16"] } }), /except/],
  ["an unknown protocol", ports({ protocol: "ICMP" }), /protocol is TCP, UDP or SCTP/],
  ["an unknown policyType", { policyTypes: ["Both"] }, /policyType is Ingress or Egress/],
  ["port 0", ports({ port: 0 }), /ports\[0\]\.port/],
  ["port 65536", ports({ port: 65536 }), /ports\[0\]\.port/],
  [
    "an all-digit string with a leading zero",
    ports({ port: "080" }),
    /spec.ingress\[0\].ports\[0\].port/,
  ],
  ["an all-digit string out of range", ports({ port: "70000" }), /ports\[0\]\.port/],
  ["a port name without a letter", ports({ port: "80-80" }), /ports\[0\]\.port/],
  ["a port name too long", ports({ port: "a-very-long-name" }), /ports\[0\]\.port/],
  ["a port name with --", ports({ port: "h--p" }), /ports\[0\]\.port/],
  ["a port name in upper case", ports({ port: "HTTP" }), /ports\[0\]\.port/],
  ["endPort below port", ports({ port: 90, endPort: 80 }), /endPort needs a port number/],
  ["endPort with a port name", ports({ port: "http", endPort: 80 }), /endPort needs/],
  ["endPort 65536", ports({ port: 1, endPort: 65536 }), /endPort/],
  ["an empty peer", peer({}), /a peer needs ipBlock, podSelector or namespaceSelector/],
];

function policy(name: string, spec: Json): Json {
  return {
    apiVersion: "k8s.cni.cncf.io/v1beta1",
    kind: "MultiNetworkPolicy",
    metadata: {
      name,
      namespace: "default",
      annotations: { "k8s.v1.cni.cncf.io/policy-for": "net1" },
    },
    spec: { podSelector: {}, ...spec },
  };
}

suite.test("the MultiNetworkPolicy CRD validates at apply time what the enforcer would refuse", async (api) => {
  const crd = (await deployObjects()).find((o) => o.metadata?.name === MNP_CRD);
  assert.ok(crd, `deploy/ has ${MNP_CRD}`);
  await api.admin.installCrd(crd);
  let n = 0;
  for (const [what, spec] of ACCEPTED) {
    const obj = policy(`ok-${n++}`, spec);
    const r = await api.admin.raw("POST", PATH, { body: obj });
    assert.equal(r.status, 201, `${what}: ${JSON.stringify(r.body)}`);
    const stored = r.body as Json;
    const parsed = parseMultiNetworkPolicy(stored);
    assert.equal(parsed.specError, undefined, `${what}: lib/policy reads it as written`);
  }
  for (const [what, spec, message] of REFUSED) {
    const obj = policy(`bad-${n++}`, spec);
    const r = await api.admin.raw("POST", PATH, { body: obj });
    assert.equal(r.status, 422, `${what}: ${JSON.stringify(r.body)}`);
    assert.match(String((r.body as Json).message), message, what);
    assert.ok(parseMultiNetworkPolicy(obj).specError, `${what}: lib/policy refuses it too`);
  }
  for (const [what, spec] of STRICTER) {
    const obj = policy(`strict-${n++}`, spec);
    const r = await api.admin.raw("POST", PATH, { body: obj });
    assert.equal(r.status, 422, `${what}: ${JSON.stringify(r.body)}`);
    assert.equal(parseMultiNetworkPolicy(obj).specError, undefined, what);
  }
  // Dry runs stored nothing.
  const list = await api.admin.request("GET", PATH.replace("?dryRun=All", ""));
  assert.deepEqual(list.items, []);
});
suite.end();
