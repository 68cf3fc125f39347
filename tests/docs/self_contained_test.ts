/**
 * A fresh clone needs nothing beside it (issue 31 §4): no file a user reads or runs — README,
 * docs/, deploy/, scripts/, the sources — names the project's build environment (`../shared`,
 * `/work/…`), and no Markdown link leaves the repository. Reads the checkout only.
 */

import assert from "node:assert/strict";
import { join, relative } from "node:path";

const ROOT = new URL("../../", import.meta.url).pathname;
/** What a user reads or runs: top-level files and folders (tests/ and .ci/ are the project's own). */
const USER_FACING = [
  "README.md",
  "Containerfile",
  "deno.json",
  "main.ts",
  "docs",
  "deploy",
  "scripts",
  "lib",
  "native",
  "conformance",
];
/** Names of the project's own build environment, which a clone does not have. */
const OUTSIDE = /\.\.\/shared\b|\/work\/(?:shared|main|\.library)\b/;

function walk(path: string): string[] {
  const st = Deno.statSync(path);
  if (st.isFile) return [path];
  return [...Deno.readDirSync(path)].flatMap((e) => walk(join(path, e.name)));
}

/** Every `file:line: text` of a user-facing file that matches {@link OUTSIDE}. */
function outsideMentions(): string[] {
  const hits: string[] = [];
  for (const top of USER_FACING) {
    for (const file of walk(join(ROOT, top))) {
      const lines = Deno.readTextFileSync(file).split("\n");
      lines.forEach((l, i) => {
        if (OUTSIDE.test(l)) hits.push(`${relative(ROOT, file)}:${i + 1}: ${l.trim()}`);
      });
    }
  }
  return hits;
}

Deno.test("the pattern catches what a clone cannot follow, and only that", () => {
  assert.ok(OUTSIDE.test("see [spec](../shared/spec/x.txt)"));
  assert.ok(OUTSIDE.test("KUBE=/work/shared/kube/kube-apiserver"));
  assert.ok(!OUTSIDE.test("43 MiB of shared file pages"));
  assert.ok(!OUTSIDE.test("see ../docs/shared_keys.md"));
});

Deno.test("fresh clone: no user-facing file names ../shared or the build machine's /work", () => {
  assert.deepEqual(outsideMentions(), []);
});

Deno.test("fresh clone: no Markdown link of README or docs/ leaves the repository", () => {
  const escaping: string[] = [];
  for (const file of [join(ROOT, "README.md"), ...walk(join(ROOT, "docs"))]) {
    if (!file.endsWith(".md")) continue;
    for (const m of Deno.readTextFileSync(file).matchAll(/\]\(([^)\s#]+)[^)]*\)/g)) {
      if (/^[a-z]+:/.test(m[1])) continue;
      const target = relative(ROOT, join(file, "..", m[1]));
      if (target.startsWith("..")) escaping.push(`${relative(ROOT, file)}: ${m[1]}`);
    }
  }
  assert.deepEqual(escaping, []);
});
