/**
 * A node's burst (issue 22 §3), a benchmark: `--pods N` (default 200) sandboxes ADDed at once
 * through one `manifold daemon`, then DELeted at once (tests/support/burst.ts). Prints ADD
 * p50/p99 and the burst's wall time, failures by CNI code, network-statuses written, leases and
 * interfaces left after the DELs, and the daemon's RSS at start and peak (VmHWM). `--throttle`:
 * the API stand-in answers 429 (`Retry-After: 1`) to one network-status PATCH in three.
 * `--status-publish sync|async` is the daemon's setting; `--api-latency MS` puts a delaying
 * TCP proxy (MS each way) in front of the API. Run as root:
 * `deno run -A scripts/bench_burst.ts [--pods 200] [--throttle [--retry-after 1]]
 * [--status-publish async] [--api-latency MS]`.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { runBurst } from "../tests/support/burst.ts";
import { stats } from "./bench_support.ts";

const { values } = parseArgs({
  options: {
    pods: { type: "string", default: "200" },
    throttle: { type: "boolean", default: false },
    "retry-after": { type: "string", default: "1" },
    "status-publish": { type: "string", default: "sync" },
    "api-latency": { type: "string", default: "0" },
    help: { type: "boolean", short: "h" },
  },
});
if (values.help) {
  console.log(
    "usage: deno run -A scripts/bench_burst.ts [--pods 200] [--throttle] " +
      "[--status-publish sync|async] [--api-latency MS]  (root)",
  );
  Deno.exit(0);
}
const mode = values["status-publish"];
if (mode !== "sync" && mode !== "async") {
  console.error(`bench_burst: --status-publish must be sync or async, got ${mode}`);
  Deno.exit(2);
}
if (Deno.uid() !== 0) {
  console.error("bench_burst: run as root (network namespaces)");
  Deno.exit(1);
}
const pods = Number(values.pods);
const r = await runBurst({
  pods,
  statusPublish: mode,
  throttle: values.throttle ? { retryAfterSeconds: Number(values["retry-after"]) } : undefined,
  apiLatencyMs: Number(values["api-latency"]),
});
const ok = r.adds.filter((a) => a.code === 0);
const byCode = new Map<number, number>();
for (const a of r.adds) byCode.set(a.code, (byCode.get(a.code) ?? 0) + 1);
const { p50, p99 } = stats(r.adds.map((a) => a.ms));
const del = stats(r.dels.map((d) => d.ms));
console.log(
  `\n${pods} sandboxes at once through one daemon (default bridge + bridge NAD), statusPublish ` +
    `${mode}${
      values.throttle ? `, 429 (Retry-After ${values["retry-after"]} s) to 1 PATCH in 3` : ""
    }, API latency ` +
    `${values["api-latency"]} ms each way`,
);
console.log(
  `ADD  p50 ${p50.toFixed(0)} ms, p99 ${p99.toFixed(0)} ms, burst ${r.addWallMs.toFixed(0)} ms`,
);
console.log(`DEL  p50 ${del.p50.toFixed(0)} ms, p99 ${del.p99.toFixed(0)} ms`);
console.log(
  `ADD results: ${ok.length}/${pods} succeeded; by code ${
    JSON.stringify(Object.fromEntries(byCode))
  } (0 success, 11 try again later, -1 no answer)`,
);
console.log(`DEL results: ${r.dels.filter((d) => d.code === 0).length}/${pods} succeeded`);
console.log(
  `network-status written: ${r.statusesWritten}/${pods}; PATCH answers ${
    JSON.stringify(r.patches)
  }`,
);
console.log(
  `left after DEL: ${r.leasesLeft} leases, ${r.interfacesLeft} sandbox interfaces, ` +
    `${r.bridgePortsLeft} bridge ports`,
);
console.log(
  `daemon RSS: ${r.startRssMiB.toFixed(1)} MiB at start, peak ${r.peakRssMiB.toFixed(1)} MiB`,
);
const failed = r.adds.find((a) => a.code !== 0);
if (failed) console.log(`first failure: ${failed.out}`);
const failedDel = r.dels.find((d) => d.code !== 0);
if (failedDel) console.log(`first DEL failure: ${failedDel.out}`);
const { code, signal, stderrTail } = r.daemonExit;
console.log(`daemon exit after SIGTERM: code ${code}${signal ? `, signal ${signal}` : ""}`);
if (failed || failedDel || code !== 0) console.log(`daemon stderr (tail):\n${stderrTail}`);
