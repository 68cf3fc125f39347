/**
 * Long fuzz runs of Manifold's parsers of untrusted input (issue 6 "Fuzzing and limits"); CI
 * runs a bounded batch of the same targets in `tests/fuzz/fuzz_test.ts`.
 *
 * ```sh
 * deno run -A scripts/fuzz.ts [--target all|selection|config|netconf|manifoldconf|cniargs|result|netlink|netlink-api|status|record|resultshape|selectionshape|k8sobjects|kubeconfigshape]
 *   [--runs 1000000] [--seed N] [--minutes M] [--jobs J] [--case I] [--max-case-ms 1000] [--hang-ms 2000]
 * ```
 *
 * - `--target`: one target or a comma list, `all` by default, run one after the other.
 * - `--runs`: cases per target (default 1,000,000); `--minutes`: a time limit per target.
 * - `--seed`: the run's seed (default: random, printed); `--case I` replays one case.
 * - `--jobs`: workers per target sharing its cases (default 1; the cases, and so the
 *   results, do not depend on it).
 * - `--max-case-ms`: a case slower than this fails (default 1000); `--hang-ms`: a case still
 *   running after this long is reported as a hang and its worker stopped (default 2000).
 *
 * Prints progress every 5 s and a final line per target (cases, accepted, rejections by CNI
 * code or netlink error, slowest case, cases/s, seed). Exits 1 on the first failure, printing
 * the target, seed, case index, input and a command that replays it; 2 for usage errors.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { emptyFuzzStats, formatStats, type FuzzStats } from "../tests/support/fuzz.ts";
import { TARGETS } from "../tests/fuzz/targets.ts";
import type { WorkerReply, WorkerRequest } from "../tests/fuzz/worker.ts";

const USAGE = `usage: deno run -A scripts/fuzz.ts [--target all|${Object.keys(TARGETS).join("|")}]
       [--runs 1000000] [--seed N] [--minutes M] [--jobs J] [--case I] [--max-case-ms 1000] [--hang-ms 2000]`;

/** Parsed command line. */
interface Options {
  targets: string[];
  runs: number;
  seed: number;
  minutes?: number;
  jobs: number;
  only?: number;
  maxCaseMs: number;
  hangMs: number;
}

function usage(message: string): never {
  console.error(`${message}\n${USAGE}`);
  Deno.exit(2);
}

function integer(name: string, text: string | undefined, min: number): number | undefined {
  if (text === undefined) return undefined;
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < min) {
    usage(`--${name} must be an integer ≥ ${min}, got ${JSON.stringify(text)}`);
  }
  return n;
}

