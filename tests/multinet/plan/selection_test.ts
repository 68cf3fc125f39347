/**
 * Tests of lib/multinet/plan/selection.ts (NPWG v1.3 §4.1). Pure: run with no permissions
 * (`deno test tests/multinet/selection_test.ts`).
 */

import assert from "node:assert/strict";
import { CniError, CniErrorCode } from "../../../lib/cni/errors.ts";
import {
  isValidInterfaceName,
  MAX_SELECTION_ANNOTATION_BYTES,
  MAX_SELECTION_ELEMENTS,
  parseNetworkReference,
  parseNetworkSelection,
} from "../../../lib/multinet/plan/selection.ts";
import type { NetworkSelectionElement } from "../../../lib/multinet/types.ts";
import { formatStats, fuzz, fuzzEnv } from "../../support/fuzz.ts";
import { selectionTarget } from "../../fuzz/selection.ts";

const NS = "pod-ns";

/** Asserts that `fn` throws a CniError 7 whose msg matches `pattern`; returns it. */
function assertCode7(fn: () => unknown, pattern?: RegExp | string): CniError {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  assert.ok(caught instanceof CniError, `expected a CniError, got ${caught}`);
  assert.equal(caught.code, CniErrorCode.InvalidNetworkConfig);
  if (typeof pattern === "string") assert.ok(caught.msg.includes(pattern), caught.msg);
  else if (pattern) assert.match(caught.msg, pattern);
  return caught;
}

/** Parses a one-element JSON annotation `{name: "net-a", ...extra}`. */
function one(extra: Record<string, unknown>): NetworkSelectionElement {
  const [element] = parseNetworkSelection(JSON.stringify([{ name: "net-a", ...extra }]), NS);
  return element;
}

// ---------------------------------------------------------------- formats

Deno.test("empty and whitespace-only annotations select nothing", () => {
  for (const text of ["", " ", "\n\t  \n"]) assert.deepEqual(parseNetworkSelection(text, NS), []);
});

Deno.test("comma-delimited format with namespaces and @ifname (§4.1.1, Multus)", () => {
  assert.deepEqual(parseNetworkSelection("net-a, other-ns/net-b ,net-c@eth5, ns2/net-d@net9", NS), [
    { name: "net-a", namespace: NS },
    { name: "net-b", namespace: "other-ns" },
    { name: "net-c", namespace: NS, interface: "eth5" },
    { name: "net-d", namespace: "ns2", interface: "net9" },
  ]);
});

Deno.test("comma-delimited: the spec example", () => {
  assert.deepEqual(parseNetworkSelection("net-a,net-b,other-ns/net-c", "my-namespace"), [
    { name: "net-a", namespace: "my-namespace" },
    { name: "net-b", namespace: "my-namespace" },
    { name: "net-c", namespace: "other-ns" },
  ]);
});

Deno.test("comma-delimited: same network twice gives two elements (§4.2.2)", () => {
  assert.equal(parseNetworkSelection("net-a,net-a", NS).length, 2);
});

Deno.test("comma-delimited: invalid items name the index", () => {
  const cases: [string, RegExp][] = [
    ["net-a,,net-b", /element \[1\] \(""\): empty item/],
    ["net-a,", /element \[1\].*empty item/],
    ["a/b/c", /element \[0\] \("a\/b\/c"\): more than one "\/"/],
    ["net-a@x@y", /more than one "@"/],
    ["Net-A", /name "Net-A": not a DNS-1123 subdomain/],
    ["net_a", /not a DNS-1123 subdomain/],
    ["Bad_NS/net-a", /namespace "Bad_NS": not a DNS-1123 label/],
    ["ns.dotted/net-a", /namespace "ns.dotted"/],
    ["/net-a", /namespace "": not a DNS-1123 label/],
    ["ns/", /empty name/],
    ["net-a@", /interface "": not a valid Linux interface name/],
    ["net-a@toolonginterface0", /interface "toolonginterface0"/],
    ["net-a@a:b", /interface "a:b"/],
    ["net-a@..", /interface "\.\."/],
  ];
  for (const [text, pattern] of cases) assertCode7(() => parseNetworkSelection(text, NS), pattern);
});

