/**
 * Fuzz target "selection": `parseNetworkSelection` (the `k8s.v1.cni.cncf.io/networks`
 * annotation, NPWG v1.3 §4.1) and, for the comma form, `parseNetworkReference`.
 *
 * Oracle: a list of elements, or `CniError` 7. Properties of an accepted annotation:
 * - at most {@link MAX_SELECTION_ELEMENTS} elements; every element has a DNS-1123 subdomain
 *   `name`, a DNS-1123 label `namespace` (the pod's when absent), a kernel-valid `interface`,
 *   only spec keys plus `extra` (keys containing "."), valid `ips`/`mac`/GUID, ports 1–65535
 *   with a lower-case protocol, positive bandwidth with each burst next to its rate, at most one
 *   `default-route`, never `ips` together with `ipam-claim-reference`;
 * - round trip: the elements written back as a JSON annotation parse to the same elements;
 * - comma form: every item parses with `parseNetworkReference` to the same element;
 * - comma and JSON forms agree: for simple references, `"ns/name@if, …"` and
 *   `[{"name","namespace","interface"}, …]` are both accepted with equal results, or both
 *   rejected.
 *
 * @module
 */

import assert from "node:assert/strict";
import { CniError } from "../../lib/cni/errors.ts";
import {
  isDns1123Label,
  isDns1123Subdomain,
  isValidInterfaceName,
  MAX_SELECTION_ANNOTATION_BYTES,
  MAX_SELECTION_ELEMENTS,
  parseNetworkReference,
  parseNetworkSelection,
} from "../../lib/multinet/plan/selection.ts";
import type { NetworkSelectionElement } from "../../lib/multinet/types.ts";
import {
  type FuzzTarget,
  mutateJson,
  mutateText,
  randomJson,
  randomString,
  renderJson,
  type Rng,
} from "../support/fuzz.ts";
import {
  cidr,
  dnsLabel,
  dnsSubdomain,
  dodgeZodRecordText,
  hexPairs,
  interfaceName,
  ip,
  KNOWN_BUG_ZOD_RECORD,
} from "./gen.ts";

/** One selection case: the annotation, the pod namespace, and an equivalent form if any. */
export interface SelectionInput {
  /** How the input was made (for reading failures). */
  mode: string;
  /** The annotation value. */
  text: string;
  /** The pod namespace. */
  ns: string;
  /** The same references in the other format: must give the same outcome. */
  twin?: string;
}

/** The spec keys of an element (NPWG v1.3 §4.1.2.1) plus near misses and an extension key. */
export const SELECTION_KEYS: readonly string[] = [
  "name",
  "namespace",
  "ips",
  "mac",
  "interface",
  "cni-args",
  "portMappings",
  "bandwidth",
  "default-route",
  "infiniband-guid",
  "ipam-claim-reference",
  "org.example.key",
  "k8s.v1.cni.cncf.io/x",
  "bogus",
  "Name",
  "__proto__",
  "constructor",
];

const SPEC_KEYS = new Set(SELECTION_KEYS.slice(0, 11));

/** Valid and near-valid values for the mutator. */
const SELECTION_VALUES: readonly unknown[] = [
  null,
  "",
  "net-a",
  "10.0.0.1",
  "10.0.0.1/24",
  "::1",
  "2001:db8::5/64",
  "02:23:45:67:89:01",
  "24:8a:07:03:00:8d:ae:2f",
  ["10.0.0.1"],
  ["10.0.0.1/24", "fd00::1/64"],
  [],
  [null],
  {},
  { spoofchk: "on" },
  [{ hostPort: 8080, containerPort: 80 }],
  [{ hostPort: 0, containerPort: 65536, protocol: "ICMP" }],
  [{ hostPort: 1, containerPort: 1, protocol: "SCTP", hostIP: "" }],
  { ingressRate: 1 },
  { ingressBurst: 1 },
  { egressRate: 0 },
  { egressRate: 1.5 },
  65535,
  65536,
  0,
  -1,
  1e21,
  true,
  "x".repeat(300),
];

/** Syntax tokens for text mutation. */
const TOKENS: readonly string[] = [
  "[",
  "]",
  "{",
  "}",
  '"',
  ",",
  ":",
  "/",
  "@",
  ".",
  "\\",
  " ",
  "\n",
  "\u0000",
  "é",
  "\u00a0",
  "😀",
  "null",
  "true",
  "-1",
  "0",
  "1e309",
  "65536",
  "__proto__",
  '"name"',
  '"ips"',
  '"mac"',
  '"interface"',
  '"default-route"',
  '"portMappings"',
  '"bandwidth"',
  '"cni-args"',
  '"x.y"',
  "[[[[[[",
  "]]]]",
  "{}",
  "[]",
];

