/**
 * Tests of native/: the symbol tables load lazily (importing needs no --allow-ffi), no
 * namespace-sensitive symbol is `nonblocking`, and (with --allow-ffi) every symbol resolves.
 */

import assert from "node:assert/strict";
import {
  LIBC_FILE_SYMBOLS,
  LIBC_SYMBOLS,
  LIBMNL_SYMBOLS,
  openLibc,
  openLibcFiles,
  openLibmnl,
} from "../../native/mod.ts";
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

Deno.test({
  name: "procfs reads bind libc's file symbols alone, the same declarations as the whole table",
  ignore: Deno.permissions.querySync({ name: "ffi" }).state !== "granted",
  async fn() {
    for (const [name, def] of Object.entries(LIBC_FILE_SYMBOLS)) {
      assert.deepEqual(def, LIBC_SYMBOLS[name as keyof typeof LIBC_SYMBOLS], name);
    }
    // In a fresh process (this one may have opened the whole table already): the file handle
    // binds exactly LIBC_FILE_SYMBOLS and reads procfs.
    const code = `
      import { openLibcFiles, LIBC_FILE_SYMBOLS } from ${
      JSON.stringify(
        new URL("../../native/mod.ts", import.meta.url).href,
      )
    };
      import { readProcFile } from ${
      JSON.stringify(
        new URL("../../lib/fs/procfs.ts", import.meta.url).href,
      )
    };
      const l = openLibcFiles();
      console.log(JSON.stringify({
        symbols: Object.keys(l.symbols).sort(),
        same: openLibcFiles() === l,
        stat: (readProcFile("/proc/1/stat") ?? "").startsWith("1 ("),
      }));`;
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["eval", "--quiet", code],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.ok(out.success, new TextDecoder().decode(out.stderr));
    const r = JSON.parse(new TextDecoder().decode(out.stdout));
    assert.deepEqual(r, {
      symbols: Object.keys(LIBC_FILE_SYMBOLS).sort(),
      same: true,
      stat: true,
    });
    assert.equal(openLibcFiles(), openLibcFiles());
  },
});
