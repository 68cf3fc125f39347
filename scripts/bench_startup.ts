/**
 * Start-up benchmark of the plugin process: Manifold runs once per pod operation, so
 * process start-up is part of every ADD/DEL. Measures with hyperfine (mean and median,
 * milliseconds) the calls that do the least real work, so what is left is start-up:
 *
 * - `deno run` of an empty file and of `import { z } from "zod"` (the floors);
 * - `scripts/manifold --version` (the runtime's view: includes the wrapper's few ms of
 *   `sh`), `deno run main.ts --version` directly, and the same with the V8 code cache
 *   disabled (`--no-code-cache`, how the compiled binary runs);
 * - CNI VERSION (`{"cniVersion":"1.1.0"}` on stdin);
 * - CNI DEL that finds a tombstone in the cache (config parse + cache read, no delegate);
 * - with `--modules`: `import "<module>"` for each lib module, to see what start-up still
 *   pays for (inclusive of the module's own imports, minus the empty run).
 *
 * Usage: `deno run -A scripts/bench_startup.ts [--runs 30] [--modules] [--json out.json]`.
 * Needs hyperfine on PATH. Not a test: figures vary with the machine.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { AttachmentCache, CACHE_SCHEMA_VERSION } from "../lib/multinet/cache/cache.ts";

const { values } = parseArgs({
  options: {
    runs: { type: "string", default: "30" },
    warmup: { type: "string", default: "3" },
    modules: { type: "boolean", default: false },
    json: { type: "string" },
  },
});
const RUNS = Math.max(20, Number(values.runs));
const WARMUP = Number(values.warmup);

const root = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const deno = Deno.execPath();
const manifold = `${root}/scripts/manifold`;
const work = await Deno.makeTempDir({ prefix: "manifold-bench-startup-" });

/** One benchmarked command line (run by hyperfine's default shell). */
interface Case {
  name: string;
  command: string;
}

/** One result row, milliseconds. */
interface Row {
  name: string;
  mean: number;
  median: number;
  stddev: number;
  min: number;
}