Deno.test("JSON list format: full example of multus-behaviour.md (c)", () => {
  const text = JSON.stringify([{
    name: "net-b",
    namespace: "ns1",
    interface: "net5",
    ips: ["10.2.2.42/24", "2001:db8::5/64"],
    mac: "02:23:45:67:89:01",
    "infiniband-guid": "24:8a:07:03:00:8d:ae:2f",
    "cni-args": { spoofchk: "on" },
    portMappings: [{ hostPort: 8080, containerPort: 80, protocol: "tcp", hostIP: "" }],
    bandwidth: { ingressRate: 2048, ingressBurst: 300, egressRate: 8000, egressBurst: 200 },
    "default-route": ["10.0.0.1"],
  }]);
  assert.deepEqual(parseNetworkSelection(text, NS), [{
    name: "net-b",
    namespace: "ns1",
    interface: "net5",
    ips: ["10.2.2.42/24", "2001:db8::5/64"],
    mac: "02:23:45:67:89:01",
    "cni-args": { spoofchk: "on" },
    portMappings: [{ hostPort: 8080, containerPort: 80, protocol: "tcp", hostIP: "" }],
    bandwidth: { ingressRate: 2048, ingressBurst: 300, egressRate: 8000, egressBurst: 200 },
    "default-route": ["10.0.0.1"],
    "infiniband-guid": "24:8a:07:03:00:8d:ae:2f",
  }]);
});

Deno.test("JSON list: surrounding whitespace, empty list, missing/empty namespace", () => {
  assert.deepEqual(parseNetworkSelection("  []\n", NS), []);
  assert.deepEqual(
    parseNetworkSelection('\n [ {"name":"a"}, {"name":"b","namespace":""} ]\n', NS),
    [
      { name: "a", namespace: NS },
      { name: "b", namespace: NS },
    ],
  );
});

Deno.test("JSON format must be a list of objects", () => {
  assertCode7(() => parseNetworkSelection('{"name":"net-a"}', NS), "must be a list of objects");
  assertCode7(() => parseNetworkSelection('"net-a"', NS), "must be a list of objects");
  assertCode7(() => parseNetworkSelection('["net-a"]', NS), /element \[0\]: not a JSON object/);
  assertCode7(() => parseNetworkSelection("[null]", NS), /element \[0\]: not a JSON object/);
  assertCode7(() => parseNetworkSelection("[[]]", NS), /element \[0\]: not a JSON object/);
  assertCode7(() => parseNetworkSelection('[{"name":"a"},', NS), "nor valid JSON");
});

// ---------------------------------------------------------------- every key, table-driven

interface KeyCase {
  key: string;
  valid: [unknown, unknown?][]; // [input value, expected output value (default: same)]
  invalid: [unknown, RegExp][];
}

