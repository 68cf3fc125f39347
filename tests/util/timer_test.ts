import assert from "node:assert/strict";
import { sleep, startTimer } from "../../lib/util/timer.ts";

Deno.test("startTimer calls back once after the delay; cancel prevents the call", async () => {
  const calls: string[] = [];
  const started = performance.now();
  startTimer(20, () => calls.push("a"));
  const b = startTimer(10, () => calls.push("b"));
  b.cancel();
  b.cancel(); // idempotent
  startTimer(-5, () => calls.push("c")); // negative: next tick
  await sleep(40);
  assert.deepEqual(calls, ["c", "a"]);
  assert.ok(performance.now() - started >= 20, "not before the delay");
});