function parseOptions(): Options {
  let values;
  try {
    ({ values } = parseArgs({
      args: Deno.args,
      options: {
        target: { type: "string", default: "all" },
        runs: { type: "string" },
        seed: { type: "string" },
        minutes: { type: "string" },
        jobs: { type: "string" },
        case: { type: "string" },
        "max-case-ms": { type: "string" },
        "hang-ms": { type: "string" },
        help: { type: "boolean", short: "h" },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (err) {
    usage((err as Error).message);
  }
  if (values.help) {
    console.log(USAGE);
    Deno.exit(0);
  }
  const targets = values.target === "all"
    ? Object.keys(TARGETS)
    : values.target.split(",").map((t) => t.trim());
  for (const t of targets) if (!(t in TARGETS)) usage(`unknown target ${JSON.stringify(t)}`);
  const minutes = values.minutes === undefined ? undefined : Number(values.minutes);
  if (minutes !== undefined && !(minutes > 0)) usage("--minutes must be a positive number");
  return {
    targets,
    runs: integer("runs", values.runs, 1) ?? 1_000_000,
    seed: (integer("seed", values.seed, 0) ?? crypto.getRandomValues(new Uint32Array(1))[0]) >>> 0,
    minutes,
    jobs: integer("jobs", values.jobs, 1) ?? 1,
    only: integer("case", values.case, 0),
    maxCaseMs: integer("max-case-ms", values["max-case-ms"], 1) ?? 1000,
    hangMs: integer("hang-ms", values["hang-ms"], 100) ?? 2000,
  };
}

/** Adds up the stats of a target's workers. */
function merge(target: string, seed: number, parts: FuzzStats[], elapsedMs: number): FuzzStats {
  const out = emptyFuzzStats(target, seed, elapsedMs);
  for (const p of parts) {
    out.cases += p.cases;
    out.accepted += p.accepted;
    out.rejected += p.rejected;
    for (const [k, v] of Object.entries(p.rejections)) {
      out.rejections[k] = (out.rejections[k] ?? 0) + v;
    }
    if (p.maxCaseMs > out.maxCaseMs) {
      (out.maxCaseMs = p.maxCaseMs), (out.maxCaseIndex = p.maxCaseIndex);
    }
  }
  return out;
}

/** Runs one target over its workers; resolves with its stats or exits the process on failure. */
function runTarget(name: string, o: Options): Promise<FuzzStats> {
  const jobs = o.only !== undefined ? 1 : o.jobs;
  const start = performance.now();
  const latest: FuzzStats[] = [];
  const heartbeats: Int32Array[] = [];
  const workers: Worker[] = [];
  const doneFlags: boolean[] = [];
  let finished = 0;
  return new Promise((resolve) => {
    const stopAll = () => workers.forEach((w) => w.terminate());
    const fail = (text: string) => {
      clearInterval(watchdog);
      clearInterval(progress);
      stopAll();
      console.error(`\nFAIL ${text}`);
      Deno.exit(1);
    };
    // Watchdog: once a worker has started its first case, a case counter that has not moved
    // for hangMs means it is stuck in one case.
    const seen: { count: number; since: number }[] = [];
    const watchdog = setInterval(() => {
      const now = performance.now();
      heartbeats.forEach((hb, j) => {
        const count = Atomics.load(hb, 0);
        const s = seen[j] ??= { count, since: now };
        if (count !== s.count) {
          s.count = count;
          s.since = now;
        } else if (count > 0 && !doneFlags[j] && now - s.since > o.hangMs) {
          const index = Atomics.load(hb, 1);
          fail(
            `fuzz target "${name}" hangs at case ${index} (seed ${o.seed}): no progress for ${o.hangMs} ms\n` +
              `  replay: deno run -A scripts/fuzz.ts --target ${name} --seed ${o.seed} --case ${index}`,
          );
        }
      });
    }, 100);
    const progress = setInterval(() => {
      const m = merge(name, o.seed, latest.filter(Boolean), performance.now() - start);
      const rate = Math.round((m.cases * 1000) / m.elapsedMs);
      console.log(
        `  ${name}: ${m.cases} cases, ${m.accepted} accepted, max ${
          m.maxCaseMs.toFixed(1)
        } ms, ${rate} cases/s`,
      );
    }, 5000);
    for (let j = 0; j < jobs; j++) {
      const heartbeat = new SharedArrayBuffer(8);
      heartbeats.push(new Int32Array(heartbeat));
      const w = new Worker(new URL("../tests/fuzz/worker.ts", import.meta.url).href, {
        type: "module",
      });
      workers.push(w);
      w.onmessage = (e: MessageEvent<WorkerReply>) => {
        const m = e.data;
        if (m.type === "progress") latest[j] = m.stats;
        else if (m.type === "fail") fail(m.message);
        else if (m.type === "error") fail(`worker for ${name} crashed: ${m.message}`);
        else {
          latest[j] = m.stats;
          doneFlags[j] = true;
          w.terminate();
          if (++finished === jobs) {
            clearInterval(watchdog);
            clearInterval(progress);
            resolve(merge(name, o.seed, latest, performance.now() - start));
          }
        }
      };
      w.onerror = (e) => {
        e.preventDefault();
        fail(`worker for ${name} failed: ${e.message}`);
      };
      const share = Math.floor(o.runs / jobs) + (j < o.runs % jobs ? 1 : 0);
      const req: WorkerRequest = {
        target: name,
        seed: o.seed,
        first: j,
        stride: jobs,
        runs: share,
        only: o.only,
        timeBudgetMs: o.minutes !== undefined ? o.minutes * 60_000 : undefined,
        maxCaseMs: o.maxCaseMs,
        heartbeat,
      };
      w.postMessage(req);
    }
  });
}

if (import.meta.main) {
  const o = parseOptions();
  console.log(
    `fuzz seed ${o.seed}: ${
      o.only !== undefined ? `case ${o.only}` : `${o.runs} cases`
    } per target, ` +
      `${o.jobs} worker(s), targets ${o.targets.join(", ")}${
        o.minutes ? `, at most ${o.minutes} min each` : ""
      }`,
  );
  const all: FuzzStats[] = [];
  for (const name of o.targets) {
    const stats = await runTarget(name, o);
    all.push(stats);
    console.log(formatStats(stats));
  }
  const total = all.reduce((n, s) => n + s.cases, 0);
  const ms = all.reduce((n, s) => n + s.elapsedMs, 0);
  console.log(`all: ${total} cases in ${(ms / 1000).toFixed(1)} s, no failure (seed ${o.seed})`);
}
