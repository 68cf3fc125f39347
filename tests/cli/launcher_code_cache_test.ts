/**
 * scripts/manifold loads V8's code cache ($DENO_DIR/v8_code_cache_v2) only from a DENO_DIR that
 * nobody but its owner could have written: every path from / to it and the cache files are no
 * symbolic links, not writable by group or others, and owned by root or the caller. Otherwise it
 * runs with `--no-code-cache`, which neither reads nor writes the cache. Through the real
 * launcher (`manifold --version`, no npm module needed), each DENO_DIR a fresh 0700 directory
 * under $HOME.
 */

import assert from "node:assert/strict";
import { MANIFOLD } from "../support/plugin.ts";

const PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
const CACHE = "v8_code_cache_v2";
const HOME = Deno.env.get("HOME") ?? "";

/** True when `path` and every directory above it are writable by their owner only. */
function ownerOnly(path: string): boolean {
  for (let p = path; p !== ""; p = p.slice(0, p.lastIndexOf("/"))) {
    const st = Deno.lstatSync(p);
    if (st.isSymlink || (st.mode! & 0o022) !== 0) return false;
  }
  return (Deno.lstatSync("/").mode! & 0o022) === 0;
}

const ignore = !HOME.startsWith("/") || !ownerOnly(HOME);
if (ignore) {
  console.log("launcher code cache tests skipped: $HOME is not writable by its owner only");
}

/** `manifold --version` with `DENO_DIR`; returns its exit code. */
async function version(denoDir: string): Promise<number> {
  const out = await new Deno.Command(MANIFOLD, {
    args: ["--version"],
    clearEnv: true,
    env: { PATH, HOME, DENO_DIR: denoDir },
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  return out.code;
}

/** Runs `fn` with a fresh 0700 directory under $HOME, removed afterwards. */
async function withDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ dir: HOME, prefix: "mf-deno-dir-" });
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

const exists = (p: string) => {
  try {
    Deno.lstatSync(p);
    return true;
  } catch {
    return false;
  }
};

Deno.test({
  name: "launcher: a DENO_DIR only its owner can write gets the code cache",
  ignore,
  fn: () =>
    withDir(async (dir) => {
      await version(dir);
      assert.ok(exists(`${dir}/${CACHE}`), "the code cache was written");
    }),
});

Deno.test({
  name: "launcher: a DENO_DIR others can write gets no code cache",
  ignore,
  fn: () =>
    withDir(async (dir) => {
      for (const mode of [0o777, 0o770]) {
        await Deno.chmod(dir, mode);
        await version(dir);
        assert.ok(!exists(`${dir}/${CACHE}`), `mode ${mode.toString(8)}: no code cache`);
      }
    }),
});

Deno.test({
  name: "launcher: a DENO_DIR through a symbolic link gets no code cache",
  ignore,
  fn: () =>
    withDir(async (dir) => {
      await Deno.mkdir(`${dir}/real`, { mode: 0o700 });
      await Deno.symlink(`${dir}/real`, `${dir}/link`);
      await version(`${dir}/link`);
      assert.ok(!exists(`${dir}/real/${CACHE}`), "no code cache behind the link");
    }),
});

Deno.test({
  name: "launcher: a cache file others can write (or a link) is not loaded",
  ignore,
  fn: () =>
    withDir(async (dir) => {
      // A 0-byte file is an empty SQLite database: Deno would fill it.
      await Deno.writeFile(`${dir}/${CACHE}`, new Uint8Array());
      await Deno.chmod(`${dir}/${CACHE}`, 0o666);
      await version(dir);
      assert.equal(Deno.statSync(`${dir}/${CACHE}`).size, 0, "group/other-writable file unused");
      await Deno.remove(`${dir}/${CACHE}`);
      await Deno.mkdir(`${dir}/elsewhere`, { mode: 0o700 });
      await Deno.writeFile(`${dir}/elsewhere/db`, new Uint8Array(), { mode: 0o600 });
      await Deno.symlink(`${dir}/elsewhere/db`, `${dir}/${CACHE}`);
      await version(dir);
      assert.equal(Deno.statSync(`${dir}/elsewhere/db`).size, 0, "linked file unused");
    }),
});

