/**
 * Crash-consistency soak (issue 6): runs many randomized crash runs — the plugin SIGKILLed at a
 * step of ADD or DEL, or from outside — each followed by the runtime's DEL, a cache readability
 * check and a leak check (see `tests/support/crash.ts`), and prints a summary table: runs per
 * crash point, plan and cniVersion, where external kills landed, and every failure with its
 * seed, run index and a command that replays it. Exit 0 when every run passed, 1 on any failure,
 * 2 for usage errors, 130 when interrupted (the summary of the runs done is still printed).
 *
 * ```sh
 * deno run -A scripts/soak.ts                         # 2000 runs, random seed, 2 lanes
 * deno run -A scripts/soak.ts --seed 424242 --runs 400 --lanes 2
 * deno run -A scripts/soak.ts --seed 424242 --only 17 # replay one run
 * ```
 *
 * Needs root (network namespaces, real delegates from /usr/lib/cni).
 *
 * @module
 */

import { parseArgs } from "node:util";
import {
  describePlan,
  formatSummary,
  runCrashBatch,
  type RunReport,
} from "../tests/support/crash.ts";

const USAGE = `usage: deno run -A scripts/soak.ts [--runs N] [--seed S] [--lanes L] [--only I]...

  --runs N    crash runs (default 2000)
  --seed S    batch seed, a 32-bit integer (default: random, printed)
  --lanes L   runs in parallel, each lane in its own netns and API stand-in (default 2)
  --only I    replay run I of the batch (repeatable; --runs is then ignored)
  --verbose   one line per run
  --help      this text`;

/** Parses a non-negative integer flag; exits 2 on anything else. */
function intFlag(name: string, text: string | undefined, fallback: number, max: number): number {
  if (text === undefined) return fallback;
  const n = Number(text);
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(n) || n > max) {
    console.error(`soak: --${name} must be an integer in 0…${max}, got ${JSON.stringify(text)}`);
    console.error(USAGE);
    Deno.exit(2);
  }
  return n;
}

/** Entry point: parse flags, run the batch, print the summary, exit with its verdict. */
async function main(): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: Deno.args,
      options: {
        runs: { type: "string" },
        seed: { type: "string" },
        lanes: { type: "string" },
        only: { type: "string", multiple: true },
        verbose: { type: "boolean", default: false },
        help: { type: "boolean", default: false },
      },
      strict: true,
      allowPositionals: false,
    });
  } catch (e) {
    console.error(`soak: ${(e as Error).message}`);
    console.error(USAGE);
    return 2;
  }
  const { values } = parsed;
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  if (Deno.uid() !== 0) {
    console.error("soak: needs root (network namespaces, host links)");
    return 2;
  }
  const randomSeed = crypto.getRandomValues(new Uint32Array(1))[0];
  const seed = intFlag("seed", values.seed, randomSeed, 0xffffffff);
  const runs = intFlag("runs", values.runs, 2000, 10_000_000);
  const lanes = Math.max(1, intFlag("lanes", values.lanes, 2, 64));
  const only = values.only?.map((t) => intFlag("only", t, 0, 10_000_000));
  const total = only?.length ?? runs;

  const abort = new AbortController();
  const onSignal = () => {
    if (abort.signal.aborted) return;
    console.error("soak: interrupted; finishing the runs under way and cleaning up");
    abort.abort();
  };
  Deno.addSignalListener("SIGINT", onSignal);
  Deno.addSignalListener("SIGTERM", onSignal);

  console.log(
    `soak: seed ${seed}, ${total} run(s), ${lanes} lane(s)` +
      (only ? ` (replaying ${only.join(", ")})` : ""),
  );
  const started = performance.now();
  let finished = 0;
  let failed = 0;
  const every = Math.max(1, Math.min(100, Math.ceil(total / 20)));
  const onRun = (r: RunReport) => {
    finished++;
    if (r.error) failed++;
    if (values.verbose || r.error) {
      console.log(
        `  run ${r.index} [${r.cniVersion}] ${describePlan(r.plan)}: ` +
          `${r.error ? "FAILED" : "ok"} (${Math.round(r.ms)} ms` +
          `${r.killedAt ? `, killed at ${r.killedAt}` : ""})`,
      );
    }
    if (finished % every === 0 || finished === total) {
      const s = ((performance.now() - started) / 1000).toFixed(0);
      console.log(`soak: ${finished}/${total} runs, ${failed} failed, ${s} s`);
    }
  };
  try {
    const batch = await runCrashBatch({ seed, runs, lanes, only, onRun, signal: abort.signal });
    console.log("");
    console.log(formatSummary(batch));
    if (abort.signal.aborted) return 130;
    return batch.reports.some((r) => r.error) ? 1 : 0;
  } finally {
    Deno.removeSignalListener("SIGINT", onSignal);
    Deno.removeSignalListener("SIGTERM", onSignal);
  }
}

if (import.meta.main) Deno.exit(await main());
