/**
 * The node's one pod → sandbox index (lib/daemon/sandbox_index.ts, issue 31 §2) over a real
 * cache directory (no root): live sandboxes by pod, newest first, UID matching, tombstones and
 * damaged files skipped, rewritten files re-read, interfaces grouped per sandbox, refreshes
 * shared between concurrent callers, and one answer for hot-plug's lookup and the policy
 * agent's query after a sandbox restart.
 */

import assert from "node:assert/strict";
import { AttachmentCache, CACHE_SCHEMA_VERSION, type CacheRecord } from "../../lib/multinet/mod.ts";
import { SandboxIndex } from "../../lib/daemon/sandbox_index.ts";

function record(
  containerId: string,
  pod: string,
  uid: string,
  createdAt: string,
  ifName = "eth0",
): CacheRecord {
  return {
    schemaVersion: CACHE_SCHEMA_VERSION,
    containerId,
    netns: `/var/run/netns/${containerId}`,
    ifName,
    pod: { namespace: "a", name: pod, uid },
    cniVersion: "1.0.0",
    createdAt,
    attachments: [],
  };
}

async function withIndex(fn: (cache: AttachmentCache, index: SandboxIndex) => Promise<void>) {
  const dir = await Deno.makeTempDir({ prefix: "mft-sbx-" });
  try {
    const cache = new AttachmentCache(dir);
    await fn(cache, new SandboxIndex(cache));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("sandbox index: the pod's newest live sandbox with a matching uid", async () => {
  await withIndex(async (cache, index) => {
    assert.equal(await index.refresh(), 0, "no directory yet");
    await cache.write(record("c1", "web", "u1", "2026-01-01T00:00:00.000Z"));
    await cache.write(record("c2", "web", "u1", "2026-01-02T00:00:00.000Z"));
    await cache.write(record("c3", "db", "", "2026-01-01T00:00:00.000Z"));
    await Deno.writeTextFile(`${cache.dir}/c9@eth0.json`, '{"schemaVersion":1,"contai');
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
  });
});

Deno.test("sandbox index: a sandbox's interfaces are its records' ifNames; key = newest", async () => {
  await withIndex(async (cache, index) => {
    await cache.write(record("c1", "web", "u1", "2026-01-01T00:00:00.000Z", "eth0"));
    await cache.write(record("c1", "web", "u1", "2026-01-01T00:00:05.000Z", "eth1"));
    await cache.write(record("c2", "db", "u2", "2026-01-01T00:00:00.000Z", "eth0"));
    await index.refresh();
    const web = index.sandboxOf({ namespace: "a", name: "web" });
    assert.deepEqual(web?.ifNames, ["eth0", "eth1"]);
    assert.deepEqual(web?.key, { containerId: "c1", ifName: "eth1" });
    assert.deepEqual(index.sandboxOf({ namespace: "a", name: "db" })?.ifNames, ["eth0"]);
  });
});

Deno.test("sandbox index: concurrent refreshes share one read; a late caller gets a newer one", async () => {
  await withIndex(async (cache, index) => {
    await cache.write(record("c1", "web", "u1", "2026-01-01T00:00:00.000Z"));
    // The first read lists the directory, then stalls (a slow disk) until released.
    const files = cache.files.bind(cache);
    let release!: () => void;
    const gate = new Promise<void>((r) => release = r);
    let calls = 0;
    cache.files = async () => {
      const listed = await files();
      if (calls++ === 0) await gate;
      return listed;
    };
    const before = index.reads;
    const first = index.refresh();
    // Asked while the first runs, which listed before their call: one more read runs after it,
    // shared by every caller that asked meanwhile.
    await cache.write(record("c2", "db", "u2", "2026-01-01T00:00:00.000Z"));
    const late = [index.refresh(), index.refresh(), index.refresh()];
    assert.equal(late[0], late[1], "one promise for every late caller");
    assert.equal(late[1], late[2]);
    release();
    assert.equal(await first, 1, "the stalled read listed before c2");
    assert.deepEqual(await Promise.all(late), [2, 2, 2], "the shared read sees c2");
    assert.equal(index.reads - before, 2, "three late callers, one read");
  });
});

Deno.test("sandbox index: after a sandbox restart, hot-plug and policy get one answer", async () => {
  await withIndex(async (cache, index) => {
    // The old sandbox's record never got its DEL (node reboot); an older pod of the same name
    // (another UID) left one too; the restarted sandbox is newest.
    await cache.write(record("old", "web", "u1", "2026-01-01T00:00:00.000Z"));
    await cache.write(record("other-pod", "web", "u0", "2026-01-03T00:00:00.000Z"));
    assert.equal(
      (await index.lookup({ namespace: "a", name: "web", uid: "u1" }))?.containerId,
      "old",
    );
    await cache.write(record("new", "web", "u1", "2026-01-02T00:00:00.000Z"));
    // Hot-plug's lookup finds its indexed record gone (rescan); the policy agent refreshes.
    const hotPlug = await index.lookup({ namespace: "a", name: "web", uid: "u1" }, true);
    await index.refresh();
    const policy = index.sandboxOf({ namespace: "a", name: "web", uid: "u1" });
    assert.equal(hotPlug?.containerId, "new");
    assert.equal(policy?.netns, "/var/run/netns/new");
    assert.deepEqual(hotPlug, policy);
  });
});

Deno.test("sandbox index: lookup reads again only when the cache directory changed", async () => {
  await withIndex(async (cache, index) => {
    await cache.write(record("c1", "web", "u1", "2026-01-01T00:00:00.000Z"));
    await new Promise((r) => setTimeout(r, 1100));
    assert.equal((await index.lookup({ namespace: "a", name: "web" }))?.containerId, "c1");
    const reads = index.reads;
    for (let i = 0; i < 5; i++) {
      assert.equal(await index.lookup({ namespace: "a", name: "host-net-pod" }), undefined);
    }
    assert.equal(index.reads, reads, "a pod without a sandbox costs no read while nothing changed");
    await cache.write(record("c2", "host-net-pod", "u3", "2026-01-01T00:00:00.000Z"));
    assert.equal((await index.lookup({ namespace: "a", name: "host-net-pod" }))?.containerId, "c2");
  });
});

Deno.test("sandbox index: a sandbox carries its newest record's verified network-status", async () => {
  await withIndex(async (cache, index) => {
    const status = (ip: string) => [
      { name: "cbr0", interface: "eth0", ips: ["10.0.0.2/24"], default: true },
      { name: "a/net1", interface: "net1", ips: [`${ip}/24`], default: false },
    ];
    await cache.write({ ...record("c1", "web", "u1", "2026-01-01T00:00:00.000Z") });
    assert.equal(await index.refresh(), 1);
    assert.equal(
      index.sandboxOf({ namespace: "a", name: "web" })?.networkStatus,
      undefined,
      "ADD not finished: no status",
    );
    await cache.write({
      ...record("c1", "web", "u1", "2026-01-01T00:00:00.000Z"),
      networkStatus: status("10.1.0.5"),
    });
    await cache.write({
      ...record("c2", "web", "u1", "2026-01-02T00:00:00.000Z"),
      networkStatus: status("10.1.0.9"),
    });
    await index.refresh();
    assert.deepEqual(
      index.sandboxOf({ namespace: "a", name: "web", uid: "u1" })?.networkStatus,
      status("10.1.0.9"),
      "the restarted sandbox's addresses",
    );
  });
});
