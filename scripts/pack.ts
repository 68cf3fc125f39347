/**
 * The pack: the plugin call's code as a few JavaScript chunks instead of ≈ 90 TypeScript
 * modules, built once when an image or a source bundle is made, never at call time.
 *
 * Why: a per-call ADD spends ≈ 0.1–0.2 ms on each module `deno run` resolves, reads, hashes and
 * instantiates; the same code in a handful of chunks loads ≈ 4–6 ms sooner (docs/performance.md,
 * "The pack"). What runs is the same code: the pack is `deno bundle` (esbuild) of `main.ts` with
 * code splitting, so every module is still evaluated once, when its branch is first taken, and a
 * module shared by two branches is one instance (one `CniError` class).
 *
 * How:
 * 1. The sources (`main.ts`, `lib/`, `native/`, `deno.json`, `deno.lock`) are copied into a
 *    scratch directory, where each `lazyImport<typeof import("X")>("X", import.meta.url)` and
 *    `load<typeof import("X")>("X")` call becomes `import("X")`, so the bundler sees the branch
 *    and makes it a chunk (lib/util/lazy.ts says why the sources compute their specifiers). A
 *    call site the rewrite does not recognise fails the build, and so does any other `import()`
 *    of a computed specifier (it would name a file beside the chunk, or load a second copy of a
 *    source module) and `import.meta.resolve`/`dirname`/`filename`. Any other `import.meta.url`
 *    becomes the source file's own URL, computed from the chunk's place (`pack/` sits beside
 *    `main.ts`), so a path relative to a source file still names the same file.
 * 2. `deno bundle --code-splitting --format esm --platform deno --keep-names`, every npm package
 *    of `deno.json`'s import map external (it stays in Deno's npm cache, pinned by `deno.lock`).
 *    `--keep-names`: a function or class keeps its `name` when two modules use the same one.
 * 3. In the chunks, each `import("literal")` becomes a computed specifier again, for the same
 *    reason lazyImport exists: `deno run` would otherwise load every branch's chunk up front.
 *
 * The launcher (scripts/manifold) runs `pack/main.js` for plugin calls when the tree it runs has
 * one; the CLI, the daemon and the tools run `main.ts`. The pack is a build product, like the
 * compiled binary: `scripts/image.sh` builds it into the image's `/opt/manifold/pack` (the
 * source bundle the installer copies holds it, lib/install/bundle.ts), and a development tree
 * has none, so edited sources are what runs. This script refuses to write into its own tree's
 * `pack/` for that reason (`--force` to do it anyway; then rebuild after every edit).
 *
 * Usage: `deno run -A scripts/pack.ts OUT_DIR [--force]` — OUT_DIR is replaced whole (written
 * beside it under a temporary name, then renamed). Prints the chunks' count and bytes.
 * `--tree DIR`: a runnable copy of this tree with its pack ({@link buildPackedTree}), for the
 * benchmarks (`--manifold DIR/scripts/manifold`) and scripts/test.sh.
 * Needs `deno bundle`'s esbuild (downloaded from the npm registry into DENO_DIR on first use;
 * scripts/setup.sh fetches it).
 *
 * @module
 */

import { parseArgs } from "node:util";

/** Root of the tree the pack is built from (this script's parent directory). */
const ROOT = new URL("../", import.meta.url);

/**
 * A lazy call site: `lazyImport<typeof import("X")>("Y"[, import.meta.url])`, or main.ts's `load`
 * (not a method of that name: `options.load<…>` is not matched).
 */
