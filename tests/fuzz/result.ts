/**
 * Fuzz target "result": `parseResult` and `convertResult` across every pair of supported
 * versions (0.1.0 … 1.1.0; CNI SPEC "Result", libcni `convert` registry).
 *
 * Oracle: a converted result, or `CniError` 1 (unsupported version; the target cannot hold the
 * result) or 6 (not a result of its version). Properties of an accepted conversion `raw → to`:
 * - the output declares `to` and is a valid `to` result (`parseResult` accepts it);
 * - same version: identity (`{...raw, cniVersion}`); same family: `raw` copied with only
 *   `cniVersion` changed;
 * - what both versions can express survives (`project`): addresses and gateways, routes
 *   `dst`/`gw`, DNS always; interfaces (`name`, `mac`, `sandbox`), address→interface indices
 *   and all route fields unless a 0.1.0/0.2.0 side is involved; CNI 1.1 interface fields
 *   between 1.x versions;
 * - round trip: converting back to the source version gives the same projection (a 0.1.0/0.2.0
 *   source that does not fit 0.1.0/0.2.0 itself — no address, or `ip4` holding an IPv6 address
 *   or route — may fail with code 1, as in libcni);
 * - the input is never modified and the output never aliases it;
 * - a code-1 rejection for a supported target means the result really does not fit: more than
 *   one address per family, no address, or a route whose family has no address (0.1.0/0.2.0).
 *
 * @module
 */

import assert from "node:assert/strict";
import { CniError } from "../../lib/cni/errors.ts";
import { convertResult, parseResult } from "../../lib/cni/result.ts";
import type { CniResult } from "../../lib/cni/types.ts";
import { isSupportedVersion, resultFamily, SUPPORTED_VERSIONS } from "../../lib/cni/version.ts";
import {
  type FuzzTarget,
  mutateJson,
  randomJson,
  randomString,
  type Rng,
} from "../support/fuzz.ts";
import { cidr, hexPairs, interfaceName, ipv4, ipv6 } from "./gen.ts";

/** One case: a raw result (usually JSON data) and the version to convert it to. */
export interface ResultInput {
  /** How the input was made. */
  mode: string;
  /** The raw result. */
  raw: unknown;
  /** Target version. */
  to: string;
  /** `JSON.stringify(raw)` before the call, to prove it is not modified. */
  snapshot: string;
}

type Family = "legacy" | "current" | "v1";

/** Keys of every result family, for the mutator. */
export const RESULT_KEYS: readonly string[] = [
  "cniVersion",
  "ip4",
  "ip6",
  "ip",
  "gateway",
  "routes",
  "dst",
  "gw",
  "dns",
  "nameservers",
  "interfaces",
  "ips",
  "address",
  "interface",
  "version",
  "name",
  "mac",
  "sandbox",
  "mtu",
  "socketPath",
  "pciID",
  "advmss",
  "priority",
  "table",
  "scope",
];

/** Valid and near-valid result values, for the mutator. */
export const RESULT_VALUES: readonly unknown[] = [
  null,
  "",
  "4",
  "6",
  "10.0.0.2/24",
  "10.0.0.1",
  "fd00::2/64",
  "fd00::1",
  "0.0.0.0/0",
  "::/0",
  "10.0.0.2",
  -1,
  0,
  1,
  2 ** 32,
  1.5,
  [],
  {},
  [{ dst: "0.0.0.0/0" }],
  [{ address: "10.0.0.3/24" }],
  { ip: "10.0.0.4/24" },
  ...SUPPORTED_VERSIONS,
  "1.2.0",
];

const BAD_VERSIONS = ["1.2.0", "", "0.3", "v1.0.0", "0.4.0 "];

function addr(r: Rng, v6: boolean): string {
  return v6 ? ipv6(r, 0.01) : ipv4(r, 0.01);
}

function prefix(r: Rng, v6: boolean): string {
  if (r.chance(0.02)) return cidr(r);
  return `${addr(r, v6)}/${r.int(v6 ? 129 : 33)}`;
}

function dns(r: Rng): Record<string, unknown> {
  const d: Record<string, unknown> = {};
  if (r.chance(0.6)) d.nameservers = Array.from({ length: r.int(3) }, () => addr(r, r.chance(0.3)));
  if (r.chance(0.4)) d.domain = r.chance(0.2) ? "" : "cluster.local";
  if (r.chance(0.3)) {
    d.search = Array.from({ length: r.int(3) }, () => randomString(r, { maxLength: 10 }));
  }
  if (r.chance(0.2)) d.options = ["ndots:5"];
  return d;
}

