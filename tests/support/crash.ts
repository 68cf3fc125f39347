/**
 * Crash-consistency runs (issue 6), shared by `tests/integration/crash_test.ts` (a fixed-seed CI
 * batch) and `scripts/soak.ts` (thousands of runs): the plugin process is SIGKILLed at a step of
 * ADD or DEL — through the test-only hook of `lib/multinet/crashpoint.ts`, or from outside after
 * a random delay — and the runtime's recovery must then find a readable cache and leave nothing
 * behind.
 *
 * One run = a fresh containerID in a reused {@link World} (one per lane and cniVersion; a world
 * whose run failed is discarded) with the pod selecting `bridge-net` and `macvlan-net` (default
 * network + 2 secondary networks, 3 attachments), a cniVersion among {@link CRASH_VERSIONS} and
 * one {@link CrashPlan}:
 *
 * - `add`: ADD crashed at a point (`#n`: its n-th occurrence);
 * - `del`: ADD succeeds, DEL crashed at a point;
 * - `kill`: ADD SIGKILLed by the test 0–300 ms after it was spawned, or — so that kills also land
 *   among the delegates rather than in the ~300 ms of Deno start-up — 0–300 ms after its first
 *   log line (an orphaned delegate may still run and finish after the plugin died);
 * - `add+del`: ADD crashed, then the recovery DEL crashed too;
 * - `rollback`: ADD whose network-status patch the API refuses (403), crashed while it rolls back.
 *
 * After every crash: no process of the container may remain (orphaned delegates are awaited,
 * ≤ 5 s, as a real runtime's DEL also comes later), the cache record must be readable or absent
 * (never a {@link CacheCorruptError}) and, for hook crashes during ADD, hold exactly the intent
 * records written so far. Then the runtime's DEL — at most 2 attempts, both with the real netns —
 * must exit 0, and {@link assertNoLeaks} plus the tuning plugin's backup files must show nothing
 * of the container.
 *
 * Plans and cniVersions are a pure function of (seed, run index) ({@link planFor}); the first
 * {@link SCHEDULE_PREFIX} runs walk every (plan, point, occurrence) deterministically so that a
 * batch of at least that many runs fires every point of {@link CRASHPOINTS}. Where an external
 * kill lands depends on timing and is not reproducible.
 *
 * @module
 */

import {
  AttachmentCache,
  CacheCorruptError,
  type CacheRecord,
} from "../../lib/multinet/cache/cache.ts";
import { type Crashpoint, CRASHPOINT_ENV, CRASHPOINTS } from "../../lib/multinet/crashpoint.ts";
import { assertNoLeaks } from "./leaks.ts";
import { k8sArgs, MANIFOLD, type PluginCall, type PluginOutcome } from "./plugin.ts";
import { done, NS, POD, UID, type World, world } from "./world.ts";

/** The cniVersions of Manifold's own config a run picks from (delegates speak ≤ 1.0.0). */
export const CRASH_VERSIONS = ["0.3.1", "0.4.0", "1.0.0", "1.1.0"] as const;

/** The pod's `k8s.v1.cni.cncf.io/networks`: 2 secondary networks (3 attachments with the default). */
export const CRASH_SELECTION = JSON.stringify([
  { name: "bridge-net" },
  { name: "macvlan-net", interface: "data0", ips: ["10.240.3.7/24"], mac: "02:00:00:0a:f0:07" },
]);

/** Attachments of the pod: the default network, `bridge-net`, `macvlan-net`. */
const ATTACHMENTS = 3;

/** The default seed of the CI batch. */
export const DEFAULT_CRASH_SEED = 424242;

/** Longest external-kill delay, ms. */
export const MAX_KILL_DELAY_MS = 300;

/** Bound on waiting for orphaned delegates after a crash, ms. */
const ORPHAN_WAIT_MS = 5000;

/** Bound on one plugin process, ms (a hang is a failure, not a stuck batch). */
const CALL_TIMEOUT_MS = 60_000;

/** Where the tuning plugin keeps its per-attachment backups (`<containerId>_<ifName>.json`). */
const TUNING_DIR = "/run/cni/tuning";

/** One crash point and which of its occurrences kills the process. */
export interface PointSpec {
  /** The hook point (`lib/multinet/crashpoint.ts`). */
  point: Crashpoint;
  /** Which occurrence of `point` in the process kills it, from 1. */
  nth: number;
}

