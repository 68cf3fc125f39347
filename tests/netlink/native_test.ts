/**
 * Tests of native/: the symbol tables load lazily (importing needs no --allow-ffi), no
 * namespace-sensitive symbol is `nonblocking`, and (with --allow-ffi) every symbol resolves.
 */

import assert from "node:assert/strict";
import { LIBC_SYMBOLS, LIBMNL_SYMBOLS, openLibc, openLibmnl } from "../../native/mod.ts";
import { resolveNetnsPath } from "../../lib/netlink/mod.ts";

Deno.test("no symbol is nonblocking (setns and sockets must stay on the calling thread)", () => {
  for (const [name, def] of Object.entries({ ...LIBC_SYMBOLS, ...LIBMNL_SYMBOLS })) {
    assert.ok(!("nonblocking" in def), name);
  }
});

Deno.test("netns names resolve under /var/run/netns, paths stay as given", () => {
  assert.equal(resolveNetnsPath("pod1"), "/var/run/netns/pod1");
  assert.equal(resolveNetnsPath("/proc/1/ns/net"), "/proc/1/ns/net");
});

Deno.test({
  name: "every declared symbol resolves in the installed libraries",
  ignore: Deno.permissions.querySync({ name: "ffi" }).state !== "granted",
  fn() {
    const libc = openLibc();
    assert.equal(openLibc(), libc, "cached");
    for (const name of Object.keys(LIBC_SYMBOLS)) {
      assert.equal(typeof libc.symbols[name as keyof typeof LIBC_SYMBOLS], "function");
    }
    const mnl = openLibmnl();
    assert.equal(openLibmnl(), mnl, "cached");
    for (const name of Object.keys(LIBMNL_SYMBOLS)) {
      assert.equal(typeof mnl.symbols[name as keyof typeof LIBMNL_SYMBOLS], "function");
    }
    assert.throws(() => openLibmnl("/nonexistent/mfnl/libmnl.so.0"));
  },
});
