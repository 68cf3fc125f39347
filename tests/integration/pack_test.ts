/**
 * Issue 30: the pack (scripts/pack.ts), the plugin call's code in chunks that the launcher runs
 * for plugin calls when its tree has one (an image or a source bundle).
 *
 * Checked: the source rewrites (each lazy call becomes a plain `import()` for the bundler, a
 * mismatched or unrecognised one fails the build, `import.meta.url` keeps naming the source
 * file); the built pack (every chunk's static imports exist, no literal dynamic import is left,
 * two builds are byte for byte the same, as the image's digest needs); and real calls through a
 * tree holding a pack, against the same calls through the sources: VERSION, a CLI command (which
 * still runs `main.ts`), an ADD, CHECK and DEL of a pod with two NADs (real delegates in a
 * scratch netns, the API stand-in) and an ADD refused for a bad annotation give the same
 * answers, and the packed calls load only the pack's chunks, fewer files than the sources.
 * The whole plugin suite also runs through a packed tree: scripts/test.sh (MANIFOLD_TEST_PLUGIN).
 */

import assert from "node:assert/strict";
import {
  buildPack,
  buildPackedTree,
  computeDynamicImports,
  rewriteSource,
} from "../../scripts/pack.ts";
import { isRoot } from "../support/netns.ts";
import { world } from "../support/world.ts";
import { SELECTION } from "../../scripts/bench_support.ts";

const ROOT = new URL("../../", import.meta.url).pathname.replace(/\/$/, "");

/** A runnable copy of this tree (what an image holds) with a pack built into it. */
async function packedTree(): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "manifold-packed-" });
  await buildPackedTree(dir);
  return dir;
}

/** Files of this project Deno fetched (`DENO_LOG=debug`), relative to `tree`. */
function fetchedFiles(stderr: string, tree: string): string[] {
  const out = new Set<string>();
  for (const m of stderr.matchAll(/fetch_no_follow - specifier: file:\/\/(\S+)/g)) {
    if (m[1].startsWith(`${tree}/`)) out.add(m[1].slice(tree.length + 1));
  }
  return [...out].sort();
}

Deno.test("pack: lazy calls become imports, import.meta.url keeps naming its source file", () => {
  const src = [
    'const a = await lazyImport<typeof import("./verbs/add.ts")>("./verbs/add.ts", import.meta.url);',
    "const b = await lazyImport<",
    '  typeof import("zod")',
    '>("zod");',
    "const here = new URL('./x.json', import.meta.url);",
  ].join("\n");
  const r = rewriteSource("lib/multinet/plugin.ts", src);
  assert.equal(r.lazyCalls, 2);
  assert.equal(r.metaUrls, 1);
  assert.match(r.text, /const a = await import\("\.\/verbs\/add\.ts"\);/);
  assert.match(r.text, /const b = await import\("zod"\);/);
  // From any chunk in <tree>/pack/, the rewritten URL is the source file's own.
  const rewritten = r.text.match(/new URL\("(\.\.\/[^"]+)", import\.meta\.url\)/)![1];
  assert.equal(
    new URL(rewritten, "file:///t/pack/chunk-ABC.js").href,
    "file:///t/lib/multinet/plugin.ts",
  );
  assert.throws(
    () =>
      rewriteSource(
        "lib/x.ts",
        'await lazyImport<typeof import("./a.ts")>("./b.ts", import.meta.url);',
      ),
    /loads "\.\/b\.ts"/,
  );
  assert.throws(
    () => rewriteSource("lib/x.ts", "await lazyImport(spec, import.meta.url);"),
    /cannot rewrite/,
  );
  // main.ts's own `load` is rewritten like lazyImport; its definition is left alone.
  const main = rewriteSource(
    "main.ts",
    'export function load<T>(path: string): Promise<T> {\n  return import(new URL(path, import.meta.url).href);\n}\nawait load<typeof import("./lib/cli/entry.ts")>("./lib/cli/entry.ts");',
  );
  assert.equal(main.lazyCalls, 1);
  assert.match(main.text, /await import\("\.\/lib\/cli\/entry\.ts"\);/);
  assert.match(main.text, /new URL\(path, new URL\("\.\.\/main\.ts", import\.meta\.url\)\.href\)/);
});

Deno.test("pack: an import() of a computed specifier, or import.meta.resolve, fails the build", () => {
  // Not a lazy call: in a chunk it would resolve against pack/, or (through import.meta.url)
  // load the source module beside the pack's copy, a second CniError class.
  for (
    const src of [
      "const m = await import(spec);",
      "const m = await import(new URL(spec, import.meta.url).href);",
      "const m = await import( `./verbs/${verb}.ts`);",
      'const p = import.meta.resolve("./x.ts");',
      "const d = import.meta.dirname;",
    ]
  ) {
    assert.throws(() => rewriteSource("lib/multinet/plugin.ts", src), /pack|chunk/, src);
  }
  // The loaders' own bodies, literal imports and type references stay allowed.
  rewriteSource(
    "lib/util/lazy.ts",
    "return import(base === undefined ? specifier : new URL(specifier, base).href);",
  );
  assert.throws(() =>
    rewriteSource(
      "lib/util/lazy.ts",
      "return import(a);\nreturn import(b);",
    ), /computed/);
  const ok = rewriteSource(
    "lib/k8s/pinned_tls.ts",
    'tlsModule ??= import("node:tls");\nlet k: import("../k8s/client.ts").KubeClient;\n' +
      "// import(spec) in a comment\nif (import.meta.main) {}",
  );
  assert.equal(ok.lazyCalls, 0);
});

