/**
 * Worker entry of `scripts/fuzz.ts`: runs one share of one target's cases and reports
 * progress, the final stats or the first failure. Before each case it stores the case index
 * and a case counter in a shared `Int32Array`, so the parent's watchdog can name the case a
 * hang is stuck in (a synchronous infinite loop cannot be timed from inside) and stop it.
 *
 * Messages in: {@link WorkerRequest}. Messages out: {@link WorkerReply}.
 *
 * @module
 */

import { formatStats, fuzz, FuzzFailure, type FuzzStats } from "../support/fuzz.ts";
import { TARGETS } from "./targets.ts";

/** What the parent asks a worker to run. */
export interface WorkerRequest {
  /** Target name (a key of `TARGETS`). */
  target: string;
  /** The run's seed. */
  seed: number;
  /** First case index of this worker's share. */
  first: number;
  /** Distance between this worker's case indices (= number of workers). */
  stride: number;
  /** Cases in this worker's share. */
  runs: number;
  /** Replay only this case. */
  only?: number;
  /** Stop after this many milliseconds. */
  timeBudgetMs?: number;
  /** Per-case limit in milliseconds. */
  maxCaseMs: number;
  /** `[cases started, current case index]`, written before each case. */
  heartbeat: SharedArrayBuffer;
}

/** What a worker reports. */
export type WorkerReply =
  | { type: "progress"; stats: FuzzStats }
  | { type: "done"; stats: FuzzStats; line: string }
  | { type: "fail"; message: string; index: number }
  | { type: "error"; message: string };

const self = globalThis as unknown as {
  onmessage: ((e: MessageEvent<WorkerRequest>) => void) | null;
  postMessage(m: WorkerReply): void;
  close(): void;
};

self.onmessage = (e) => {
  const req = e.data;
  const hb = new Int32Array(req.heartbeat);
  try {
    const entry = TARGETS[req.target];
    if (!entry) throw new Error(`unknown target ${req.target}`);
    const stats = fuzz(entry.target, {
      seed: req.seed,
      runs: req.runs,
      first: req.first,
      stride: req.stride,
      only: req.only,
      timeBudgetMs: req.timeBudgetMs,
      maxCaseMs: req.maxCaseMs,
      progressEvery: 5000,
      onCase: (index) => {
        Atomics.add(hb, 0, 1);
        Atomics.store(hb, 1, index);
      },
      onProgress: (s) =>
        self.postMessage({ type: "progress", stats: { ...s, rejections: { ...s.rejections } } }),
    });
    self.postMessage({ type: "done", stats, line: formatStats(stats) });
  } catch (err) {
    if (err instanceof FuzzFailure) {
      self.postMessage({ type: "fail", message: err.message, index: err.index });
    } else {self.postMessage({
        type: "error",
        message: err instanceof Error ? err.stack ?? err.message : String(err),
      });}
  }
};