function q(s: string): string {
  return `'${s.replaceAll("'", `'\\''`)}'`;
}

/** `deno run` with the flags scripts/manifold uses, for one file. */
function denoRun(file: string, extra = ""): string {
  return `${q(deno)} run --quiet --no-prompt --cached-only --no-check ${extra} ` +
    `--config ${q(`${root}/deno.json`)} --lock=${q(`${root}/deno.lock`)} -A ${q(file)}`;
}

async function prepare(): Promise<Case[]> {
  const empty = `${work}/empty.ts`;
  await Deno.writeTextFile(empty, "");
  const zod = `${work}/zod.ts`;
  await Deno.writeTextFile(zod, `import { z } from "zod";\nif (!z) throw new Error("no zod");\n`);

  const versionIn = `${work}/version.json`;
  await Deno.writeTextFile(versionIn, JSON.stringify({ cniVersion: "1.1.0" }));

  // DEL hitting a tombstone: parse Manifold's config, read the cache record, return.
  const containerId = "benchstartup0123456789abcdef";
  const cniDir = `${work}/cache`;
  const conflist = `${work}/10-bridge.conflist`;
  await Deno.writeTextFile(
    conflist,
    JSON.stringify({
      cniVersion: "1.1.0",
      name: "bench-default",
      plugins: [{ type: "bridge", bridge: "benchbr0", ipam: { type: "host-local" } }],
    }),
  );
  await new AttachmentCache(cniDir).writeTombstone({
    schemaVersion: CACHE_SCHEMA_VERSION,
    containerId,
    netns: "",
    ifName: "eth0",
    pod: { namespace: "default", name: "bench", uid: "00000000-0000-0000-0000-000000000000" },
    cniVersion: "1.1.0",
    createdAt: new Date().toISOString(),
    attachments: [],
  });
  const delIn = `${work}/del.json`;
  await Deno.writeTextFile(
    delIn,
    JSON.stringify({
      cniVersion: "1.1.0",
      name: "manifold",
      type: "manifold",
      clusterNetwork: conflist,
      cniDir,
      logLevel: "error",
    }),
  );
  const delEnv = `CNI_COMMAND=DEL CNI_CONTAINERID=${containerId} CNI_IFNAME=eth0 ` +
    `CNI_PATH=/usr/lib/cni CNI_NETNS=''`;

  // The DEL must succeed silently (empty stdout, exit 0), else the figure means nothing.
  const check = await new Deno.Command("sh", {
    args: ["-c", `${delEnv} ${q(manifold)} < ${q(delIn)}`],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const out = new TextDecoder().decode(check.stdout);
  if (!check.success || out !== "") {
    throw new Error(
      `DEL on a tombstone failed (exit ${check.code}): ${out}${
        new TextDecoder().decode(check.stderr)
      }`,
    );
  }

  return [
    { name: "deno run (empty file)", command: denoRun(empty) },
    { name: `deno run import "zod"`, command: denoRun(zod) },
    { name: "manifold --version", command: `${q(manifold)} --version` },
    { name: "deno run main.ts --version", command: denoRun(`${root}/main.ts`) + " --version" },
    {
      name: "manifold --version (--no-code-cache)",
      command: denoRun(`${root}/main.ts`, "--no-code-cache") + " --version",
    },
    { name: "CNI VERSION", command: `CNI_COMMAND=VERSION ${q(manifold)} < ${q(versionIn)}` },
    { name: "CNI DEL (tombstone)", command: `${delEnv} ${q(manifold)} < ${q(delIn)}` },
    {
      name: "CNI DEL (tombstone, --no-code-cache)",
      command: `${delEnv} ${denoRun(`${root}/main.ts`, "--no-code-cache")} < ${q(delIn)}`,
    },
  ];
}

/** The lib modules whose import cost is measured with `--modules` (inclusive). */
const MODULES = [
  "lib/cni/errors.ts",
  "lib/cni/version.ts",
  "lib/cni/env.ts",
  "lib/cni/types.ts",
  "lib/cni/result.ts",
  "lib/cni/skel.ts",
  "lib/cni/invoke.ts",
  "lib/cni/runtime.ts",
  "lib/log/mod.ts",
  "lib/multinet/config.ts",
  "lib/multinet/status/network_status.ts",
  "lib/multinet/cache/cache.ts",
  "lib/multinet/plan/selection.ts",
  "lib/multinet/plan/resolve.ts",
  "lib/multinet/nad/source.ts",
  "lib/multinet/plan/networks.ts",
  "lib/multinet/status/kernel.ts",
  "lib/multinet/status/sinks.ts",
  "lib/multinet/verbs/add.ts",
  "lib/multinet/verbs/del.ts",
  "lib/multinet/verbs/check.ts",
  "lib/multinet/verbs/gc.ts",
  "lib/multinet/wiring.ts",
  "lib/multinet/plugin.ts",
  "lib/k8s/kubeconfig/load.ts",
  "lib/k8s/client.ts",
  "lib/netlink/mod.ts",
];

async function moduleCases(): Promise<Case[]> {
  const cases: Case[] = [];
  for (const m of MODULES) {
    const file = `${work}/import_${m.replaceAll("/", "_")}`;
    await Deno.writeTextFile(file, `import ${JSON.stringify(`${root}/${m}`)};\n`);
    cases.push({ name: `import ${m}`, command: denoRun(file) });
  }
  return cases;
}

async function measure(cases: Case[]): Promise<Row[]> {
  const out = `${work}/hyperfine.json`;
  const args = ["--runs", String(RUNS), "--warmup", String(WARMUP), "--style", "none"];
  args.push("--export-json", out);
  for (const c of cases) args.push("--command-name", c.name, c.command);
  const run = await new Deno.Command("hyperfine", { args, stdout: "null", stderr: "piped" })
    .output();
  if (!run.success) {
    throw new Error(`hyperfine failed (exit ${run.code}): ${new TextDecoder().decode(run.stderr)}`);
  }
  const report = JSON.parse(await Deno.readTextFile(out)) as {
    results: { command: string; mean: number; median: number; stddev: number; min: number }[];
  };
  return report.results.map((r) => ({
    name: r.command,
    mean: r.mean * 1000,
    median: r.median * 1000,
    stddev: (r.stddev ?? 0) * 1000,
    min: r.min * 1000,
  }));
}

function table(rows: Row[], floor?: number): string {
  const width = Math.max(...rows.map((r) => r.name.length), 7);
  const head = `${"command".padEnd(width)}  ${"mean ms".padStart(8)}  ${"median".padStart(8)}  ` +
    `${"± sd".padStart(6)}  ${"min".padStart(6)}${floor === undefined ? "" : "  over empty"}`;
  const lines = rows.map((r) =>
    `${r.name.padEnd(width)}  ${r.mean.toFixed(1).padStart(8)}  ${
      r.median.toFixed(1).padStart(8)
    }  ${r.stddev.toFixed(1).padStart(6)}  ${r.min.toFixed(1).padStart(6)}${
      floor === undefined ? "" : `  ${(r.median - floor).toFixed(1).padStart(11)}`
    }`
  );
  return [head, "-".repeat(head.length), ...lines].join("\n");
}

try {
  const rows = await measure(await prepare());
  console.log(`start-up, ${RUNS} runs each (deno ${Deno.version.deno}, hyperfine)\n`);
  console.log(table(rows));
  let moduleRows: Row[] = [];
  if (values.modules) {
    const floor = rows[0].median;
    moduleRows = (await measure(await moduleCases())).sort((a, b) => b.median - a.median);
    console.log(
      `\nimport cost per module (inclusive of its imports; empty run = ${floor.toFixed(1)} ms)\n`,
    );
    console.log(table(moduleRows, floor));
  }
  if (values.json) {
    await Deno.writeTextFile(
      values.json,
      JSON.stringify({ runs: RUNS, rows, moduleRows }, null, 2),
    );
  }
} finally {
  await Deno.remove(work, { recursive: true });
}
