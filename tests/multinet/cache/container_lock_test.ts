/**
 * The container lock (lib/multinet/cache/container_lock.ts): an exclusive flock(2) on
 * `<cniDir>/locks/<containerId>.lock`, taken by every ADD, DEL and CHECK. flock conflicts
 * between separate opens even inside one process, so one process can hold and wait.
 */

import assert from "node:assert/strict";
import { lockContainer } from "../../../lib/multinet/cache/container_lock.ts";
import { CniError } from "../../../lib/cni/errors.ts";

/** Whether `p` settles within `ms`. */
async function settles(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<false>((r) => timer = setTimeout(() => r(false), ms));
  try {
    return await Promise.race([p.then(() => true, () => true), late]);
  } finally {
    clearTimeout(timer);
  }
}

Deno.test("container lock: a second taker waits for the holder; a removed lock file is not held", async () => {
  const dir = await Deno.makeTempDir({ prefix: "mf-lock-" });
  try {
    const first = await lockContainer(dir, "c/1");
    const path = `${dir}/locks/${encodeURIComponent("c/1")}.lock`;
    assert.equal((await Deno.stat(`${dir}/locks`)).mode! & 0o777, 0o700);
    assert.equal((await Deno.stat(path)).mode! & 0o777, 0o600);
    const second = lockContainer(dir, "c/1");
    assert.equal(await settles(second, 300), false, "the second taker got the lock while held");
    // Another container is independent.
    (await lockContainer(dir, "c/2")).release();
    // The holder removes the file (a DEL that finished) and releases: the waiter must not keep
    // the unlinked file's lock, but take the new file's.
    await first.remove();
    first.release();
    const held = await second;
    const third = lockContainer(dir, "c/1");
    assert.equal(await settles(third, 300), false, "the waiter held an unlinked file");
    held.release();
    (await third).release();
    assert.ok((await Deno.stat(path)).isFile);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("container lock: a cache directory that cannot hold the lock fails with code 5", async () => {
  const dir = await Deno.makeTempDir({ prefix: "mf-lock-" });
  try {
    await Deno.writeTextFile(`${dir}/file`, "");
    const err = await lockContainer(`${dir}/file`, "c").then(() => undefined, (e) => e);
    assert.ok(err instanceof CniError, String(err));
    assert.equal(err.code, 5);
    assert.match(err.details ?? "", /file\/locks\/c\.lock/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