/** What a run does; see the module doc. */
export type CrashPlan =
  | { kind: "add"; crash: PointSpec }
  | { kind: "del"; crash: PointSpec }
  | { kind: "kill"; delayMs: number; after: KillAnchor }
  | { kind: "add+del"; crash: PointSpec; delCrash: PointSpec }
  | { kind: "rollback"; crash: PointSpec };

/**
 * What an external kill's delay counts from: the spawn, or the plugin's first stderr output
 * (its first log line: start-up is over and the ADD has begun).
 */
export type KillAnchor = "spawn" | "first-log";

/** The kinds of {@link CrashPlan}, in the order the summary lists them. */
export const PLAN_KINDS = ["add", "del", "kill", "add+del", "rollback"] as const;

/** The occurrences of each point an ADD of the pod passes (cache writes: one intent + final). */
const ADD_OCCURRENCES: Partial<Record<Crashpoint, number>> = {
  "add:before-intent": 1,
  "add:before-delegate": ATTACHMENTS,
  "add:after-delegate": ATTACHMENTS,
  "add:before-final-cache": 1,
  "add:before-patch": 1,
  "add:after-patch": 1,
  "cache:after-temp-write": 2,
};

/** The occurrences of each point a DEL of `n` attachments passes (one tombstone write). */
function delOccurrences(n: number): Partial<Record<Crashpoint, number>> {
  return {
    "del:before-delegate": n,
    "del:after-delegate": n,
    "del:before-tombstone": 1,
    "cache:after-temp-write": 1,
  };
}

/** Every `{point, nth}` of an occurrence table. */
function specs(table: Partial<Record<Crashpoint, number>>): PointSpec[] {
  return Object.entries(table).flatMap(([point, n]) =>
    Array.from({ length: n! }, (_, i) => ({ point: point as Crashpoint, nth: i + 1 }))
  );
}

const ADD_SPECS = specs(ADD_OCCURRENCES);
const DEL_SPECS = specs(delOccurrences(ATTACHMENTS));
/** A rolled-back ADD: every delegate DEL, then the tombstone (the 3rd cache write of the ADD). */
const ROLLBACK_SPECS: PointSpec[] = [
  ...specs({ "del:before-delegate": ATTACHMENTS, "del:after-delegate": ATTACHMENTS }),
  { point: "cache:after-temp-write", nth: 3 },
];

/** What the cache must hold right after an ADD crashed at a hook point. */
interface ExpectedAfterAdd {
  /** Attachments in the record (0: no record at all). */
  attachments: number;
  /** True when the final record (all "added", network-status) is on disk. */
  final: boolean;
}

/**
 * The record an ADD of the pod leaves when it crashes at `spec`: one intent record naming every
 * attachment ("adding") is written before the first delegate, the final record (all "added")
 * after all of them; a crash inside a write leaves the previous record.
 */
function expectedAfterAdd(spec: PointSpec): ExpectedAfterAdd {
  switch (spec.point) {
    case "add:before-intent":
      return { attachments: 0, final: false };
    case "add:before-delegate":
    case "add:after-delegate":
      return { attachments: ATTACHMENTS, final: false };
    case "cache:after-temp-write":
      return { attachments: spec.nth === 1 ? 0 : ATTACHMENTS, final: false };
    case "add:before-final-cache":
    case "add:before-patch": // the final record's write has only started
      return { attachments: ATTACHMENTS, final: false };
    default: // add:after-patch
      return { attachments: ATTACHMENTS, final: true };
  }
}

/** Attachments the recovery DEL after an ADD crash at `spec` detaches (none cached: rebuilt). */
function attachmentsForDel(spec: PointSpec): number {
  return expectedAfterAdd(spec).attachments || ATTACHMENTS;
}

/**
 * The text of a point as in {@link CRASHPOINT_ENV} (`#1` left out).
 * @param spec the point and occurrence.
 * @returns e.g. `"add:before-delegate#2"`, `"del:before-tombstone"`.
 * @example
 * ```ts
 * formatSpec({ point: "add:after-delegate", nth: 3 }); // "add:after-delegate#3"
 * ```
 */
export function formatSpec(spec: PointSpec): string {
  return spec.nth === 1 ? spec.point : `${spec.point}#${spec.nth}`;
}

/**
 * One line naming a plan, for summaries and failure messages.
 * @param plan the plan.
 * @returns e.g. `"add+del add:after-delegate#2 → del:before-delegate"`.
 * @example
 * ```ts
 * describePlan({ kind: "kill", delayMs: 120, after: "spawn" }); // "kill 120 ms after spawn"
 * ```
 */
