/**
 * Fuzz target "config": `parseNetworkConfig` on network configurations and configuration
 * lists (CNI SPEC 1.1 "Network configuration format"), as JSON text and as decoded objects.
 *
 * Oracle: a {@link NetworkConfigList}, or `CniError` 1 (no usable version), 6 (not JSON / not
 * an object) or 7 (invalid config). Properties of an accepted config:
 * - `name` matches libcni `ValidateNetworkName`; `cniVersion` is supported — the declared one
 *   (0.1.0 when absent), or the highest supported of `cniVersions` + `cniVersion`;
 * - `plugins` is non-empty, every plugin an object with a safe `type`; `raw.plugins` equals
 *   `plugins` and `raw.name` equals `name`; a conflist's `raw` is the input, every key kept; a
 *   single conf is kept whole as `plugins[0]`;
 * - `disableCheck`/`disableGC` are booleans;
 * - normalisation is idempotent: parsing `raw` again gives the same list;
 * - text and object input agree (same list, or the same rejection code), and the object
 *   form never aliases or modifies the caller's object.
 *
 * @module
 */

import assert from "node:assert/strict";
import { CniError } from "../../lib/cni/errors.ts";
import {
  assertPluginType,
  type NetworkConfigList,
  parseNetworkConfig,
} from "../../lib/cni/types.ts";
import { isSupportedVersion, parseVersion, SUPPORTED_VERSIONS } from "../../lib/cni/version.ts";
import {
  type FuzzTarget,
  mutateJson,
  mutateText,
  randomJson,
  randomString,
  renderJson,
  type Rng,
} from "../support/fuzz.ts";
import { cidr, dodgeZodRecordText, dodgeZodRecordValue, KNOWN_BUG_ZOD_RECORD } from "./gen.ts";

/** One config case: the config as text or as a decoded object. */
export interface ConfigInput {
  /** How the input was made. */
  mode: string;
  /** JSON text (string form), or undefined when `object` is given. */
  text?: string;
  /** A decoded object (object form). */
  object?: Record<string, unknown>;
}

/**
 * True while the bug "config-1" of the fuzz report is open: `parseNetworkConfig` honours
 * `disableCheck`/`disableGC` on a single plugin conf but does not copy them into the
 * synthesized conflist `raw`, which is what delegates carry and the cache re-parses. Set to
 * false once fixed; `tests/fuzz/fuzz_test.ts` has the (ignored) regression test.
 */
export const KNOWN_BUG_SINGLE_CONF_FLAGS = false;

const NAME_RE = /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/;

/** Keys of a conflist and of a plugin conf, and near misses. */
export const CONFIG_KEYS: readonly string[] = [
  "cniVersion",
  "cniVersions",
  "name",
  "type",
  "plugins",
  "disableCheck",
  "disableGC",
  "capabilities",
  "ipam",
  "dns",
  "args",
  "runtimeConfig",
  "prevResult",
  "bridge",
  "master",
  "Name",
  "__proto__",
  "constructor",
];

const VERSIONS: readonly string[] = [
  ...SUPPORTED_VERSIONS,
  "",
  "1.2.0",
  "0.0.1",
  "2.0.0",
  "1.0",
  "v1.0.0",
  "01.0.0",
  "1.0.0 ",
];

const CONFIG_VALUES: readonly unknown[] = [
  null,
  "",
  "1.0.0",
  "1.1.0",
  "0.4.0",
  "9.9.9",
  ["1.0.0", "1.1.0"],
  ["0.3.1", "x"],
  [],
  "bridge",
  "../bin/sh",
  "a/b",
  "x\u0000",
  "true",
  "FALSE",
  "yes",
  true,
  false,
  1,
  { type: "bridge" },
  { type: "host-local", subnet: "10.0.0.0/24" },
  [{ type: "bridge" }],
  [{}],
  [null],
  { portMappings: true },
  "net_1.x-y",
  "-bad",
];

const TYPES = [
  "bridge",
  "host-local",
  "tuning",
  "macvlan",
  "portmap",
  "manifold",
  "",
  "..",
  "../sh",
  "a/b",
  "x\0",
  "é",
  " ",
  "a..b",
];

