/**
 * Fuzz targets that keep the hand-written shape checks of the per-call path equal to the zod
 * schemas they replace (issue 30: the plugin process no longer loads zod for well-formed
 * input). Each case runs the hand-written check and the zod reference on the same input and
 * fails unless they agree: both accept with deep-equal values (prototypes included), or both
 * reject with a `CniError` of the same code, `msg` and `details` (zod's issue text).
 *
 * - `netconf`: lib/cni/netconf.ts's `NETWORK_CONFIG_CHECKS` against lib/cni/types.ts's
 *   `NETWORK_CONFIG_ZOD_CHECKS`, through `parseNetworkConfigWith`, on the inputs of the
 *   `config` target (valid, mutated, text-mutated and random configs and conflists).
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
import type { FuzzTarget } from "../support/fuzz.ts";
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