export function describePlan(plan: CrashPlan): string {
  switch (plan.kind) {
    case "kill":
      return `kill ${plan.delayMs} ms after ${plan.after === "spawn" ? "spawn" : "first log"}`;
    case "add+del":
      return `add+del ${formatSpec(plan.crash)} → ${formatSpec(plan.delCrash)}`;
    default:
      return `${plan.kind} ${formatSpec(plan.crash)}`;
  }
}

/**
 * The deterministic head of every schedule: each ADD, DEL and rollback occurrence once, then
 * two external kills and one crashed ADD + crashed DEL. A batch of at least this many runs fires
 * every point of {@link CRASHPOINTS}.
 */
export const SCHEDULE_PREFIX: readonly CrashPlan[] = [
  ...ADD_SPECS.map((crash): CrashPlan => ({ kind: "add", crash })),
  ...DEL_SPECS.map((crash): CrashPlan => ({ kind: "del", crash })),
  ...ROLLBACK_SPECS.map((crash): CrashPlan => ({ kind: "rollback", crash })),
  { kind: "kill", delayMs: 150, after: "spawn" },
  { kind: "kill", delayMs: 100, after: "first-log" },
  {
    kind: "add+del",
    crash: { point: "add:after-delegate", nth: 2 },
    delCrash: { point: "del:after-delegate", nth: 1 },
  },
];

/**
 * A small seeded PRNG (mulberry32): the same seed gives the same sequence on every machine.
 * @param seed any 32-bit integer.
 * @returns a function giving floats in [0, 1).
 * @example
 * ```ts
 * const r = rng(1); r() === rng(1)(); // true
 * ```
 */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The PRNG of one run, independent of the other runs (so one run can be replayed alone). */
function runRng(seed: number, index: number): () => number {
  const mixed = Math.imul((seed >>> 0) ^ 0x9e3779b9, 0x85ebca6b) ^ Math.imul(index + 1, 0xc2b2ae35);
  const r = rng(mixed);
  r(); // discard the first draw: nearby seeds give nearby first values
  return r;
}

function pick<T>(r: () => number, items: readonly T[]): T {
  return items[Math.floor(r() * items.length)];
}

/**
 * The cniVersion and plan of run `index` of the batch seeded `seed`: the
 * {@link SCHEDULE_PREFIX} for the first runs, then random plans (add 35 %, del 20 %, kill 20 %,
 * add+del 15 %, rollback 10 %; kills: 30 % timed from the spawn, 70 % from the first log line).
 * @param seed the batch seed (32-bit integer).
 * @param index the run index, from 0.
 * @returns the run's cniVersion (one of {@link CRASH_VERSIONS}) and plan.
 * @example
 * ```ts
 * planFor(1, 0).plan; // { kind: "add", crash: { point: "add:before-intent", nth: 1 } }
 * ```
 */
export function planFor(seed: number, index: number): { cniVersion: string; plan: CrashPlan } {
  const r = runRng(seed, index);
  const cniVersion = pick(r, CRASH_VERSIONS);
  if (index < SCHEDULE_PREFIX.length) return { cniVersion, plan: SCHEDULE_PREFIX[index] };
  const u = r();
  let plan: CrashPlan;
  if (u < 0.35) plan = { kind: "add", crash: pick(r, ADD_SPECS) };
  else if (u < 0.55) plan = { kind: "del", crash: pick(r, DEL_SPECS) };
  else if (u < 0.75) {
    const delayMs = Math.floor(r() * (MAX_KILL_DELAY_MS + 1));
    plan = { kind: "kill", delayMs, after: r() < 0.3 ? "spawn" : "first-log" };
  } else if (u < 0.9) {
    const crash = pick(r, ADD_SPECS);
    plan = {
      kind: "add+del",
      crash,
      delCrash: pick(r, specs(delOccurrences(attachmentsForDel(crash)))),
    };
  } else plan = { kind: "rollback", crash: pick(r, ROLLBACK_SPECS) };
  return { cniVersion, plan };
}

