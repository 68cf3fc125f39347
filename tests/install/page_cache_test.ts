/**
 * lib/install/page_cache.ts: an executable the installer has just written is dropped from the
 * page cache (its written pages, in large folios, inflated every plugin call's resident set).
 * Resident pages are counted with util-linux fincore(1) (Essential in Debian).
 */

import assert from "node:assert/strict";
import { dropPageCache } from "../../lib/install/page_cache.ts";
import { installBinary } from "../../lib/install/binary.ts";

const FINCORE = "/usr/bin/fincore";
const haveFincore = (() => {
  try {
    return Deno.statSync(FINCORE).isFile;
  } catch {
    return false;
  }
})();
if (!haveFincore) console.log("page cache tests skipped: no /usr/bin/fincore (util-linux)");

/** Bytes of `path` resident in the page cache. */
export async function residentBytes(path: string): Promise<number> {
  const out = await new Deno.Command(FINCORE, { args: ["-b", "-n", "-o", "RES", path] }).output();
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
  return Number(new TextDecoder().decode(out.stdout).trim());
}

Deno.test({
  name: "page cache: an installed binary's written pages are dropped; advice never throws",
  ignore: !haveFincore,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "mf-pagecache-" });
    try {
      const size = 16 << 20;
      const source = `${dir}/source`;
      const data = new Uint8Array(size);
      for (let off = 0; off < size; off += 65536) {
        crypto.getRandomValues(data.subarray(off, off + 65536));
      }
      await Deno.writeFile(source, data, { mode: 0o755 });
      // A file just written is resident (what the advice is for).
      assert.ok(await residentBytes(source) > size / 2, "a written file is not resident here");
      assert.equal(await installBinary(source, `${dir}/bin/manifold`), "installed");
      const resident = await residentBytes(`${dir}/bin/manifold`);
      assert.ok(resident < size / 8, `installed binary still resident: ${resident} of ${size}`);
      // Advice only: a missing file is false, not an error.
      assert.equal(dropPageCache(`${dir}/missing`), false);
      assert.equal(dropPageCache(source), true);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