/** Hand-written annotations mutated as text (from the original selection_test fuzz corpus). */
const CORPUS: readonly string[] = [
  "net-a, ns/net-b, net-c@eth5",
  "net-a,net-a",
  JSON.stringify([{
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
    "org.example.key": true,
  }, { name: "net-c", "ipam-claim-reference": "vm.a" }]),
];

const PROTOCOLS = ["tcp", "udp", "sctp", "TCP", "Udp", "SCTP", "icmp", ""];

/** One element with a random subset of keys, valid most of the time. */
function element(r: Rng): Record<string, unknown> {
  const e: Record<string, unknown> = { name: dnsSubdomain(r, 0.05) };
  if (r.chance(0.4)) e.namespace = r.chance(0.1) ? "" : dnsLabel(r, 0.05);
  if (r.chance(0.3)) e.interface = interfaceName(r);
  const claim = r.chance(0.1);
  if (!claim && r.chance(0.3)) {
    e.ips = Array.from({ length: r.range(1, 3) }, () => (r.chance(0.5) ? cidr(r) : ip(r)));
  }
  if (claim) e["ipam-claim-reference"] = dnsSubdomain(r, 0.05);
  if (r.chance(0.2)) e.mac = hexPairs(r, 6);
  if (r.chance(0.1)) e["infiniband-guid"] = hexPairs(r, 8);
  if (r.chance(0.15)) e["cni-args"] = randomJson(r, { depth: 2 }) ?? {};
  if (typeof e["cni-args"] !== "object" || Array.isArray(e["cni-args"])) {
    if ("cni-args" in e) e["cni-args"] = { k: e["cni-args"] };
  }
  if (r.chance(0.15)) {
    e.portMappings = Array.from({ length: r.range(1, 3) }, () => {
      const pm: Record<string, unknown> = {
        hostPort: r.chance(0.95) ? r.range(1, 65535) : r.pick([0, 65536, 1.5]),
        containerPort: r.range(1, 65535),
      };
      if (r.chance(0.6)) pm.protocol = r.pick(PROTOCOLS);
      if (r.chance(0.3)) pm.hostIP = r.chance(0.3) ? "" : ip(r);
      return pm;
    });
  }
  if (r.chance(0.15)) {
    const b: Record<string, unknown> = {};
    for (const dir of ["ingress", "egress"]) {
      if (r.chance(0.6)) {
        b[`${dir}Rate`] = r.range(1, 1e9);
        if (r.chance(0.5)) b[`${dir}Burst`] = r.range(1, 1e9);
      }
    }
    e.bandwidth = b;
  }
  if (r.chance(0.1)) e["default-route"] = Array.from({ length: r.int(3) }, () => ip(r));
  if (r.chance(0.1)) {
    e[`${dnsLabel(r, 0)}.${dnsLabel(r, 0)}/${randomString(r, { maxLength: 6 })}`] = randomJson(r);
  }
  return e;
}

function elements(r: Rng): Record<string, unknown>[] {
  const n = r.chance(0.03) ? MAX_SELECTION_ELEMENTS + r.range(0, 1) : r.range(0, 4);
  const list = Array.from({ length: n }, () => element(r));
  // At most one default-route, usually.
  if (r.chance(0.9)) {
    let seen = false;
    for (const e of list) {
      if ("default-route" in e) {
        if (seen) delete e["default-route"];
        seen = true;
      }
    }
  }
  return list;
}

/** A reference safe for both formats: no whitespace, `,`, `/`, `@` or JSON syntax inside parts. */
function simpleRef(r: Rng): { name: string; namespace?: string; interface?: string } {
  const ref: { name: string; namespace?: string; interface?: string } = {
    name: dnsSubdomain(r, 0.1),
  };
  if (r.chance(0.4)) ref.namespace = dnsLabel(r, 0.1);
  if (r.chance(0.4)) ref.interface = interfaceName(r, "@/ \t\u000b\u00a0");
  return ref;
}

