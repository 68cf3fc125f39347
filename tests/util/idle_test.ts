/**
 * lib/util/idle.ts: work queued for the main thread's waits — run in the order queued, one
 * task per `idleNow`, a task's exception swallowed, `drainIdle` running what is left; and the
 * HTTP/1.1 transport calling `idleNow` once per request written, before its answer is read.
 */

import assert from "node:assert/strict";
import { drainIdle, idleNow, whenIdle } from "../../lib/util/idle.ts";
import { Http1Transport } from "../../lib/k8s/http1/mod.ts";
import { okResponse, type ScriptedConn, withScriptedServer } from "../support/scripted_http.ts";

Deno.test("idle: tasks run in the order queued, one per idleNow", () => {
  drainIdle(); // whatever another test left
  const ran: string[] = [];
  whenIdle(() => ran.push("a"));
  whenIdle(() => ran.push("b"));
  whenIdle(() => ran.push("c"));
  assert.deepEqual(ran, [], "queued, not run");
  assert.equal(idleNow(), true);
  assert.deepEqual(ran, ["a"]);
  assert.equal(idleNow(), true);
  assert.deepEqual(ran, ["a", "b"]);
  assert.equal(idleNow(), true);
  assert.deepEqual(ran, ["a", "b", "c"]);
  assert.equal(idleNow(), false, "nothing left");
  assert.deepEqual(ran, ["a", "b", "c"]);
});

Deno.test("idle: a task's exception is swallowed and counts as its turn", () => {
  drainIdle();
  const ran: string[] = [];
  whenIdle(() => {
    throw new Error("boom");
  });
  whenIdle(() => ran.push("after"));
  assert.equal(idleNow(), true, "the throwing task ran");
  assert.deepEqual(ran, [], "one task per call, even when it threw");
  assert.equal(idleNow(), true);
  assert.deepEqual(ran, ["after"]);
});

Deno.test("idle: drainIdle runs every queued task in order, throwing ones included", () => {
  drainIdle();
  const ran: number[] = [];
  for (let i = 0; i < 5; i++) {
    whenIdle(() => {
      ran.push(i);
      if (i === 2) throw new Error("skipped over");
    });
  }
  drainIdle();
  assert.deepEqual(ran, [0, 1, 2, 3, 4]);
  assert.equal(idleNow(), false);
  drainIdle(); // empty: nothing to do
  // A task queued by a task runs later in the same drain.
  whenIdle(() => {
    ran.push(5);
    whenIdle(() => ran.push(6));
  });
  drainIdle();
  assert.deepEqual(ran, [0, 1, 2, 3, 4, 5, 6]);
});

Deno.test("idle: the HTTP/1.1 transport runs one task per request while its answer is awaited", async () => {
  drainIdle();
  const events: string[] = [];
  const script = async (c: ScriptedConn) => {
    for (let i = 0;; i++) {
      const req = await c.request(i);
      if (!req) return;
      // Answered only once the task of this wait ran (or after 2 s: the test then fails below).
      for (let j = 0; j < 200 && !events.includes(`task ${i}`); j++) {
        await new Promise((r) => setTimeout(r, 10));
      }
      events.push(`answer ${req.path}`);
      await c.send(okResponse(req.path));
    }
  };
  await withScriptedServer({ script }, async (server) => {
    const t = new Http1Transport({ server: server.url, insecureSkipTlsVerify: false });
    try {
      for (let i = 0; i < 3; i++) {
        whenIdle(() => {
          events.push(`task ${i}`);
        });
      }
      for (const p of ["/a", "/b"]) {
        const r = await t.send({
          method: "GET",
          url: `${server.url}${p}`,
          headers: {},
          signal: new AbortController().signal,
        });
        assert.equal(r.body, p);
      }
      assert.deepEqual(events, ["task 0", "answer /a", "task 1", "answer /b"]);
      assert.equal(idleNow(), true, "the third task is still queued: one per request");
      assert.deepEqual(events.at(-1), "task 2");
    } finally {
      t.close();
    }
  });
});

Deno.test("idle: prefetchSpawn({ idle }) queues its work once per process (a daemon's ADDs do not grow the queue)", async () => {
  // `manifold daemon` runs cmdAdd in-process with its pods from the informer's store: each ADD
  // asks for the idle prefetch, and its few API requests run fewer tasks than that queues.
  const { prefetchSpawn } = await import("../../lib/cni/exec.ts");
  drainIdle();
  for (let i = 0; i < 100; i++) prefetchSpawn({ idle: true });
  let ran = 0;
  while (idleNow()) ran++;
  assert.ok(ran <= 2, `${ran} tasks queued by 100 ADDs`);
});
