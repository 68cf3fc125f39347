/**
 * Crash consistency (issue 6): the plugin process is SIGKILLed at every step of ADD and DEL
 * (before/after each delegate, each cache write, the status patch; during an ADD's rollback) or
 * from outside at a random moment, then the runtime's DEL must succeed (≤ 2 attempts), the cache
 * must always be readable and nothing may leak. A fixed-seed batch of randomized runs; the run
 * logic is in `tests/support/crash.ts`, `scripts/soak.ts` runs more.
 *
 * `CRASH_SEED` (default {@link DEFAULT_CRASH_SEED}) and `CRASH_RUNS` (default 200) override the
 * batch; `CRASH_LANES` (default 2) runs that many worlds in parallel. A failure names seed, run
 * index and plan, and the command that replays that run alone. Needs root.
 */

import assert from "node:assert/strict";
import { CRASHPOINTS } from "../../lib/multinet/crashpoint.ts";
import {
  CRASH_VERSIONS,
  DEFAULT_CRASH_SEED,
  describePlan,
  firedCounts,
  formatFailures,
  formatSummary,
  PLAN_KINDS,
  planFor,
  runCrashBatch,
  SCHEDULE_PREFIX,
} from "../support/crash.ts";
import { isRoot } from "../support/netns.ts";

const root = { ignore: !isRoot(), sanitizeResources: false, sanitizeOps: false };

/** A non-negative integer from the environment, or `fallback` when unset. */
function envInt(name: string, fallback: number): number {
  const text = Deno.env.get(name);
  if (text === undefined || text === "") return fallback;
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < 0) {
    throw new Error(`${name} must be an integer ≥ 0, got ${text}`);
  }
  return n;
}

Deno.test("crash plans are a pure function of (seed, run index)", () => {
  for (const seed of [0, 1, DEFAULT_CRASH_SEED, 0xffffffff]) {
    for (let i = 0; i < 300; i++) assert.deepEqual(planFor(seed, i), planFor(seed, i));
  }
  const plans = (seed: number) =>
    Array.from({ length: 300 }, (_, i) => describePlan(planFor(seed, i).plan)).join("\n");
  assert.notDeepEqual(plans(1), plans(2), "different seeds give different batches");
});

Deno.test("the schedule prefix plans every crash point; random plans stay in range", () => {
  const planned = new Set(
    SCHEDULE_PREFIX.flatMap((p) =>
      p.kind === "kill"
        ? []
        : p.kind === "add+del"
        ? [p.crash.point, p.delCrash.point]
        : [p.crash.point]
    ),
  );
  assert.deepEqual(CRASHPOINTS.filter((p) => !planned.has(p)), []);
  const kinds = new Set<string>();
  const versions = new Set<string>();
  for (let i = 0; i < 2000; i++) {
    const { cniVersion, plan } = planFor(DEFAULT_CRASH_SEED, i);
    kinds.add(plan.kind);
    versions.add(cniVersion);
    if (plan.kind === "kill") {
      assert.ok(plan.delayMs >= 0 && plan.delayMs <= 300, describePlan(plan));
      continue;
    }
    for (const s of plan.kind === "add+del" ? [plan.crash, plan.delCrash] : [plan.crash]) {
      assert.ok(Number.isInteger(s.nth) && s.nth >= 1 && s.nth <= 5, describePlan(plan));
      assert.ok(CRASHPOINTS.includes(s.point), describePlan(plan));
    }
  }
  assert.deepEqual([...kinds].sort(), [...PLAN_KINDS].sort());
  assert.deepEqual([...versions].sort(), [...CRASH_VERSIONS].sort());
});

Deno.test({
  name: "SIGKILL at every step of ADD/DEL, then DEL: 0 leaks, cache always readable (randomized)",
  ...root,
  async fn() {
    const seed = envInt("CRASH_SEED", DEFAULT_CRASH_SEED);
    const runs = envInt("CRASH_RUNS", 200);
    const lanes = Math.max(1, envInt("CRASH_LANES", 2));
    console.log(`crash_test: seed ${seed}, ${runs} runs, ${lanes} lanes (CRASH_SEED, CRASH_RUNS)`);
    let finished = 0;
    const batch = await runCrashBatch({
      seed,
      runs,
      lanes,
      onRun: () => {
        if (++finished % 50 === 0) console.log(`crash_test: ${finished}/${runs} runs`);
      },
    });
    console.log(formatSummary(batch));
    const failures = formatFailures(batch);
    assert.ok(failures === "", `crash runs failed (seed ${seed}):\n\n${failures}`);
    assert.deepEqual(batch.reports.length, runs);
    if (runs >= SCHEDULE_PREFIX.length) {
      const fired = firedCounts(batch);
      assert.deepEqual(
        CRASHPOINTS.filter((p) => fired[p] === 0),
        [],
        `crash points never hit (seed ${seed}, ${runs} runs)`,
      );
    }
  },
});
