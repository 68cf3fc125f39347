/** Tests of lib/netlink/attributes.ts: writer, alignment, nesting, sticky-error decoder. Pure. */

import assert from "node:assert/strict";
import {
  align,
  AttributeDecoder,
  NetlinkDecodeError,
  NetlinkWriter,
  NLA_F_NESTED,
} from "../../lib/netlink/mod.ts";

Deno.test("align rounds up to 4 bytes", () => {
  assert.deepEqual([0, 1, 2, 3, 4, 5, 8].map(align), [0, 4, 4, 4, 4, 8, 8]);
});

Deno.test("attributes round trip with padding and nesting", () => {
  const w = new NetlinkWriter(8); // small on purpose: must grow
  w.attrU8(1, 7).attrString(2, "eth0").attrU32(3, 0xdeadbeef).nested(4, (n) => {
    n.attrString(1, "veth").attr(2, new Uint8Array([1, 2, 3]));
  }).attr(5, new Uint8Array(0));
  const bytes = w.finish();
  assert.equal(bytes.length % 4, 0);
  // u8 attribute: len 5, padded to 8
  assert.deepEqual(Array.from(bytes.subarray(0, 8)), [5, 0, 1, 0, 7, 0, 0, 0]);
  const ad = new AttributeDecoder(bytes);
  const seen: unknown[] = [];
  while (ad.next()) {
    switch (ad.type) {
      case 1:
        seen.push(ad.u8());
        break;
      case 2:
        seen.push(ad.string());
        break;
      case 3:
        seen.push(ad.u32());
        break;
      case 4: {
        assert.ok(ad.isNested);
        const n = ad.nested();
        while (n.next()) seen.push(n.type === 1 ? n.string() : Array.from(n.bytes()));
        ad.adopt(n);
        break;
      }
      case 5:
        seen.push(ad.length);
        break;
    }
  }
  ad.finish();
  assert.deepEqual(seen, [7, "eth0", 0xdeadbeef, "veth", [1, 2, 3], 0]);
});

Deno.test("nested attribute header carries NLA_F_NESTED", () => {
  const b = new NetlinkWriter().nested(18, () => {}).finish();
  assert.equal(new DataView(b.buffer).getUint16(2, true), 18 | NLA_F_NESTED);
});

Deno.test("a last attribute without trailing padding is accepted", () => {
  const ad = new AttributeDecoder(new Uint8Array([5, 0, 1, 0, 9])); // len 5, no padding
  assert.ok(ad.next());
  assert.equal(ad.u8(), 9);
  assert.ok(!ad.next());
  ad.finish();
});

Deno.test("sticky error: wrong size read, bad length, truncated header", () => {
  const wrongSize = new AttributeDecoder(new NetlinkWriter().attrU8(1, 1).attrU8(2, 2).finish());
  assert.ok(wrongSize.next());
  assert.equal(wrongSize.u32(), 0);
  assert.ok(!wrongSize.next(), "next() stops after an error");
  assert.throws(() => wrongSize.finish(), NetlinkDecodeError);
  assert.match(wrongSize.err!.message, /u32 needs 4/);

  const tooLong = new AttributeDecoder(new Uint8Array([40, 0, 1, 0, 0, 0, 0, 0]), 100);
  assert.ok(!tooLong.next());
  assert.throws(() => tooLong.finish(), /at byte 100/);

  const tooShort = new AttributeDecoder(new Uint8Array([2, 0, 1, 0]));
  assert.ok(!tooShort.next());
  assert.throws(() => tooShort.finish(), NetlinkDecodeError);

  const header = new AttributeDecoder(new Uint8Array([8, 0]));
  assert.ok(!header.next());
  assert.throws(() => header.finish(), /Truncated attribute header/);
});

Deno.test("NLA_F_NET_BYTEORDER integers are read big-endian", () => {
  const ad = new AttributeDecoder(new Uint8Array([6, 0, 1, 0x40, 0x12, 0xb5, 0, 0]));
  assert.ok(ad.next());
  assert.ok(ad.isNetByteOrder);
  assert.equal(ad.type, 1);
  assert.equal(ad.u16(), 4789);
});
