/**
 * Bounded property/fuzz batch for every parser of untrusted input (issue 6 "Fuzzing and
 * limits"): the selection annotation, network configs, CNI_ARGS and the CNI environment, result
 * conversion, network-status, and the netlink decoders and API. Each target runs its CI batch
 * (see `targets.ts`) from a fixed seed; the seed is printed.
 *
 * Replay or widen: `FUZZ_SEED=<seed>` (run seed), `FUZZ_RUNS=<n>` (cases per target, no time
 * cap), `FUZZ_CASE=<index>` (one case only), e.g.
 * `FUZZ_SEED=24301 FUZZ_CASE=1378 deno test -A tests/fuzz/fuzz_test.ts --filter "fuzz selection:"`.
 * For millions of cases: `deno run -A scripts/fuzz.ts`.
 *
 * Pure: without `--allow-env` the defaults are used; without `--allow-read` the netlink
 * targets skip the captured kernel dumps.
 */

import assert from "node:assert/strict";
import { CniError } from "../../lib/cni/errors.ts";
import { parseNetworkConfig } from "../../lib/cni/types.ts";
import { validateInterfaceName } from "../../lib/cni/env.ts";
import { isValidInterfaceName, parseNetworkSelection } from "../../lib/multinet/plan/selection.ts";
import {
  AttributeDecoder,
  decodeError,
  encodeMessage,
  IFLA_IFNAME,
  NetlinkDecodeError,
  NetlinkWriter,
  NLM_F_ACK_TLVS,
  NLMSG_ERROR,
  NLMSGERR_ATTR_MSG,
  parseMessages,
} from "../../lib/netlink/mod.ts";
import {
  caseSeed,
  describeInput,
  formatStats,
  fuzz,
  fuzzEnv,
  FuzzFailure,
  type FuzzTarget,
  mutateBytes,
  mutateJson,
  mutateText,
  randomJson,
  renderJson,
  Rng,
} from "../support/fuzz.ts";
import { DEFAULT_SEED, TARGETS } from "./targets.ts";

const env = fuzzEnv();
const SEED = env.seed ?? DEFAULT_SEED;
console.log(
  `fuzz seed ${SEED}${env.runs !== undefined ? `, ${env.runs} cases per target` : ""}${
    env.only !== undefined ? `, case ${env.only} only` : ""
  } (replay: FUZZ_SEED=${SEED} [FUZZ_RUNS=n] [FUZZ_CASE=i])`,
);

// ---------------------------------------------------------------------------- the batch

for (const [name, { target, ciRuns }] of Object.entries(TARGETS)) {
  const runs = env.runs ?? ciRuns;
  Deno.test(`fuzz ${name}: ${runs} cases, typed errors only, properties hold`, () => {
    const stats = fuzz(target, {
      seed: SEED,
      runs,
      only: env.only,
      // A safety cap for slow CI machines; FUZZ_RUNS asks for exactly that many cases.
      timeBudgetMs: env.runs === undefined ? 2500 : undefined,
    });
    console.log(formatStats(stats));
    if (env.only === undefined && stats.cases >= 500) {
      // The generators are not degenerate: both outcomes occur.
      assert.ok(stats.accepted > 0, `${name}: no input was accepted`);
      assert.ok(stats.rejected > 0, `${name}: no input was rejected`);
    }
  });
}

// ---------------------------------------------------------------------- the harness itself

Deno.test("harness: a case replays from (seed, index) alone", () => {
  for (const { target } of Object.values(TARGETS)) {
    for (const index of [0, 1, 977]) {
      const a = target.generate(new Rng(caseSeed(SEED, index)));
      const b = target.generate(new Rng(caseSeed(SEED, index)));
      assert.equal(describeInput(a, 1e6), describeInput(b, 1e6), `${target.name} #${index}`);
    }
  }
  assert.notEqual(caseSeed(1, 0), caseSeed(1, 1));
  assert.notEqual(caseSeed(1, 0), caseSeed(2, 0));
});

Deno.test("harness: an untyped error fails with target, seed, case and input", () => {
  const target: FuzzTarget<number, void> = {
    name: "demo",
    generate: (r) => r.int(100),
    call: (n) => {
      if (n > 90) throw new TypeError("boom");
      if (n > 50) throw new CniError(7, "invalid");
    },
  };
  let caught: unknown;
  try {
    fuzz(target, { seed: 7, runs: 1000 });
  } catch (err) {
    caught = err;
  }
  assert.ok(caught instanceof FuzzFailure);
  const f = caught;
  assert.equal(f.target, "demo");
  assert.equal(f.seed, 7);
  assert.match(f.message, /untyped TypeError escaped/);
  assert.match(f.message, new RegExp(`FUZZ_SEED=7 FUZZ_CASE=${f.index}`));
  assert.ok(Number(f.input) > 90);
  // Replaying exactly that case fails the same way; the cases before it pass.
  assert.throws(() => fuzz(target, { seed: 7, only: f.index }), FuzzFailure);
  fuzz(target, { seed: 7, runs: f.index });
});

