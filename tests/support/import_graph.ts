/**
 * Module-graph checks for the layout tests (tests/layout_test.ts for lib/,
 * tests/conformance/layout_test.ts for conformance/): the first import circle of a graph.
 *
 * @module
 */

/**
 * The first circle found in a module graph, as a path `a → b → … → a`.
 *
 * @param g module → the modules it imports (static, type-only included)
 * @returns the circle's modules, the first repeated at the end; undefined when there is none
 */
export function importCircle(g: Map<string, string[]>): string[] | undefined {
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
