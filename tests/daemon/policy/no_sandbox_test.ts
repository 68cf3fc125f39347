/** The no-sandbox grace period: reported only past it, counted once per episode, wake time. */

import assert from "node:assert/strict";
import { NoSandboxTracker } from "../../../lib/daemon/policy/no_sandbox.ts";

Deno.test("a pod without a sandbox is reported after the grace, counted once per episode", () => {
  const t = new NoSandboxTracker({ graceMs: 1000, cniDir: "/c" });
  let v = t.observe(["a/p", "a/q"], 0);
  assert.deepEqual([v.problems, v.counted, v.wakeAt], [[], 0, 1000]);
  v = t.observe(["a/p", "a/q"], 400);
  assert.equal(v.wakeAt, 1000, "the first sighting counts, not the latest");
  v = t.observe(["a/p"], 1000);
  assert.deepEqual(v.problems.map((p) => [p.pod, p.reason]), [["a/p", "NoSandbox"]]);
  assert.match(v.problems[0].message, /attachment cache \(\/c\) after 1 s/);
  assert.deepEqual([v.counted, v.wakeAt], [1, undefined]);
  v = t.observe(["a/p", "a/q"], 1500);
  assert.deepEqual([v.problems.length, v.counted, v.wakeAt], [1, 0, 2500], "q starts over");
  t.observe([], 1600); // p found its sandbox
  v = t.observe(["a/p"], 1700);
  assert.deepEqual([v.problems, v.wakeAt], [[], 2700], "a new episode waits again");
  assert.equal(t.observe(["a/p"], 2700).counted, 1, "and is counted again");
});