const BAD_CHARS = /[\s,/@[\]{}"\u00a0\ufeff]/u;

function commaItem(ref: { name: string; namespace?: string; interface?: string }): string {
  return `${ref.namespace !== undefined ? `${ref.namespace}/` : ""}${ref.name}${
    ref.interface !== undefined ? `@${ref.interface}` : ""
  }`;
}

function generateRaw(r: Rng): SelectionInput {
  const ns = r.chance(0.9) ? "pod-ns" : dnsLabel(r, 0);
  const x = r.float();
  if (x < 0.15) {
    let refs = Array.from({ length: r.chance(0.03) ? 33 : r.range(0, 4) }, () => simpleRef(r));
    refs = refs.filter((ref) =>
      !BAD_CHARS.test(ref.name) && !BAD_CHARS.test(ref.namespace ?? "") &&
      !BAD_CHARS.test(ref.interface ?? "") && ref.namespace !== "" && ref.name !== ""
    );
    const sep = r.pick([",", ", ", " ,"]);
    return {
      mode: "comma-twin",
      text: refs.map(commaItem).join(sep),
      ns,
      twin: JSON.stringify(refs),
    };
  }
  if (x < 0.3) {
    const items = Array.from({ length: r.range(0, 5) }, () => {
      const y = r.float();
      if (y < 0.6) return commaItem(simpleRef(r));
      if (y < 0.7) return "";
      if (y < 0.8) {
        return r.pick(["a/b/c", "a@b@c", " / ", "@eth0", "ns/", "/name", " net-a ", "net-a@"]);
      }
      return randomString(r, { maxLength: 20, alphabet: "abc-./@ ,\t" });
    });
    return { mode: "comma-random", text: items.join(r.pick([",", ", "])), ns };
  }
  if (x < 0.55) return { mode: "json-valid", text: renderJson(elements(r), r), ns };
  if (x < 0.85) {
    const mutated = mutateJson(r, elements(r), { keys: SELECTION_KEYS, values: SELECTION_VALUES });
    return { mode: "json-mutated", text: renderJson(mutated, r), ns };
  }
  if (x < 0.95) {
    const base = r.chance(0.5) ? r.pick(CORPUS) : renderJson(elements(r));
    return { mode: "text-mutated", text: mutateText(r, base, TOKENS), ns };
  }
  if (x < 0.998) {
    const text = r.chance(0.5)
      ? randomString(r, { maxLength: 40 })
      : renderJson(randomJson(r, { keys: SELECTION_KEYS }), r);
    return { mode: "random", text, ns };
  }
  // Around the 256 KiB limit: one huge element or many bytes of whitespace.
  const fill = r.pick(["a", " ", "é", "😀"]);
  const bytes = new TextEncoder().encode(fill).length;
  const n = Math.floor(MAX_SELECTION_ANNOTATION_BYTES / bytes) + r.range(-20, 20);
  const text = r.chance(0.5)
    ? `[{"name":"n","org.x":"${fill.repeat(n)}"}]`
    : `net-a${fill.repeat(n)}`;
  return { mode: "huge", text, ns };
}

function generate(r: Rng): SelectionInput {
  const input = generateRaw(r);
  input.text = dodgeZodRecordText(input.text);
  return input;
}

/** The element as an annotation object again: spec keys plus the `extra` keys. */
function toAnnotation(e: NetworkSelectionElement): Record<string, unknown> {
  const { extra, ...rest } = e;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(rest)) {
    Object.defineProperty(out, k, { value: v, enumerable: true });
  }
  for (const [k, v] of Object.entries(extra ?? {})) {
    Object.defineProperty(out, k, { value: v, enumerable: true });
  }
  return out;
}

/** `v` as JSON would carry it (`-0` → `0`, `undefined` members dropped). */
function asJson(v: unknown): unknown {
  return JSON.parse(JSON.stringify(v));
}

const MAC_48 = /^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}$/;
const GUID_64 = /^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){7}$/;

function checkElement(e: NetworkSelectionElement, ns: string): void {
  for (const key of Object.keys(e)) {
    assert.ok(
      SPEC_KEYS.has(key) || key === "extra",
      `unexpected key ${JSON.stringify(key)} in element`,
    );
  }
  assert.ok(
    isDns1123Subdomain(e.name),
    `name ${JSON.stringify(e.name)} is not a DNS-1123 subdomain`,
  );
  assert.ok(isDns1123Label(e.namespace), `namespace ${JSON.stringify(e.namespace)} is not a label`);
  if (e.interface !== undefined) assert.ok(isValidInterfaceName(e.interface), "interface invalid");
  if (e.ips !== undefined) {
    assert.ok(e.ips.length > 0, "empty ips accepted");
    for (const a of e.ips) assert.equal(typeof a, "string");
  }
  if (e.mac !== undefined) assert.match(e.mac, MAC_48);
  if (e["infiniband-guid"] !== undefined) assert.match(e["infiniband-guid"], GUID_64);
  if (e["ipam-claim-reference"] !== undefined) {
    assert.equal(e.ips, undefined, "ips together with ipam-claim-reference");
    assert.ok(isDns1123Subdomain(e["ipam-claim-reference"]));
  }
  for (const pm of e.portMappings ?? []) {
    for (const p of [pm.hostPort, pm.containerPort]) {
      assert.ok(Number.isInteger(p) && p >= 1 && p <= 65535, `port ${p}`);
    }
    assert.ok(["tcp", "udp", "sctp"].includes(pm.protocol ?? ""), `protocol ${pm.protocol}`);
  }
  if (e.bandwidth !== undefined) {
    const b = e.bandwidth;
    assert.ok(Object.keys(b).length > 0, "empty bandwidth accepted");
    for (const v of Object.values(b)) assert.ok(Number.isInteger(v) && v >= 1, `bandwidth ${v}`);
    if (b.ingressBurst !== undefined) assert.notEqual(b.ingressRate, undefined);
    if (b.egressBurst !== undefined) assert.notEqual(b.egressRate, undefined);
  }
  if (e["cni-args"] !== undefined) {
    assert.ok(
      typeof e["cni-args"] === "object" && !Array.isArray(e["cni-args"]) && e["cni-args"] !== null,
    );
  }
  for (const key of Object.keys(e.extra ?? {})) assert.ok(key.includes("."), `extra key ${key}`);
  assert.ok(ns.length > 0);
}

