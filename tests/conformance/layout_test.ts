/**
 * The conformance suite's module graph has no circle (issue 23 §1: harness.ts ⇄ pod_run.ts):
 * every `import`/`export … from "./x.ts"` between conformance/ files, type-only ones included,
 * points one way. No permissions beyond reading the folder.
 */

import assert from "node:assert/strict";

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

/** The first circle found, as a path `a → b → … → a`; undefined when there is none. */
function circle(g: Map<string, string[]>): string[] | undefined {
  const state = new Map<string, "open" | "done">();
  const path: string[] = [];
  const visit = (n: string): string[] | undefined => {
    if (state.get(n) === "done") return undefined;
    if (state.get(n) === "open") return [...path.slice(path.indexOf(n)), n];
    state.set(n, "open");
    path.push(n);
    for (const d of g.get(n) ?? []) {
      const c = visit(d);
      if (c) return c;
    }
    path.pop();
    state.set(n, "done");
    return undefined;
  };
  for (const n of [...g.keys()].sort()) {
    const c = visit(n);
    if (c) return c;
  }
  return undefined;
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
