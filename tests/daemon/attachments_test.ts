/** The `manifold_attachments` tally: what counts as live, and the per-request refresh. */

import assert from "node:assert/strict";
import { AttachmentTally, liveAttachments } from "../../lib/daemon/attachments.ts";
import { AttachmentCache } from "../../lib/multinet/cache/cache.ts";

Deno.test("liveAttachments: completed ADDs of records that are not tombstones", () => {
  assert.equal(liveAttachments('{"attachments":[{"state":"added"},{"state":"adding"}]}'), 1);
  assert.equal(
    liveAttachments('{"deletedAt":"2026-01-01T00:00:00Z","attachments":[{"state":"added"}]}'),
    0,
  );
  for (const text of ["", "{", "null", "[]", '{"attachments":7}', '{"attachments":[null]}']) {
    assert.equal(liveAttachments(text), 0, text);
  }
});

Deno.test("AttachmentTally: scan counts every record, refresh re-reads one, in order", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const cache = new AttachmentCache(dir);
    const rec = (id: string, states: string[], deletedAt?: string) =>
      Deno.writeTextFile(
        cache.path(id, "eth0"),
        JSON.stringify({ attachments: states.map((state) => ({ state })), deletedAt }),
      );
    await rec("a1", ["added", "added"]);
    await rec("b1", ["added"], "2026-01-01T00:00:00Z");
    await Deno.writeTextFile(`${dir}/${".a1@eth0.json.tmp-1-x"}`, "{"); // a temp file: ignored
    const reported: number[] = [];
    const tally = new AttachmentTally(cache, (n) => reported.push(n));
    await tally.scan();
    assert.equal(tally.total, 2);
    await rec("c1", ["added", "added", "adding"]);
    const p1 = tally.refresh("c1", "eth0");
    await rec("a1", [], "2026-01-02T00:00:00Z");
    const p2 = tally.refresh("a1", "eth0");
    await Promise.all([p1, p2]);
    assert.equal(tally.total, 2);
    await tally.refresh("bad/id", "eth0"); // a bad key is logged, never thrown
    assert.deepEqual(reported, [2, 4, 2]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
