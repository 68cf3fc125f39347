/**
 * Fuzz targets that keep the hand-written shape checks of the per-call path equal to the zod
 * schemas they replace (issue 30: the plugin process no longer loads zod for well-formed
 * input). Each case runs the hand-written check and the zod reference on the same input and
 * fails unless they agree: both accept with deep-equal values (prototypes included), or both
 * reject with a `CniError` of the same code, `msg` and `details` (zod's issue text).
 *
 * - `netconf`: lib/cni/netconf.ts's `NETWORK_CONFIG_CHECKS` against lib/cni/types.ts's
 *   `NETWORK_CONFIG_ZOD_CHECKS`, through `parseNetworkConfigWith`, on the inputs of the
 *   `config` target (valid, mutated, text-mutated and random configs and conflists);
 * - `manifoldconf`: lib/multinet/config.ts's `checkManifoldConfShape` against
 *   lib/multinet/config_schema.ts's zod schema, on Manifold configurations (every key with
 *   values of the right kind, of another kind and near misses; mutated; random; `__proto__`
 *   and `constructor` keys; Infinity and NaN), compared as zod's `safeParse` results: the
 *   same acceptance, the same output value, the same prettified issues;
 * - `record`: lib/multinet/cache/record_format.ts's `fastRecordCheck` against record.ts's zod
 *   schema, on cache records (valid ones with every optional part, mutated, random): what the
 *   fast check accepts, zod accepts with a deep-equal value; a valid record is always accepted
 *   by the fast check (else the per-call path would load zod for it).
 *
 * The API-facing shapes (results, selection elements, Kubernetes objects, kubeconfig) are in
 * tests/fuzz/fast_checks_api.ts.
 *
 * @module
 */

import assert from "node:assert/strict";
import { CniError } from "../../lib/cni/errors.ts";
import {
  NETWORK_CONFIG_CHECKS,
  type NetworkConfigList,
  parseNetworkConfigWith,
} from "../../lib/cni/netconf.ts";
import { NETWORK_CONFIG_ZOD_CHECKS } from "../../lib/cni/types.ts";
import { checkManifoldConfShape } from "../../lib/multinet/config.ts";
import { buildManifoldConfSchema } from "../../lib/multinet/config_schema.ts";
import { zodDetails } from "../../lib/cni/decode.ts";
import { fastRecordCheck } from "../../lib/multinet/cache/record_format.ts";
import { buildRecordSchema } from "../../lib/multinet/cache/record.ts";
import { z } from "zod";
import { type FuzzTarget, mutateJson, randomJson, renderJson, type Rng } from "../support/fuzz.ts";
import { type ConfigInput, configTarget } from "./config.ts";

/** What one call did: its value, or what it threw. */
export type Outcome<T> = { ok: true; value: T } | { ok: false; error: unknown };

/**
 * Runs `f`, keeping its value or what it threw.
 * @param f the call
 * @returns the outcome
 */
export function settle<T>(f: () => T): Outcome<T> {
  try {
    return { ok: true, value: f() };
  } catch (error) {
    return { ok: false, error };
  }
}

/** A CniError as the runtime sees it. */
function shown(e: unknown): unknown {
  return e instanceof CniError ? { code: e.code, msg: e.msg, details: e.details } : String(e);
}

/**
 * Runs the hand-written check and the reference; returns the value both agree on or throws
 * the error both threw. A disagreement throws an `AssertionError` (a fuzz failure).
 *
 * @param fast the call with the hand-written check
 * @param reference the same call with zod's
 * @returns the agreed value
 * @throws the agreed error (a CniError), or an AssertionError when they disagree
 */
export function agree<T>(fast: () => T, reference: () => T): T {
  const a = settle(fast);
  const b = settle(reference);
  if (a.ok && b.ok) {
    assert.deepStrictEqual(a.value, b.value, "the fast check and zod return different values");
    return a.value;
  }
  assert.deepStrictEqual(
    a.ok ? { accepted: a.value } : { rejected: shown(a.error) },
    b.ok ? { accepted: b.value } : { rejected: shown(b.error) },
    "the fast check and zod disagree",
  );
  throw (a as { error: unknown }).error;
}