const KEY_CASES: KeyCase[] = [
  {
    key: "name",
    valid: [["a"], ["net-a"], ["0net"], ["vm123.tenantblue"], [
      `${"a".repeat(63)}.${"b".repeat(63)}`,
    ]],
    invalid: [
      ["", /"name": required \(empty\)/],
      [42, /"name": not a string/],
      [null, /"name": not a string/],
      ["Net-A", /"name": not a DNS-1123 subdomain/],
      ["-net", /not a DNS-1123/],
      ["net-", /not a DNS-1123/],
      ["ns/net", /not a DNS-1123/],
      ["a..b", /not a DNS-1123/],
      ["a".repeat(64), /not a DNS-1123/],
      [Array(64).fill("abc").join("."), /not a DNS-1123/], // 255 characters
    ],
  },
  {
    key: "namespace",
    valid: [["other"], ["a"], ["a".repeat(63)], ["", NS]],
    invalid: [
      ["a.b", /"namespace": not a DNS-1123 label/],
      ["Other", /not a DNS-1123 label/],
      ["a".repeat(64), /not a DNS-1123 label/],
      [7, /"namespace": not a string/],
    ],
  },
  {
    key: "ips",
    valid: [
      [["10.2.2.42"]],
      [["10.2.2.42/24"]],
      [["10.0.0.0/8", "2001:db8::5/64", "::1", "::ffff:1.2.3.4", "fe80::1/128", "1.2.3.4/32"]],
    ],
    invalid: [
      [[], /"ips": must contain at least one address/],
      ["10.0.0.1", /"ips": not an array/],
      [["10.2.2.300"], /"ips"\[0\]: not an IPv4 or IPv6 address/],
      [["10.2.2.1", "10.2.2.1/33"], /"ips"\[1\]/],
      [["2001:db8::/129"], /"ips"\[0\]/],
      [["010.1.1.1"], /"ips"\[0\]/],
      [["fe80::1%eth0"], /"ips"\[0\]/],
      [[" 10.0.0.1"], /"ips"\[0\]/],
      [["10.0.0.1/"], /"ips"\[0\]/],
      [[1], /"ips"\[0\]: not a string/],
    ],
  },
  {
    key: "mac",
    valid: [["02:23:45:67:89:01"], ["AA:BB:CC:DD:EE:FF"]],
    invalid: [
      ["02:23:45:67:89", /"mac": not a 6-byte MAC address/],
      ["02:23:45:67:89:01:02", /not a 6-byte MAC/],
      ["02-23-45-67-89-01", /not a 6-byte MAC/],
      ["0223.4567.8901", /not a 6-byte MAC/],
      ["02:23:45:67:89:0g", /not a 6-byte MAC/],
      [12345, /"mac": not a string/],
    ],
  },
  {
    key: "interface",
    valid: [["eth1"], ["net-5"], ["a"], ["x".repeat(15)], ["Eth_1.100"], ["é".repeat(7)]],
    invalid: [
      ["", /"interface": not a valid Linux interface name/],
      ["x".repeat(16), /not a valid Linux interface name/],
      ["é".repeat(8), /not a valid Linux interface name/], // 16 bytes
      [".", /not a valid/],
      ["..", /not a valid/],
      ["a/b", /not a valid/],
      ["a:b", /not a valid/],
      ["a b", /not a valid/],
      ["a\tb", /not a valid/],
      ["a\nb", /not a valid/],
      ["a\u00a0b", /not a valid/],
      ["à", /not a valid/], // UTF-8 C3 A0: the kernel's isspace(0xa0)
      ["a\u0000b", /not a valid/],
      [5, /"interface": not a string/],
    ],
  },
  {
    key: "cni-args",
    valid: [[{}], [{ spoofchk: "on", nested: { a: [1, 2] }, n: null }]],
    invalid: [
      [[], /"cni-args": not a JSON object/],
      ["a=b", /"cni-args": not a JSON object/],
      [null, /"cni-args": not a JSON object/],
    ],
  },
  {
    key: "portMappings",
    valid: [
      [[{ hostPort: 8080, containerPort: 80 }], [{
        hostPort: 8080,
        containerPort: 80,
        protocol: "tcp",
      }]],
      [[{ hostPort: 1, containerPort: 65535, protocol: "UDP" }], [{
        hostPort: 1,
        containerPort: 65535,
        protocol: "udp",
      }]],
      [[{ hostPort: 53, containerPort: 53, protocol: "Sctp", hostIP: "10.0.0.1" }], [{
        hostPort: 53,
        containerPort: 53,
        protocol: "sctp",
        hostIP: "10.0.0.1",
      }]],
    ],
    invalid: [
      [[], /"portMappings": must contain at least one port mapping/],
      [{ hostPort: 1, containerPort: 1 }, /"portMappings": not an array/],
      [[{ containerPort: 80 }], /"portMappings"\[0\]\."hostPort": required/],
      [[{ hostPort: 80 }], /"portMappings"\[0\]\."containerPort": required/],
      [[{ hostPort: 0, containerPort: 80 }], /"hostPort": not a port between 1 and 65535/],
      [[{ hostPort: 65536, containerPort: 80 }], /"hostPort": not a port between 1 and 65535/],
      [[{ hostPort: 80, containerPort: -1 }], /"containerPort": not a port/],
      [[{ hostPort: 80.5, containerPort: 80 }], /"hostPort": not an integer port/],
      [[{ hostPort: "80", containerPort: 80 }], /"hostPort": not an integer port/],
      [
        [{ hostPort: 80, containerPort: 80, protocol: "icmp" }],
        /"protocol": not one of TCP, UDP or SCTP/,
      ],
      [[{ hostPort: 80, containerPort: 80, protocol: 6 }], /"protocol": not a string/],
      [[{ hostPort: 80, containerPort: 80, hostIP: "x" }], /"hostIP": not an IPv4 or IPv6 address/],
      [
        [{ hostPort: 80, containerPort: 80, hostport: 1 }],
        /"portMappings"\[0\]\."hostport": unknown key/,
      ],
      [["80:80"], /"portMappings"\[0\]: not an object/],
    ],
  },
  {
    key: "bandwidth",
    valid: [
      [{ ingressRate: 2048 }],
      [{ egressRate: 1, egressBurst: 1 }],
      [{ ingressRate: 2048, ingressBurst: 300, egressRate: 8000, egressBurst: 200 }],
      [{ ingressRate: Number.MAX_SAFE_INTEGER }],
    ],
    invalid: [
      [{}, /"bandwidth": must contain at least one rate or burst/],
      [{ ingressBurst: 300 }, /"bandwidth"\."ingressBurst": requires "ingressRate"/],
      [{ ingressRate: 1, egressBurst: 300 }, /"egressBurst": requires "egressRate"/],
      [{ ingressRate: 0 }, /"ingressRate": not a positive integer/],
      [{ ingressRate: -5 }, /"ingressRate": not a positive integer/],
      [{ egressRate: 1.5 }, /"egressRate": not a positive integer/],
      [{ egressRate: "1M" }, /"egressRate": not a positive integer/],
      [{ ingressRate: 1e300 }, /"ingressRate": not a positive integer/],
      [{ ingressrate: 1 }, /"bandwidth"\."ingressrate": unknown key/],
      [[{ ingressRate: 1 }], /"bandwidth": not an object/],
    ],
  },
  {
    key: "default-route",
    valid: [[[]], [["10.0.0.1"]], [["10.0.0.1", "2001:db8::1"]]],
    invalid: [
      ["10.0.0.1", /"default-route": not an array/],
      [["10.0.0.0/24"], /"default-route"\[0\]: not an IPv4 or IPv6 gateway address/],
      [["gateway"], /"default-route"\[0\]/],
    ],
  },
  {
    key: "infiniband-guid",
    valid: [["24:8a:07:03:00:8d:ae:2f"], ["C2:8A:07:03:00:8D:AE:2F"]],
    invalid: [
      ["24:8a:07:03:00:8d:ae", /"infiniband-guid": not an 8-byte InfiniBand GUID/],
      ["24:8a:07:03:00:8d:ae:2f:00", /not an 8-byte InfiniBand GUID/],
      ["02:23:45:67:89:01", /not an 8-byte InfiniBand GUID/],
      ["248a0703008dae2f", /not an 8-byte InfiniBand GUID/],
      [true, /"infiniband-guid": not a string/],
    ],
  },
  {
    key: "ipam-claim-reference",
    valid: [["vm123.tenantblue"], ["myappstatefulset.safenetwork.eth1"]],
    invalid: [
      ["", /"ipam-claim-reference": not an IPAMClaim name/],
      ["Bad_Claim", /not an IPAMClaim name/],
      [{ name: "x" }, /"ipam-claim-reference": not a string/],
    ],
  },
];