Deno.test({
  name: "launcher: MANIFOLD_CODE_CACHE=0 turns the code cache off",
  ignore,
  fn: () =>
    withDir(async (dir) => {
      const out = await new Deno.Command(MANIFOLD, {
        args: ["--version"],
        clearEnv: true,
        env: { PATH, HOME, DENO_DIR: dir, MANIFOLD_CODE_CACHE: "0" },
        stdin: "null",
        stdout: "null",
        stderr: "null",
      }).output();
      assert.equal(out.code, 0);
      assert.ok(!exists(`${dir}/${CACHE}`));
    }),
});

/** The arguments scripts/manifold gives deno, through a stand-in `MANIFOLD_DENO` that prints them. */
async function launcherArgs(
  dir: string,
  args: string[],
  env: Record<string, string>,
): Promise<string> {
  const fake = `${dir}/fake-deno`;
  await Deno.writeTextFile(fake, '#!/bin/sh\nprintf "%s\\n" "$@"\n', { mode: 0o700 });
  const out = await new Deno.Command(MANIFOLD, {
    args,
    clearEnv: true,
    env: { PATH, HOME, DENO_DIR: dir, MANIFOLD_DENO: fake, ...env },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  return new TextDecoder().decode(out.stdout);
}

Deno.test({
  name:
    "launcher: a plugin call runs V8's interpreter only (and compiles eagerly with the cache); " +
    "the tools and the daemon keep every tier",
  ignore,
  fn: () =>
    withDir(async (dir) => {
      const tiersOff = "--v8-flags=--no-opt,--no-maglev,--no-sparkplug";
      for (const command of ["ADD", "DEL", "VERSION"]) {
        const argv = (await launcherArgs(dir, [], { CNI_COMMAND: command })).split("\n");
        assert.ok(argv.includes(tiersOff), `${command}: ${argv.join(" ")}`);
      }
      // With a cache the launcher vouches for, a plugin call also compiles every function.
      await Deno.writeFile(`${dir}/${CACHE}`, new Uint8Array(), { mode: 0o600 });
      const add = (await launcherArgs(dir, [], { CNI_COMMAND: "ADD" })).split("\n");
      assert.ok(add.includes("--v8-flags=--no-lazy"), add.join(" "));
      for (const args of [["--version"], ["daemon", "--help"]]) {
        const argv = await launcherArgs(dir, args, {});
        assert.ok(!argv.includes("--no-opt"), `${args.join(" ")}: ${argv}`);
        assert.ok(!argv.includes("--no-lazy"), `${args.join(" ")}: ${argv}`);
      }
    }),
});

Deno.test({
  name: "launcher: MANIFOLD_CODE_CACHE=vouched (the installed launcher's) skips the check, " +
    "for an absolute DENO_DIR only; =0 still turns the cache off",
  ignore,
  fn: () =>
    withDir(async (dir) => {
      // A DENO_DIR the check refuses (group-writable): the cache is off unless vouched for.
      const denoDir = `${dir}/deno-dir`;
      await Deno.mkdir(denoDir);
      await Deno.chmod(denoDir, 0o770);
      const args = async (env: Record<string, string>) =>
        (await launcherArgs(dir, [], { CNI_COMMAND: "ADD", DENO_DIR: denoDir, ...env }))
          .split("\n");
      assert.ok((await args({})).includes("--no-code-cache"));
      const vouched = await args({ MANIFOLD_CODE_CACHE: "vouched" });
      assert.ok(!vouched.includes("--no-code-cache"), vouched.join(" "));
      assert.ok(vouched.includes("--v8-flags=--no-lazy"), vouched.join(" "));
      assert.ok(
        (await args({ MANIFOLD_CODE_CACHE: "vouched", DENO_DIR: "relative/deno-dir" }))
          .includes("--no-code-cache"),
      );
      assert.ok((await args({ MANIFOLD_CODE_CACHE: "0" })).includes("--no-code-cache"));
    }),
});