/** What one run did. */
export interface RunReport {
  /** The batch seed. */
  seed: number;
  /** The run index in the batch, from 0. */
  index: number;
  /** Manifold's cniVersion in this run. */
  cniVersion: string;
  plan: CrashPlan;
  /** CNI_CONTAINERID of the run. */
  containerId: string;
  /** The hook points that really killed the plugin, in order. */
  fired: Crashpoint[];
  /**
   * `kill` plans: where the kill landed, as the cache shows it — `no record`,
   * `3/3 intent` (the intent record: every attachment "adding"), `final record`,
   * `tombstone`, or `finished (exit n)` when the ADD ended before the kill.
   */
  killedAt?: string;
  /** Orphaned processes of the container that were awaited after a crash. */
  orphans: number;
  /** Recovery DELs run (1 or 2). */
  dels: number;
  /** Wall time of the run, ms. */
  ms: number;
  /** Why the run failed; absent when it passed. */
  error?: string;
}

/** Outcome of a plugin process started by {@link spawnPlugin}. */
export interface SpawnOutcome extends PluginOutcome {
  /** The terminating signal, e.g. "SIGKILL", or null when the process exited. */
  signal: Deno.Signal | null;
  /** True when the process was killed by {@link SpawnedPlugin.kill} or the timeout. */
  killedByUs: boolean;
}

/** A running plugin process whose handle the caller keeps (to SIGKILL it from outside). */
export interface SpawnedPlugin {
  /** The process id (the `deno` process itself: `scripts/manifold` execs it). */
  pid: number;
  /** Sends SIGKILL now; a no-op when the process already ended. */
  kill(): void;
  /** Resolves at the process's first stderr output (its first log line), or when it ended. */
  firstOutput: Promise<void>;
  /** Resolves when the process ended, with its output. */
  outcome: Promise<SpawnOutcome>;
}

/**
 * Starts the plugin exactly as `runPlugin` (tests/support/plugin.ts) does — `scripts/manifold`,
 * a cleared environment with the CNI_* variables, the config on stdin — but returns at once with
 * the child's handle.
 * @param call the invocation (only `command`, `config`, `containerId`, `netns`, `ifName`,
 *   `args`, `path` and `env` are used).
 * @param opts `timeoutMs`: SIGKILL after this long (default 60000 ms).
 * @returns the handle; `outcome` never rejects for the child's own failures.
 */
