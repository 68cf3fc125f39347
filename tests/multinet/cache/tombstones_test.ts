/** Tests of lib/multinet/cache/tombstones.ts (`--allow-read --allow-write`). */

import assert from "node:assert/strict";
import {
  AttachmentCache,
  CACHE_SCHEMA_VERSION,
  type CacheRecord,
} from "../../../lib/multinet/cache/cache.ts";
import {
  PRUNE_MARKER,
  pruneTombstones,
  pruneTombstonesIfDue,
  TOMBSTONE_MAX_AGE_MS,
} from "../../../lib/multinet/cache/tombstones.ts";

const NOW = new Date("2026-03-10T00:00:00.000Z");
const ago = (ms: number) => new Date(NOW.getTime() - ms);
const DAY = 24 * 3600_000;

function record(containerId: string, createdAt: Date): CacheRecord {
  return {
    schemaVersion: CACHE_SCHEMA_VERSION,
    containerId,
    netns: "",
    ifName: "eth0",
    pod: { namespace: "ns", name: "p", uid: "" },
    cniVersion: "1.0.0",
    createdAt: createdAt.toISOString(),
    attachments: [],
  };
}

async function withCache(fn: (cache: AttachmentCache) => Promise<void>) {
  const dir = await Deno.makeTempDir({ prefix: "manifold-tomb-test-" });
  try {
    await fn(new AttachmentCache(dir));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** A tombstone deleted `age` ago (content and mtime), or a live record created then. */
async function put(cache: AttachmentCache, id: string, age: number, tombstone = true) {
  const when = ago(age);
  if (tombstone) await cache.writeTombstone(record(id, when), { now: when });
  else await cache.write(record(id, when));
  await Deno.utime(cache.path(id, "eth0"), when, when);
}

const ids = async (cache: AttachmentCache) => (await cache.list()).map((k) => k.containerId);

Deno.test("pruneTombstones removes old tombstones only; live, young and damaged stay", async () => {
  await withCache(async (cache) => {
    await put(cache, "old1", 2 * DAY);
    await put(cache, "old2", TOMBSTONE_MAX_AGE_MS);
    await put(cache, "young", TOMBSTONE_MAX_AGE_MS - 60_000);
    await put(cache, "live", 30 * DAY, false);
    // Old file, young deletedAt (e.g. mtime restored from a backup): kept.
    await put(cache, "touched", 1000);
    await Deno.utime(cache.path("touched", "eth0"), ago(3 * DAY), ago(3 * DAY));
    await Deno.writeTextFile(cache.path("broken", "eth0"), "{");
    await Deno.utime(cache.path("broken", "eth0"), ago(3 * DAY), ago(3 * DAY));
    // A legacy-layout tombstone is pruned too.
    await Deno.writeTextFile(
      `${cache.dir}/legacy.json`,
      JSON.stringify({ ...record("legacy", ago(5 * DAY)), deletedAt: ago(5 * DAY).toISOString() }),
    );
    await Deno.utime(`${cache.dir}/legacy.json`, ago(5 * DAY), ago(5 * DAY));
    const report = await pruneTombstones(cache, { now: NOW });
    assert.deepEqual(report, { removed: 3, scanned: 7, complete: true });
    assert.deepEqual(await ids(cache), ["broken", "live", "touched", "young"]);
  });
});

Deno.test("pruneTombstones stops at the count bound and at the time budget", async () => {
  await withCache(async (cache) => {
    for (let i = 0; i < 12; i++) await put(cache, `old${i}`, 2 * DAY);
    const first = await pruneTombstones(cache, { now: NOW, maxRemovals: 5 });
    assert.equal(first.removed, 5);
    assert.equal(first.complete, false);
    assert.equal((await ids(cache)).length, 7);
    const none = await pruneTombstones(cache, { now: NOW, budgetMs: -1 });
    assert.deepEqual(none, { removed: 0, scanned: 0, complete: false });
    assert.equal((await pruneTombstones(cache, { now: NOW })).removed, 7);
  });
});

Deno.test("pruneTombstonesIfDue runs at most once per interval (marker mtime)", async () => {
  await withCache(async (cache) => {
    assert.equal(await pruneTombstonesIfDue(new AttachmentCache(`${cache.dir}/none`)), undefined);
    await put(cache, "old1", 2 * DAY);
    assert.equal((await pruneTombstonesIfDue(cache, { now: NOW }))?.removed, 1);
    assert.equal((await Deno.stat(`${cache.dir}/${PRUNE_MARKER}`)).mtime?.getTime(), NOW.getTime());
    await put(cache, "old2", 2 * DAY);
    const soon = new Date(NOW.getTime() + 60_000);
    assert.equal(await pruneTombstonesIfDue(cache, { now: soon }), undefined, "not due");
    const later = new Date(NOW.getTime() + 11 * 60_000);
    assert.equal((await pruneTombstonesIfDue(cache, { now: later }))?.removed, 1);
    assert.deepEqual(await cache.list(), [], "the marker is no record");
  });
});