for (const { key, valid, invalid } of KEY_CASES) {
  Deno.test(`key "${key}": valid values (§4.1.2.1)`, () => {
    for (const [value, expected] of valid) {
      const element = one({ [key]: value });
      const got = (element as unknown as Record<string, unknown>)[key];
      assert.deepEqual(
        got,
        expected === undefined ? value : expected,
        `${key}: ${JSON.stringify(value)}`,
      );
    }
  });
  Deno.test(`key "${key}": invalid values fail the whole annotation with code 7`, () => {
    for (const [value, pattern] of invalid) {
      const text = JSON.stringify([{ name: "ok-net" }, { name: "net-a", [key]: value }]);
      const err = assertCode7(() => parseNetworkSelection(text, NS), pattern);
      // The element index and (when valid-ish) its name come first; the key is named.
      assert.match(err.msg, /^invalid network selection element \[1\]/);
      if (key !== "name") {
        assert.ok(err.msg.startsWith('invalid network selection element [1] ("net-a"): '), err.msg);
      }
      assert.ok(err.msg.includes(`"${key}"`), err.msg);
      assert.ok(err.details.length > 0, "details carry the prettified zod error");
    }
  });
}

Deno.test("the message of the brief's example", () => {
  const text = '[{"name":"net-a"},{"name":"macvlan-conf","mac":"nope"}]';
  const err = assertCode7(() => parseNetworkSelection(text, NS));
  assert.equal(
    err.msg,
    'invalid network selection element [1] ("macvlan-conf"): "mac": not a 6-byte MAC address (xx:xx:xx:xx:xx:xx)',
  );
  assert.match(err.details, /✖ not a 6-byte MAC address[\s\S]*→ at mac/);
});