function legacyIp(r: Rng, v6: boolean): Record<string, unknown> {
  const wrongFamily = r.chance(0.03);
  const fam = wrongFamily ? !v6 : v6;
  const o: Record<string, unknown> = { ip: prefix(r, fam) };
  if (r.chance(0.5)) o.gateway = r.chance(0.1) ? null : addr(r, fam);
  if (r.chance(0.5)) {
    o.routes = Array.from({ length: r.int(3) }, () => {
      const rt: Record<string, unknown> = { dst: prefix(r, r.chance(0.03) ? !fam : fam) };
      if (r.chance(0.5)) rt.gw = addr(r, fam);
      return rt;
    });
  }
  return o;
}

/**
 * A plausible raw result of `version` (the version key itself is sometimes left out for 0.1.0),
 * with near misses: addresses of the other family in `ip4`/`ip6`, out-of-range interface
 * indices, empty DNS fields.
 *
 * @param r the case's generator
 * @param version one of `SUPPORTED_VERSIONS`
 * @returns the raw result
 */
export function randomResult(r: Rng, version: string): Record<string, unknown> {
  const fam = resultFamily(version);
  const out: Record<string, unknown> = {};
  if (!(version === "0.1.0" && r.chance(0.2))) out.cniVersion = version;
  if (r.chance(0.4)) out.dns = r.chance(0.1) ? null : dns(r);
  if (fam === "legacy") {
    if (r.chance(0.8)) out.ip4 = legacyIp(r, false);
    if (r.chance(0.5)) out.ip6 = legacyIp(r, true);
    return out;
  }
  const v11 = version === "1.1.0";
  const nIf = r.int(4);
  if (nIf > 0 || r.chance(0.2)) {
    out.interfaces = Array.from({ length: nIf }, () => {
      const i: Record<string, unknown> = { name: interfaceName(r) };
      if (r.chance(0.6)) i.mac = hexPairs(r, r.chance(0.1) ? 20 : 6);
      if (r.chance(0.5)) i.sandbox = r.chance(0.1) ? "" : "/var/run/netns/x";
      if (v11 && r.chance(0.3)) i.mtu = r.range(0, 9000);
      if (v11 && r.chance(0.1)) i.socketPath = "/run/vhost.sock";
      if (v11 && r.chance(0.1)) i.pciID = "0000:03:00.1";
      return i;
    });
  }
  const nIp = r.int(4);
  if (nIp > 0 || r.chance(0.2)) {
    out.ips = Array.from({ length: nIp }, () => {
      const v6 = r.chance(0.4);
      const ip: Record<string, unknown> = { address: prefix(r, v6) };
      if (fam === "current" && r.chance(0.8)) ip.version = v6 ? "6" : "4";
      if (r.chance(0.6)) {
        ip.interface = r.chance(0.9) ? r.int(Math.max(1, nIf)) : r.pick([-1, 7, null]);
      }
      if (r.chance(0.5)) ip.gateway = addr(r, v6);
      return ip;
    });
  }
  const nRt = r.int(4);
  if (nRt > 0 || r.chance(0.2)) {
    out.routes = Array.from({ length: nRt }, () => {
      const v6 = r.chance(0.4);
      const rt: Record<string, unknown> = { dst: prefix(r, v6) };
      if (r.chance(0.5)) rt.gw = addr(r, v6);
      if (v11) {
        for (const k of ["mtu", "advmss", "priority", "table", "scope"]) {
          if (r.chance(0.2)) rt[k] = r.range(0, 1500);
        }
      }
      return rt;
    });
  }
  return out;
}

function generate(r: Rng): ResultInput {
  const version = r.pick(SUPPORTED_VERSIONS);
  const to = r.chance(0.92) ? r.pick(SUPPORTED_VERSIONS) : r.pick(BAD_VERSIONS);
  const x = r.float();
  let raw: unknown;
  let mode: string;
  if (x < 0.55) (mode = "valid"), (raw = randomResult(r, version));
  else if (x < 0.95) {
    mode = "mutated";
    raw = mutateJson(r, randomResult(r, version), { keys: RESULT_KEYS, values: RESULT_VALUES }, 2);
  } else (mode = "random"), (raw = randomJson(r, { keys: RESULT_KEYS, values: RESULT_VALUES }));
  return { mode, raw, to, snapshot: JSON.stringify(raw) };
}

