/**
 * The house's shape (STYLE.md "Layout", issue 31 §1): no folder of lib/ is a hall of more than 25
 * files (a shared file-name prefix is a room waiting to be made), and lib/'s module graph has no
 * circle — every static `import`/`export … from` between lib/ files, type-only ones included,
 * points one way. Reads lib/ only.
 */

import assert from "node:assert/strict";
import { importCircle as circle } from "./support/import_graph.ts";
import { dirname, join, normalize, relative } from "node:path";

const LIB = new URL("../lib/", import.meta.url).pathname;

/** Every .ts file under `dir` (absolute paths), depth first. */
async function tsFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  for await (const e of Deno.readDir(dir)) {
    const p = join(dir, e.name);
    if (e.isDirectory) out.push(...await tsFiles(p));
    else if (e.isFile && e.name.endsWith(".ts")) out.push(p);
  }
  return out;
}

/** lib/ file (relative to lib/) → the lib/ files it imports statically (type-only included). */
async function graph(): Promise<Map<string, string[]>> {
  const g = new Map<string, string[]>();
  for (const f of await tsFiles(LIB)) {
    const text = await Deno.readTextFile(f);
    const deps = [
      ...text.matchAll(/^\s*(?:import|export)\b[^;]*?\bfrom\s+"(\.{1,2}\/[^"]+\.ts)"/gms),
    ]
      .map((m) => relative(LIB, normalize(join(dirname(f), m[1]))))
      .filter((p) => !p.startsWith(".."));
    g.set(relative(LIB, f), [...new Set(deps)]);
  }
  return g;
}

Deno.test("circle finder: finds a circle through a type-only import across folders", () => {
  const g = new Map([["a/x.ts", ["b/y.ts"]], ["b/y.ts", ["a/x.ts"]], ["c.ts", ["a/x.ts"]]]);
  assert.deepEqual(circle(g), ["a/x.ts", "b/y.ts", "a/x.ts"]);
  assert.equal(circle(new Map([["a.ts", ["b.ts"]], ["b.ts", []]])), undefined);
});

Deno.test("lib/: no import circle (type-only imports count)", async () => {
  const g = await graph();
  assert.ok(g.has("daemon/daemon.ts") && g.has("multinet/mod.ts"), "lib/ not found");
  assert.ok(
    g.get("daemon/daemon.ts")!.includes("daemon/hotplug/mod.ts"),
    "the graph misses a known edge (daemon.ts → hotplug/mod.ts)",
  );
  const c = circle(g);
  assert.equal(c, undefined, `import circle: ${c?.join(" → ")}`);
});

Deno.test("lib/: no folder holds more than 25 files", async () => {
  const halls: string[] = [];
  const walk = async (dir: string) => {
    let files = 0;
    for await (const e of Deno.readDir(dir)) {
      if (e.isDirectory) await walk(join(dir, e.name));
      else files++;
    }
    if (files > 25) halls.push(`${relative(LIB, dir) || "."}: ${files} files`);
  };
  await walk(LIB);
  assert.deepEqual(halls, [], `halls over 25 files: ${halls.join(", ")}`);
});