const LAZY_CALL =
  /(?<![.\w$])(lazyImport|load)<\s*typeof import\("([^"]+)"\)\s*>\(\s*"([^"]+)"(\s*,\s*import\.meta\.url)?\s*,?\s*\)/g;

/**
 * Files allowed a computed `import(…)` and how many: the two loaders themselves, lazyImport's
 * body and main.ts's `load` (reached in a pack only by the CLI, which runs main.ts).
 */
const COMPUTED_IMPORTS_ALLOWED: Readonly<Record<string, number>> = {
  "lib/util/lazy.ts": 1,
  "main.ts": 1,
};

/** What the sources of one pack are, and what became of them. */
export interface PackReport {
  /** Output directory (absolute). */
  outDir: string;
  /** Lazy call sites turned into `import()` for the bundler. */
  lazyCalls: number;
  /** Other `import.meta.url` uses given their source file's URL. */
  metaUrls: number;
  /** Chunks written (`*.js`), `main.js` included. */
  chunks: number;
  /** Their total size, bytes. */
  bytes: number;
}

/** Every `.ts` file under `dir` (relative to ROOT), sorted. */
async function tsFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  for await (const e of Deno.readDir(new URL(dir, ROOT))) {
    const rel = `${dir}/${e.name}`;
    if (e.isDirectory) out.push(...await tsFiles(rel));
    else if (e.isFile && e.name.endsWith(".ts")) out.push(rel);
  }
  return out.sort();
}

/**
 * Rewrites one source file for the bundler (step 1 above).
 *
 * @param rel the file's path relative to the tree's root (`lib/multinet/plugin.ts`)
 * @param text its source
 * @returns the rewritten source and the counts of each rewrite
 * @throws Error when a lazy call's type argument and specifier name different modules, a
 *   `lazyImport` of a relative specifier lacks `import.meta.url` (or a bare one has it), a
 *   `lazyImport(`/`load(` call is left that the pattern did not take, an `import(…)` of a
 *   computed specifier is left (but the loaders' own, {@link COMPUTED_IMPORTS_ALLOWED}), or an
 *   `import.meta` property other than `url` and `main` is used
 */