Deno.test("harness: wrong CNI code, empty msg, broken property and slow case fail", () => {
  const base = { name: "demo", generate: (r: Rng) => r.int(10) };
  assert.throws(
    () =>
      fuzz({
        ...base,
        codes: [7],
        call: () => {
          throw new CniError(6, "x");
        },
      }, { seed: 1, runs: 5 }),
    /CniError with code 6, expected one of 7/,
  );
  assert.throws(
    () =>
      fuzz({
        ...base,
        call: () => {
          throw new CniError(7, "");
        },
      }, { seed: 1, runs: 5 }),
    /empty msg/,
  );
  assert.throws(
    () =>
      fuzz({ ...base, call: (n: number) => n, check: (n: number) => assert.ok(n < 5) }, {
        seed: 1,
        runs: 50,
      }),
    /property broken for an accepted input/,
  );
  assert.throws(
    () =>
      fuzz({
        ...base,
        call: () => {
          const end = performance.now() + 5;
          while (performance.now() < end) { /* busy */ }
        },
      }, { seed: 1, runs: 3, maxCaseMs: 1 }),
    /case took \d+ ms, more than 1 ms/,
  );
  const stats = fuzz({
    ...base,
    codes: [7],
    call: (n: number) => {
      if (n % 2) throw new CniError(7, "odd");
    },
  }, {
    seed: 1,
    runs: 200,
  });
  assert.equal(stats.accepted + stats.rejected, 200);
  assert.equal(stats.rejections["cni 7"], stats.rejected);
});

Deno.test("harness: generators and mutators are deterministic and render valid JSON", () => {
  const make = (seed: number) => {
    const r = new Rng(seed);
    const value = randomJson(r, { depth: 3, breadth: 5 });
    return [
      renderJson(value, r),
      renderJson(mutateJson(r, value, { keys: ["name"], values: [1] })),
      mutateText(r, "a=b;c=d", ["=", ";"]),
      describeInput(mutateBytes(r, new Uint8Array(32))),
    ];
  };
  for (let seed = 0; seed < 300; seed++) {
    const a = make(seed);
    assert.deepStrictEqual(a, make(seed));
    JSON.parse(a[0]);
    JSON.parse(a[1]);
  }
  assert.equal(renderJson({ a: Infinity, b: -0, c: NaN }), '{"a":1e999,"b":-0,"c":null}');
});

// --------------------------------------------------------- bugs found by fuzzing (see report)

Deno.test({
  name: "fixed bug config-1: a single conf's disableCheck/disableGC survive normalisation",
  fn() {
    const list = parseNetworkConfig(
      '{"cniVersion":"1.1.0","name":"n","type":"bridge","disableCheck":true,"disableGC":true}',
    );
    assert.equal(list.disableCheck, true);
    const again = parseNetworkConfig(list.raw); // what the cache re-parses for CHECK and GC
    assert.equal(again.disableCheck, true);
    assert.equal(again.disableGC, true);
  },
});

Deno.test({
  name: "fixed bug netlink-1: a leading U+FEFF in a netlink string is kept",
  fn() {
    const w = new NetlinkWriter();
    w.attrString(IFLA_IFNAME, "\ufeffeth0");
    const ad = new AttributeDecoder(w.finish());
    assert.ok(ad.next());
    assert.equal(ad.string(), "\ufeffeth0");
  },
});

Deno.test({
  name: "fixed bug netlink-2: an NLMSG_ERROR request length ≥ 0x7ffffffd is truncated, not wrapped",
  fn() {
    for (const reqLen of [0x7ffffffd, 0x80010014, 0xfffffffc]) {
      const bytes = encodeMessage(
        { type: NLMSG_ERROR, flags: NLM_F_ACK_TLVS, seq: 1, pid: 1 },
        (w) => {
          w.i32(-22).u32(reqLen).u16(16).u16(0).u32(1).u32(0);
          w.attrString(NLMSGERR_ATTR_MSG, "hello");
        },
      );
      assert.throws(
        () => decodeError(parseMessages(bytes)[0]),
        (e) =>
          e instanceof NetlinkDecodeError && /Truncated NLMSG_ERROR request copy/.test(e.message) &&
          e.offset >= 0,
      );
    }
  },
});

Deno.test({
  name: "fixed bug env-1: CNI_IFNAME and annotation interface names follow the same rules",
  fn() {
    // "à" is c3 a0 in UTF-8: the kernel's isspace(0xa0) rejects it; U+2028 and U+0085 are
    // Unicode spaces that libcni's ValidateInterfaceName (unicode.IsSpace) rejects.
    for (const name of ["netà", "net\u2028", "net\u0085", "net1", "é"]) {
      let envOk = true;
      try {
        validateInterfaceName(name);
      } catch {
        envOk = false;
      }
      assert.equal(envOk, isValidInterfaceName(name), JSON.stringify(name));
    }
    assert.throws(() => validateInterfaceName("net\u0085"), CniError);
  },
});

Deno.test({
  name: 'fixed bug zod-1: JSON objects with a "constructor" key are records',
  fn() {
    for (const value of ["null", "1", '"x"', "{}"]) {
      const [e] = parseNetworkSelection(`[{"name":"a","cni-args":{"constructor":${value}}}]`, "ns");
      assert.deepStrictEqual(e["cni-args"], JSON.parse(`{"constructor":${value}}`));
      const list = parseNetworkConfig(
        `{"cniVersion":"1.0.0","name":"n","type":"bridge","capabilities":{"constructor":${value}}}`,
      );
      assert.equal(list.plugins.length, 1);
    }
  },
});