Deno.test("pack: OUT_DIR naming the tree's own pack/ in any spelling is refused without --force", async () => {
  // A development tree's own pack would run instead of the sources being edited.
  const tmp = await Deno.makeTempDir({ prefix: "manifold-pack-own-" });
  try {
    const tree = `${tmp}/tree`;
    await Deno.mkdir(`${tree}/scripts`, { recursive: true });
    await Deno.copyFile(`${ROOT}/scripts/pack.ts`, `${tree}/scripts/pack.ts`);
    await Deno.symlink(tree, `${tmp}/link`);
    for (const arg of ["pack", "./pack", "pack/", "scripts/../pack", `${tmp}/link/pack`]) {
      const o = await new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", "--quiet", "scripts/pack.ts", arg],
        cwd: tree,
        stdout: "piped",
        stderr: "piped",
      }).output();
      const stderr = new TextDecoder().decode(o.stderr);
      assert.equal(o.code, 2, `${arg}: exit ${o.code}: ${stderr.slice(-300)}`);
      assert.match(stderr, /own pack/, arg);
      assert.ok(!(await Deno.stat(`${tree}/pack`).then(() => true, () => false)), arg);
    }
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
});

Deno.test("pack: only main.ts's own load() and well-based lazyImport calls are rewritten", () => {
  // Another object's `load` method is not main.ts's loader: left alone (it was made into
  // `options.import(…)`).
  const other = 'await options.load<typeof import("./lib/cli/x.ts")>("./lib/cli/x.ts");';
  assert.equal(rewriteSource("lib/cli/entry.ts", other).text, other);
  assert.equal(rewriteSource("lib/cli/entry.ts", other).lazyCalls, 0);
  // A relative specifier without the caller's URL resolves against lib/util/ under `deno run`
  // but against the caller in the pack; a bare name with it names a file: both refused.
  assert.throws(
    () => rewriteSource("lib/x.ts", 'await lazyImport<typeof import("./a.ts")>("./a.ts");'),
    /without import\.meta\.url/,
  );
  assert.throws(
    () =>
      rewriteSource("lib/x.ts", 'await lazyImport<typeof import("zod")>("zod", import.meta.url);'),
    /with import\.meta\.url/,
  );
});

