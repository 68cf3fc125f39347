/**
 * prom-client's pieces the daemon uses, each loaded from its own file rather than through the
 * package index: the index also loads the Pushgateway (`node:http`, `node:https`), the cluster
 * aggregator (`node:cluster`), Summary (tdigest, bintrees) and `collectDefaultMetrics` with its
 * event-loop histogram (loop_delay.ts), none of which the daemon uses: measured +1.8 MiB of V8
 * heap and ≈ +2.5 MiB RSS for the index. Types come from the package's own declarations.
 *
 * @module
 */

import process from "node:process";
import type * as Prom from "prom-client";
import RegistryClass from "prom-client/lib/registry.js";
import CounterClass from "prom-client/lib/counter.js";
import GaugeClass from "prom-client/lib/gauge.js";
import HistogramClass from "prom-client/lib/histogram.js";
import processCpuTotal from "prom-client/lib/metrics/processCpuTotal.js";
import processStartTime from "prom-client/lib/metrics/processStartTime.js";
import osMemoryHeap from "prom-client/lib/metrics/osMemoryHeap.js";
import processOpenFileDescriptors from "prom-client/lib/metrics/processOpenFileDescriptors.js";
import processMaxFileDescriptors from "prom-client/lib/metrics/processMaxFileDescriptors.js";
import processResources from "prom-client/lib/metrics/processResources.js";
import processHandles from "prom-client/lib/metrics/processHandles.js";
import processRequests from "prom-client/lib/metrics/processRequests.js";
import heapSizeAndUsed from "prom-client/lib/metrics/heapSizeAndUsed.js";
import heapSpacesSizeAndUsed from "prom-client/lib/metrics/heapSpacesSizeAndUsed.js";
import version from "prom-client/lib/metrics/version.js";
import gc from "prom-client/lib/metrics/gc.js";

/** prom-client's `Registry` (lib/registry.js). */
export const Registry: typeof Prom.Registry = RegistryClass;
/** A prom-client registry. */
export type Registry = Prom.Registry;
/** prom-client's `Counter` (lib/counter.js). */
export const Counter: typeof Prom.Counter = CounterClass;
/** prom-client's `Gauge` (lib/gauge.js). */
export const Gauge: typeof Prom.Gauge = GaugeClass;
/** prom-client's `Histogram` (lib/histogram.js). */
export const Histogram: typeof Prom.Histogram = HistogramClass;

/**
 * A default-metric registrar of prom-client (`lib/metrics/*.js`): registers its series in
 * `registry`; `config` as `collectDefaultMetrics` passes it.
 */
export type DefaultMetric = (registry: Registry, config: Record<string, unknown>) => void;

/**
 * prom-client 15.1.3's default metrics in `collectDefaultMetrics`'s order (lib/defaultMetrics.js),
 * split where its `eventLoopLag` registrar stands (left out: loop_delay.ts). `processResources`
 * is in `after` only when `process.getActiveResourcesInfo` exists, as prom-client decides.
 */
export const DEFAULT_METRICS: { before: DefaultMetric[]; after: DefaultMetric[] } = {
  before: [
    processCpuTotal,
    processStartTime,
    osMemoryHeap,
    processOpenFileDescriptors,
    processMaxFileDescriptors,
  ],
  after: [
    ...(typeof (process as { getActiveResourcesInfo?: unknown }).getActiveResourcesInfo ===
        "function"
      ? [processResources]
      : []),
    processHandles,
    processRequests,
    heapSizeAndUsed,
    heapSpacesSizeAndUsed,
    version,
    gc,
  ],
};