/** The `netconf` target (see the module doc). */
export const netconfTarget: FuzzTarget<ConfigInput, NetworkConfigList> = {
  name: "netconf",
  codes: [1, 6, 7],
  generate: (r) => configTarget.generate(r),
  call(input) {
    const text = input.text ?? input.object!;
    return agree(
      () => parseNetworkConfigWith(text, { source: "fuzz" }, NETWORK_CONFIG_CHECKS),
      () => parseNetworkConfigWith(text, { source: "fuzz" }, NETWORK_CONFIG_ZOD_CHECKS),
    );
  },
};

/** Keys of Manifold's configuration (the schema's own) and near misses. */
const CONF_KEYS: readonly string[] = [
  ...Object.keys(buildManifoldConfSchema().shape),
  "__proto__",
  "constructor",
  "length",
  "toString",
  "plugins",
  "Type",
];

/** Values of every kind the schema has, and near misses. */
const CONF_VALUES: readonly unknown[] = [
  "",
  "manifold",
  "1.1.0",
  "/etc/cni/net.d",
  "relative/path",
  "a,b, c",
  "sync",
  "async",
  "SYNC",
  "all",
  "warnings",
  "none",
  "fail",
  "ignore",
  true,
  false,
  0,
  1,
  -1,
  1.5,
  600_001,
  Infinity,
  -Infinity,
  NaN,
  null,
  [],
  ["a", "b"],
  ["a", 1],
  [{}],
  [{ type: "bridge", name: "n" }],
  [null],
  ["x", { a: 1 }],
  {},
  { portMappings: true, bandwidth: false },
  { portMappings: "true" },
  { a: { b: 1 } },
  { maxAgeDays: 1 },
  // Own "__proto__" keys (JSON.parse makes them; a literal would set the prototype).
  JSON.parse('{"__proto__": {"polluted": true}, "portMappings": true}'),
  JSON.parse('[{"__proto__": {"type": "x"}, "name": "n"}]'),
];

let confSchema: ReturnType<typeof buildManifoldConfSchema> | undefined;
/** Per key, the values of CONF_VALUES its schema takes. */
const goodValues = new Map<string, unknown[]>();

/** A Manifold configuration object, of the right shape most of the time. */
function manifoldConf(r: Rng): Record<string, unknown> {
  const c: Record<string, unknown> = { cniVersion: "1.1.0", type: "manifold" };
  const n = r.int(8);
  const shape = (confSchema ??= buildManifoldConfSchema()).shape as Record<string, z.ZodType>;
  for (let i = 0; i < n; i++) {
    const key = r.pick(CONF_KEYS);
    // Half the time a value of the key's own kind (one the schema takes), else any value.
    let good = goodValues.get(key);
    if (!good) {
      good = Object.hasOwn(shape, key)
        ? CONF_VALUES.filter((v) => shape[key].safeParse(v).success)
        : [];
      goodValues.set(key, good);
    }
    c[key] = structuredClone(r.pick(good.length > 0 && r.chance(0.5) ? good : CONF_VALUES));
  }
  if (r.chance(0.2)) delete c[r.pick(["cniVersion", "type"])];
  return c;
}

/** A case of `manifoldconf`: a decoded JSON value (through JSON text most of the time). */
function manifoldConfInput(r: Rng): unknown {
  const x = r.float();
  let value: unknown;
  if (x < 0.4) value = manifoldConf(r);
  else if (x < 0.85) {
    value = mutateJson(r, manifoldConf(r), { keys: CONF_KEYS, values: CONF_VALUES });
  } else value = randomJson(r, { keys: CONF_KEYS, values: CONF_VALUES, nonFinite: true });
  // Through JSON text (own "__proto__" keys, 1e999 → Infinity) unless it keeps NaN as is.
  return r.chance(0.8) ? JSON.parse(renderJson(value)) : value;
}

