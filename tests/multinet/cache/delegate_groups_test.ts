/**
 * Tests of lib/multinet/cache/delegate_groups.ts (issue 20 item 7): the notes of running
 * delegate ADDs under `<cniDir>/delegates/`, the tracker that writes them (ADD only), and
 * `stop`, which stops a noted group that still runs and removes the note. Real files and
 * processes; no root needed.
 */

import assert from "node:assert/strict";
import type { ExecRequest } from "../../../lib/cni/exec.ts";
import { processGroupOf } from "../../../lib/cni/process_group.ts";
import { AttachmentCache } from "../../../lib/multinet/cache/cache.ts";
import { delegateGroupTracker } from "../../../lib/multinet/cache/delegate_groups.ts";
import { nullLogger } from "../../../lib/log/mod.ts";

function request(env: Record<string, string>): ExecRequest {
  return { path: "/x", stdin: new Uint8Array(), env, timeoutMs: 1000 };
}

async function exists(path: string): Promise<boolean> {
  return await Deno.stat(path).then(() => true, () => false);
}

Deno.test("delegate groups: noted per attachment, read back, forgotten", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const groups = new AttachmentCache(dir).delegates;
    const group = { pgid: 4242, startTime: 777, bootId: "b", pidNs: "pid:[1]" };
    assert.equal(groups.path("c1", "net@1"), `${dir}/delegates/c1@net%401.group`);
    assert.equal(await groups.read("c1", "net1"), undefined);
    groups.note("c1", "net1", group);
    assert.deepEqual(await groups.read("c1", "net1"), group);
    assert.equal((await Deno.stat(groups.path("c1", "net1"))).mode! & 0o777, 0o600);
    assert.equal((await Deno.stat(`${dir}/delegates`)).mode! & 0o777, 0o700);
    assert.deepEqual(await new AttachmentCache(dir).list(), [], "not cache records");
    groups.forget("c1", "net1");
    groups.forget("c1", "net1"); // idempotent
    assert.equal(await groups.read("c1", "net1"), undefined);
    assert.throws(() => groups.note("../x", "net1", group), /invalid container ID/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("delegate groups: the tracker notes delegate ADDs only", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const groups = new AttachmentCache(dir).delegates;
    const tracker = delegateGroupTracker(groups, nullLogger);
    const add = request({ CNI_COMMAND: "ADD", CNI_CONTAINERID: "c1", CNI_IFNAME: "eth0" });
    for (
      const env of [
        { CNI_COMMAND: "DEL", CNI_CONTAINERID: "c1", CNI_IFNAME: "eth0" },
        { CNI_COMMAND: "CHECK", CNI_CONTAINERID: "c1", CNI_IFNAME: "eth0" },
        { CNI_COMMAND: "GC", CNI_CONTAINERID: "", CNI_IFNAME: "" },
        { CNI_COMMAND: "ADD", CNI_CONTAINERID: "", CNI_IFNAME: "eth0" },
      ]
    ) {
      assert.equal(tracker.tracks(request(env)), false, JSON.stringify(env));
    }
    assert.equal(tracker.tracks(add), true);
    const group = { pgid: 4242, startTime: 777, bootId: "b", pidNs: "pid:[1]" };
    tracker.started(add, group);
    assert.deepEqual(await groups.read("c1", "eth0"), group);
    tracker.ended(add, group);
    assert.equal(await exists(groups.path("c1", "eth0")), false);
    // A bad key is logged, never thrown: the delegate runs anyway.
    tracker.started(request({ ...add.env, CNI_CONTAINERID: "../x" }), group);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("delegate groups: stop ends a noted group that still runs, then drops the note", async () => {
  const dir = await Deno.makeTempDir();
  const child = new Deno.Command("/bin/sh", {
    args: ["-c", "sleep 30 & wait"],
    detached: true,
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).spawn();
  try {
    const groups = new AttachmentCache(dir).delegates;
    assert.equal(await groups.stop("c1", "eth0"), undefined, "nothing noted");
    assert.equal(await groups.stop("c1", "bad/name"), undefined, "nothing can be noted there");
    const group = processGroupOf(child.pid)!;
    groups.note("c1", "eth0", group);
    const stopped = await groups.stop("c1", "eth0");
    assert.deepEqual(stopped, { group, outcome: "terminated" });
    assert.equal((await child.status).signal, "SIGTERM");
    assert.equal(await exists(groups.path("c1", "eth0")), false);
    // Stale (the process is gone): nothing to do, the note goes.
    groups.note("c1", "eth0", group);
    assert.deepEqual(await groups.stop("c1", "eth0"), { group, outcome: "gone" });
    assert.equal(await exists(groups.path("c1", "eth0")), false);
    // Cut short by a kill: names nothing, goes.
    await Deno.writeTextFile(groups.path("c1", "eth0"), '{"pgid":42');
    assert.equal(await groups.stop("c1", "eth0"), undefined);
    assert.equal(await exists(groups.path("c1", "eth0")), false);
  } finally {
    try {
      Deno.kill(-child.pid, "SIGKILL");
    } catch { /* gone */ }
    await child.status;
    await Deno.remove(dir, { recursive: true });
  }
});