Deno.test("missing name is reported without a name label", () => {
  assertCode7(
    () => parseNetworkSelection('[{"namespace":"x"}]', NS),
    /^invalid network selection element \[0\]: "name": required$/,
  );
});

Deno.test("ipam-claim-reference together with ips is an error (spec v1.3 §4.1.2.1.11)", () => {
  assertCode7(
    () => one({ ips: ["10.0.0.5/24"], "ipam-claim-reference": "vm-a.tenantred" }),
    /"ipam-claim-reference": must not be combined with "ips"/,
  );
  assert.equal(
    one({ "ipam-claim-reference": "vm-a.tenantred" })["ipam-claim-reference"],
    "vm-a.tenantred",
  );
});

Deno.test("default-route on two elements invalidates the annotation (§4.1.2.1.9)", () => {
  const text = JSON.stringify([
    { name: "a", "default-route": [] },
    { name: "b" },
    { name: "c", "default-route": ["10.0.0.1"] },
  ]);
  assertCode7(
    () => parseNetworkSelection(text, NS),
    /element \[2\] \("c"\): "default-route": may be set on only one element \(already set on element \[0\]/,
  );
  const okText = JSON.stringify([{ name: "a" }, { name: "c", "default-route": [] }]);
  assert.deepEqual(parseNetworkSelection(okText, NS)[1]["default-route"], []);
});

Deno.test("reverse-DNS extension keys are kept in extra", () => {
  const element = one({ "org.example.vlan": 100, "io.foo.bar": { a: [1] } });
  assert.deepEqual(element, {
    name: "net-a",
    namespace: NS,
    extra: { "org.example.vlan": 100, "io.foo.bar": { a: [1] } },
  });
});

Deno.test("unknown keys without a dot are reserved and rejected", () => {
  for (
    const key of [
      "foo",
      "gateway",
      "ip",
      "Mac",
      "cniArgs",
      "interfaceName",
      "__proto__",
      "constructor",
    ]
  ) {
    const text = `[{"name":"net-a",${JSON.stringify(key)}:1}]`;
    assertCode7(
      () => parseNetworkSelection(text, NS),
      `"${key}": reserved key not defined by NPWG v1.3`,
    );
  }
});

Deno.test("a __proto__ key never reaches an object's prototype", () => {
  const [element] = parseNetworkSelection(
    '[{"name":"a","x.y":1,"cni-args":{"__proto__":{"p":1}}}]',
    NS,
  );
  assert.equal(Object.getPrototypeOf(element.extra), Object.prototype);
  assert.deepEqual(Object.keys(element["cni-args"]!), ["__proto__"]);
  assert.equal(({} as Record<string, unknown>).p, undefined);
});

// ---------------------------------------------------------------- limits

Deno.test("annotation larger than 256 KiB is refused, naming the limit", () => {
  const big = JSON.stringify([{
    name: "a",
    "org.x.pad": "x".repeat(MAX_SELECTION_ANNOTATION_BYTES),
  }]);
  assertCode7(() => parseNetworkSelection(big, NS), /bytes, more than the limit of 262144 bytes/);
  // Multi-byte characters count in UTF-8 bytes.
  const wide = JSON.stringify([{
    name: "a",
    "org.x.pad": "é".repeat(MAX_SELECTION_ANNOTATION_BYTES / 2),
  }]);
  assertCode7(() => parseNetworkSelection(wide, NS), /262144 bytes/);
  const fits = JSON.stringify([{
    name: "a",
    "org.x.pad": "x".repeat(MAX_SELECTION_ANNOTATION_BYTES - 100),
  }]);
  assert.equal(parseNetworkSelection(fits, NS).length, 1);
});

Deno.test("more than 32 elements is refused, naming the limit", () => {
  const names = Array.from({ length: MAX_SELECTION_ELEMENTS }, (_, i) => `net-${i}`);
  assert.equal(parseNetworkSelection(names.join(","), NS).length, 32);
  assert.equal(
    parseNetworkSelection(JSON.stringify(names.map((name) => ({ name }))), NS).length,
    32,
  );
  names.push("net-32");
  assertCode7(
    () => parseNetworkSelection(names.join(","), NS),
    /has 33 elements, more than the limit of 32/,
  );
  assertCode7(
    () => parseNetworkSelection(JSON.stringify(names.map((name) => ({ name }))), NS),
    /has 33 elements, more than the limit of 32/,
  );
});

// ---------------------------------------------------------------- parseNetworkReference

Deno.test("parseNetworkReference: forms and errors", () => {
  assert.deepEqual(parseNetworkReference("net-a", "kube-system"), {
    namespace: "kube-system",
    name: "net-a",
  });
  assert.deepEqual(parseNetworkReference(" ns/net-a ", "x"), { namespace: "ns", name: "net-a" });
  assert.deepEqual(parseNetworkReference("ns/net-a@eth1", "x"), {
    namespace: "ns",
    name: "net-a",
    interface: "eth1",
  });
  assert.deepEqual(parseNetworkReference("calico.k8s-pod-network", "x"), {
    namespace: "x",
    name: "calico.k8s-pod-network",
  });
  for (const bad of ["", "a/b/c", "A", "ns/", "bad ns/net", "net@a@b", "net@eth0:1"]) {
    assertCode7(() => parseNetworkReference(bad, "x"), /^invalid network reference /);
  }
});

Deno.test("isValidInterfaceName follows the kernel's dev_valid_name", () => {
  assert.ok(isValidInterfaceName("eth0"));
  assert.ok(isValidInterfaceName("a@b,c"));
  assert.ok(!isValidInterfaceName("a\u000bb"));
  assert.ok(!isValidInterfaceName("a\u000cb"));
  assert.ok(!isValidInterfaceName("a\rb"));
});

// ---------------------------------------------------------------- fuzz

// The seeded fuzzing of the annotation (the original corpus and tokens, generated valid
// elements, structure-aware and text mutations, comma/JSON agreement, round trips) is the
// "selection" target of tests/fuzz/selection.ts; tests/fuzz/fuzz_test.ts runs it from seed
// 0x5eed. This file runs the same target from another fixed seed so it covers it on its own.
Deno.test("fuzz: 2,000 generated and mutated annotations give valid elements or CniError 7", () => {
  const stats = fuzz(selectionTarget, { seed: fuzzEnv().seed ?? 0x5e1ec7, runs: 2000 });
  // Sanity: the generator produces both accepted and rejected inputs.
  assert.ok(stats.accepted > 0 && stats.rejected > 0, formatStats(stats));
});