/** zod's `safeParse` result as the fuzz compares it. */
function asResult(
  r: { success: true; data: unknown } | { success: false; error: unknown },
  details: (e: unknown) => string,
): unknown {
  return r.success ? { accepted: r.data } : { rejected: details(r.error) };
}

/** The `manifoldconf` target (see the module doc). */
export const manifoldConfTarget: FuzzTarget<unknown, unknown> = {
  name: "manifoldconf",
  codes: [7],
  generate: manifoldConfInput,
  call(input) {
    const fast = asResult(checkManifoldConfShape(input), zodDetails);
    const reference = asResult(
      (confSchema ??= buildManifoldConfSchema()).safeParse(input),
      (e) => z.prettifyError(e as z.ZodError),
    );
    assert.deepStrictEqual(fast, reference, "the fast check and zod disagree");
    const out = fast as { accepted?: unknown; rejected?: string };
    if ("rejected" in out) {
      throw new CniError(7, "invalid manifold configuration", out.rejected);
    }
    return out.accepted;
  },
};

/**
 * A copy of `value` (JSON) with one value anywhere in it replaced by one of `pool` or removed:
 * a near miss at any depth.
 */
export function nearMiss(r: Rng, value: unknown, pool: readonly unknown[]): unknown {
  const copy = JSON.parse(JSON.stringify(value));
  const slots: [Record<string, unknown>, string][] = [];
  const walk = (v: unknown) => {
    if (typeof v !== "object" || v === null) return;
    for (const k of Object.keys(v)) {
      slots.push([v as Record<string, unknown>, k]);
      walk((v as Record<string, unknown>)[k]);
    }
  };
  walk(copy);
  if (slots.length === 0) return copy;
  const [holder, key] = r.pick(slots);
  holder[key] = structuredClone(r.pick([...pool, undefined]));
  return copy;
}

/** Keys of a cache record and of an attachment, and near misses. */
const RECORD_KEYS: readonly string[] = [
  "schemaVersion",
  "containerId",
  "netns",
  "ifName",
  "pod",
  "cniVersion",
  "createdAt",
  "attachments",
  "networkStatus",
  "statusAnnotations",
  "deletedAt",
  "abandoned",
  "defaultRouteChange",
  "statusName",
  "isDefault",
  "origin",
  "conflist",
  "capabilityArgs",
  "cniArgs",
  "state",
  "result",
  "delFailures",
  "count",
  "firstAt",
  "__proto__",
];

const RECORD_VALUES: readonly unknown[] = [
  1,
  2,
  0,
  1.5,
  -1,
  Infinity,
  "",
  "abc",
  "0123abcd",
  "-bad",
  "2026-01-02T03:04:05.678Z",
  "2026-01-02T03:04:05+01:00",
  "2026-01-02 03:04:05",
  "adding",
  "added",
  "removed",
  true,
  null,
  [],
  [["K8S_POD_NAME", "p"]],
  [["a"]],
  [["a", "b", "c"]],
  {},
  { a: "b" },
  { a: 1 },
  JSON.parse('{"__proto__": {"x": 1}}'),
];