/**
 * The "selection" target (see the module doc for its properties).
 */
export const selectionTarget: FuzzTarget<SelectionInput, NetworkSelectionElement[]> = {
  name: "selection",
  codes: [7],
  generate,
  call: (input) => parseNetworkSelection(input.text, input.ns),
  check(out, input) {
    assert.ok(Array.isArray(out));
    assert.ok(out.length <= MAX_SELECTION_ELEMENTS, `${out.length} elements accepted`);
    let defaultRoutes = 0;
    for (const e of out) {
      checkElement(e, input.ns);
      if (e["default-route"] !== undefined) defaultRoutes++;
    }
    assert.ok(defaultRoutes <= 1, `${defaultRoutes} elements with default-route`);
    // Round trip through the JSON form (compared as JSON: -0 is written as 0). Skipped when the
    // longer written form no longer fits the size limit.
    const written = JSON.stringify(out.map(toAnnotation));
    if (
      written.length * 3 <= MAX_SELECTION_ANNOTATION_BYTES ||
      new TextEncoder().encode(written).length <= MAX_SELECTION_ANNOTATION_BYTES
    ) {
      const again = parseNetworkSelection(written, input.ns);
      assert.deepStrictEqual(
        asJson(again),
        asJson(out),
        "elements written back as JSON parse differently",
      );
    }
    // Comma form: each item agrees with parseNetworkReference.
    const text = input.text.trim();
    if (text !== "" && !/[[{"]/.test(text)) {
      const items = text.split(",");
      assert.equal(items.length, out.length);
      items.forEach((item, i) => {
        const ref = parseNetworkReference(item.trim(), input.ns);
        const expected: NetworkSelectionElement = { name: ref.name, namespace: ref.namespace };
        if (ref.interface !== undefined) expected.interface = ref.interface;
        assert.deepStrictEqual(out[i], expected, `item ${i} differs from parseNetworkReference`);
      });
    }
    if (input.twin !== undefined) {
      let twin: NetworkSelectionElement[];
      try {
        twin = parseNetworkSelection(input.twin, input.ns);
      } catch (err) {
        throw new Error(
          `comma form accepted but the JSON form was rejected: ${(err as Error).message}`,
        );
      }
      assert.deepStrictEqual(twin, out, "comma and JSON forms disagree");
    }
  },
  checkRejection(err, input) {
    // "cni-args" is any JSON object: rejecting one as "not a JSON object" is wrong.
    const m = /^invalid network selection element \[(\d+)\][^:]*: "cni-args": not a JSON object/
      .exec((err as CniError).msg);
    if (m) {
      const list = JSON.parse(input.text.trim());
      const value = list[Number(m[1])]["cni-args"];
      const plain = typeof value === "object" && value !== null && !Array.isArray(value);
      const known = KNOWN_BUG_ZOD_RECORD && plain && Object.hasOwn(value, "constructor");
      assert.ok(
        !plain || known,
        `a JSON object was rejected as cni-args: ${JSON.stringify(value)}`,
      );
    }
    if (input.twin === undefined) return;
    try {
      const twin = parseNetworkSelection(input.twin, input.ns);
      throw new Error(
        `comma form rejected but the JSON form was accepted: ${JSON.stringify(twin)}`,
      );
    } catch (err) {
      if (!(err instanceof CniError && err.code === 7)) throw err;
    }
  },
  show: (input) =>
    `${input.mode} ns=${JSON.stringify(input.ns)} text=${
      JSON.stringify(input.text.slice(0, 1200))
    }${input.text.length > 1200 ? `… (${input.text.length} chars)` : ""}${
      input.twin !== undefined ? ` twin=${JSON.stringify(input.twin.slice(0, 600))}` : ""
    }`,
};
