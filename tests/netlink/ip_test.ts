/** Tests of lib/netlink/ip.ts: address text forms (inet_ntop-compatible). Pure. */

import assert from "node:assert/strict";
import { anyAddress, formatIp, formatMac, parseCidr, parseIp } from "../../lib/netlink/ip.ts";

Deno.test("formatIp prints IPv4 dotted quads", () => {
  assert.equal(formatIp(new Uint8Array([10, 0, 0, 1])), "10.0.0.1");
  assert.equal(formatIp(new Uint8Array([255, 255, 255, 255])), "255.255.255.255");
});

Deno.test("formatIp compresses IPv6 like inet_ntop", () => {
  const cases: [string, string][] = [
    ["::", "::"],
    ["::1", "::1"],
    ["fd00::1", "fd00::1"],
    ["fe80::fc:ff:fe00:1", "fe80::fc:ff:fe00:1"],
    ["2001:db8:0:1:0:0:0:1", "2001:db8:0:1::1"],
    ["2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"],
    ["2001:0:1:2:3:4:5:6", "2001:0:1:2:3:4:5:6"], // a single zero group is not compressed
    ["1::", "1::"],
    ["::ffff:10.1.2.3", "::ffff:10.1.2.3"],
    ["::10.1.2.3", "::10.1.2.3"],
    ["ff02::1:ff00:1", "ff02::1:ff00:1"],
  ];
  for (const [input, want] of cases) assert.equal(formatIp(parseIp(input).bytes), want, input);
});

Deno.test("parseIp rejects garbage", () => {
  const bad = ["", "1.2.3", "1.2.3.256", "::1::2", "fd00:::1", "1:2:3:4:5:6:7:8:9", "g::1", "x"];
  for (const b of bad) assert.throws(() => parseIp(b), TypeError, b);
});

Deno.test("parseCidr reads prefixes and host addresses", () => {
  assert.equal(parseCidr("10.0.0.0/8").prefixLength, 8);
  assert.equal(parseCidr("10.0.0.1").prefixLength, 32);
  assert.equal(parseCidr("::/0").prefixLength, 0);
  assert.equal(parseCidr("fd00::1").prefixLength, 128);
  assert.throws(() => parseCidr("10.0.0.0/33"), TypeError);
  assert.throws(() => parseCidr("fd00::/129"), TypeError);
  assert.throws(() => parseCidr("10.0.0.0/x"), TypeError);
});

Deno.test("formatMac prints any length", () => {
  assert.equal(formatMac(new Uint8Array([2, 0xab, 0, 0, 0, 1])), "02:ab:00:00:00:01");
  assert.equal(formatMac(new Uint8Array(0)), "");
  assert.equal(anyAddress(2), "0.0.0.0");
  assert.equal(anyAddress(10), "::");
});
