/**
 * The daemon's `nodejs_eventloop_lag_*` series: prom-client's event-loop-lag default metric
 * (`prom-client/lib/metrics/eventLoopLag.js`, same series, help texts and aggregators), fed by
 * a timer sampled here instead of `perf_hooks.monitorEventLoopDelay`.
 *
 * Why: Deno's `monitorEventLoopDelay` keeps a native histogram of 2 MiB from `enable()` that
 * grows by ≈ 1 MiB with every doubling of the largest delay recorded and never shrinks
 * (`reset()` zeroes it in place): measured 10–18 MiB of the daemon's resident memory, i.e. most
 * of prom-client's footprint. It also records only the timer's jitter: a loop blocked 100 ms
 * reads a max of 0.3 ms. Here a 10 ms interval timer (prom-client's default
 * `eventLoopMonitoringPrecision`) records how late each tick runs into `createHistogram()`
 * (3 significant figures, a few KiB): ≈ 0 for an idle loop, the blocked time when it was busy.
 *
 * @module
 */

import { createHistogram, type RecordableHistogram } from "node:perf_hooks";
import { Gauge, type Registry } from "./prom.ts";

/** Sampling interval of {@link registerEventLoopLag}, ms (prom-client's default). */
export const LOOP_LAG_RESOLUTION_MS = 10;

/**
 * Samples the event loop's lag: a timer every `resolutionMs` records into a histogram how late
 * it ran (ns, at least 1: an HDR histogram records no 0). Unref'd: never keeps a process alive.
 */
export class LoopLagSampler {
  /** Lags recorded since the last {@link reset}, ns. */
  readonly histogram: RecordableHistogram = createHistogram();
  readonly #resolutionMs: number;
  #timer: ReturnType<typeof setInterval> | undefined;
  #last = 0;

  /** @param resolutionMs the sampling interval, ms */
  constructor(resolutionMs = LOOP_LAG_RESOLUTION_MS) {
    this.#resolutionMs = resolutionMs;
  }

  /** Starts sampling (idempotent). */
  start(): void {
    if (this.#timer !== undefined) return;
    this.#last = performance.now();
    this.#timer = setInterval(() => {
      const now = performance.now();
      const lateMs = now - this.#last - this.#resolutionMs;
      this.#last = now;
      this.histogram.record(Math.max(1, Math.round(lateMs * 1e6)));
    }, this.#resolutionMs);
    Deno.unrefTimer(this.#timer);
  }

  /** Stops sampling (idempotent). */
  stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }
}

/**
 * Registers prom-client's eight `nodejs_eventloop_lag*_seconds` gauges in `registry`, fed by a
 * started {@link LoopLagSampler}: at every scrape `nodejs_eventloop_lag_seconds` is the delay of
 * a `setImmediate` (set once it ran, as prom-client does), the others the histogram's min, max,
 * mean, stddev and percentiles since the previous scrape (then reset).
 *
 * @param registry the daemon's registry
 * @returns the sampler (stop it when the registry is cleared)
 */
export function registerEventLoopLag(registry: Registry): LoopLagSampler {
  const sampler = new LoopLagSampler();
  const h = sampler.histogram;
  const registers = [registry];
  const gauge = (name: string, help: string, aggregator: "min" | "max" | "average") =>
    new Gauge({ name: `nodejs_eventloop_lag_${name}`, help, registers, aggregator });
  const lag = new Gauge({
    name: "nodejs_eventloop_lag_seconds",
    help: "Lag of event loop in seconds.",
    registers,
    aggregator: "average",
    // This one metric's `collect` sets all eight (prom-client's own arrangement).
    collect() {
      const start = performance.now();
      setImmediate(() => lag.set((performance.now() - start) / 1e3));
      min.set(h.min / 1e9);
      max.set(h.max / 1e9);
      mean.set(h.mean / 1e9);
      stddev.set(h.stddev / 1e9);
      p50.set(h.percentile(50) / 1e9);
      p90.set(h.percentile(90) / 1e9);
      p99.set(h.percentile(99) / 1e9);
      h.reset();
    },
  });
  const min = gauge("min_seconds", "The minimum recorded event loop delay.", "min");
  const max = gauge("max_seconds", "The maximum recorded event loop delay.", "max");
  const mean = gauge("mean_seconds", "The mean of the recorded event loop delays.", "average");
  const stddev = gauge(
    "stddev_seconds",
    "The standard deviation of the recorded event loop delays.",
    "average",
  );
  const p50 = gauge(
    "p50_seconds",
    "The 50th percentile of the recorded event loop delays.",
    "average",
  );
  const p90 = gauge(
    "p90_seconds",
    "The 90th percentile of the recorded event loop delays.",
    "average",
  );
  const p99 = gauge(
    "p99_seconds",
    "The 99th percentile of the recorded event loop delays.",
    "average",
  );
  sampler.start();
  return sampler;
}