function name(r: Rng): string {
  if (r.chance(0.1)) return r.pick(["", "-x", "a b", "ä", "a/b", "_a", "x".repeat(300), "a\n"]);
  return randomString(r, { alphabet: "abcdefghijklmnopqrstuvwxyzABC0123456789_.-", maxLength: 16 })
    .replace(/^[_.-]/, "n") || "n";
}

function plugin(r: Rng): Record<string, unknown> {
  const p: Record<string, unknown> = {
    type: r.chance(0.9) ? r.pick(TYPES.slice(0, 6)) : r.pick(TYPES),
  };
  if (r.chance(0.3)) {
    const caps: Record<string, unknown> = { portMappings: r.chance(0.5), ips: true };
    if (r.chance(0.1)) {
      const value = r.pick([null, true, 1, "x", {}]);
      Object.defineProperty(caps, "constructor", {
        value,
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    p.capabilities = caps;
  }
  if (r.chance(0.4)) p.ipam = { type: "host-local", subnet: cidr(r) };
  if (r.chance(0.2)) p.mtu = r.range(0, 9000);
  if (r.chance(0.2)) p[randomString(r, { maxLength: 8 })] = randomJson(r, { depth: 2 });
  return p;
}

/** A valid-looking conf or conflist. */
function config(r: Rng): Record<string, unknown> {
  const c: Record<string, unknown> = {};
  if (r.chance(0.95)) c.name = name(r);
  if (r.chance(0.85)) c.cniVersion = r.chance(0.85) ? r.pick(SUPPORTED_VERSIONS) : r.pick(VERSIONS);
  if (r.chance(0.15)) c.cniVersions = Array.from({ length: r.range(0, 4) }, () => r.pick(VERSIONS));
  if (r.chance(0.1)) c.disableCheck = r.pick([true, false, "true", "False", "yes", 1]);
  if (r.chance(0.1)) c.disableGC = r.pick([true, false, "TRUE", "false", null]);
  if (r.chance(0.6)) {
    c.plugins = Array.from({ length: r.chance(0.05) ? 0 : r.range(1, 4) }, () => plugin(r));
  } else Object.assign(c, plugin(r));
  return c;
}

function generateRaw(r: Rng): ConfigInput {
  const x = r.float();
  let value: unknown;
  let mode: string;
  if (x < 0.35) (mode = "valid"), (value = config(r));
  else if (x < 0.8) {
    mode = "mutated";
    value = mutateJson(r, config(r), { keys: CONFIG_KEYS, values: CONFIG_VALUES });
  } else if (x < 0.92) {
    return {
      mode: "text-mutated",
      text: mutateText(r, renderJson(config(r)), [
        '"',
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        '"plugins"',
        '"type"',
        "null",
        "1e999",
      ]),
    };
  } else {
    mode = "random";
    value = randomJson(r, { keys: CONFIG_KEYS, values: CONFIG_VALUES });
  }
  if (r.chance(0.25) && typeof value === "object" && value !== null && !Array.isArray(value)) {
    return { mode: `${mode}/object`, object: value as Record<string, unknown> };
  }
  return { mode, text: renderJson(value, r) };
}

function generate(r: Rng): ConfigInput {
  const input = generateRaw(r);
  if (input.text !== undefined) input.text = dodgeZodRecordText(input.text);
  else dodgeZodRecordValue(input.object);
  return input;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function expectedVersion(decoded: Record<string, unknown>): string {
  const declared = typeof decoded.cniVersion === "string" ? decoded.cniVersion : "";
  if (!Array.isArray(decoded.cniVersions)) return declared || "0.1.0";
  const offered = [...decoded.cniVersions as string[], ...(declared ? [declared] : [])];
  const usable = offered.filter(isSupportedVersion).map((v) => parseVersion(v)!);
  usable.sort((a, b) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2]);
  return usable.at(-1)!.join(".");
}

/** `v` as JSON carries it (`-0` → `0`); the config parser's contract is JSON. */
function asJson(v: unknown): unknown {
  return JSON.parse(JSON.stringify(v));
}

/** The outcome of a call: the list, or the CniError code. */
function outcome(f: () => NetworkConfigList): NetworkConfigList | number {
  try {
    return f();
  } catch (err) {
    if (err instanceof CniError) return err.code;
    throw err;
  }
}

/** The "config" target (see the module doc for its properties). */
export const configTarget: FuzzTarget<ConfigInput, NetworkConfigList> = {
  name: "config",
  codes: [1, 6, 7],
  generate,
  call: (input) => parseNetworkConfig(input.text ?? input.object!, { source: "fuzz" }),
  check(out, input) {
    const decoded = input.object !== undefined ? input.object : JSON.parse(input.text!);
    assert.ok(isObject(decoded), "a non-object was accepted");
    assert.match(out.name, NAME_RE);
    assert.equal(out.name, decoded.name);
    assert.ok(
      isSupportedVersion(out.cniVersion),
      `unsupported cniVersion ${out.cniVersion} accepted`,
    );
    assert.equal(out.cniVersion, expectedVersion(decoded), "negotiated version");
    assert.ok(out.plugins.length > 0, "no plugins");
    for (const p of out.plugins) {
      assert.ok(isObject(p), "plugin is not an object");
      assert.equal(typeof p.type, "string");
      assertPluginType(p.type as string);
    }
    assert.equal(typeof out.disableCheck, "boolean");
    assert.equal(typeof out.disableGC, "boolean");
    assert.equal(out.raw.name, out.name);
    assert.deepStrictEqual(out.raw.plugins, out.plugins, "raw.plugins differs from plugins");
    if ("plugins" in decoded) {
      assert.deepStrictEqual(asJson(out.raw), asJson(decoded), "conflist keys lost");
    } else assert.deepStrictEqual(asJson(out.plugins[0]), asJson(decoded), "conf keys lost");

    // Idempotent normalisation: the normalised list parses to the same result.
    const again = parseNetworkConfig(out.raw);
    if (KNOWN_BUG_SINGLE_CONF_FLAGS && !("plugins" in decoded)) {
      // Known bug (fuzz report "config-1"): a single conf's disableCheck/disableGC are
      // honoured but left out of the synthesized `raw`, so a re-parse (cache → CHECK/GC) loses
      // them. Compared without the two flags until lib/cni/types.ts is fixed.
      again.disableCheck = out.disableCheck;
      again.disableGC = out.disableGC;
    }
    assert.deepStrictEqual(asJson(again), asJson(out), "parsing raw again gives another result");

    if (input.object !== undefined) {
      // The caller's object is neither aliased nor modified.
      const before = JSON.stringify(input.object);
      (out.plugins[0] as Record<string, unknown>).type = "changed-by-fuzz";
      out.raw.name = "changed-by-fuzz";
      assert.equal(JSON.stringify(input.object), before, "the input object was aliased");
    } else {
      const viaObject = outcome(() => parseNetworkConfig(decoded));
      assert.deepStrictEqual(asJson(viaObject), asJson(out), "text and object forms disagree");
    }
  },
  checkRejection(err, input) {
    // `capabilities` is any JSON object: rejecting one as "expected record" is wrong.
    const e = err as CniError;
    if (
      e.msg === "invalid plugin config" && /expected record[\s\S]*→ at capabilities/.test(e.details)
    ) {
      const decoded = input.object ?? JSON.parse(input.text!);
      const at = /^plugins\[(\d+)\]:/.exec(e.details);
      const plugin = at ? decoded.plugins[Number(at[1])] : decoded;
      const caps = plugin.capabilities;
      const known = KNOWN_BUG_ZOD_RECORD && isObject(caps) && Object.hasOwn(caps, "constructor");
      assert.ok(
        !isObject(caps) || known,
        `a JSON object was rejected as capabilities: ${e.details}`,
      );
    }
    if (input.text === undefined) return;
    let decoded: unknown;
    try {
      decoded = JSON.parse(input.text);
    } catch {
      return;
    }
    if (!isObject(decoded)) return;
    const viaObject = outcome(() => parseNetworkConfig(decoded as Record<string, unknown>));
    assert.equal(viaObject, (err as CniError).code, "text and object forms disagree");
  },
  show: (input) =>
    `${input.mode} ${
      input.text !== undefined
        ? `text=${JSON.stringify(input.text.slice(0, 1500))}`
        : `object=${JSON.stringify(input.object)?.slice(0, 1500)}`
    }`,
};
