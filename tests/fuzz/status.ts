/**
 * Fuzz target "status": the `k8s.v1.cni.cncf.io/network-status` annotation (NPWG v1.3 §5) —
 * `parseNetworkStatus` on annotation text (written by Manifold, Multus, or anyone with pod
 * write access) and `buildNetworkStatus` on delegate results of every version.
 *
 * Oracle: entries, or `CniError` 6 (decoding failure). Properties:
 * - parse: every entry has a string `name` and a boolean `default`; writing the entries with
 *   `serializeNetworkStatus` and parsing them again gives the same entries, default ones first;
 *   every truncation of a valid annotation is rejected (covered by the mutators' truncation);
 * - build: `name`/`default` are the attachment's; `ips` are addresses of the result; `mac`
 *   only with `interface`; `default-route` and `gateway` equal the requested gateways; the
 *   entry survives serialize → parse; the result object is not modified.
 *
 * @module
 */

import { parseResult } from "../../lib/cni/result.ts";
import assert from "node:assert/strict";
import {
  buildNetworkStatus,
  parseNetworkStatus,
  serializeNetworkStatus,
  type StatusInput,
} from "../../lib/multinet/status/network_status.ts";
import type { NetworkStatus } from "../../lib/multinet/types.ts";
import { SUPPORTED_VERSIONS } from "../../lib/cni/version.ts";
import {
  type FuzzTarget,
  mutateJson,
  mutateText,
  randomJson,
  randomString,
  renderJson,
  type Rng,
} from "../support/fuzz.ts";
import { interfaceName, ip } from "./gen.ts";
import { randomResult, RESULT_KEYS, RESULT_VALUES } from "./result.ts";

/** One case: annotation text to parse, or an attachment to build an entry for. */
export type StatusFuzzInput =
  | { kind: "parse"; mode: string; text: string }
  | { kind: "build"; mode: string; input: RawStatusInput; snapshot: string };

/** A status input whose result is still the raw JSON a delegate printed. */
type RawStatusInput = Omit<StatusInput, "result"> & { result?: unknown };

const STATUS_KEYS = [
  "name",
  "interface",
  "ips",
  "mac",
  "mtu",
  "default",
  "dns",
  "device-info",
  "default-route",
  "gateway",
  "infiniband-guid",
  "org.example/x",
];

const STATUS_VALUES: readonly unknown[] = [
  null,
  "",
  "cbr0",
  "ns/net-a",
  "net1",
  ["10.0.0.2/24"],
  ["10.0.0.2"],
  ["not-an-ip"],
  "02:00:00:00:00:01",
  1500,
  -1,
  1500.5,
  true,
  false,
  "yes",
  { nameservers: ["10.0.0.10"] },
  { type: "pci", version: "1.1.0", pci: { "pci-address": "0000:03:00.1" } },
  { version: "1.1.0" },
  ["10.0.0.1"],
];

/** A valid entry. */
function entry(r: Rng): NetworkStatus {
  const e: NetworkStatus = {
    name: r.chance(0.8) ? `ns/net-${r.int(9)}` : "cbr0",
    default: r.chance(0.3),
  };
  if (r.chance(0.8)) e.interface = interfaceName(r);
  if (r.chance(0.7)) {
    e.ips = Array.from(
      { length: r.range(1, 3) },
      () => (r.chance(0.5) ? `${ip(r, 0)}/24` : ip(r, 0)),
    );
  }
  if (r.chance(0.5)) e.mac = "02:00:00:00:00:01";
  if (r.chance(0.2)) e.mtu = r.range(0, 9000);
  if (r.chance(0.2)) e.dns = { nameservers: [ip(r, 0)], search: ["svc"] };
  if (r.chance(0.1)) {
    e["device-info"] = { type: "pci", version: "1.1.0", pci: { "pci-address": "0000:03:00.1" } };
  }
  if (r.chance(0.1)) e["default-route"] = e.gateway = [ip(r, 0)];
  return e;
}

