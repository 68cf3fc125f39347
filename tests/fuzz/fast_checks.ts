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
 *   same acceptance, the same output value, the same prettified issues.
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
import { z } from "zod";
import { type FuzzTarget, mutateJson, randomJson, renderJson, type Rng } from "../support/fuzz.ts";
import { type ConfigInput, configTarget } from "./config.ts";

/** What one call did: its value, or what it threw. */
type Outcome<T> = { ok: true; value: T } | { ok: false; error: unknown };

function settle<T>(f: () => T): Outcome<T> {
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
