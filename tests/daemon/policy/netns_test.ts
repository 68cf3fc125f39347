/**
 * PodNetnsIndex over a real cache directory (no root): live sandboxes by pod, newest first,
 * uid matching, tombstones and damaged files skipped, rewritten files re-read.
 */

import assert from "node:assert/strict";
import {
  AttachmentCache,
  CACHE_SCHEMA_VERSION,
  type CacheRecord,
} from "../../../lib/multinet/mod.ts";
import { PodNetnsIndex } from "../../../lib/daemon/policy/netns.ts";

function record(containerId: string, pod: string, uid: string, createdAt: string): CacheRecord {
  return {
    schemaVersion: CACHE_SCHEMA_VERSION,
    containerId,
    netns: `/var/run/netns/${containerId}`,
    ifName: "eth0",
    pod: { namespace: "a", name: pod, uid },
    cniVersion: "1.0.0",
    createdAt,
    attachments: [],
  };
}

Deno.test("PodNetnsIndex: the pod's newest live sandbox with a matching uid", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const cache = new AttachmentCache(dir);
    const index = new PodNetnsIndex(dir);
    assert.equal(await index.refresh(), 0, "no directory yet");
    await cache.write(record("c1", "web", "u1", "2026-01-01T00:00:00.000Z"));
    await cache.write(record("c2", "web", "u1", "2026-01-02T00:00:00.000Z"));
    await cache.write(record("c3", "db", "", "2026-01-01T00:00:00.000Z"));
    await Deno.writeTextFile(`${dir}/c9@eth0.json`, '{"schemaVersion":1,"contai');
    assert.equal(await index.refresh(), 2);
    assert.equal(
      index.sandboxOf({ namespace: "a", name: "web", uid: "u1" })?.netns,
      "/var/run/netns/c2",
    );
    assert.equal(
      index.sandboxOf({ namespace: "a", name: "web", uid: "other" }),
      undefined,
      "uid differs",
    );
    assert.equal(index.sandboxOf({ namespace: "a", name: "db", uid: "any" })?.containerId, "c3");
    assert.equal(index.sandboxOf({ namespace: "b", name: "web" }), undefined);

    // DEL leaves a tombstone: the older sandbox is the live one again; removal forgets it.
    await cache.writeTombstone(record("c2", "web", "u1", "2026-01-02T00:00:00.000Z"));
    await index.refresh();
    assert.equal(index.sandboxOf({ namespace: "a", name: "web" })?.containerId, "c1");
    await cache.remove("c1", "eth0");
    await index.refresh();
    assert.equal(index.sandboxOf({ namespace: "a", name: "web" }), undefined);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
