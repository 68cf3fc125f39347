/**
 * The daemon's `nodejs_eventloop_lag_*` series (lib/daemon/loop_delay.ts) measure the event
 * loop's lag: a blocked loop shows in them (Deno's `monitorEventLoopDelay`, which prom-client's
 * default metric used, read 0.3 ms for a loop blocked 100 ms), and clearing the metrics stops
 * the sampler (the test sanitizer sees a leaked interval).
 */

import assert from "node:assert/strict";
import { createDaemonMetrics } from "../../lib/daemon/metrics.ts";
import { LoopLagSampler } from "../../lib/daemon/loop_delay.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function block(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) { /* the loop is blocked */ }
}

function sample(text: string, name: string): number {
  const m = new RegExp(`^${name} (\\S+)$`, "m").exec(text);
  assert.ok(m, `${name} in the exposition`);
  return Number(m[1]);
}

Deno.test("nodejs_eventloop_lag_*: a loop blocked 150 ms shows as max and p99; reset per scrape", async () => {
  const metrics = createDaemonMetrics();
  try {
    await sleep(50);
    block(150);
    await sleep(50);
    const text = await metrics.scrape();
    const max = sample(text, "nodejs_eventloop_lag_max_seconds");
    assert.ok(max >= 0.1 && max < 5, `max ${max} s`);
    assert.equal(sample(text, "nodejs_eventloop_lag_p99_seconds"), max);
    assert.ok(sample(text, "nodejs_eventloop_lag_min_seconds") < 0.05);
    // The summary is one distribution: min ≤ p50 ≤ p90 ≤ p99 = max, min ≤ mean ≤ max, and the
    // one blocked tick among many short ones spreads it.
    const [min, p50, p90, mean, stddev] = ["min", "p50", "p90", "mean", "stddev"].map((s) =>
      sample(text, `nodejs_eventloop_lag_${s}_seconds`)
    );
    assert.ok(min <= p50 && p50 <= p90 && p90 <= max, `min ${min} p50 ${p50} p90 ${p90}`);
    assert.ok(min <= mean && mean <= max && mean > min, `mean ${mean}`);
    assert.ok(stddev > 0, `stddev ${stddev}`);
    await sleep(100); // the histogram was reset by the scrape: the block is gone
    assert.ok(sample(await metrics.scrape(), "nodejs_eventloop_lag_max_seconds") < max);
  } finally {
    metrics.clear();
  }
});

Deno.test("LoopLagSampler: records one lag per tick (ns, ≥ 1); stop is idempotent", async () => {
  const s = new LoopLagSampler(5);
  s.start();
  s.start();
  try {
    await sleep(60);
    assert.ok(s.histogram.count >= 3, `count ${s.histogram.count}`);
    assert.ok(s.histogram.min >= 1);
  } finally {
    s.stop();
    s.stop();
  }
});
