/** Hot-plug's retry back-off per (pod, change) (lib/daemon/hotplug/backoff.ts; pure, no permissions). */

import assert from "node:assert/strict";
import {
  HOTPLUG_BACKOFF_MAX_MS,
  HOTPLUG_MAX_FAILURES,
  HotPlugBackoff,
} from "../../../lib/daemon/hotplug/backoff.ts";

Deno.test("HotPlugBackoff: 1 s, 2 s, 4 s, 8 s, then given up at the 5th failure", () => {
  assert.equal(HOTPLUG_MAX_FAILURES, 5);
  const b = new HotPlugBackoff();
  let now = 0;
  const delays: number[] = [];
  for (let i = 1; i < 5; i++) {
    const r = b.failed("ns/p", "c", now);
    assert.equal(r.kind, "retry");
    if (r.kind !== "retry") return;
    assert.equal(r.failures, i);
    delays.push(r.delayMs);
    assert.ok(b.waiting("ns/p", "c", r.at - 1), "held back until its time");
    assert.ok(!b.waiting("ns/p", "c", r.at), "free at its time");
    now = r.at;
  }
  assert.deepEqual(delays, [1000, 2000, 4000, 8000]);
  assert.deepEqual(b.failed("ns/p", "c", now), { kind: "given-up", failures: 5 });
  assert.ok(b.waiting("ns/p", "c", now + 365 * 86_400_000), "given up: waits for good");
});

Deno.test("HotPlugBackoff: delays are capped at 10 min", () => {
  assert.equal(HOTPLUG_BACKOFF_MAX_MS, 600_000);
  const b = new HotPlugBackoff({ maxFailures: 100 });
  let last = 0;
  for (let i = 0; i < 20; i++) {
    const r = b.failed("ns/p", "c", 0);
    if (r.kind === "retry") last = r.delayMs;
  }
  assert.equal(last, 600_000);
});

Deno.test("HotPlugBackoff: another change, or another pod, is not held back", () => {
  const b = new HotPlugBackoff();
  for (let i = 0; i < 5; i++) b.failed("ns/p", "a", 0);
  assert.ok(b.waiting("ns/p", "a", 0));
  assert.ok(!b.waiting("ns/p", "b", 0), "the next annotation value is tried at once");
  assert.ok(!b.waiting("ns/q", "a", 0));
  // The new change counts from its own first failure.
  assert.deepEqual(b.failed("ns/p", "b", 0), {
    kind: "retry",
    at: 1000,
    delayMs: 1000,
    failures: 1,
  });
  assert.ok(!b.waiting("ns/p", "a", 0), "the old change was replaced");
  b.forget("ns/p");
  assert.equal(b.size, 0);
  assert.ok(!b.waiting("ns/p", "b", 0));
});