Deno.test("pack: chunks' dynamic imports become computed specifiers", () => {
  const js = [
    'import { a } from "./chunk-A.js";',
    'import { z } from "zod";',
    'const m = await import("./add-X.js");',
    'const y = await import("yaml");',
    'const t = await import("node:tls");',
  ].join("\n");
  const out = computeDynamicImports(js);
  assert.match(out, /import \{ a \} from "\.\/chunk-A\.js";/);
  assert.match(out, /import \{ z \} from "zod";/);
  assert.match(out, /import\(new URL\("\.\/add-X\.js", import\.meta\.url\)\.href\)/);
  assert.match(out, /import\(String\("yaml"\)\)/);
  assert.match(out, /import\(String\("node:tls"\)\)/);
  assert.doesNotMatch(out, /\bimport\(\s*"/);
});

Deno.test({
  name: "pack: this tree's pack is whole, reproducible, and runs VERSION; the CLI runs main.ts",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const tree = await packedTree();
    try {
      const names = [...Deno.readDirSync(`${tree}/pack`)].map((e) => e.name).sort();
      assert.ok(names.includes("main.js"));
      assert.ok(names.length > 10, `${names.length} chunks`);
      for (const name of names) {
        const text = await Deno.readTextFile(`${tree}/pack/${name}`);
        assert.doesNotMatch(text, /\bimport\(\s*["'`]/, `${name}: a literal dynamic import`);
        for (const m of text.matchAll(/(?:from|import)\s*"(\.\/[^"]+)"/g)) {
          assert.ok(names.includes(m[1].slice(2)), `${name} imports a missing ${m[1]}`);
        }
        for (const m of text.matchAll(/new URL\("(\.[^"]+\.js)", import\.meta\.url\)/g)) {
          assert.ok(names.includes(m[1].slice(2)), `${name} loads a missing ${m[1]}`);
        }
      }
      // Built again: the same names and bytes (the image's digest depends on it).
      const again = await Deno.makeTempDir({ prefix: "manifold-pack-again-" });
      try {
        await buildPack(`${again}/pack`);
        const names2 = [...Deno.readDirSync(`${again}/pack`)].map((e) => e.name).sort();
        assert.deepEqual(names2, names);
        for (const name of names) {
          assert.equal(
            await Deno.readTextFile(`${again}/pack/${name}`),
            await Deno.readTextFile(`${tree}/pack/${name}`),
            `${name} differs between two builds`,
          );
        }
      } finally {
        await Deno.remove(again, { recursive: true });
      }
      const run = async (launcher: string, args: string[], env: Record<string, string>) => {
        const o = await new Deno.Command(launcher, {
          args,
          env: { ...env, DENO_LOG: "debug" },
          stdin: "null",
          stdout: "piped",
          stderr: "piped",
        }).output();
        const stderr = new TextDecoder().decode(o.stderr);
        return {
          code: o.code,
          stdout: new TextDecoder().decode(o.stdout),
          main: stderr.match(/main_module (\S+)/)?.[1],
        };
      };
      const packed = await run(`${tree}/scripts/manifold`, [], { CNI_COMMAND: "VERSION" });
      const source = await run(`${ROOT}/scripts/manifold`, [], { CNI_COMMAND: "VERSION" });
      assert.equal(packed.code, 0);
      assert.equal(packed.stdout, source.stdout);
      assert.equal(packed.main, `file://${tree}/pack/main.js`);
      assert.equal(source.main, `file://${ROOT}/main.ts`);
      const cli = await run(`${tree}/scripts/manifold`, ["--version"], {});
      assert.equal(cli.code, 0);
      assert.equal(cli.main, `file://${tree}/main.ts`);
      assert.equal(cli.stdout, (await run(`${ROOT}/scripts/manifold`, ["--version"], {})).stdout);
    } finally {
      await Deno.remove(tree, { recursive: true });
    }
  },
});

Deno.test({
  name: "pack: a plugin ADD, CHECK and DEL through a packed tree answer as the sources do, " +
    "loading only the pack's chunks",
  ignore: !isRoot(),
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const tree = await packedTree();
    const w = await world({
      annotations: { "k8s.v1.cni.cncf.io/networks": JSON.stringify(SELECTION) },
    });
    try {
      const packed = `${tree}/scripts/manifold`;
      const results: Record<string, unknown>[] = [];
      const counts: Record<string, number> = {};
      // This tree's own launcher, also when MANIFOLD_TEST_PLUGIN names another (scripts/test.sh).
      const source = `${ROOT}/scripts/manifold`;
      for (const [label, plugin, dir] of [["source", source, ROOT], ["pack", packed, tree]]) {
        const add = await w.call("ADD", { plugin, env: { DENO_LOG: "debug" } });
        assert.equal(add.code, 0, `${label} ADD: ${add.stdout} ${add.stderr.slice(-1500)}`);
        const files = fetchedFiles(add.stderr, dir!);
        counts[label!] = files.length;
        if (label === "pack") {
          assert.deepEqual(
            files.filter((f) => !f.startsWith("pack/")),
            [],
            "pack ADD read sources",
          );
        } else {
          assert.ok(files.includes("lib/multinet/verbs/add.ts"));
        }
        const result = JSON.parse(add.stdout);
        // Addresses (host-local) and host-side veth names (random) may differ between two ADDs:
        // compare the rest.
        results.push({
          cniVersion: result.cniVersion,
          interfaces: result.interfaces?.map((i: { name: string; sandbox?: string }) => ({
            name: i.sandbox || !i.name.startsWith("veth") ? i.name : "veth…",
            sandbox: i.sandbox ?? null,
          })),
          ips: result.ips?.length,
        });
        const check = await w.call("CHECK", { plugin, config: { ...w.conf, prevResult: result } });
        assert.equal(check.code, 0, `${label} CHECK: ${check.stdout} ${check.stderr.slice(-1500)}`);
        const del = await w.call("DEL", { plugin, env: { DENO_LOG: "debug" } });
        assert.equal(del.code, 0, `${label} DEL: ${del.stdout} ${del.stderr.slice(-1500)}`);
        if (label === "pack") {
          assert.deepEqual(
            fetchedFiles(del.stderr, dir!).filter((f) => !f.startsWith("pack/")),
            [],
            "pack DEL read sources",
          );
        }
      }
      assert.deepEqual(results[1], results[0]);
      assert.ok(counts.pack < counts.source, JSON.stringify(counts));
      console.log(`ADD files fetched: sources ${counts.source}, pack ${counts.pack}`);

      // Refused input: the same CNI error from both.
      const bad = { "k8s.v1.cni.cncf.io/networks": "[{" };
      const errors: string[] = [];
      for (const plugin of [source, packed]) {
        const r = await w.call("ADD", {
          plugin,
          config: {
            ...w.conf,
            capabilities: { "io.kubernetes.cri.pod-annotations": true },
            runtimeConfig: { "io.kubernetes.cri.pod-annotations": bad },
          },
        });
        assert.notEqual(r.code, 0, r.stdout);
        const e = JSON.parse(r.stdout);
        assert.ok(typeof e.code === "number" && e.msg, r.stdout);
        errors.push(r.stdout);
      }
      assert.equal(errors[1], errors[0]);
    } finally {
      await w.api.stop();
      await w.scratch.cleanup();
      await Deno.remove(tree, { recursive: true });
    }
  },
});
