import assert from "node:assert/strict";
import { sleep, startTimer, useClearableTimers } from "../../lib/util/timer.ts";

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

Deno.test("useClearableTimers: the callbacks run as before; a cancelled timer is gone at once", async () => {
  // A process whose only timer was cancelled ends by itself (an AbortSignal.timeout timer stays
  // pending, with what it holds, until its delay ends: 10 minutes here).
  const lib = new URL("../../lib/util/timer.ts", import.meta.url).href;
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "eval",
      `import { startTimer, useClearableTimers } from "${lib}";
       useClearableTimers();
       startTimer(600_000, () => console.log("fired")).cancel();
       console.log("cancelled");`,
    ],
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const killer = setTimeout(() => child.kill("SIGKILL"), 20_000);
  try {
    const out = await child.output();
    assert.equal(new TextDecoder().decode(out.stdout), "cancelled\n");
    assert.equal(out.signal, null, "ended by itself, not killed while its cancelled timer ran");
  } finally {
    clearTimeout(killer);
  }

  useClearableTimers();
  const calls: string[] = [];
  startTimer(60_000, () => calls.push("long")).cancel();
  const t = startTimer(5, () => calls.push("short"));
  await sleep(20);
  t.cancel(); // after the call: nothing
  startTimer(-5, () => calls.push("next tick"));
  await sleep(10);
  assert.deepEqual(calls, ["short", "next tick"]);
});
