/** The daemon's idle memory reclaim (lib/daemon/memory.ts). */

import assert from "node:assert/strict";
import { IdleReclaimer, tuneAllocator } from "../../lib/daemon/memory.ts";

const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

Deno.test("IdleReclaimer: collects once idle after enough requests, never mid-burst", async () => {
  const calls: string[] = [];
  const r = new IdleReclaimer({
    gc: () => calls.push("gc"),
    trim: () => calls.push("trim"),
    idleMs: 30,
    minRequests: 3,
  });
  try {
    r.settled(0); // 1 request: too few
    await wait(60);
    assert.deepEqual(calls, []);
    r.settled(1);
    r.settled(0); // 3 requests, idle → reclaim after 30 ms …
    r.served(); // … unless a request comes first: the wait starts again
    assert.deepEqual(calls, []);
    r.settled(0);
    await wait(60);
    assert.deepEqual(calls, ["gc", "trim"]);
    assert.equal(r.reclaims, 1);
    r.settled(0); // the count starts again from 0
    await wait(60);
    assert.equal(r.reclaims, 1);
    for (let i = 0; i < 3; i++) r.settled(0);
    r.close(); // a stopping daemon drops the pending reclaim
    await wait(60);
    assert.equal(r.reclaims, 1);
  } finally {
    r.close();
  }
});

Deno.test("IdleReclaimer: nothing to run → no timer", async () => {
  const r = new IdleReclaimer({ idleMs: 10, minRequests: 1 });
  r.settled(0);
  await wait(30);
  assert.equal(r.reclaims, 0);
});

Deno.test("tuneAllocator: glibc's malloc_trim is reachable through FFI", () => {
  const trim = tuneAllocator();
  assert.ok(trim, "libc.so.6 loads on this machine kind");
  assert.equal(typeof trim(), "boolean");
});

Deno.test("IdleReclaimer: background work counts, waits for requests in flight; collect", async () => {
  const calls: string[] = [];
  let heap = 100;
  const r = new IdleReclaimer({
    gc: () => calls.push("gc"),
    collect: () => {
      calls.push("collect");
      heap = 100;
    },
    heapUsed: () => heap,
    idleMs: 30,
    minRequests: 3,
  });
  try {
    assert.equal(r.collect(), true);
    assert.deepEqual(calls, ["collect"]);
    heap = 150;
    assert.equal(r.collect(64), false, "grew by 50 only");
    heap = 170;
    assert.equal(r.collect(64), true, "grew by 70");
    assert.deepEqual(calls, ["collect", "collect"]);
    calls.length = 0;
    calls.push("collect");
    r.settled(2); // two requests in flight
    r.background();
    r.background(); // 3 counted, but a request is in flight: no reclaim yet
    await wait(60);
    assert.deepEqual(calls, ["collect"]);
    r.settled(0); // the last one ended
    await wait(60);
    assert.deepEqual(calls, ["collect", "gc"]);
    for (let i = 0; i < 3; i++) r.background(); // watch events only, nothing in flight
    await wait(60);
    assert.equal(r.reclaims, 2);
  } finally {
    r.close();
  }
});
