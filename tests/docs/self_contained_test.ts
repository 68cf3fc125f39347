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
const OUTSIDE =
  /\.\.\/shared\b|\/work\/(?:shared|main|\.library)\b|\bSTYLE\.md\b|\bmultus-behaviour\.md\b/;

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
  // The house style and the Multus notes live beside the project, not in it.
  assert.ok(OUTSIDE.test('retries are bounded (STYLE.md "Trust")'));
  assert.ok(OUTSIDE.test("the same meaning (multus-behaviour.md b.1)"));
  assert.ok(!OUTSIDE.test("docs/multus.md maps them"));
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

/** README.md and every page of docs/, read once. */
function pages(): Array<{ file: string; text: string }> {
  return [join(ROOT, "README.md"), ...walk(join(ROOT, "docs"))]
    .filter((f) => f.endsWith(".md"))
    .map((f) => ({ file: relative(ROOT, f), text: Deno.readTextFileSync(f) }));
}

/**
 * Every path of the checkout and every file name in it (a page may name a file by its name);
 * symbolic links are named, not followed (test fixtures hold sysfs-like loops).
 */
function checkoutNames(): Set<string> {
  const names = new Set<string>();
  const visit = (path: string) => {
    const rel = relative(ROOT, path);
    names.add(rel);
    names.add(rel.slice(rel.lastIndexOf("/") + 1));
    if (Deno.lstatSync(path).isDirectory) {
      for (const e of Deno.readDirSync(path)) visit(join(path, e.name));
    }
  };
  for (const top of [...USER_FACING, "tests", ".ci"]) visit(join(ROOT, top));
  return names;
}

Deno.test("fresh clone: every document README or docs/ names in backticks is in the checkout", () => {
  const names = checkoutNames();
  const missing: string[] = [];
  for (const { file, text } of pages()) {
    for (const m of text.matchAll(/`([^`\s]+\.(?:md|txt))`/g)) {
      const name = m[1].replace(/^\.\//, "");
      const besides = relative(ROOT, join(ROOT, file, "..", name));
      if (!names.has(name) && !names.has(besides)) missing.push(`${file}: ${m[1]}`);
    }
  }
  assert.deepEqual(missing, []);
});

/**
 * The specs a page cites, each with the upstream document a reader can open: a page that cites one
 * links it, inline or by a reference definition (the KEP also through docs/kep-3698.md, which links
 * it upstream).
 */
const SPECS = [
  {
    cites: /\bNPWG\b/,
    target: String.raw`https://github\.com/k8snetworkplumbingwg/multi-net-spec\b`,
  },
  {
    cites: /\bCNI (?:§|spec\b|specification\b)/,
    target: String.raw`https://github\.com/containernetworking/cni/blob/[^/\s)]+/SPEC\.md`,
  },
  {
    cites: /\bKEP\b/,
    target: String
      .raw`(?:https://github\.com/kubernetes/enhancements/\S*3698|(?:docs/)?kep-3698\.md)`,
  },
].map(({ cites, target }) => ({
  cites,
  /** An inline link `[text](target…)` or a reference definition `[id]: target…`. */
  link: new RegExp(String.raw`\]\(${target}|^\[[^\]]+\]: ${target}`, "m"),
}));

Deno.test("fresh clone: a page that cites the NPWG spec, the CNI spec or the KEP links it upstream", () => {
  const unlinked: string[] = [];
  for (const { file, text } of pages()) {
    for (const spec of SPECS) {
      if (spec.cites.test(text) && !spec.link.test(text)) {
        unlinked.push(`${file}: ${spec.cites.source}`);
      }
    }
  }
  assert.deepEqual(unlinked, []);
});