export function spawnPlugin(call: PluginCall, opts: { timeoutMs?: number } = {}): SpawnedPlugin {
  const env: Record<string, string> = {
    PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    CNI_COMMAND: call.command,
    CNI_CONTAINERID: call.containerId ?? "",
    CNI_NETNS: call.netns ?? "",
    CNI_IFNAME: call.ifName ?? "eth0",
    CNI_ARGS: call.args ?? "",
    CNI_PATH: call.path ?? "/usr/lib/cni",
    ...call.env,
  };
  const stdin = typeof call.config === "string" ? call.config : JSON.stringify(call.config);
  const started = performance.now();
  const child = new Deno.Command(MANIFOLD, {
    clearEnv: true,
    env,
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let killedByUs = false;
  const kill = () => {
    killedByUs = true;
    try {
      child.kill("SIGKILL");
    } catch { /* already ended */ }
  };
  const timer = setTimeout(kill, opts.timeoutMs ?? CALL_TIMEOUT_MS);
  let firstOutput!: () => void;
  const first = new Promise<void>((resolve) => firstOutput = resolve);
  const collect = async (stream: ReadableStream<Uint8Array>, onChunk?: () => void) => {
    const chunks: Uint8Array[] = [];
    for await (const chunk of stream) {
      chunks.push(chunk);
      onChunk?.();
    }
    const all = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
    chunks.reduce((off, c) => (all.set(c, off), off + c.length), 0);
    return new TextDecoder().decode(all);
  };
  const outcome = (async (): Promise<SpawnOutcome> => {
    try {
      const stdoutP = collect(child.stdout);
      const stderrP = collect(child.stderr, firstOutput);
      const w = child.stdin.getWriter();
      try {
        await w.write(new TextEncoder().encode(stdin));
        await w.close();
      } catch { /* killed before reading its stdin */ }
      const [status, stdout, stderr] = await Promise.all([child.status, stdoutP, stderrP]);
      let json: Record<string, unknown> | undefined;
      try {
        json = stdout.trim() ? JSON.parse(stdout) : undefined;
      } catch { /* not JSON */ }
      return {
        code: status.code,
        signal: status.signal,
        stdout,
        stderr,
        json,
        ms: performance.now() - started,
        killedByUs,
      };
    } finally {
      clearTimeout(timer);
      firstOutput();
    }
  })();
  return { pid: child.pid, kill, firstOutput: first, outcome };
}

/**
 * The processes whose environment holds `CNI_CONTAINERID=<containerId>`: the plugin and every
 * delegate (and IPAM plugin) it started for the container, orphaned or not.
 * @param containerId the container.
 * @returns their pids, sorted.
 */
export async function processesOf(containerId: string): Promise<number[]> {
  const needle = `CNI_CONTAINERID=${containerId}\0`;
  const dec = new TextDecoder("latin1");
  const pids: number[] = [];
  for await (const e of Deno.readDir("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    try {
      if (dec.decode(await Deno.readFile(`/proc/${e.name}/environ`)).includes(needle)) {
        pids.push(Number(e.name));
      }
    } catch { /* gone meanwhile, or a kernel thread */ }
  }
  return pids.sort((a, b) => a - b);
}

/**
 * Waits until no process of the container remains (see {@link processesOf}); on timeout the
 * stragglers (started by the plugin this test ran) are SIGKILLed by pid and an error is thrown.
 * @param containerId the container.
 * @param timeoutMs the bound, ms.
 * @returns how many processes were seen at the first look (0: none was running).
 * @throws {Error} naming the pids and command lines still running after `timeoutMs`.
 */
export async function waitForOrphans(containerId: string, timeoutMs = ORPHAN_WAIT_MS) {
  const deadline = performance.now() + timeoutMs;
  let pids = await processesOf(containerId);
  const first = pids.length;
  while (pids.length > 0) {
    if (performance.now() > deadline) {
      const what = await Promise.all(pids.map(async (pid) => {
        const cmd = await Deno.readTextFile(`/proc/${pid}/cmdline`).catch(() => "");
        return `${pid} ${cmd.replaceAll("\0", " ").trim()}`;
      }));
      for (const pid of pids) {
        try {
          Deno.kill(pid, "SIGKILL");
        } catch { /* ended meanwhile */ }
      }
      throw new Error(`processes of the container still running after ${timeoutMs} ms: ${what}`);
    }
    await new Promise((r) => setTimeout(r, 20));
    pids = await processesOf(containerId);
  }
  return first;
}

/**
 * The worlds of one lane: one per cniVersion, created on first use and reused by its runs;
 * runs in different lanes share nothing (own netns, bridges, dirs, API stand-in).
 */
export class CrashLane {
  readonly #worlds = new Map<string, World>();

  /**
   * The lane's world for a cniVersion (pod annotated with {@link CRASH_SELECTION}).
   * @param cniVersion Manifold's cniVersion (delegates get it too, 1.0.0 for 1.1.0).
   * @returns the world, created on first use.
   */
  async world(cniVersion: string): Promise<World> {
    let w = this.#worlds.get(cniVersion);
    if (!w) {
      w = await world({
        annotations: { "k8s.v1.cni.cncf.io/networks": CRASH_SELECTION },
        cniVersion,
      });
      this.#worlds.set(cniVersion, w);
    }
    return w;
  }

  /** Tears down a world whose run failed (it may hold leaked state); the next run gets a new one. */
  async discard(cniVersion: string): Promise<void> {
    const w = this.#worlds.get(cniVersion);
    this.#worlds.delete(cniVersion);
    if (w) await done(w);
  }

  /** Tears down every world of the lane; never throws. */
  async close(): Promise<void> {
    for (const v of [...this.#worlds.keys()]) await this.discard(v).catch(() => {});
  }
}

/** The container ID of a run: unique per process (tuning backups live in a host-wide dir). */
function containerIdFor(nonce: string, seed: number, index: number): string {
  return `crash${nonce}s${(seed >>> 0).toString(16)}r${String(index).padStart(6, "0")}`;
}

const NONCE = crypto.randomUUID().slice(0, 6);

/** Last lines of a process's stderr, for failure messages. */
function tail(text: string, lines = 6): string {
  return text.trimEnd().split("\n").slice(-lines).join("\n");
}

/**
 * Runs one crash run (see the module doc) in a lane; never throws for a failed check.
 * @param lane the lane whose worlds the run uses (a failed run's world is discarded).
 * @param seed the batch seed.
 * @param index the run index.
 * @returns the report; `error` set when a check failed.
 */
export async function crashRun(lane: CrashLane, seed: number, index: number): Promise<RunReport> {
  const { cniVersion, plan } = planFor(seed, index);
  const containerId = containerIdFor(NONCE, seed, index);
  const report: RunReport = {
    seed,
    index,
    cniVersion,
    plan,
    containerId,
    fired: [],
    orphans: 0,
    dels: 0,
    ms: 0,
  };
  const started = performance.now();
  let w: World | undefined;
  try {
    w = await lane.world(cniVersion);
    await runPlan(w, report);
  } catch (e) {
    report.error = e instanceof Error ? e.message : String(e);
    // Whatever the run left (orphans included) must not reach the next run of the lane.
    await waitForOrphans(containerId, 1000).catch(() => {});
    await lane.discard(cniVersion);
  }
  report.ms = performance.now() - started;
  return report;
}

/** The steps of one run in its world; throws on the first failed check. */
async function runPlan(w: World, report: RunReport): Promise<void> {
  const { plan, containerId } = report;
  const cache = new AttachmentCache(w.dirs.cache);
  const call = (command: "ADD" | "DEL", crash?: PointSpec): SpawnedPlugin =>
    spawnPlugin({
      command,
      config: w.conf,
      containerId,
      netns: w.netnsPath,
      ifName: "eth0",
      args: k8sArgs(NS, POD, containerId, UID),
      path: "/usr/lib/cni",
      env: crash ? { [CRASHPOINT_ENV]: `${crash.point}#${crash.nth}` } : {},
    });
  const crashed = async (command: "ADD" | "DEL", crash: PointSpec): Promise<void> => {
    const r = await call(command, crash).outcome;
    if (r.signal !== "SIGKILL" || r.killedByUs) {
      throw new Error(
        `${command} did not crash at ${formatSpec(crash)}: exit ${r.code}` +
          `${r.signal ? ` (${r.signal})` : ""} ${r.stdout.trim()}\n${tail(r.stderr)}`,
      );
    }
    report.fired.push(crash.point);
  };
  /** After a crash: orphans gone, then the record must be readable (or absent). */
  const afterCrash = async (what: string): Promise<CacheRecord | undefined> => {
    report.orphans += await waitForOrphans(containerId);
    try {
      return await cache.read(containerId, "eth0");
    } catch (e) {
      const why = e instanceof CacheCorruptError ? `${e.reason}: ${e.details}` : String(e);
      throw new Error(`cache unreadable after ${what}: ${why}`);
    }
  };

  switch (plan.kind) {
    case "add": {
      await crashed("ADD", plan.crash);
      checkIntent(await afterCrash("the ADD crash"), plan.crash);
      break;
    }
    case "del": {
      const add = await call("ADD").outcome;
      if (add.code !== 0) throw new Error(`ADD failed: ${add.stdout.trim()}\n${tail(add.stderr)}`);
      await crashed("DEL", plan.crash);
      const record = await afterCrash("the DEL crash");
      // Until its tombstone, a DEL keeps every attachment cached (a retry DELs them again).
      if (record?.deletedAt || record?.attachments.length !== ATTACHMENTS) {
        throw new Error(`the crashed DEL lost cached attachments: ${summarizeRecord(record)}`);
      }
      break;
    }
    case "kill": {
      const h = call("ADD");
      if (plan.after === "first-log") await h.firstOutput;
      await new Promise((r) => setTimeout(r, plan.delayMs));
      h.kill();
      const r = await h.outcome;
      const record = await afterCrash("the external kill");
      if (r.signal === "SIGKILL") {
        report.killedAt = summarizeRecord(record);
      } else {
        report.killedAt = `finished (exit ${r.code})`;
        if (r.code !== 0) throw new Error(`ADD failed: ${r.stdout.trim()}\n${tail(r.stderr)}`);
      }
      break;
    }
    case "add+del": {
      await crashed("ADD", plan.crash);
      checkIntent(await afterCrash("the ADD crash"), plan.crash);
      await crashed("DEL", plan.delCrash);
      await afterCrash("the recovery DEL crash");
      break;
    }
    case "rollback": {
      const seen = w.api.requests.length;
      w.api.fault({ method: "PATCH", path: new RegExp(`/pods/${POD}/status$`), status: 403 });
      await crashed("ADD", plan.crash);
      const refused = w.api.requests.slice(seen)
        .some((q) => q.method === "PATCH" && q.status === 403);
      if (!refused) throw new Error("the network-status patch was never refused: no rollback ran");
      const record = await afterCrash("the rollback crash");
      if (record?.deletedAt || record?.attachments.length !== ATTACHMENTS) {
        throw new Error(`the crashed rollback lost cached attachments: ${summarizeRecord(record)}`);
      }
      break;
    }
  }

  // The runtime's DEL, retried once if it fails; both with the real netns.
  const failures: string[] = [];
  for (let attempt = 1; attempt <= 2; attempt++) {
    report.dels = attempt;
    const r = await call("DEL").outcome;
    if (r.code === 0) break;
    failures.push(`DEL #${attempt}: exit ${r.code} ${r.stdout.trim()}\n${tail(r.stderr)}`);
    await afterCrash(`failed DEL #${attempt}`);
    if (attempt === 2) throw new Error(`recovery DEL failed twice:\n${failures.join("\n")}`);
  }
  await afterCrash("the recovery DEL");
  await assertNoLeaks({
    containerIds: [containerId],
    podNetns: w.podNetns,
    ipamDir: w.dirs.ipam,
    cacheDir: w.dirs.cache,
    deviceInfoDir: String(w.conf.deviceInfoDir ?? "/var/run/k8s.cni.cncf.io/devinfo"),
  }, `after the recovery DEL (${failures.length + 1} DEL(s))`);
  const backups = await tuningBackups(containerId);
  if (backups.length > 0) {
    throw new Error(`leaks after the recovery DEL: tuning backups ${backups.join(", ")}`);
  }
}

/** Checks that the record after an ADD crash holds exactly the intents written so far. */
function checkIntent(record: CacheRecord | undefined, crash: PointSpec): void {
  const want = expectedAfterAdd(crash);
  const got = record?.attachments ?? [];
  const states = got.map((a) => a.state);
  const wantStates = Array.from(
    { length: want.attachments },
    () => want.final ? "added" : "adding",
  );
  const ok = (want.attachments === 0 ? record === undefined : record !== undefined) &&
    !record?.deletedAt &&
    JSON.stringify(states) === JSON.stringify(wantStates) &&
    (record?.networkStatus !== undefined) === want.final;
  if (!ok) {
    throw new Error(
      `after the ADD crash at ${formatSpec(crash)} the cache should hold ` +
        `${
          want.attachments === 0 ? "no record" : `[${wantStates}]${want.final ? " + status" : ""}`
        }` +
        `, it holds ${summarizeRecord(record)}`,
    );
  }
}

/** A short description of a cache record (see {@link RunReport.killedAt}). */
function summarizeRecord(record: CacheRecord | undefined): string {
  if (!record) return "no record";
  if (record.deletedAt) return `tombstone (${record.attachments.length} attachments)`;
  if (record.networkStatus) return "final record";
  return `${record.attachments.length}/${ATTACHMENTS} intent`;
}

/** The tuning plugin's backup files of a container (its DEL removes them). */
async function tuningBackups(containerId: string): Promise<string[]> {
  const out: string[] = [];
  try {
    for await (const e of Deno.readDir(TUNING_DIR)) {
      if (e.name.startsWith(`${containerId}_`)) out.push(`${TUNING_DIR}/${e.name}`);
    }
  } catch { /* no such dir: nothing */ }
  return out;
}

/** A batch of runs and what it covered. */
export interface CrashBatch {
  /** The batch seed. */
  seed: number;
  /** Every run's report, by index. */
  reports: RunReport[];
  /** Wall time of the batch, ms. */
  ms: number;
  /** Lanes used. */
  lanes: number;
}

/**
 * Runs runs `0 … runs-1` (or only `only`) of the batch seeded `seed`, `lanes` at a time, each
 * lane in its own worlds. Worlds are torn down before it returns, even when aborted.
 * @param opts `seed`, `runs`, `lanes` (default 2), `only` (run indices to replay),
 *   `onRun` (called after each run), `signal` (stop taking new runs).
 * @returns the reports sorted by index.
 */
export async function runCrashBatch(opts: {
  seed: number;
  runs: number;
  lanes?: number;
  only?: number[];
  onRun?: (r: RunReport) => void;
  signal?: AbortSignal;
}): Promise<CrashBatch> {
  const queue = opts.only ?? Array.from({ length: opts.runs }, (_, i) => i);
  const lanes = Math.max(1, Math.min(opts.lanes ?? 2, queue.length));
  const reports: RunReport[] = [];
  const started = performance.now();
  let next = 0;
  await Promise.all(Array.from({ length: lanes }, async () => {
    const lane = new CrashLane();
    try {
      while (next < queue.length && !opts.signal?.aborted) {
        const r = await crashRun(lane, opts.seed, queue[next++]);
        reports.push(r);
        opts.onRun?.(r);
      }
    } finally {
      await lane.close();
    }
  }));
  reports.sort((a, b) => a.index - b.index);
  return { seed: opts.seed, reports, ms: performance.now() - started, lanes };
}

/**
 * How often each crash point really killed the plugin in a batch.
 * @param batch the batch.
 * @returns a count for every point of {@link CRASHPOINTS} (0 for points never hit).
 */
export function firedCounts(batch: CrashBatch): Record<Crashpoint, number> {
  const counts = Object.fromEntries(CRASHPOINTS.map((p) => [p, 0])) as Record<Crashpoint, number>;
  for (const r of batch.reports) for (const p of r.fired) counts[p]++;
  return counts;
}

/**
 * The command that replays one run alone (same seed, same plan and cniVersion).
 * @param r the run.
 * @returns e.g. `"deno run -A scripts/soak.ts --seed 424242 --only 17"`.
 */
export function replayCommand(r: RunReport): string {
  return `deno run -A scripts/soak.ts --seed ${r.seed} --only ${r.index}`;
}

/**
 * The failed runs of a batch, one paragraph each: seed, run index, cniVersion, plan, container,
 * the error and the replay command.
 * @param batch the batch.
 * @returns the text; `""` when every run passed.
 */
export function formatFailures(batch: CrashBatch): string {
  return batch.reports.filter((r) => r.error).map((r) =>
    `seed ${r.seed} run ${r.index} (cniVersion ${r.cniVersion}, ${describePlan(r.plan)}, ` +
    `container ${r.containerId}${r.killedAt ? `, killed at ${r.killedAt}` : ""}): ` +
    `${r.error}\n  replay: ${replayCommand(r)}`
  ).join("\n\n");
}

/**
 * The summary of a batch: runs, hook kills and failures per crash point; runs and failures per
 * plan kind and per cniVersion; where external kills landed; then every failure.
 * @param batch the batch.
 * @returns plain-text tables, one line each, no trailing newline.
 */
export function formatSummary(batch: CrashBatch): string {
  const rows: string[][] = [["crash point", "runs", "fired", "failed"]];
  const planned = (r: RunReport): PointSpec[] =>
    r.plan.kind === "kill"
      ? []
      : r.plan.kind === "add+del"
      ? [r.plan.crash, r.plan.delCrash]
      : [r.plan.crash];
  const fired = firedCounts(batch);
  for (const p of CRASHPOINTS) {
    const runs = batch.reports.filter((r) => planned(r).some((s) => s.point === p));
    rows.push([p, `${runs.length}`, `${fired[p]}`, `${runs.filter((r) => r.error).length}`]);
  }
  const kills = batch.reports.filter((r) => r.plan.kind === "kill");
  rows.push([
    "(external kill)",
    `${kills.length}`,
    `${kills.filter((r) => r.killedAt && !r.killedAt.startsWith("finished")).length}`,
    `${kills.filter((r) => r.error).length}`,
  ]);
  const table = (t: string[][]) => {
    const widths = t[0].map((_, c) => Math.max(...t.map((row) => row[c].length)));
    return t.map((row) =>
      row.map((cell, c) => c === 0 ? cell.padEnd(widths[c]) : cell.padStart(widths[c])).join("  ")
    ).join("\n");
  };
  const by = (key: (r: RunReport) => string, keys: readonly string[], title: string) => {
    const t = [[title, "runs", "failed"]];
    for (const k of keys) {
      const runs = batch.reports.filter((r) => key(r) === k);
      t.push([k, `${runs.length}`, `${runs.filter((r) => r.error).length}`]);
    }
    return table(t);
  };
  const landed = new Map<string, number>();
  for (const r of kills) landed.set(r.killedAt ?? "?", (landed.get(r.killedAt ?? "?") ?? 0) + 1);
  const failed = batch.reports.filter((r) => r.error);
  const orphaned = batch.reports.filter((r) => r.orphans > 0).length;
  const retried = batch.reports.filter((r) => r.dels > 1).length;
  return [
    `crash runs: ${batch.reports.length}, seed ${batch.seed}, ${batch.lanes} lane(s), ` +
    `${(batch.ms / 1000).toFixed(1)} s, ${failed.length} failed`,
    "",
    table(rows),
    "",
    by((r) => r.plan.kind, PLAN_KINDS, "plan"),
    "",
    by((r) => r.cniVersion, CRASH_VERSIONS, "cniVersion"),
    "",
    `external kills landed: ${
      [...landed].sort().map(([k, n]) => `${k}: ${n}`).join(", ") || "none"
    }`,
    `runs with orphaned processes awaited: ${orphaned}; recovery needing a 2nd DEL: ${retried}`,
    ...(failed.length ? ["", "failures:", formatFailures(batch)] : []),
  ].join("\n");
}
