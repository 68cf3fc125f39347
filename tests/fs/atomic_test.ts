/**
 * Tests of lib/fs/atomic.ts's temporary-file naming and rename hook (the rest of the module
 * is tested in tests/install/atomic_test.ts). `deno test --allow-read --allow-write`.
 */

import assert from "node:assert/strict";
import { syncDir, tempName, tempPrefix, writeFileAtomic } from "../../lib/fs/atomic.ts";

const bytes = (s: string) => new TextEncoder().encode(s).length;

Deno.test("tempName: hidden, prefix + suffix, cut to NAME_MAX at a character boundary", () => {
  assert.equal(tempName("a.conflist", "1-x"), ".a.conflist.tmp-1-x");
  assert.equal(tempPrefix("a"), ".a.tmp-");
  const long = `${"c".repeat(200)}@${"%C3%A9".repeat(7)}.json`;
  const t = tempName(long, "4194304-zzzzzzz");
  assert.ok(bytes(t) <= 255, `${bytes(t)} bytes`);
  assert.ok(t.startsWith(`.${"c".repeat(200)}@`));
  assert.ok(t.endsWith(".tmp-4194304-zzzzzzz"));
  const wide = tempName("é".repeat(200), "1-x"); // 2-byte characters are never split
  assert.ok(bytes(wide) <= 255);
  assert.doesNotThrow(() => decodeURIComponent(encodeURIComponent(wide)));
});

Deno.test("writeFileAtomic: a name at NAME_MAX works; beforeRename runs before the rename", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const name = `${"x".repeat(250)}.json`; // 255 bytes: its temporary name must be cut
    const seen: string[] = [];
    await writeFileAtomic(`${dir}/${name}`, "one", {
      beforeRename: () => {
        for (const e of Deno.readDirSync(dir)) seen.push(e.name);
      },
    });
    assert.equal(seen.length, 1);
    assert.ok(seen[0].startsWith(".x") && seen[0].includes(".tmp-"), seen[0]);
    assert.equal(await Deno.readTextFile(`${dir}/${name}`), "one");

    // A throwing hook aborts the write: old content kept, no temporary file left.
    await assert.rejects(
      writeFileAtomic(`${dir}/${name}`, "two", {
        beforeRename: () => {
          throw new Error("stop");
        },
      }),
      /stop/,
    );
    assert.equal(await Deno.readTextFile(`${dir}/${name}`), "one");
    assert.deepEqual(Array.from(Deno.readDirSync(dir), (e) => e.name), [name]);
    await syncDir(`${dir}/missing`); // best effort: no throw
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
