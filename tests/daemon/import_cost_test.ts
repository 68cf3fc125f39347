/**
 * What the per-call path loads. main.ts loads nothing at start (`deno run` would read and parse
 * every module reachable through string-literal imports, ≈ 12 ms for 147 modules): each mode
 * loads its own modules by path. The forwarder path loads three import-free modules. Nothing the
 * plugin mode loads (main.ts's modules except the `manifold <tool>` commands in lib/cli/, and
 * everything reachable from them) reaches `npm:prom-client` or lib/daemon/metrics.ts: importing
 * prom-client costs ≈ 50–100 ms and ≈ 20 MiB RSS on this machine kind.
 */

import assert from "node:assert/strict";

interface Dep {
  specifier: string;
  code?: { specifier: string };
  type?: { specifier: string };
  isDynamic?: boolean;
}
interface Mod {
  specifier: string;
  dependencies?: Dep[];
}

const ROOT = new URL("../../", import.meta.url);

/** `deno info --json` of one module. */
async function info(path: string): Promise<{ modules: Mod[]; redirects: Record<string, string> }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", path],
    cwd: ROOT.pathname,
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
  return JSON.parse(new TextDecoder().decode(out.stdout));
}

/**
 * The modules main.ts loads by path, relative to the repository: `load<typeof import("X")>("X")`
 * calls and the `module` paths of its COMMANDS table.
 */
async function mainLoads(): Promise<string[]> {
  const text = await Deno.readTextFile(new URL("main.ts", ROOT));
  const typed = [...text.matchAll(/load<typeof import\("([^"]+)"\)>\(\s*"([^"]+)"/g)].map((m) => {
    assert.equal(m[1], m[2], "the type argument names the module loaded");
    return m[2];
  });
  const table = [...text.matchAll(/module: "([^"]+)"/g)].map((m) => m[1]);
  assert.ok(table.length >= 7, "the COMMANDS table names each subcommand's module");
  return [...new Set([...typed, ...table])];
}

Deno.test("main.ts itself loads no module at start: each mode loads its own", async () => {
  const graph = await info("main.ts");
  const main = graph.modules.find((m) => m.specifier === new URL("main.ts", ROOT).href);
  const code = (main?.dependencies ?? []).filter((d) => d.code !== undefined);
  assert.deepEqual(code.map((d) => d.specifier), []);
  const loads = await mainLoads();
  assert.ok(
    loads.includes("./lib/daemon/forward.ts") && loads.includes("./lib/multinet/plugin.ts"),
  );
  for (const path of loads) await Deno.stat(new URL(path, ROOT)); // each exists
});

Deno.test("the forwarder path loads only the import-free stdin, forward and protocol modules", async () => {
  const seen = new Set<string>();
  for (const entry of ["lib/cni/stdin.ts", "lib/daemon/forward.ts"]) {
    for (const m of (await info(entry)).modules) seen.add(m.specifier.slice(ROOT.href.length));
  }
  assert.deepEqual([...seen].sort(), [
    "lib/cni/stdin.ts",
    "lib/daemon/forward.ts",
    "lib/daemon/protocol.ts",
  ]);
});

Deno.test("the plugin path (main.ts's modules without its lib/cli tools) never loads prom-client", async () => {
  const seen = new Set<string>();
  const cli = new URL("lib/cli/", ROOT).href;
  const entries = (await mainLoads()).map((p) => new URL(p, ROOT).href).filter((s) =>
    !s.startsWith(cli)
  );
  for (const entry of entries) {
    const graph = await info(new URL(entry).pathname);
    const bySpec = new Map(graph.modules.map((m) => [m.specifier, m]));
    const stack = [entry];
    while (stack.length > 0) {
      const s = stack.pop()!;
      if (seen.has(s)) continue;
      seen.add(s);
      for (const d of bySpec.get(s)?.dependencies ?? []) {
        const target = d.code?.specifier;
        if (target === undefined) continue; // type-only
        stack.push(graph.redirects[target] ?? target);
      }
    }
  }
  assert.ok(seen.has(new URL("lib/multinet/plugin.ts", ROOT).href), "the walk reaches the plugin");
  const heavy = [...seen].filter((s) =>
    s.includes("prom-client") || s.endsWith("/lib/daemon/metrics.ts") ||
    s.endsWith("/lib/daemon/http.ts")
  );
  assert.deepEqual(heavy, []);
  // And the walk would see it: the metrics module itself does import prom-client.
  const metrics = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", "lib/daemon/http.ts"],
    cwd: ROOT.pathname,
    stdout: "piped",
  }).output();
  assert.match(new TextDecoder().decode(metrics.stdout), /npm:prom-client@15\./);
});

Deno.test("VERSION loads only the import-free lib/cni/version.ts (no zod, no dispatcher)", async () => {
  const text = await Deno.readTextFile(new URL("main.ts", ROOT));
  const branch = text.slice(text.indexOf('if (command === "VERSION")'));
  assert.ok(branch.length < text.length, "main.ts answers VERSION before loading the dispatcher");
  const first = branch.slice(0, branch.indexOf("let stdin"));
  assert.deepEqual([...first.matchAll(/load<[^>]*>\(\s*"([^"]+)"/g)].map((m) => m[1]), [
    "./lib/cni/version.ts",
  ]);
  const graph = await info("lib/cni/version.ts");
  assert.deepEqual(graph.modules.map((m) => m.specifier.slice(ROOT.href.length)), [
    "lib/cni/version.ts",
  ]);
});