/** The most a result can carry in both families `a` and `b`, order-independent where legacy reorders. */
function project(res: CniResult, a: Family, b: Family): unknown {
  const legacy = a === "legacy" || b === "legacy";
  const current = a === "current" || b === "current";
  const sort = <T>(list: T[]) => list.map((x) => JSON.stringify(x)).sort();
  if (legacy) {
    return {
      ips: sort((res.ips ?? []).map((i) => ({ address: i.address, gateway: i.gateway }))),
      routes: sort((res.routes ?? []).map((rt) => ({ dst: rt.dst, gw: rt.gw }))),
      dns: res.dns,
    };
  }
  return {
    interfaces: current
      ? (res.interfaces ?? []).map((i) => ({ name: i.name, mac: i.mac, sandbox: i.sandbox }))
      : res.interfaces ?? [],
    ips: res.ips ?? [],
    routes: res.routes ?? [],
    dns: res.dns,
  };
}

function family(addrOrPrefix: string): "4" | "6" {
  return addrOrPrefix.includes(":") ? "6" : "4";
}

/** Whether a normalized result fits 0.1.0/0.2.0: one address per family at most, one at least, routes of those families. */
function fitsLegacy(res: CniResult): boolean {
  const fams = (res.ips ?? []).map((i) => family(i.address));
  if (fams.length === 0 || new Set(fams).size !== fams.length) return false;
  return (res.routes ?? []).every((rt) => fams.includes(family(rt.dst)));
}

function deepMutate(v: unknown): void {
  if (Array.isArray(v)) {
    for (const e of v) deepMutate(e);
    v.push("mutated-by-fuzz");
  } else if (typeof v === "object" && v !== null) {
    for (const k of Object.keys(v)) {
      const e = (v as Record<string, unknown>)[k];
      if (typeof e === "object" && e !== null) deepMutate(e);
      else (v as Record<string, unknown>)[k] = "mutated-by-fuzz";
    }
  }
}

/** The "result" target (see the module doc for its properties). */
export const resultTarget: FuzzTarget<ResultInput, Record<string, unknown>> = {
  name: "result",
  codes: [1, 6],
  generate,
  call: (input) => convertResult(input.raw, input.to),
  check(out, input) {
    const raw = input.raw as Record<string, unknown>;
    const src = parseResult(raw);
    const from = src.cniVersion;
    const ff = resultFamily(from), tf = resultFamily(input.to);
    assert.equal(out.cniVersion, input.to);
    const converted = parseResult(out);
    if (ff === tf) {
      assert.deepStrictEqual(
        out,
        { ...raw, cniVersion: input.to },
        "same family: not a copy of raw",
      );
    }
    assert.deepStrictEqual(
      project(converted, ff, tf),
      project(src, ff, tf),
      "expressible fields lost",
    );
    // Round trip back to the source version.
    let back: Record<string, unknown> | undefined;
    try {
      back = convertResult(out, from);
    } catch (err) {
      // A 0.1.0/0.2.0 source that did not fit its own version (no address; ip4 holding an
      // IPv6 address or route) decodes, but cannot be written as 0.1.0/0.2.0 again.
      const allowed = err instanceof CniError && err.code === 1 && ff === "legacy" &&
        !fitsLegacy(src);
      if (!allowed) throw err;
    }
    if (back) {
      assert.deepStrictEqual(
        project(parseResult(back), ff, tf),
        project(src, ff, tf),
        "round trip lost fields",
      );
    }
    // No aliasing, no modification of the input.
    deepMutate(out);
    assert.equal(
      JSON.stringify(input.raw),
      input.snapshot,
      "input modified or aliased by the output",
    );
  },
  checkRejection(err, input) {
    assert.equal(JSON.stringify(input.raw), input.snapshot, "input modified");
    const e = err as CniError;
    if (e.code === 1) {
      if (!isSupportedVersion(input.to)) return;
      let src: CniResult;
      try {
        src = parseResult(input.raw);
      } catch (inner) {
        assert.ok(
          inner instanceof CniError && inner.code === 1,
          "code 1 for a result parseResult rejects otherwise",
        );
        return;
      }
      assert.equal(resultFamily(input.to), "legacy", `code 1 converting to ${input.to}: ${e.msg}`);
      assert.ok(!fitsLegacy(src), `code 1 for a result that fits ${input.to}: ${e.msg}`);
    } else {
      assert.throws(
        () => parseResult(input.raw),
        CniError,
        "code 6 for a result parseResult accepts",
      );
    }
  },
  show: (input) =>
    `${input.mode} to=${JSON.stringify(input.to)} raw=${input.snapshot?.slice(0, 1500)}`,
};
