/**
 * The daemon's metrics load only the prom-client files they use (lib/daemon/prom.ts): not the
 * package index, which brings the Pushgateway (`node:http`, `node:https`), the cluster
 * aggregator, Summary and `collectDefaultMetrics`' event-loop histogram (≈ 1 MiB of heap).
 */

import assert from "node:assert/strict";
import { createDaemonMetrics } from "../../lib/daemon/metrics.ts";

Deno.test("createDaemonMetrics loads prom-client's registry and metric files, not its index", async () => {
  const metrics = new URL("../../lib/daemon/metrics.ts", import.meta.url).href;
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "eval",
      `import { createRequire } from "node:module";
       import { createDaemonMetrics } from "${metrics}";
       createDaemonMetrics().clear();
       const cache = createRequire(import.meta.url).cache;
       console.log(JSON.stringify(Object.keys(cache).filter((k) => k.includes("/prom-client/"))
         .map((k) => k.replace(/^.*\\/prom-client\\/[^/]+\\//, ""))));`,
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  const loaded: string[] = JSON.parse(new TextDecoder().decode(out.stdout));
  for (const f of ["lib/registry.js", "lib/counter.js", "lib/histogram.js", "lib/metrics/gc.js"]) {
    assert.ok(loaded.includes(f), `${f} in ${loaded.join(" ")}`);
  }
  for (const f of ["index.js", "lib/pushgateway.js", "lib/cluster.js", "lib/summary.js"]) {
    assert.ok(!loaded.includes(f), `${f} loaded`);
  }
  assert.ok(!loaded.includes("lib/metrics/eventLoopLag.js"), "loop_delay.ts replaces it");
});

Deno.test("manifold_events_total counts what the counting sink passes on, by type and reason", async () => {
  const { countingEventSink } = await import("../../lib/daemon/observer.ts");
  const metrics = createDaemonMetrics({ defaultMetrics: false });
  const passed: string[] = [];
  const sink = countingEventSink({
    emit: (_pod, ev) => void passed.push(ev.reason),
    flush: () => Promise.resolve(),
  }, metrics.observer);
  const pod = { namespace: "ns", name: "p", uid: "u", infraContainerId: "c" };
  sink.emit(pod, { type: "Warning", reason: "TeardownAbandoned", message: "m" });
  sink.emit(pod, { type: "Warning", reason: "TeardownAbandoned", message: "m" });
  sink.emit(pod, { type: "Normal", reason: "AddedInterface", message: "m" });
  sink.emit(pod, { type: "Warning", reason: "not a reason!", message: "m" });
  assert.deepEqual(passed, [
    "TeardownAbandoned",
    "TeardownAbandoned",
    "AddedInterface",
    "not a reason!",
  ]);
  const text = await metrics.scrape();
  assert.match(text, /^manifold_events_total\{type="Warning",reason="TeardownAbandoned"\} 2$/m);
  assert.match(text, /^manifold_events_total\{type="Normal",reason="AddedInterface"\} 1$/m);
  assert.match(text, /^manifold_events_total\{type="Warning",reason="other"\} 1$/m);
  metrics.clear();
});