/** A valid attachment: every optional part present or not. */
function attachment(r: Rng): Record<string, unknown> {
  const a: Record<string, unknown> = {
    statusName: r.pick(["cbr0", "default/macvlan", ""]),
    isDefault: r.chance(0.5),
    ifName: r.pick(["eth0", "net1"]),
    conflist: { cniVersion: "1.0.0", name: "n", plugins: [{ type: "bridge", ipam: {} }] },
    capabilityArgs: r.chance(0.5) ? {} : { portMappings: [{ hostPort: 80 }] },
    cniArgs: r.chance(0.5) ? [] : [["K8S_POD_NAME", "p"], ["IgnoreUnknown", "true"]],
    state: r.pick(["adding", "added"]),
  };
  if (r.chance(0.5)) a.origin = r.pick(["selection", "default", "future-origin"]);
  if (r.chance(0.6)) {
    a.result = { cniVersion: "1.0.0", ips: [{ address: "10.0.0.2/24" }], dns: {} };
  }
  if (r.chance(0.2)) a.deviceInfoFile = "/var/run/k8s.cni.cncf.io/devinfo/cni/x.json";
  if (r.chance(0.2)) a.resourceName = "intel.com/sriov";
  if (r.chance(0.2)) a.deviceId = "0000:18:02.5";
  if (r.chance(0.2)) a.deviceInfo = { type: "pci", version: "1.1.0", pci: { "pci-address": "x" } };
  if (r.chance(0.2)) a.defaultRoute = r.chance(0.5) ? [] : ["10.0.0.1"];
  if (r.chance(0.2)) {
    a.delFailures = { count: r.range(1, 5), firstAt: new Date(0).toISOString(), lastError: "e" };
  }
  if (r.chance(0.1)) a["example.com/extension"] = { any: [1, "x"] };
  return a;
}

/** A valid cache record. */
function cacheRecord(r: Rng): Record<string, unknown> {
  const rec: Record<string, unknown> = {
    schemaVersion: 1,
    containerId: r.pick(["abc123", "0123456789abcdef", "a.b-c_d"]),
    netns: r.pick(["", "/var/run/netns/cni-1"]),
    ifName: "eth0",
    pod: { namespace: "default", name: "p", uid: r.pick(["", "uid-1"]) },
    cniVersion: "1.1.0",
    createdAt: new Date(r.int(2e12)).toISOString(),
    attachments: Array.from({ length: r.int(4) }, () => attachment(r)),
  };
  if (r.chance(0.3)) {
    rec.networkStatus = [{ name: "cbr0", default: true, interface: "eth0", ips: ["10.0.0.2"] }];
  }
  if (r.chance(0.2)) rec.statusAnnotations = { "k8s.v1.cni.cncf.io/network-status": "[]" };
  if (r.chance(0.3)) rec.deletedAt = "2026-01-02T03:04:05+01:00";
  if (r.chance(0.2)) rec.abandoned = [attachment(r)];
  if (r.chance(0.2)) {
    rec.defaultRouteChange = {
      ifName: "net1",
      added: [{ dst: "0.0.0.0/0", gateway: "10.0.0.1", metric: 0 }],
      removed: [{ dst: "0.0.0.0/0", ifName: "eth0" }],
    };
  }
  return rec;
}

let recordZod: ReturnType<typeof buildRecordSchema> | undefined;

/** The `record` target (see the module doc). */
export const recordTarget: FuzzTarget<{ mode: string; value: unknown }, unknown> = {
  name: "record",
  codes: [6],
  generate(r) {
    const x = r.float();
    if (x < 0.35) return { mode: "valid", value: JSON.parse(JSON.stringify(cacheRecord(r))) };
    if (x < 0.6) {
      return { mode: "near", value: nearMiss(r, cacheRecord(r), RECORD_VALUES) };
    }
    const value = x < 0.9
      ? mutateJson(r, cacheRecord(r), { keys: RECORD_KEYS, values: RECORD_VALUES })
      : randomJson(r, { keys: RECORD_KEYS, values: RECORD_VALUES });
    return { mode: "mutated", value: r.chance(0.8) ? JSON.parse(renderJson(value)) : value };
  },
  call({ mode, value }) {
    const fast = fastRecordCheck(value);
    const reference = (recordZod ??= buildRecordSchema()).safeParse(value);
    if (fast !== undefined) {
      assert.ok(reference.success, "the fast check accepted what zod rejects");
      assert.ok(fast.success);
      assert.deepStrictEqual(fast.data, reference.data, "the fast check and zod differ");
    } else if (mode === "valid") assert.fail("the fast check did not accept a valid record");
    if (!reference.success) {
      throw new CniError(6, "cache record is malformed", z.prettifyError(reference.error));
    }
    return reference.data;
  },
};
