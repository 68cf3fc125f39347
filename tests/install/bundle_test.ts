/**
 * Tests of the source variant's install (lib/install/bundle.ts, launcher.ts, bundle_prune.ts,
 * source_install.ts, variant.ts): an image-built source tree (the layout scripts/image.sh
 * writes to /opt/manifold: the tree, its npm cache in deno-dir/npm, run by deno) installed by
 * the real `manifold install` process into a CNI bin dir as a bundle + launcher; the launcher
 * run by path after the tree is gone; an upgrade while the launcher is executed in a loop; old
 * bundles kept while a process runs from them; directories others can write refused.
 */

import assert from "node:assert/strict";
import {
  assertOwnedDir,
  BUNDLE_ENTRIES,
  bundleDirHost,
  bundleHash,
  installBundle,
  installSourceVariant,
  launcherBundle,
  listBundleFiles,
  pluginSource,
  pruneBundles,
  renderLauncher,
  runInstaller,
} from "../../lib/install/mod.ts";
import { fakeHost, flannelConflist } from "./fixtures.ts";

const REPO = new URL("../../", import.meta.url).pathname.replace(/\/$/, "");

/** The npm cache of the running deno (what `deno install` filled for this checkout). */
async function npmCache(): Promise<string> {
  const out = await new Deno.Command(Deno.execPath(), { args: ["info", "--json"] }).output();
  return JSON.parse(new TextDecoder().decode(out.stdout)).npmCache;
}

/**
 * An image-built source tree in `<dir>/app`, as scripts/image.sh lays out /opt/manifold: the
 * tracked source files of the bundle's entries and the npm cache in deno-dir/npm.
 */
async function imageTree(dir: string): Promise<string> {
  const app = `${dir}/app`;
  await Deno.mkdir(`${app}/scripts`, { recursive: true });
  await Deno.mkdir(`${app}/deno-dir`, { recursive: true });
  const ls = await new Deno.Command("git", {
    args: ["-C", REPO, "ls-files", "-z", "main.ts", "deno.json", "deno.lock", "lib", "native"],
  }).output();
  const files = new TextDecoder().decode(ls.stdout).split("\0").filter(Boolean);
  for (const f of files) {
    await Deno.mkdir(`${app}/${f.slice(0, f.lastIndexOf("/") + 1)}`, { recursive: true });
    await Deno.copyFile(`${REPO}/${f}`, `${app}/${f}`);
  }
  for (const s of ["manifold", "permissions", "runtime-flags"]) {
    await Deno.copyFile(`${REPO}/scripts/${s}`, `${app}/scripts/${s}`);
  }
  await Deno.chmod(`${app}/scripts/manifold`, 0o755);
  const cp = await new Deno.Command("cp", {
    args: ["-a", await npmCache(), `${app}/deno-dir/npm`],
  }).output();
  assert.ok(cp.success, new TextDecoder().decode(cp.stderr));
  return app;
}