function generate(r: Rng): StatusFuzzInput {
  const x = r.float();
  if (x < 0.55) {
    const entries = Array.from({ length: r.range(0, 4) }, () => entry(r));
    const y = r.float();
    if (y < 0.25) return { kind: "parse", mode: "valid", text: serializeNetworkStatus(entries) };
    if (y < 0.6) {
      const mutated = mutateJson(r, entries, { keys: STATUS_KEYS, values: STATUS_VALUES });
      return { kind: "parse", mode: "mutated", text: renderJson(mutated, r) };
    }
    if (y < 0.9) {
      const tokens = [
        "[",
        "]",
        "{",
        "}",
        '"',
        ",",
        ":",
        "null",
        "true",
        '"name"',
        '"default"',
        '"ips"',
      ];
      return {
        kind: "parse",
        mode: "text-mutated",
        text: mutateText(r, serializeNetworkStatus(entries), tokens),
      };
    }
    return {
      kind: "parse",
      mode: "random",
      text: r.chance(0.5) ? randomString(r) : renderJson(randomJson(r, { keys: STATUS_KEYS }), r),
    };
  }
  let result: unknown = r.chance(0.1) ? undefined : randomResult(r, r.pick(SUPPORTED_VERSIONS));
  let mode = "valid-result";
  if (result !== undefined && r.chance(0.4)) {
    result = mutateJson(r, result, { keys: RESULT_KEYS, values: RESULT_VALUES }, 2);
    mode = "mutated-result";
  }
  const input: RawStatusInput = {
    statusName: r.chance(0.9) ? "ns/net-a" : randomString(r),
    ifName: r.chance(0.9) ? "net1" : interfaceName(r),
    isDefault: r.chance(0.3),
    result,
  };
  if (r.chance(0.2)) input.defaultRoute = Array.from({ length: r.int(3) }, () => ip(r, 0));
  if (r.chance(0.1)) input.deviceInfo = { type: "pci", version: "1.1.0" };
  return { kind: "build", mode, input, snapshot: JSON.stringify(input) };
}

/** Every address string anywhere in a raw result (`ips[].address`, `ip4.ip`, `ip6.ip`). */
function resultAddresses(raw: unknown): Set<string> {
  const out = new Set<string>();
  const o = raw as {
    ips?: { address?: unknown }[];
    ip4?: { ip?: unknown };
    ip6?: { ip?: unknown };
  };
  for (const i of Array.isArray(o?.ips) ? o.ips : []) {
    if (typeof i?.address === "string") out.add(i.address);
  }
  for (const k of ["ip4", "ip6"] as const) {
    if (typeof o?.[k]?.ip === "string") out.add(o[k]!.ip as string);
  }
  return out;
}

function defaultsFirst(list: NetworkStatus[]): NetworkStatus[] {
  return [...list.filter((e) => e.default), ...list.filter((e) => !e.default)];
}

/** `v` as JSON carries it (`-0` → `0`). */
function asJson(v: unknown): unknown {
  return JSON.parse(JSON.stringify(v));
}

/** The "status" target (see the module doc for its properties). */
export const statusTarget: FuzzTarget<StatusFuzzInput, NetworkStatus[] | NetworkStatus> = {
  name: "status",
  // 6 for a bad shape, 1 for a result whose cniVersion is unknown (the decoder checks it).
  codes: [1, 6],
  generate,
  call: (c) =>
    c.kind === "parse" ? parseNetworkStatus(c.text) : buildNetworkStatus({
      ...c.input,
      // Decoded once, as ADD does; a malformed result is the decoder's typed error.
      result: c.input.result === undefined ? undefined : parseResult(c.input.result),
    }),
  check(out, c) {
    if (c.kind === "parse") {
      const list = out as NetworkStatus[];
      assert.ok(Array.isArray(list));
      for (const e of list) {
        assert.equal(typeof e.name, "string");
        assert.equal(typeof e.default, "boolean");
      }
      const again = parseNetworkStatus(serializeNetworkStatus(list));
      assert.deepStrictEqual(
        asJson(again),
        asJson(defaultsFirst(list)),
        "serialize → parse round trip",
      );
      return;
    }
    const e = out as NetworkStatus;
    assert.equal(e.name, c.input.statusName);
    assert.equal(e.default, c.input.isDefault);
    const known = resultAddresses(c.input.result);
    for (const a of e.ips ?? []) assert.ok(known.has(a), `ip ${a} is not in the result`);
    if (e.mac !== undefined) assert.notEqual(e.interface, undefined, "mac without interface");
    assert.deepStrictEqual(e["default-route"], c.input.defaultRoute);
    assert.deepStrictEqual(e.gateway, c.input.defaultRoute);
    assert.equal(JSON.stringify(c.input), c.snapshot, "input modified");
    const [again] = parseNetworkStatus(serializeNetworkStatus([e]));
    assert.deepStrictEqual(
      asJson(again),
      asJson(e),
      "built entry does not survive serialize → parse",
    );
  },
  checkRejection(_err, c) {
    if (c.kind === "build") assert.equal(JSON.stringify(c.input), c.snapshot, "input modified");
  },
  show: (c) =>
    c.kind === "parse"
      ? `parse ${c.mode} text=${JSON.stringify(c.text.slice(0, 1500))}`
      : `build ${c.mode} input=${c.snapshot.slice(0, 1500)}`,
};
