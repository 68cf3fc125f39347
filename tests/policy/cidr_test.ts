/** ipBlock arithmetic: parsing, RFC 5952 printing, `cidr` minus `except` (IPv4 and IPv6). */

import assert from "node:assert/strict";
import {
  canonicalIp,
  formatPrefix,
  parseCidr,
  parseIp,
  splitExcept,
} from "../../lib/policy/cidr.ts";

Deno.test("the Kuryr spec's example: 1.1.1.0/24 except 1.1.1.0/26", () => {
  assert.deepEqual(splitExcept("1.1.1.0/24", ["1.1.1.0/26"]), ["1.1.1.64/26", "1.1.1.128/25"]);
});

Deno.test("no except: the block itself, host bits cleared", () => {
  assert.deepEqual(splitExcept("10.1.2.3/24"), ["10.1.2.0/24"]);
  assert.deepEqual(splitExcept("0.0.0.0/0", []), ["0.0.0.0/0"]);
});

Deno.test("except == cidr, and /32 minus itself, leave nothing", () => {
  assert.deepEqual(splitExcept("10.0.0.0/24", ["10.0.0.0/24"]), []);
  assert.deepEqual(splitExcept("10.0.0.1/32", ["10.0.0.1/32"]), []);
  assert.deepEqual(splitExcept("10.0.0.0/24", ["10.0.0.0/16"]), [], "a wider except covers all");
});

Deno.test("a /32 hole in a /30, excepts outside or of the other family are ignored", () => {
  assert.deepEqual(splitExcept("10.0.0.0/30", ["10.0.0.2/32"]), [
    "10.0.0.0/31",
    "10.0.0.3/32",
  ]);
  assert.deepEqual(splitExcept("10.0.0.0/24", ["10.0.1.0/24", "fd00::/8"]), ["10.0.0.0/24"]);
});

Deno.test("overlapping and nested excepts give disjoint covering CIDRs", () => {
  assert.deepEqual(
    splitExcept("10.0.0.0/24", ["10.0.0.0/25", "10.0.0.0/26", "10.0.0.128/26"]),
    ["10.0.0.192/26"],
  );
  assert.deepEqual(splitExcept("10.0.0.0/24", ["10.0.0.64/26", "10.0.0.0/25"]), ["10.0.0.128/25"]);
  // Every address of the block is in exactly one output CIDR or one except.
  const out = splitExcept("192.168.0.0/22", [
    "192.168.1.17/32",
    "192.168.2.0/23",
    "192.168.1.16/30",
  ]);
  assert.deepEqual(out, [
    "192.168.0.0/24",
    "192.168.1.0/28",
    "192.168.1.20/30",
    "192.168.1.24/29",
    "192.168.1.32/27",
    "192.168.1.64/26",
    "192.168.1.128/25",
  ]);
});

Deno.test("IPv6: split, RFC 5952 output", () => {
  assert.deepEqual(splitExcept("fd00::/64", ["fd00::/65"]), ["fd00::8000:0:0:0/65"]);
  assert.deepEqual(splitExcept("2001:db8::/126", ["2001:db8::1/128"]), [
    "2001:db8::/128",
    "2001:db8::2/127",
  ]);
  assert.deepEqual(splitExcept("2001:DB8:0:0::/32", ["2001:db8::/32"]), []);
});

Deno.test("parsing and printing addresses", () => {
  assert.equal(canonicalIp("FD00:0:0::1"), "fd00::1");
  assert.equal(canonicalIp("2001:db8:0:0:1:0:0:1"), "2001:db8::1:0:0:1", "first longest run");
  assert.equal(canonicalIp("::ffff:1.2.3.4"), "::ffff:102:304");
  assert.equal(canonicalIp("::"), "::");
  assert.equal(canonicalIp("1:2:3:4:5:6:7:8"), "1:2:3:4:5:6:7:8");
  for (
    const bad of ["1::2::3", "1.2.3", "1.2.3.256", "", "g::1", "1:2:3:4:5:6:7:8:9", "01.2.3.4.5"]
  ) {
    assert.equal(parseIp(bad), null, bad);
  }
  assert.equal(parseCidr("10.0.0.0/33"), null);
  assert.equal(parseCidr("10.0.0.0"), null);
  assert.equal(formatPrefix(parseCidr("fd00::1/8")!), "fd00::/8");
  assert.throws(() => splitExcept("nope/8"), RangeError);
});
