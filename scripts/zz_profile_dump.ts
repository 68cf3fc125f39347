/**
 * Load-independent profile of one plugin call (the "before/after" of docs/performance.md): which
 * scripts V8 compiles, how many source bytes, how many functions it compiles to bytecode, and in
 * which phase of the call's timeline — counts that a loaded machine does not change, unlike wall
 * time. Runs Manifold exactly as scripts/bench.ts does (same pod: default + bridge NAD + macvlan
 * NAD, real delegates in a scratch netns, the HTTPS API stand-in) with
 * `DENO_V8_FLAGS=--log-function-events` and reads V8's log: `script,create` (a script or module
 * compiled), `function,parse-script` (its source length), `function,interpreter` (a function
 * compiled to bytecode, at its first call). Phases are the plugin's own timeline marks (ms since
 * the runtime started; the V8 log's clock starts with the isolate, ≈ the same origin).
 *
 * Run as root: `deno run -A scripts/profile_add.ts [--json]`.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { NS, world } from "../tests/support/world.ts";
import { SELECTION } from "./bench_support.ts";

const { values } = parseArgs({ options: { json: { type: "boolean" } } });
if (Deno.uid() !== 0) {
  console.error("profile_add: run as root (network namespaces)");
  Deno.exit(1);
}
const ROOT = new URL("../", import.meta.url).href;

/** What V8 compiled in one process, per group of scripts and per phase. */
export interface Profile {
  scripts: number;
  sourceBytes: number;
  functions: number;
  groups: Record<string, { scripts: number; bytes: number; functions: number }>;
  phases: { phase: string; atMs: number; scripts: number; bytes: number; functions: number }[];
}

