/**
 * The daemon's metrics load only the prom-client files they use (lib/daemon/prom.ts): not the
 * package index, which brings the Pushgateway (`node:http`, `node:https`), the cluster
 * aggregator, Summary and `collectDefaultMetrics`' event-loop histogram (≈ 1 MiB of heap).
 */

import assert from "node:assert/strict";

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
