/**
 * Tests of lib/fs/atomic.ts and binary.ts: atomic replacement in a temp dir, including
 * replacing a binary that is running (in-place writes fail with ETXTBSY, Multus #1221).
 */

import assert from "node:assert/strict";
import {
  copyFileAtomic,
  installBinary,
  readTextIfExists,
  removeFileDurable,
  sameContent,
  STALE_TEMP_MS,
  writeFileAtomic,
} from "../../lib/install/mod.ts";
import { tempFiles } from "./fixtures.ts";

Deno.test("writeFileAtomic: content, mode 0600 by default, no temp file left", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await writeFileAtomic(`${dir}/a.conflist`, "one");
    await writeFileAtomic(`${dir}/a.conflist`, new TextEncoder().encode("two"));
    assert.equal(await Deno.readTextFile(`${dir}/a.conflist`), "two");
    assert.equal((await Deno.stat(`${dir}/a.conflist`)).mode! & 0o777, 0o600);
    await writeFileAtomic(`${dir}/b`, "x", { mode: 0o644 });
    assert.equal((await Deno.stat(`${dir}/b`)).mode! & 0o777, 0o644);
    assert.deepEqual(await tempFiles(dir), []);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("writeFileAtomic: a missing directory fails and leaves nothing", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await assert.rejects(writeFileAtomic(`${dir}/nope/a`, "x"), Deno.errors.NotFound);
    assert.deepEqual(await tempFiles(dir), []);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("copyFileAtomic replaces a running binary (no 'text file busy')", async () => {
  const dir = await Deno.makeTempDir();
  const dest = `${dir}/manifold`;
  await Deno.copyFile("/bin/sleep", dest);
  await Deno.chmod(dest, 0o755);
  const child = new Deno.Command(dest, { args: ["30"], stdout: "null", stderr: "null" }).spawn();
  try {
    // The naive way fails while the file is executing.
    await assert.rejects(
      Deno.writeFile(dest, new Uint8Array([1, 2, 3])),
      (e: unknown) => e instanceof Error && /busy/i.test(e.message),
    );
    const src = `${dir}/new-manifold`;
    await Deno.writeTextFile(src, "#!/bin/sh\necho new\n");
    await copyFileAtomic(src, dest, { mode: 0o755 });
    assert.equal(await Deno.readTextFile(dest), "#!/bin/sh\necho new\n");
    assert.equal((await Deno.stat(dest)).mode! & 0o777, 0o755);
    const out = await new Deno.Command(dest, { stdout: "piped" }).output();
    assert.equal(new TextDecoder().decode(out.stdout), "new\n");
  } finally {
    child.kill("SIGKILL");
    await child.status;
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("installBinary copies once, then reports unchanged; creates the bin dir", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const src = `${dir}/src`;
    const data = new Uint8Array(3 * (1 << 20) + 17);
    for (let i = 0; i < data.length; i++) data[i] = (i * 2654435761) >>> 24;
    await Deno.writeFile(src, data);
    assert.equal(await installBinary(src, `${dir}/host/opt/cni/bin/manifold`), "installed");
    assert.ok(await sameContent(src, `${dir}/host/opt/cni/bin/manifold`));
    assert.equal(await installBinary(src, `${dir}/host/opt/cni/bin/manifold`), "unchanged");
    // Same size, one byte different: copied again.
    const bytes = await Deno.readFile(src);
    bytes[bytes.length - 1] ^= 0xff;
    await Deno.writeFile(src, bytes);
    assert.equal(await sameContent(src, `${dir}/host/opt/cni/bin/manifold`), false);
    assert.equal(await installBinary(src, `${dir}/host/opt/cni/bin/manifold`), "installed");
    await assert.rejects(installBinary(`${dir}/missing`, `${dir}/x`), Deno.errors.NotFound);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("installBinary: the same bytes without mode 0755, or behind a link, are replaced", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const src = `${dir}/src`;
    const dest = `${dir}/manifold`;
    await Deno.writeTextFile(src, "#!/bin/sh\necho plugin\n");
    assert.equal(await installBinary(src, dest), "installed");
    // Someone made it non-executable: every CNI call would fail with "permission denied".
    await Deno.chmod(dest, 0o644);
    assert.equal(await installBinary(src, dest), "installed");
    assert.equal((await Deno.lstat(dest)).mode! & 0o7777, 0o755);
    // A link to a file with the same bytes: replaced by the installer's own regular file.
    await Deno.remove(dest);
    await Deno.copyFile(src, `${dir}/elsewhere`);
    await Deno.symlink(`${dir}/elsewhere`, dest);
    assert.equal(await installBinary(src, dest), "installed");
    const st = await Deno.lstat(dest);
    assert.ok(st.isFile && !st.isSymlink);
    assert.equal(await installBinary(src, dest), "unchanged");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("installBinary removes temporary copies an installer killed mid-copy left, not fresh ones", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const src = `${dir}/src`;
    await Deno.writeTextFile(src, "#!/bin/sh\necho plugin\n");
    const stale = `${dir}/.manifold.tmp-17-dead`;
    const fresh = `${dir}/.manifold.tmp-18-busy`;
    const other = `${dir}/.bridge.tmp-19-x`;
    for (const p of [stale, fresh, other]) await Deno.writeTextFile(p, "partial");
    const old = new Date(Date.now() - STALE_TEMP_MS - 60_000);
    await Deno.utime(stale, old, old);
    await Deno.utime(other, old, old);
    assert.equal(await installBinary(src, `${dir}/manifold`), "installed");
    assert.equal(await readTextIfExists(stale), undefined);
    assert.equal(await readTextIfExists(fresh), "partial", "another installer's copy in progress");
    assert.equal(await readTextIfExists(other), "partial", "not Manifold's");
    // Also when the binary is already up to date.
    await Deno.writeTextFile(stale, "partial");
    await Deno.utime(stale, old, old);
    assert.equal(await installBinary(src, `${dir}/manifold`), "unchanged");
    assert.equal(await readTextIfExists(stale), undefined);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("removeFileDurable and readTextIfExists tolerate missing files", async () => {
  const dir = await Deno.makeTempDir();
  try {
    assert.equal(await readTextIfExists(`${dir}/x`), undefined);
    assert.equal(await removeFileDurable(`${dir}/x`), false);
    await Deno.writeTextFile(`${dir}/x`, "1");
    assert.equal(await readTextIfExists(`${dir}/x`), "1");
    assert.equal(await removeFileDurable(`${dir}/x`), true);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("concurrent writers: the file is always one complete version", async () => {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/c.conflist`;
  try {
    const version = (i: number) => JSON.stringify({ i, pad: "x".repeat(200_000 + i) });
    await writeFileAtomic(path, version(0));
    let stop = false;
    let reads = 0;
    const reader = (async () => {
      while (!stop) {
        const v = JSON.parse(await Deno.readTextFile(path));
        assert.equal(v.pad.length, 200_000 + v.i);
        reads++;
      }
    })();
    await Promise.all(
      [0, 1, 2].map(async (w) => {
        for (let i = 1; i <= 20; i++) await writeFileAtomic(path, version(w * 100 + i));
      }),
    );
    stop = true;
    await reader;
    assert.ok(reads > 10);
    assert.deepEqual(await tempFiles(dir), []);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