export function rewriteSource(
  rel: string,
  text: string,
): { text: string; lazyCalls: number; metaUrls: number } {
  let lazyCalls = 0;
  let out = text.replace(LAZY_CALL, (all, fn: string, typeOf: string, spec: string, base) => {
    if (fn === "load" && rel !== "main.ts") return all; // main.ts's loader only
    if (typeOf !== spec) {
      throw new Error(`${rel}: ${fn}<typeof import("${typeOf}")> loads "${spec}"`);
    }
    // What the call resolves against at run time must be what the bundler resolves against
    // (this file): a relative specifier with this file's URL, an import-map name without.
    const relative = spec.startsWith("./") || spec.startsWith("../");
    if (fn === "lazyImport" && relative !== (base !== undefined)) {
      throw new Error(
        `${rel}: lazyImport("${spec}") ${relative ? "without" : "with"} import.meta.url`,
      );
    }
    lazyCalls++;
    return `import(${JSON.stringify(spec)})`;
  });
  const code = out.replace(/\/\*[\s\S]*?\*\/|\/\/.*$/gm, "");
  const left = rel === "lib/util/lazy.ts" ? [] : code.match(/\blazyImport\s*[<(]/g) ?? [];
  const leftLoad = rel === "main.ts" ? (code.match(/\bload\s*<\s*typeof/g) ?? []) : [];
  if (left.length + leftLoad.length > 0) {
    throw new Error(`${rel}: a lazy call the pack cannot rewrite (${[...left, ...leftLoad][0]})`);
  }
  // Any other computed `import(…)` would resolve against its chunk in pack/ (a relative
  // specifier names no file there) or, through `import.meta.url`, load the source module
  // beside the pack's copy of it: a second instance of every module it reaches (another
  // `CniError` class, another module-level cache). Only the two loaders' own bodies may.
  const computed = code.match(/\bimport\s*\(\s*(?!["'\s])/g)?.length ?? 0;
  if (computed > (COMPUTED_IMPORTS_ALLOWED[rel] ?? 0)) {
    throw new Error(
      `${rel}: an import() of a computed specifier the pack cannot follow; load the module ` +
        "through lazyImport (lib/util/lazy.ts) with a literal specifier",
    );
  }
  // `import.meta.url` is rewritten below; the others would name the chunk, not the source file.
  const meta = code.match(/\bimport\.meta\.(?!url\b|main\b)[A-Za-z_$][\w$]*/);
  if (meta) throw new Error(`${rel}: ${meta[0]} names the chunk in the pack, not this file`);
  let metaUrls = 0;
  const self = JSON.stringify(`../${rel}`);
  out = out.replace(/\bimport\.meta\.url\b/g, () => {
    metaUrls++;
    return `new URL(${self}, import.meta.url).href`;
  });
  return { text: out, lazyCalls, metaUrls };
}

/**
 * Turns each literal dynamic import of a chunk into a computed one (step 3 above).
 *
 * @param text a chunk's JavaScript
 * @returns the chunk with `import("./x.js")` → `import(new URL("./x.js", import.meta.url).href)`
 *   and `import("zod")` (a package or `node:` module) → `import(String("zod"))`
 */
export function computeDynamicImports(text: string): string {
  return text.replace(
    /\bimport\(\s*"([^"]+)"\s*\)/g,
    (_all, spec: string) =>
      spec.startsWith("./") || spec.startsWith("../")
        ? `import(new URL(${JSON.stringify(spec)}, import.meta.url).href)`
        : `import(String(${JSON.stringify(spec)}))`,
  );
}

/**
 * Builds the pack of this tree's sources into `outDir` (replaced whole).
 *
 * @param outDir the pack's directory; in a runnable tree, `<tree>/pack` beside `main.ts`
 * @param opts `deno`: the Deno executable (default: this one)
 * @returns what was built ({@link PackReport})
 * @throws Error when a rewrite fails, `deno bundle` fails (its stderr in the message) or a
 *   chunk still holds a literal dynamic import
 */
export async function buildPack(
  outDir: string,
  opts: { deno?: string } = {},
): Promise<PackReport> {
  const deno = opts.deno ?? Deno.execPath();
  const scratch = await Deno.makeTempDir({ prefix: "manifold-pack-" });
  const out = outDir.replace(/\/+$/, "");
  const tmpOut = `${out}.tmp-${Deno.pid}`;
  try {
    let lazyCalls = 0;
    let metaUrls = 0;
    const files = ["main.ts", ...await tsFiles("lib"), ...await tsFiles("native")];
    for (const rel of files) {
      const r = rewriteSource(rel, await Deno.readTextFile(new URL(rel, ROOT)));
      lazyCalls += r.lazyCalls;
      metaUrls += r.metaUrls;
      const dest = `${scratch}/${rel}`;
      await Deno.mkdir(dest.slice(0, dest.lastIndexOf("/")), { recursive: true });
      await Deno.writeTextFile(dest, r.text);
    }
    const config = await Deno.readTextFile(new URL("deno.json", ROOT));
    await Deno.writeTextFile(`${scratch}/deno.json`, config);
    await Deno.copyFile(new URL("deno.lock", ROOT), `${scratch}/deno.lock`);
    const externals = Object.keys(
      (JSON.parse(config) as { imports?: Record<string, string> }).imports ?? {},
    ).flatMap((name) => ["--external", name]);
    const bundled = await new Deno.Command(deno, {
      args: [
        "bundle",
        "--quiet",
        "--code-splitting",
        "--format",
        "esm",
        "--platform",
        "deno",
        "--keep-names",
        "--frozen-lockfile",
        ...externals,
        "--outdir",
        `${scratch}/out`,
        "main.ts",
      ],
      cwd: scratch,
      stdout: "piped",
      stderr: "piped",
    }).output();
    if (!bundled.success) {
      throw new Error(`deno bundle failed: ${new TextDecoder().decode(bundled.stderr).trim()}`);
    }
    await Deno.remove(tmpOut, { recursive: true }).catch(() => {});
    await Deno.mkdir(tmpOut, { recursive: true });
    let chunks = 0;
    let bytes = 0;
    const names = (await Array.fromAsync(Deno.readDir(`${scratch}/out`)))
      .map((e) => e.name).sort();
    for (const name of names) {
      if (!name.endsWith(".js")) throw new Error(`deno bundle wrote an unexpected file: ${name}`);
      const text = computeDynamicImports(await Deno.readTextFile(`${scratch}/out/${name}`));
      if (/\bimport\(\s*["'`]/.test(text)) {
        throw new Error(`pack: ${name} still holds a literal dynamic import`);
      }
      await Deno.writeTextFile(`${tmpOut}/${name}`, text);
      chunks++;
      bytes += new TextEncoder().encode(text).length;
    }
    if (!names.includes("main.js")) throw new Error("deno bundle wrote no main.js");
    await Deno.remove(out, { recursive: true }).catch(() => {});
    await Deno.rename(tmpOut, out);
    return { outDir: out, lazyCalls, metaUrls, chunks, bytes };
  } finally {
    await Deno.remove(scratch, { recursive: true }).catch(() => {});
    await Deno.remove(tmpOut, { recursive: true }).catch(() => {});
  }
}

/**
 * Makes `dir` a runnable copy of this tree with a pack, as an image's `/opt/manifold` is: the
 * entries of a source bundle (`BUNDLE_ENTRIES`: the sources and the launcher's files) but the
 * npm cache, and `pack/`. Deno's
 * caches stay the caller's (DENO_DIR). For the benchmarks and scripts/test.sh's pass through a
 * pack.
 *
 * @param dir a directory that does not exist or is empty
 * @returns the pack's {@link PackReport}
 * @throws Error from {@link buildPack}; Deno errors of the copy
 */
export async function buildPackedTree(dir: string): Promise<PackReport> {
  const root = dir.replace(/\/+$/, "");
  await Deno.mkdir(root, { recursive: true });
  // What a source bundle holds (lib/install/bundle.ts), but the npm cache: Deno's stays in use.
  const { BUNDLE_ENTRIES } = await import("../lib/install/bundle.ts");
  const entries = BUNDLE_ENTRIES.filter((e) => e !== "deno-dir/npm");
  const cp = await new Deno.Command("cp", {
    args: ["-r", "--parents", "--", ...entries, root],
    cwd: ROOT.pathname,
    stderr: "piped",
  }).output();
  if (!cp.success) throw new Error(`copy into ${root}: ${new TextDecoder().decode(cp.stderr)}`);
  return await buildPack(`${root}/pack`);
}

/**
 * OUT_DIR as the directory it will be: absolute, `.` and `..` resolved, its parent's symbolic
 * links followed (when the parent exists), no trailing slash — so `./pack`, `scripts/../pack`
 * or a link to the tree name this tree's own pack as `pack` does.
 *
 * @param arg OUT_DIR as given, absolute or relative to the working directory
 * @returns the absolute path
 */
export async function resolveOutDir(arg: string): Promise<string> {
  const parts: string[] = [];
  for (const seg of `${arg.startsWith("/") ? "" : await Deno.realPath(".")}/${arg}`.split("/")) {
    if (seg === "..") parts.pop();
    else if (seg !== "" && seg !== ".") parts.push(seg);
  }
  const abs = `/${parts.join("/")}`;
  const slash = abs.lastIndexOf("/");
  const parent = await Deno.realPath(abs.slice(0, slash) || "/").catch(() => abs.slice(0, slash));
  return `${parent === "/" ? "" : parent}/${abs.slice(slash + 1)}`;
}

if (import.meta.main) {
  const { values, positionals } = parseArgs({
    args: Deno.args,
    allowPositionals: true,
    options: {
      force: { type: "boolean", default: false },
      tree: { type: "string" },
      help: { type: "boolean" },
    },
  });
  if (values.tree !== undefined) {
    const r = await buildPackedTree(values.tree);
    console.log(`pack: a runnable tree in ${values.tree}, ${r.chunks} chunks in its pack/`);
    Deno.exit(0);
  }
  if (values.help || positionals.length !== 1) {
    console.error(
      "usage: deno run -A scripts/pack.ts OUT_DIR [--force]   the pack of this tree into OUT_DIR\n" +
        "       deno run -A scripts/pack.ts --tree DIR          a runnable copy of this tree " +
        "with its pack (DIR new or empty)",
    );
    Deno.exit(values.help ? 0 : 2);
  }
  const outDir = await resolveOutDir(positionals[0]);
  const own = `${await Deno.realPath(ROOT)}/pack`;
  if (outDir === own && !values.force) {
    console.error(
      `pack: ${own} is this development tree's own pack, which the launcher would run instead of ` +
        "the sources you edit; build into another tree's pack/ (or pass --force and rebuild " +
        "after every edit)",
    );
    Deno.exit(2);
  }
  const r = await buildPack(outDir);
  console.log(
    `pack: ${r.chunks} chunks, ${(r.bytes / 1024).toFixed(0)} KiB in ${r.outDir} ` +
      `(${r.lazyCalls} lazy imports, ${r.metaUrls} import.meta.url rewritten)`,
  );
}
