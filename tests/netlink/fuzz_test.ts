/**
 * Random and mutated netlink bytes must give a typed error (or a clean decode), never a
 * crash or a hang — through the decoders and through the API over a fake transport.
 * Seeded: set MANIFOLD_FUZZ_SEED to replay; the seed is printed. Pure (env read is optional).
 */

import assert from "node:assert/strict";
import {
  decodeAddress,
  decodeDone,
  decodeError,
  decodeLink,
  decodeRoute,
  encodeMessage,
  FakeTransport,
  type Link,
  LinkNotFoundError,
  NetlinkDecodeError,
  NetlinkDumpInterruptedError,
  NetlinkError,
  NetlinkHandle,
  NetlinkProtocolError,
  NLM_F_MULTI,
  NLMSG_DONE,
  parseMessages,
  RTM_NEWLINK,
  RTM_NEWROUTE,
  writeLink,
  writeRoute,
} from "../../lib/netlink/mod.ts";
import { testRoute } from "../fixtures/netlink/fake_kernel.ts";

function seedFromEnv(): number {
  try {
    const s = Deno.env.get("MANIFOLD_FUZZ_SEED");
    if (s) return Number(s) >>> 0;
  } catch { /* no --allow-env */ }
  return (Date.now() ^ (Math.random() * 0x7fffffff)) >>> 0;
}

const SEED = seedFromEnv();
console.log(`netlink fuzz seed: ${SEED} (replay with MANIFOLD_FUZZ_SEED=${SEED})`);

/** mulberry32: small seeded PRNG. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function decodeAll(bytes: Uint8Array): void {
  for (const m of parseMessages(bytes)) {
    decodeLink(m);
    decodeAddress(m);
    decodeRoute(m);
    decodeError(m);
    decodeDone(m);
  }
}

function typedOrClean(f: () => void, context: string): void {
  try {
    f();
  } catch (e) {
    if (!(e instanceof NetlinkDecodeError)) {
      throw new Error(`${context}: untyped ${e} (seed ${SEED})`, { cause: e });
    }
  }
}

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

Deno.test("random bytes: decoders give NetlinkDecodeError or a clean decode", () => {
  const r = rng(SEED);
  for (let i = 0; i < 20000; i++) {
    const len = Math.floor(r() * 160);
    const b = new Uint8Array(len).map(() => Math.floor(r() * 256));
    // Half the time make the first header's length plausible so decoders get exercised.
    if (len >= 16 && r() < 0.5) {
      new DataView(b.buffer).setUint32(0, len - Math.floor(r() * 4), true);
    }
    typedOrClean(() => decodeAll(b), `random #${i}`);
  }
});

Deno.test("mutated and truncated valid messages: typed error or clean decode", () => {
  const r = rng(SEED ^ 0x5eed);
  for (const sample of SAMPLES) {
    for (let cut = 0; cut <= sample.length; cut++) {
      typedOrClean(() => decodeAll(sample.subarray(0, cut)), `cut ${cut}`);
      const fixed = sample.slice(0, cut);
      if (cut >= 16) new DataView(fixed.buffer).setUint32(0, cut, true);
      typedOrClean(() => decodeAll(fixed), `cut+len ${cut}`);
    }
    for (let i = 0; i < 5000; i++) {
      const b = sample.slice();
      const flips = 1 + Math.floor(r() * 4);
      for (let j = 0; j < flips; j++) {
        b[16 + Math.floor(r() * (b.length - 16))] = Math.floor(r() * 256);
      }
      typedOrClean(() => decodeAll(b), `mutation #${i}`);
    }
  }
});

const API_ERRORS = [
  NetlinkDecodeError,
  NetlinkError,
  NetlinkProtocolError,
  NetlinkDumpInterruptedError,
  LinkNotFoundError,
];

Deno.test("random replies through the API: typed error, never a hang", () => {
  const r = rng(SEED ^ 0xa11);
  let typed = 0;
  for (let i = 0; i < 3000; i++) {
    const transport = new FakeTransport({
      respond: (req, pid) => {
        const seq = parseMessages(req)[0].header.seq;
        const out: Uint8Array[] = [];
        const n = 1 + Math.floor(r() * 3);
        for (let k = 0; k < n; k++) {
          const base = SAMPLES[Math.floor(r() * SAMPLES.length)].slice();
          const v = new DataView(base.buffer);
          if (r() < 0.8) v.setUint32(8, seq, true);
          if (r() < 0.9) v.setUint32(12, pid, true);
          const flips = Math.floor(r() * 3);
          for (let j = 0; j < flips; j++) {
            base[Math.floor(r() * base.length)] = Math.floor(r() * 256);
          }
          out.push(base);
        }
        if (r() < 0.5) {
          out.push(
            encodeMessage({ type: NLMSG_DONE, flags: NLM_F_MULTI, seq, pid }, (w) => w.i32(0)),
          );
        }
        return out;
      },
    });
    using h = new NetlinkHandle(transport);
    try {
      if (i % 3 === 0) h.linkList();
      else if (i % 3 === 1) h.routeList();
      else h.linkByName("net1");
    } catch (e) {
      if (!API_ERRORS.some((c) => e instanceof c)) {
        throw new Error(`API #${i}: untyped ${e} (seed ${SEED})`, { cause: e });
      }
      typed++;
    }
  }
  assert.ok(typed > 0);
});
