/**
 * lib/util/shape.ts (the per-call path's fast shape checks, issue 30) and `zodDetails`
 * (lib/cni/decode.ts): each fast check accepts only what the zod schema it stands for accepts,
 * with zod's value; zodDetails prints zod's `prettifyError` text without zod.
 */

import assert from "node:assert/strict";
import { z } from "zod";
import { zodDetails } from "../../lib/cni/decode.ts";
import {
  array,
  fastCheck,
  int,
  ipAddress,
  ipPrefix,
  loose,
  nullish,
  str,
  strict,
  unknown,
} from "../../lib/util/shape.ts";

Deno.test("loose: known keys first, absent optional keys left out, other keys kept — as zod", () => {
  const fast = loose({ name: str, mtu: { optional: int(0) }, ips: nullish(array(str)) });
  const ref = z.looseObject({
    name: z.string(),
    mtu: z.number().int().nonnegative().optional(),
    ips: z.array(z.string()).nullish(),
  });
  for (
    const input of [
      { x: 1, name: "n" },
      { ips: null, name: "n", mtu: 3, extra: { a: [1] } },
      { name: "n", ips: ["a", "b"] },
    ]
  ) {
    const got = fastCheck(fast, input);
    const want = ref.parse(input);
    assert.deepStrictEqual(got, want);
    assert.deepEqual(Object.keys(got!), Object.keys(want), "key order");
  }
  // What the fast check does not take goes to zod: wrong types, a negative mtu, an own
  // "__proto__" key (zod's copy would differ), a non-plain object.
  for (
    const input of [
      { name: 1 },
      { name: "n", mtu: -1 },
      { name: "n", mtu: 1.5 },
      JSON.parse('{"name": "n", "__proto__": {"x": 1}}'),
      new Date(),
      null,
      [],
    ]
  ) assert.equal(fastCheck(fast, input), undefined, JSON.stringify(input));
});

Deno.test("strict: an unknown key sends the input to zod", () => {
  const fast = strict({ a: { optional: unknown } });
  assert.deepEqual(fastCheck(fast, { a: 1 }), { a: 1 });
  assert.equal(fastCheck(fast, { a: 1, b: 2 }), undefined);
});

Deno.test("ipAddress / ipPrefix accept only what zod's ip and cidr unions accept", () => {
  const ip = z.union([z.ipv4(), z.ipv6()]);
  const cidr = z.union([z.cidrv4(), z.cidrv6()]);
  const candidates = [
    "10.0.0.1",
    "0.0.0.0",
    "255.255.255.255",
    "256.1.1.1",
    "01.2.3.4",
    "1.2.3",
    "::",
    "::1",
    "fe80::1",
    "1:2:3:4:5:6:7:8",
    "1:2:3:4:5:6:7::",
    "1::2::3",
    "1:2:3:4:5:6:7:8:9",
    "::ffff:1.2.3.4",
    "fe80::1%eth0",
    "g::1",
  ];
  let plain = 0;
  for (const a of candidates) {
    if (fastCheck(ipAddress, a) !== undefined) {
      plain++;
      assert.ok(ip.safeParse(a).success, `${a}: accepted, zod rejects`);
    }
    for (const p of ["/0", "/24", "/32", "/33", "/64", "/128", "/129", "/024", "/", ""]) {
      if (fastCheck(ipPrefix, a + p) !== undefined) {
        assert.ok(cidr.safeParse(a + p).success, `${a + p}: accepted, zod rejects`);
      }
    }
  }
  assert.equal(plain, 8, "the plain addresses are accepted");
  assert.equal(fastCheck(ipPrefix, "10.0.0.0/24"), "10.0.0.0/24");
  assert.equal(fastCheck(ipPrefix, "2001:db8::/64"), "2001:db8::/64");
});

Deno.test("zodDetails prints zod's prettifyError text", () => {
  const schema = z.looseObject({
    a: z.string(),
    "odd-key": z.array(z.object({ b: z.number() })),
    c: z.record(z.string(), z.boolean()),
  });
  const r = schema.safeParse({ a: 1, "odd-key": [{ b: "x" }], c: { "x.y": 1, z: true } });
  assert.ok(!r.success);
  assert.equal(zodDetails(r.error), z.prettifyError(r.error));
  assert.equal(zodDetails({ issues: [] }), "");
});
