/**
 * Random and mutated netlink bytes must give a typed error (or a clean decode), never a
 * crash or a hang — through the decoders and through the API over a fake transport.
 *
 * Built on the shared seeded harness (tests/support/fuzz.ts) and the "netlink" and
 * "netlink-api" targets of tests/fuzz/netlink.ts (random bytes, encode → decode round trips,
 * structure-aware byte mutations, truncations, mutated kernel dumps). The seed is printed;
 * `FUZZ_SEED=<seed>` replays (env access optional). Pure, except that the captured kernel
 * dumps are used as extra seeds when `--allow-read` is given.
 */

import assert from "node:assert/strict";
import {
  encodeMessage,
  type Link,
  NetlinkDecodeError,
  NLM_F_MULTI,
  RTM_NEWLINK,
  RTM_NEWROUTE,
  writeLink,
  writeRoute,
} from "../../lib/netlink/mod.ts";
import { testRoute } from "../fixtures/netlink/fake_kernel.ts";
import { formatStats, fuzz, fuzzEnv } from "../support/fuzz.ts";
import {
  capturedDatagrams,
  decodeEverything,
  netlinkApiTarget,
  netlinkTarget,
} from "../fuzz/netlink.ts";

const SEED = fuzzEnv().seed ?? 0x6e71;
console.log(`netlink fuzz seed: ${SEED} (replay with FUZZ_SEED=${SEED})`);

const LINK: Link = {
  index: 3,
  name: "net1",
  type: 1,
  flags: 0x11043,
  mac: "02:00:00:00:00:03",
  mtu: 1500,
  operState: "UP",
  kind: "macvlan",
  masterIndex: 2,
};

const SAMPLES = [
  encodeMessage(
    { type: RTM_NEWLINK, flags: NLM_F_MULTI, seq: 1, pid: 1 },
    (w) => writeLink(w, LINK),
  ),
  encodeMessage({ type: RTM_NEWROUTE, flags: NLM_F_MULTI, seq: 1, pid: 1 }, (w) =>
    writeRoute(
      w,
      testRoute(2, "10.0.0.0/8", {
        prefsrc: "10.0.0.2",
        nexthops: [{ oif: 2, gateway: "10.0.0.1", weight: 1, flags: 0 }],
      }),
    )),
];

function typedOrClean(f: () => void, context: string): void {
  try {
    f();
  } catch (e) {
    if (!(e instanceof NetlinkDecodeError)) {
      throw new Error(`${context}: untyped ${e}`, { cause: e });
    }
  }
}

Deno.test("random, round-tripped, mutated and truncated datagrams: NetlinkDecodeError or a clean decode", () => {
  const stats = fuzz(netlinkTarget, { seed: SEED, runs: 10000 });
  assert.ok(stats.accepted > 0 && stats.rejected > 0, formatStats(stats));
});

Deno.test("every truncation of valid messages and kernel dumps: typed error or clean decode", () => {
  for (const sample of [...SAMPLES, ...capturedDatagrams()]) {
    for (let cut = 0; cut <= sample.length; cut++) {
      typedOrClean(() => decodeEverything(sample.subarray(0, cut)), `cut ${cut}`);
      const fixed = sample.slice(0, cut);
      if (cut >= 16) new DataView(fixed.buffer).setUint32(0, cut, true);
      typedOrClean(() => decodeEverything(fixed), `cut+len ${cut}`);
    }
  }
});

Deno.test("random replies through the API: typed error, never a hang", () => {
  const stats = fuzz(netlinkApiTarget, { seed: SEED, runs: 3000 });
  assert.ok(stats.rejected > 0, formatStats(stats));
});
