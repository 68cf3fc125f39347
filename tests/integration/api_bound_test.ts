/**
 * The plugin process (no daemon) against a throttling API: the network-status PATCH's
 * `Retry-After` is honoured within `apiDeadlineMs` — in full when it fits, and when it does not
 * the ADD fails at once with code 11 saying what the server asked, and rolls back. Real
 * delegates, real netns, the HTTPS API stand-in. Needs root.
 */

import assert from "node:assert/strict";
import { isRoot, linkNames } from "../support/netns.ts";
import { done, expectOk, podStatus, world } from "../support/world.ts";

const root = { ignore: !isRoot(), sanitizeResources: false, sanitizeOps: false };
const STATUS_PATCH = /\/pods\/[^/]+\/status$/;

Deno.test({
  name:
    "plugin ADD: a PATCH Retry-After beyond apiDeadlineMs fails at once with code 11, rolled back",
  ...root,
  async fn() {
    const w = await world({ conf: { apiDeadlineMs: 3000 } });
    try {
      w.api.fault({ method: "PATCH", path: STATUS_PATCH, status: 429, retryAfterSeconds: 30 });
      const t0 = performance.now();
      const r = await w.call("ADD");
      const ms = performance.now() - t0;
      assert.notEqual(r.code, 0, r.stdout);
      const err = JSON.parse(r.stdout);
      assert.equal(err.code, 11, r.stdout);
      assert.match(err.msg, /PATCH .*\/status failed with 429 TooManyRequests/);
      assert.match(
        err.details,
        /the server asked to retry after 30000 ms within the call's bound of 3000 ms/,
      );
      // One PATCH: no wait and no retry (the machine's load, not the API, sets the ADD's time).
      const patches = w.api.requests.filter((q) =>
        q.method === "PATCH" && STATUS_PATCH.test(q.path)
      );
      assert.deepEqual(patches.map((p) => p.status), [429]);
      assert.ok(ms < 30_000, `ADD answered after ${Math.round(ms)} ms`);
      assert.deepEqual(await linkNames(w.podNetns), [], "rolled back");
      assert.deepEqual(await w.leases(), []);
    } finally {
      await done(w);
    }
  },
});

Deno.test({
  name:
    "plugin ADD: a 500 with Retry-After: 2 is honoured in full within apiDeadlineMs (client-go: any 5xx)",
  ...root,
  async fn() {
    const w = await world({ conf: { apiDeadlineMs: 10_000 } });
    try {
      w.api.fault({ method: "PATCH", path: STATUS_PATCH, status: 500, retryAfterSeconds: 2 });
      const r = await w.call("ADD");
      expectOk(r, "ADD");
      const patches = w.api.requests.filter((q) =>
        q.method === "PATCH" && STATUS_PATCH.test(q.path)
      );
      assert.deepEqual(patches.map((p) => p.status), [500, 200]);
      const gap = patches[1].at - patches[0].at;
      assert.ok(gap >= 1_950, `retried ${Math.round(gap)} ms after Retry-After: 2`);
      assert.equal(podStatus(w).length, 1);
      expectOk(await w.call("DEL"), "DEL");
    } finally {
      await done(w);
    }
  },
});