async function run(cmd: string, args: string[], env: Record<string, string>, stdin = "") {
  const child = new Deno.Command(cmd, {
    args,
    env,
    clearEnv: true,
    stdin: stdin ? "piped" : "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (stdin) {
    const w = child.stdin.getWriter();
    // A process that exits without reading stdin closes the pipe: not this test's concern.
    await w.write(new TextEncoder().encode(stdin)).catch(() => {});
    await w.close().catch(() => {});
  }
  const out = await child.output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

/** A CNI VERSION call of `plugin`, with nothing of the caller's environment but PATH. */
function cniVersion(plugin: string) {
  return run(
    plugin,
    [],
    { PATH: "/usr/sbin:/usr/bin:/sbin:/bin", CNI_COMMAND: "VERSION" },
    '{"cniVersion":"1.0.0"}',
  );
}

async function modeOf(p: string): Promise<number> {
  return (await Deno.lstat(p)).mode! & 0o7777;
}

Deno.test({
  name: "source variant: the real `manifold install` puts bundle + launcher in the CNI bin dir; " +
    "it runs after the image tree is gone",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const dir = await Deno.makeTempDir({ prefix: "mf-bundle-" });
    try {
      const app = await imageTree(dir);
      const bin = `${dir}/host/opt/cni/bin`;
      const conf = `${dir}/host/etc/cni/net.d`;
      await Deno.mkdir(bin, { recursive: true });
      await Deno.mkdir(conf, { recursive: true });
      await Deno.writeTextFile(`${conf}/10-flannel.conflist`, JSON.stringify(flannelConflist()));
      // As in the image: deno runs scripts/manifold of the tree with DENO_DIR in it; no --binary.
      const inst = await run(`${app}/scripts/manifold`, [
        "install",
        "--once",
        "--no-kubeconfig",
        "--cni-bin-dir",
        bin,
        "--cni-conf-dir",
        conf,
      ], {
        PATH: "/usr/sbin:/usr/bin:/sbin:/bin",
        MANIFOLD_DENO: Deno.execPath(),
        DENO_DIR: `${app}/deno-dir`,
      });
      assert.equal(inst.code, 0, inst.stderr);
      assert.match(inst.stderr, /installed the plugin bundle/);

      const launcher = await Deno.readTextFile(`${bin}/manifold`);
      const bundle = launcherBundle(launcher);
      assert.ok(bundle, launcher);
      assert.match(bundle, new RegExp(`^${bin}/\\.manifold/[0-9a-f]{32}$`));
      assert.equal(await modeOf(`${bin}/manifold`), 0o755);
      assert.equal(await modeOf(`${bin}/.manifold`), 0o755);
      assert.equal(await modeOf(bundle), 0o755);
      await assertOwnedDir(bundle, Deno.uid()!);
      assert.equal((await Deno.stat(bundle)).uid, Deno.uid());
      // The bundle holds the runtime and the tree, byte for byte.
      assert.deepEqual(await Deno.readFile(`${bundle}/deno`), await Deno.readFile(Deno.execPath()));
      assert.equal(await modeOf(`${bundle}/deno`), 0o755);
      assert.deepEqual(
        await Deno.readFile(`${bundle}/lib/install/bundle.ts`),
        await Deno.readFile(`${REPO}/lib/install/bundle.ts`),
      );
      assert.ok((await Deno.stat(`${bundle}/deno-dir/npm`)).isDirectory);
      const entries = [];
      for await (const e of Deno.readDir(`${bin}/.manifold`)) entries.push(e.name);
      assert.deepEqual(entries, [bundle.slice(bundle.lastIndexOf("/") + 1)], "no temp dir left");

      // An upgrade by the real process (the compiled binary's permissions: no --allow-all, so
      // /proc is read through libc): a new bundle, the launcher switched, the old one kept for
      // the grace, and nothing the installer cannot do.
      await Deno.writeTextFile(`${app}/main.ts`, "\n// v2\n", { append: true });
      const up = await run(`${app}/scripts/manifold`, [
        "install",
        "--once",
        "--no-kubeconfig",
        "--cni-bin-dir",
        bin,
        "--cni-conf-dir",
        conf,
      ], {
        PATH: "/usr/sbin:/usr/bin:/sbin:/bin",
        MANIFOLD_DENO: Deno.execPath(),
        DENO_DIR: `${app}/deno-dir`,
      });
      assert.equal(up.code, 0, up.stderr);
      assert.doesNotMatch(up.stderr, /cannot prune|"level":"warn/, up.stderr);
      const upgraded = launcherBundle(await Deno.readTextFile(`${bin}/manifold`))!;
      assert.notEqual(upgraded, bundle);
      assert.ok((await Deno.stat(`${bundle}/deno`)).isFile, "old bundle kept for the grace");

      // The image's tree is gone (as on the host, which never had it): the launcher still runs.
      await Deno.remove(app, { recursive: true });
      const v = await cniVersion(`${bin}/manifold`);
      assert.equal(v.code, 0, v.stderr);
      assert.deepEqual(JSON.parse(v.stdout).supportedVersions.includes("1.0.0"), true);
      const ver = await run(`${bin}/manifold`, ["--version"], { PATH: "/usr/bin:/bin" });
      assert.match(ver.stdout, /^manifold /);

      // A second install of the same tree copies nothing and keeps the launcher.
      const again = await installBundle(
        { root: `${bundle}`, deno: `${bundle}/deno` },
        `${dir}/other/.manifold`,
      );
      assert.equal(
        again.name,
        bundle.slice(bundle.lastIndexOf("/") + 1),
        "same content, same name",
      );
    } finally {
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
});

Deno.test({
  name: "source variant: upgrade swaps the launcher atomically while it runs; the old bundle " +
    "stays while a process runs from it, then goes",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const dir = await Deno.makeTempDir({ prefix: "mf-bundle-" });
    let holder: Deno.ChildProcess | undefined;
    let stop = false;
    try {
      const app = await imageTree(dir);
      const bin = `${dir}/bin`;
      const conf = `${dir}/net.d`;
      await Deno.mkdir(bin);
      await Deno.mkdir(conf);
      await Deno.writeTextFile(`${conf}/10-flannel.conflist`, JSON.stringify(flannelConflist()));
      const install = (pruneGraceMs: number) =>
        runInstaller({
          cniBinDir: bin,
          cniConfDir: conf,
          bundle: { root: app, deno: Deno.execPath() },
          once: true,
          pruneGraceMs,
        });
      await install(0);
      const first = launcherBundle(await Deno.readTextFile(`${bin}/manifold`))!;

      // Calls keep coming while the launcher is replaced.
      let calls = 0;
      const failures: string[] = [];
      const caller = (async () => {
        while (!stop) {
          const r = await cniVersion(`${bin}/manifold`);
          calls++;
          if (r.code !== 0) failures.push(r.stderr || r.stdout);
        }
      })();

      // Version 2 of the tree; a process still runs from version 1.
      await Deno.writeTextFile(`${app}/main.ts`, "\n// upgraded\n", { append: true });
      holder = new Deno.Command("sh", {
        args: ["-c", "sleep 60", `${first}/scripts/manifold`],
      }).spawn();
      await install(0);
      const second = launcherBundle(await Deno.readTextFile(`${bin}/manifold`))!;
      assert.notEqual(second, first);
      assert.ok((await Deno.stat(`${first}/deno`)).isFile, "old bundle kept: a process runs it");
      // Calls started after the swap run the new bundle.
      const before = calls;
      while (calls < before + 3 && failures.length === 0) {
        await new Promise((r) => setTimeout(r, 50));
      }
      stop = true;
      await caller;
      assert.deepEqual(failures, [], `${calls} calls`);

      const prune = (graceMs: number, firstSeen = new Map<string, number>()) =>
        pruneBundles({
          bundlesDir: `${bin}/.manifold`,
          bundlesDirHost: `${bin}/.manifold`,
          cniBinDir: bin,
          graceMs,
          firstSeen,
        });
      const name = (p: string) => p.slice(p.lastIndexOf("/") + 1);
      assert.deepEqual(
        (await prune(0)).kept,
        [
          { name: name(first), why: "running" },
          { name: name(second), why: "named" },
        ].sort((a, b) => a.name < b.name ? -1 : 1),
      );
      holder.kill("SIGKILL");
      await holder.status;
      holder = undefined;
      // Unused now, but only just: kept for the grace, then removed.
      const seen = new Map<string, number>();
      assert.deepEqual((await prune(60_000, seen)).removed, []);
      assert.deepEqual((await prune(0, seen)).removed, [name(first)]);
      await assert.rejects(Deno.stat(first), Deno.errors.NotFound);
      const left = [];
      for await (const e of Deno.readDir(`${bin}/.manifold`)) left.push(e.name);
      assert.deepEqual(left, [name(second)]);
      const v = await cniVersion(`${bin}/manifold`);
      assert.equal(v.code, 0, v.stderr);
    } finally {
      stop = true;
      try {
        holder?.kill("SIGKILL");
      } catch { /* gone */ }
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
});

/** A scratch image tree installed once into `<dir>/host/opt/cni/bin` (host path /opt/cni/bin). */
interface Installed {
  dir: string;
  bin: string;
  target: { cniBinDir: string; cniBinDirHost: string; binaryName: string };
  src: { root: string; deno: string };
  first: Awaited<ReturnType<typeof installSourceVariant>>;
}

/** Runs `fn` with a fresh {@link Installed}, removed afterwards. */
async function withSourceInstall(fn: (i: Installed) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "mf-bundle-" });
  try {
    const app = await imageTree(dir);
    const bin = `${dir}/host/opt/cni/bin`;
    const target = { cniBinDir: bin, cniBinDirHost: "/opt/cni/bin", binaryName: "manifold" };
    const src = { root: app, deno: Deno.execPath() };
    const first = await installSourceVariant(src, target);
    await fn({ dir, bin, target, src, first });
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

Deno.test("source variant: the launcher names the host path, not the installer's view", async () => {
  const dir = await Deno.makeTempDir({ prefix: "mf-bundle-" });
  try {
    const app = await imageTree(dir);
    const root = `${dir}/host`;
    await Deno.mkdir(`${root}/etc/cni/net.d`, { recursive: true });
    await Deno.writeTextFile(
      `${root}/etc/cni/net.d/10-flannel.conflist`,
      JSON.stringify(flannelConflist()),
    );
    await runInstaller({
      hostRoot: root,
      bundle: { root: app, deno: Deno.execPath() },
      once: true,
    });
    const text = await Deno.readTextFile(`${root}/opt/cni/bin/manifold`);
    const bundle = launcherBundle(text)!;
    assert.match(bundle, /^\/opt\/cni\/bin\/\.manifold\/[0-9a-f]{32}$/);
    assert.ok(!text.includes(dir), text);
    assert.ok((await Deno.stat(`${root}${bundle}/scripts/manifold`)).isFile);
    // The same launcher text made non-executable is restored by the next installer run.
    await Deno.chmod(`${root}/opt/cni/bin/manifold`, 0o644);
    await runInstaller({
      hostRoot: root,
      bundle: { root: app, deno: Deno.execPath() },
      once: true,
    });
    assert.equal(await modeOf(`${root}/opt/cni/bin/manifold`), 0o755);
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
});

Deno.test("source variant: a present bundle a concurrent pruner takes before the launcher names it is copied again", async () => {
  await withSourceInstall(async ({ dir, bin, target, src, first }) => {
    // A rollback: the launcher names another bundle, so this one is unnamed and unused, and
    // an old installer (still stopping) prunes it the moment the new one found it "present".
    await Deno.writeTextFile(
      `${bin}/manifold`,
      renderLauncher(bundleDirHost("/opt/cni/bin", "f".repeat(32))),
    );
    let pruned: string[] = [];
    let calls = 0;
    const r = await installSourceVariant(src, {
      ...target,
      beforeLauncher: async () => {
        if (calls++ > 0) return;
        pruned = (await pruneBundles({
          bundlesDir: `${bin}/.manifold`,
          bundlesDirHost: "/opt/cni/bin/.manifold",
          cniBinDir: bin,
          graceMs: 0,
          firstSeen: new Map(),
          cmdlines: () => [],
        })).removed;
      },
    });
    assert.deepEqual(pruned, [first.bundleHost.split("/").at(-1)], "the pruner took the bundle");
    assert.equal(calls, 2, "copied again, then named");
    assert.equal(r.bundleHost, first.bundleHost);
    assert.equal(launcherBundle(await Deno.readTextFile(`${bin}/manifold`)), r.bundleHost);
    // The launcher names the host path; below the fake root the bundle is complete.
    assert.ok((await Deno.stat(`${dir}/host${r.bundleHost}/scripts/manifold`)).isFile);
  });
});

Deno.test("source variant: the launcher vouches for its bundle's deno-dir only once the installer checked it", async () => {
  await withSourceInstall(async ({ dir, bin, target, src, first }) => {
    // The bundle's deno, just written, is not left in the page cache (lib/install/page_cache.ts).
    const fincore = await new Deno.Command("/usr/bin/fincore", {
      args: ["-b", "-n", "-o", "RES,SIZE", `${dir}/host${first.bundleHost}/deno`],
    }).output().catch(() => undefined);
    if (fincore?.success) {
      const [res, size] = new TextDecoder().decode(fincore.stdout).trim().split(/\s+/).map(Number);
      assert.ok(res < size / 8, `the bundle's deno is resident: ${res} of ${size} bytes`);
    }
    const vouch = /^MANIFOLD_CODE_CACHE=vouched$/m;
    assert.match(await Deno.readTextFile(`${bin}/manifold`), vouch);
    // The launcher runs the bundle's scripts/manifold in its own shell (sourced): the programs
    // executed are the launcher and deno, no second shell.
    const trace = `${dir}/execve.trace`;
    // The launcher names host paths; this one names the bundle where this test put it.
    const launcher = `${dir}/launcher`;
    await Deno.writeTextFile(
      launcher,
      renderLauncher(`${dir}/host${first.bundleHost}`, { codeCacheVouched: true }),
      { mode: 0o755 },
    );
    const traced = await new Deno.Command("strace", {
      args: ["-f", "-qq", "-e", "trace=execve", "-o", trace, launcher, "--version"],
      clearEnv: true,
      env: { PATH: "/usr/bin:/bin", MANIFOLD_ROOT: "/nonexistent" },
      stdout: "piped",
      stderr: "piped",
    }).output().catch(() => undefined);
    if (traced) {
      assert.equal(traced.code, 0, new TextDecoder().decode(traced.stderr));
      assert.match(new TextDecoder().decode(traced.stdout), /^manifold /);
      const programs = [...(await Deno.readTextFile(trace)).matchAll(/execve\("([^"]+)"/g)]
        .map((m) => m[1].slice(m[1].lastIndexOf("/") + 1));
      assert.deepEqual(programs, ["launcher", "deno"], programs.join(" "));
    } else {
      console.log("bundle_test: no strace; the launcher's exec chain is not checked");
    }
    // The bundle's deno-dir made group-writable (by root, by mistake): the next run finds the
    // bundle present, and the launcher it writes leaves the check to scripts/manifold again.
    const denoDir = `${dir}/host${first.bundleHost}/deno-dir`;
    await Deno.chmod(denoDir, 0o775);
    const second = await installSourceVariant(src, target);
    assert.equal(second.bundle, "present");
    assert.equal(second.launcher, "installed");
    const text = await Deno.readTextFile(`${bin}/manifold`);
    assert.doesNotMatch(text, vouch);
    assert.match(text, /^MANIFOLD_CODE_CACHE=1$/m, "the caller's value is not kept");
    assert.equal(launcherBundle(text), first.bundleHost);
    // Fixed: vouched again.
    await Deno.chmod(denoDir, 0o755);
    await installSourceVariant(src, target);
    assert.match(await Deno.readTextFile(`${bin}/manifold`), vouch);
  });
});

Deno.test("source variant: a code cache file others can write, or a link, in a present bundle is not vouched for", async () => {
  // scripts/manifold's own check refuses these; the vouching that replaces it must too.
  await withSourceInstall(async ({ dir, bin, target, src, first }) => {
    const vouch = /^MANIFOLD_CODE_CACHE=vouched$/m;
    const denoDir = `${dir}/host${first.bundleHost}/deno-dir`;
    // A cache file as a runtime's call leaves it (0644): still vouched for.
    await Deno.writeFile(`${denoDir}/v8_code_cache_v2`, new Uint8Array(8), { mode: 0o644 });
    await Deno.chmod(`${denoDir}/v8_code_cache_v2`, 0o644);
    assert.equal((await installSourceVariant(src, target)).bundle, "present");
    assert.match(await Deno.readTextFile(`${bin}/manifold`), vouch);
    for (
      const [what, make] of [
        ["writable by others", () => Deno.chmod(`${denoDir}/v8_code_cache_v2`, 0o666)],
        ["a link", async () => {
          await Deno.remove(`${denoDir}/v8_code_cache_v2`);
          await Deno.writeFile(`${dir}/elsewhere`, new Uint8Array(8), { mode: 0o644 });
          await Deno.symlink(`${dir}/elsewhere`, `${denoDir}/v8_code_cache_v2`);
        }],
        ["a -wal writable by group", async () => {
          await Deno.remove(`${denoDir}/v8_code_cache_v2`);
          await Deno.writeFile(`${denoDir}/v8_code_cache_v2-wal`, new Uint8Array(8));
          await Deno.chmod(`${denoDir}/v8_code_cache_v2-wal`, 0o664);
        }],
      ] as const
    ) {
      await make();
      assert.equal((await installSourceVariant(src, target)).bundle, "present", what);
      assert.doesNotMatch(await Deno.readTextFile(`${bin}/manifold`), vouch, what);
    }
  });
});

Deno.test("source variant: bundle directories others can write, or links, are refused", async () => {
  const dir = await Deno.makeTempDir({ prefix: "mf-bundle-" });
  try {
    const app = await imageTree(dir);
    const src = { root: app, deno: Deno.execPath() };
    // Group-writable .manifold.
    await Deno.mkdir(`${dir}/a/.manifold`, { recursive: true });
    await Deno.chmod(`${dir}/a/.manifold`, 0o775);
    await assert.rejects(
      installBundle(src, `${dir}/a/.manifold`),
      /writable by group or others \(mode 775\); the installer will not use it: remove it/,
    );
    // A symbolic link as .manifold.
    await Deno.mkdir(`${dir}/elsewhere`);
    await Deno.mkdir(`${dir}/b`);
    await Deno.symlink(`${dir}/elsewhere`, `${dir}/b/.manifold`);
    await assert.rejects(installBundle(src, `${dir}/b/.manifold`), /not a directory.*remove it/);
    // A directory of the right hash that another user owns (root only: chown).
    if (Deno.uid() === 0) {
      const name = await bundleHash(await listBundleFiles(src));
      await Deno.mkdir(`${dir}/c/.manifold/${name}`, { recursive: true });
      await Deno.chown(`${dir}/c/.manifold/${name}`, 65534, 65534);
      await assert.rejects(installBundle(src, `${dir}/c/.manifold`), /owned by uid 65534/);
    }
    // A tree that is not image-built: no npm cache.
    await Deno.remove(`${app}/deno-dir`, { recursive: true });
    await assert.rejects(listBundleFiles(src), /has no deno-dir\/npm/);
    // A symbolic link inside the tree.
    await Deno.mkdir(`${app}/deno-dir/npm`, { recursive: true });
    await Deno.symlink("/etc/passwd", `${app}/lib/passwd`);
    await assert.rejects(listBundleFiles(src), /symbolic link/);
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
});

Deno.test("launcher: names only well-formed bundle paths; the caller's environment cannot redirect it", () => {
  const h = "0123456789abcdef0123456789abcdef";
  const text = renderLauncher(`/opt/cni/bin/.manifold/${h}`);
  assert.equal(launcherBundle(text), `/opt/cni/bin/.manifold/${h}`);
  assert.match(text, new RegExp(`^MANIFOLD_DENO=/opt/cni/bin/\\.manifold/${h}/deno$`, "m"));
  assert.match(text, new RegExp(`^DENO_DIR=/opt/cni/bin/\\.manifold/${h}/deno-dir$`, "m"));
  assert.doesNotMatch(text, /\$\{DENO_DIR|\$\{MANIFOLD_DENO/);
  for (
    const bad of [
      `/opt/cni/bin/.manifold/${h}/..`,
      "/opt/cni/bin/.manifold/xyz",
      `/opt/cni/bin/other/${h}`,
      `/opt/cni/b'in/.manifold/${h}`,
      `relative/.manifold/${h}`,
    ]
  ) {
    assert.equal(launcherBundle(`#!/bin/sh\n# manifold-bundle: ${bad}\n`), undefined, bad);
    assert.throws(() => renderLauncher(bad), /not a bundle directory/, bad);
  }
  assert.equal(launcherBundle("\x7fELF…"), undefined);
  assert.throws(() => bundleDirHost("/opt/cni bin", h), /cannot name the bundle/);
  assert.equal(bundleDirHost("/opt/cni/bin/", h), `/opt/cni/bin/.manifold/${h}`);
});

Deno.test("variant: the flags, else the process (compiled or an image-built source tree) choose", async () => {
  const dir = await Deno.makeTempDir({ prefix: "mf-variant-" });
  try {
    const proc = { standalone: false, execPath: "/usr/local/bin/deno", sourceRoot: dir };
    assert.deepEqual(pluginSource({ binary: "/b" }, proc), { kind: "binary", path: "/b" });
    assert.equal(pluginSource({ skip: true }, proc), undefined);
    assert.throws(() => pluginSource({ skip: true, binary: "/b" }, proc), /cannot be used/);
    assert.deepEqual(pluginSource({}, { ...proc, standalone: true, execPath: "/m" }), {
      kind: "binary",
      path: "/m",
    });
    assert.throws(() => pluginSource({}, proc), /running from source .*pass --binary/);
    await Deno.mkdir(`${dir}/deno-dir/npm`, { recursive: true });
    assert.deepEqual(pluginSource({}, proc), {
      kind: "bundle",
      bundle: { root: dir, deno: "/usr/local/bin/deno" },
    });
    assert.ok(BUNDLE_ENTRIES.includes("deno-dir/npm"));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("compiled variant after the source variant: the old bundles go once unnamed", async () => {
  const dir = await Deno.makeTempDir({ prefix: "mf-bundle-" });
  try {
    const bin = `${dir}/bin`;
    const conf = `${dir}/net.d`;
    const old = `${bin}/.manifold/${"ab".repeat(16)}`;
    await Deno.mkdir(`${old}/scripts`, { recursive: true });
    await Deno.writeTextFile(`${old}/deno`, "");
    await Deno.writeTextFile(`${bin}/manifold`, renderLauncher(old), { mode: 0o755 });
    await Deno.mkdir(conf);
    await Deno.writeTextFile(`${conf}/10-flannel.conflist`, JSON.stringify(flannelConflist()));
    const binary = `${dir}/manifold-compiled`;
    await Deno.writeTextFile(binary, "\x7fELF stand-in");
    await runInstaller({ cniBinDir: bin, cniConfDir: conf, binary, once: true, pruneGraceMs: 0 });
    assert.equal(await Deno.readTextFile(`${bin}/manifold`), "\x7fELF stand-in");
    await assert.rejects(Deno.stat(old), Deno.errors.NotFound);
    // Without any bundle dir, the installer has nothing to prune and says nothing.
    await Deno.remove(`${bin}/.manifold`, { recursive: true });
    await runInstaller({ cniBinDir: bin, cniConfDir: conf, binary, once: true, pruneGraceMs: 0 });
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
});

Deno.test("upgrade: the installer mirrors the service-account token before it copies the plugin", async () => {
  // The old pod's bound token is invalid once that pod is gone: the plugin on the node needs the
  // new one before the (seconds long) copy, not after. A plugin that cannot be installed shows
  // the order: the token is there all the same.
  const h = await fakeHost();
  try {
    await Deno.writeTextFile(`${h.confDir}/10-flannel.conflist`, JSON.stringify(flannelConflist()));
    await assert.rejects(
      runInstaller({
        hostRoot: h.root,
        bundle: { root: `${h.root}/not-an-image-tree`, deno: Deno.execPath() },
        kubeconfig: { server: "https://10.96.0.1:443", serviceAccountDir: h.saDir },
        once: true,
      }),
      /has no main\.ts/,
    );
    assert.equal(await Deno.readTextFile(`${h.confDir}/manifold.d/token`), "token-one");
  } finally {
    await h.cleanup();
  }
});
