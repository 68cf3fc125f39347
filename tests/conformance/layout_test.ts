/**
 * The conformance suite's module graph has no circle (issue 23 §1: harness.ts ⇄ pod_run.ts):
 * every `import`/`export … from "./x.ts"` between conformance/ files, type-only ones included,
 * points one way. No permissions beyond reading the folder.
 */

import assert from "node:assert/strict";
import { importCircle as circle } from "../support/import_graph.ts";

const DIR = new URL("../../conformance/", import.meta.url);

/** conformance/ file → the conformance/ files it imports (static, type-only included). */
async function graph(): Promise<Map<string, string[]>> {
  const g = new Map<string, string[]>();
  for await (const e of Deno.readDir(DIR)) {
    if (!e.isFile || !e.name.endsWith(".ts")) continue;
    const text = await Deno.readTextFile(new URL(e.name, DIR));
    const deps = [...text.matchAll(/\bfrom\s+"\.\/([\w.-]+\.ts)"/g)].map((m) => m[1]);
    g.set(e.name, [...new Set(deps)]);
  }
  return g;
}

Deno.test("circle finder: finds a two-file circle through a type-only import", () => {
  const g = new Map([["a.ts", ["b.ts"]], ["b.ts", ["a.ts"]], ["c.ts", ["a.ts"]]]);
  assert.deepEqual(circle(g), ["a.ts", "b.ts", "a.ts"]);
  assert.equal(circle(new Map([["a.ts", ["b.ts"]], ["b.ts", []]])), undefined);
});

Deno.test("conformance/: no import circle (type-only imports count)", async () => {
  const g = await graph();
  assert.ok(g.has("harness.ts") && g.has("pod_run.ts"), "conformance/ not found");
  const c = circle(g);
  assert.equal(c, undefined, `import circle: ${c?.join(" → ")}`);
});