/** The group of a script URL: lib/<dir>, an npm package, Deno's own (ext:), or other. */
function group(url: string): string {
  if (url.startsWith(ROOT)) return url.slice(ROOT.length).split("/").slice(0, 2).join("/");
  const npm = url.match(/(?:node_modules|\/npm\/[^/]+)\/((?:@[^/]+\/)?[^/]+)\//);
  if (npm) return `npm:${npm[1]}`;
  if (url.startsWith("ext:") || url.startsWith("node:")) return "deno (ext:, node:)";
  return url === "" ? "(eval/anonymous)" : "other";
}

/** Reads one V8 log and the call's timeline marks into a {@link Profile}. */
function analyse(log: string, timeline: Record<string, number>): Profile {
  const url = new Map<number, string>();
  const len = new Map<number, number>();
  const created: { id: number; ms: number }[] = [];
  const fns: { id: number; ms: number }[] = [];
  for (const line of log.split("\n")) {
    const f = line.split(",");
    if (f[0] === "script-details") url.set(Number(f[1]), f[2]);
    else if (f[0] === "script" && f[1] === "create") {
      created.push({ id: Number(f[2]), ms: Number(f[3]) / 1000 });
    } else if (f[0] === "function" && f[1] === "parse-script") {
      len.set(Number(f[2]), Number(f[4]));
    } else if (f[0] === "function" && f[1] === "interpreter") {
      fns.push({ id: Number(f[2]), ms: Number(f[6]) / 1000 });
    }
  }
  const marks = Object.entries(timeline)
    .filter(([k, v]) => typeof v === "number" && k !== "epochMs")
    .sort((a, b) => a[1] - b[1]);
  const phaseOf = (ms: number) => marks.find(([, at]) => ms <= at)?.[0] ?? "(after last mark)";
  const groups: Profile["groups"] = {};
  const phases = new Map<string, Profile["phases"][number]>();
  for (const [k, at] of marks) {
    phases.set(k, { phase: k, atMs: at, scripts: 0, bytes: 0, functions: 0 });
  }
  phases.set("(after last mark)", {
    phase: "(after last mark)",
    atMs: NaN,
    scripts: 0,
    bytes: 0,
    functions: 0,
  });
  let sourceBytes = 0;
  for (const c of created) {
    const g = groups[group(url.get(c.id) ?? "")] ??= { scripts: 0, bytes: 0, functions: 0 };
    const b = len.get(c.id) ?? 0;
    g.scripts++;
    g.bytes += b;
    sourceBytes += b;
    const p = phases.get(phaseOf(c.ms))!;
    p.scripts++;
    p.bytes += b;
  }
  for (const fn of fns) {
    (groups[group(url.get(fn.id) ?? "")] ??= { scripts: 0, bytes: 0, functions: 0 }).functions++;
    phases.get(phaseOf(fn.ms))!.functions++;
  }
  return {
    scripts: created.length,
    sourceBytes,
    functions: fns.length,
    groups,
    phases: [...phases.values()].filter((p) => p.scripts || p.functions),
  };
}

const w = await world({
  annotations: { "k8s.v1.cni.cncf.io/networks": JSON.stringify(SELECTION) },
  conf: { logLevel: "verbose" },
});
const logs = await Deno.makeTempDir();
const out: Record<string, Profile> = {};
try {
  const runtimeMode = {
    ...w.conf,
    capabilities: { "io.kubernetes.cri.pod-annotations": true },
    runtimeConfig: {
      "io.kubernetes.cri.pod-annotations": {
        "k8s.v1.cni.cncf.io/networks": JSON.stringify(SELECTION),
      },
    },
  };
  const profiled = async (
    name: string,
    command: "ADD" | "DEL" | "VERSION",
    id: string,
    config: Record<string, unknown>,
  ) => {
    const file = `${logs}/${name}.log`;
    const r = await w.call(command, {
      containerId: id,
      config,
      env: { DENO_V8_FLAGS: `--log-function-events,--no-logfile-per-isolate,--logfile=${file}` },
    });
    if (r.code !== 0) throw new Error(`${name}: exit ${r.code}: ${r.stdout} ${r.stderr}`);
    let timeline: Record<string, number> = {};
    for (const line of r.stderr.split("\n")) {
      if (line.includes('"timeline"')) timeline = JSON.parse(line);
    }
    out[name] = analyse(await Deno.readTextFile(file), timeline); await Deno.copyFile(file, `/tmp/z30/${name.replace(/\W+/g,"_")}.log`);
  };
  // One warm-up call (Deno's transpile cache), then the profiled ones.
  await profiled("warm-up", "ADD", "profwarm", w.conf);
  await profiled("warm-up DEL", "DEL", "profwarm", w.conf);
  await profiled("VERSION", "VERSION", "profv", w.conf);
  await profiled("ADD (pod GET)", "ADD", "profa", w.conf);
  await profiled("DEL", "DEL", "profa", w.conf);
  await profiled("ADD (runtime annotations)", "ADD", "profb", runtimeMode);
  await profiled("DEL (runtime annotations)", "DEL", "profb", runtimeMode);
  delete out["warm-up"];
  delete out["warm-up DEL"];
} finally {
  await w.api.stop();
  await w.scratch.cleanup();
  await Deno.remove(logs, { recursive: true });
}
void NS;

if (values.json) console.log(JSON.stringify(out, null, 2));
else {
  for (const [name, p] of Object.entries(out)) {
    console.log(
      `\n${name}: ${p.scripts} scripts compiled, ${
        (p.sourceBytes / 1024).toFixed(0)
      } KiB source, ` +
        `${p.functions} functions compiled to bytecode`,
    );
    const user = Object.entries(p.groups).sort((a, b) => b[1].bytes - a[1].bytes);
    for (const [g, v] of user) {
      console.log(
        `  ${g.padEnd(32)} ${String(v.scripts).padStart(5)} scripts ${
          (v.bytes / 1024).toFixed(0).padStart(5)
        } KiB ${String(v.functions).padStart(5)} fns`,
      );
    }
    console.log("  phase (timeline mark it ends at, ms)      scripts   KiB   fns");
    for (const ph of p.phases) {
      console.log(
        `  ${(ph.phase + (isNaN(ph.atMs) ? "" : ` @${ph.atMs.toFixed(0)}`)).padEnd(40)} ${
          String(ph.scripts).padStart(7)
        } ${(ph.bytes / 1024).toFixed(0).padStart(5)} ${String(ph.functions).padStart(5)}`,
      );
    }
  }
}
