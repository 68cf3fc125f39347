/**
 * lib/cni/spawn/native.ts: plugins started with posix_spawn through FFI, as the per-call plugin
 * starts its delegates (`ProcessPluginExec({ nativeSpawn: true })`). What a child gets (its own
 * session and group, exactly its environment, default signals, no descriptor of this process
 * but its three pipes), what this process gets back (large configs and outputs through full
 * pipes, the cap, exit codes and signals), and the failures: a missing or non-executable
 * binary, one busy being written, a grandchild holding the output pipe. Each is checked against
 * what the `Deno.Command` path gives for the same plugin. Real processes; no root needed.
 */

import assert from "node:assert/strict";
import { ProcessPluginExec } from "../../lib/cni/exec.ts";
import { CniError } from "../../lib/cni/errors.ts";
import { decodeWaitStatus, spawnNative } from "../../lib/cni/spawn/mod.ts";

const ENV = { CNI_COMMAND: "ADD", CNI_CONTAINERID: "c1", CNI_IFNAME: "eth0" };
const text = (b: Uint8Array) => new TextDecoder().decode(b);

async function withDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "spawn-native-" });
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

async function script(dir: string, name: string, body: string): Promise<string> {
  const path = `${dir}/${name}`;
  await Deno.writeTextFile(path, `#!/bin/sh\n${body}\n`, { mode: 0o755 });
  return path;
}

/** Runs `path` both ways (Deno.Command, then posix_spawn) with the same request. */
async function bothWays(
  path: string,
  stdin: Uint8Array,
  opts: { maxOutputBytes?: number; drainGraceMs?: number; timeoutMs?: number } = {},
) {
  const run = (nativeSpawn: boolean) =>
    new ProcessPluginExec({ ...opts, nativeSpawn }).exec({
      path,
      stdin,
      env: ENV,
      timeoutMs: opts.timeoutMs ?? 10_000,
    });
  return { deno: await run(false), native: await run(true) };
}

Deno.test("spawnNative: the child leads its own session, gets exactly its env, default signals, no other descriptor", async () => {
  await withDir(async (dir) => {
    // A descriptor of this process that must not reach the child (Deno opens it close-on-exec).
    using _file = await Deno.open(`${dir}/held`, { create: true, write: true });
    const path = await script(
      dir,
      "who",
      [
        `read -r s </proc/$$/stat; set -- \${s##*) }`,
        `echo "pid=$$ pgrp=$3 sid=$4"`,
        `env | sort`,
        // Descriptors the shell did not open itself: 0-2 and what they are.
        `for f in /proc/$$/fd/*; do echo "fd \${f##*/} $(readlink $f)"; done`,
      ].join("\n"),
    );
    const { deno, native } = await bothWays(path, new Uint8Array());
    assert.equal(native.code, 0, text(native.stderr));
    const out = text(native.stdout);
    const m = out.match(/pid=(\d+) pgrp=(\d+) sid=(\d+)/)!;
    assert.equal(m[2], m[1], "its own process group");
    assert.equal(m[3], m[1], "its own session");
    const env = out.split("\n").filter((l) => /^[A-Z_]+=/.test(l));
    assert.deepEqual(
      env.filter((l) => !l.startsWith("PWD=")), // sh sets PWD itself
      ["CNI_COMMAND=ADD", "CNI_CONTAINERID=c1", "CNI_IFNAME=eth0", "MANIFOLD_DELEGATION_DEPTH=1"],
    );
    const fds = out.split("\n").filter((l) => l.startsWith("fd "));
    assert.ok(!fds.some((l) => l.includes(`${dir}/held`)), `no descriptor leaked: ${fds}`);
    // Whatever this process passed on without close-on-exec (a test runner's descriptors), the
    // Deno.Command child has too: the same descriptor numbers, and none of this side's pipes.
    const fdsOf = (o: string) =>
      o.split("\n").filter((l) => l.startsWith("fd ")).map((l) => l.split(" ")[1]);
    assert.deepEqual(fdsOf(out), fdsOf(text(deno.stdout)));
    // The signal state, read by the plugin process itself (awk, exec'd by the kernel for the
    // script: a shell's own mask is blocked while it forks its commands).
    const sigs = `${dir}/sigs`;
    await Deno.writeTextFile(
      sigs,
      `#!/usr/bin/awk -f\nBEGIN { while ((getline l < "/proc/self/status") > 0) if (l ~ /^Sig(Blk|Ign)/) print l }\n`,
      { mode: 0o755 },
    );
    const signals = text((await bothWays(sigs, new Uint8Array())).native.stdout);
    assert.match(signals, /SigBlk:\s*0+$/m, `no signal blocked: ${signals}`);
    // SIGPIPE (13) is ignored by Deno's runtime; the child has it at its default again.
    const ign = BigInt(`0x${signals.match(/SigIgn:\s*([0-9a-f]+)/)![1]}`);
    assert.equal(ign & (1n << 12n), 0n, "SIGPIPE at its default action");
    // The same as Deno.Command gives, but for the PIDs.
    const strip = (s: string) => s.replace(/\d{2,}/g, "N");
    assert.equal(strip(out), strip(text(deno.stdout)));
  });
});

Deno.test("spawnNative: a config and an output larger than a pipe's buffer cross whole", async () => {
  await withDir(async (dir) => {
    const path = await script(dir, "echo", "cat; echo done >&2");
    const big = new Uint8Array(1 << 20).map((_, i) => 97 + (i % 26)); // 1 MiB
    const { deno, native } = await bothWays(path, big);
    assert.equal(native.code, 0);
    assert.equal(native.stdout.length, big.length);
    assert.deepEqual(native.stdout, big);
    assert.equal(text(native.stderr), "done\n");
    assert.equal(native.truncated, false);
    assert.deepEqual(native.stdout, deno.stdout);
  });
});

Deno.test("spawnNative: output over the cap is cut, drained, and reported truncated", async () => {
  await withDir(async (dir) => {
    const path = await script(dir, "chatty", "head -c 200000 /dev/zero; echo ok >&2");
    const { deno, native } = await bothWays(path, new Uint8Array(), { maxOutputBytes: 1000 });
    assert.equal(native.code, 0, "the plugin was not blocked on a full pipe");
    assert.equal(native.stdout.length, 1000);
    assert.equal(native.truncated, true);
    assert.equal(text(native.stderr), "ok\n");
    assert.deepEqual(
      [native.stdout.length, native.truncated],
      [deno.stdout.length, deno.truncated],
    );
  });
});

Deno.test("spawnNative: exit codes and terminating signals as Deno reports them", async () => {
  await withDir(async (dir) => {
    const code = await script(dir, "code", "exit 42");
    const killed = await script(dir, "killed", "kill -TERM $$");
    for (const path of [code, killed]) {
      const { deno, native } = await bothWays(path, new Uint8Array());
      assert.deepEqual([native.code, native.signal], [deno.code, deno.signal]);
    }
    const { native } = await bothWays(killed, new Uint8Array());
    assert.deepEqual([native.code, native.signal], [143, "SIGTERM"]);
  });
  assert.deepEqual(decodeWaitStatus(0x0300), { success: false, code: 3, signal: null });
  assert.deepEqual(decodeWaitStatus(9), { success: false, code: 137, signal: "SIGKILL" });
  assert.deepEqual(decodeWaitStatus(0), { success: true, code: 0, signal: null });
});

Deno.test("spawnNative: a missing or non-executable plugin is CNI code 999 worded as setsid words it", async () => {
  await withDir(async (dir) => {
    await Deno.writeTextFile(`${dir}/plain`, "not a program", { mode: 0o644 });
    for (
      const [path, why] of [[`${dir}/nope`, "No such file or directory"], [
        `${dir}/plain`,
        "Permission denied",
      ]]
    ) {
      for (const nativeSpawn of [false, true]) {
        const err = await new ProcessPluginExec({ nativeSpawn }).exec({
          path,
          stdin: new Uint8Array(),
          env: ENV,
          timeoutMs: 5000,
        }).then(() => undefined, (e) => e);
        assert.ok(err instanceof CniError, `${nativeSpawn}: ${err}`);
        assert.equal(err.code, 999);
        assert.equal(err.msg, `failed to execute plugin ${path.split("/").pop()}`);
        assert.equal(
          err.details,
          `failed to execute ${path}: ${why}`,
          `nativeSpawn ${nativeSpawn}`,
        );
      }
    }
  });
});

Deno.test("spawnNative: a binary open for writing is retried, then code 11 busy", async () => {
  await withDir(async (dir) => {
    const path = await script(dir, "busy", "exit 0");
    const writer = await Deno.open(path, { write: true });
    try {
      for (const nativeSpawn of [false, true]) {
        const exec = new ProcessPluginExec({ nativeSpawn, spawnRetries: 2, retryDelayMs: 5 });
        const err = await exec.exec({ path, stdin: new Uint8Array(), env: ENV, timeoutMs: 5000 })
          .then(() => undefined, (e) => e);
        assert.ok(err instanceof CniError, String(err));
        assert.equal(err.code, 11);
        assert.equal(err.msg, "plugin busy is busy");
        assert.match(err.details!, /Text file busy \(after 3 attempts\)$/);
      }
      // Released while retrying: the plugin runs.
      const exec = new ProcessPluginExec({ nativeSpawn: true, spawnRetries: 5, retryDelayMs: 20 });
      const running = exec.exec({ path, stdin: new Uint8Array(), env: ENV, timeoutMs: 5000 });
      setTimeout(() => writer.close(), 30);
      assert.equal((await running).code, 0);
    } finally {
      try {
        writer.close();
      } catch { /* closed above */ }
    }
  });
});

Deno.test("spawnNative: a grandchild holding stdout open does not hold the call past the grace", async () => {
  await withDir(async (dir) => {
    const path = await script(
      dir,
      "leaver",
      `echo result\n(sleep 5; echo late) &\necho $! >${dir}/grandchild\nexit 0`,
    );
    const t0 = performance.now();
    const res = await new ProcessPluginExec({ nativeSpawn: true, drainGraceMs: 100 }).exec({
      path,
      stdin: new Uint8Array(),
      env: ENV,
      timeoutMs: 10_000,
    });
    const ms = performance.now() - t0;
    try {
      assert.equal(res.code, 0);
      assert.equal(text(res.stdout), "result\n");
      assert.ok(ms < 2000, `returned after the grace, not the grandchild (${ms.toFixed(0)} ms)`);
    } finally {
      const pid = Number(await Deno.readTextFile(`${dir}/grandchild`));
      try {
        Deno.kill(-pid, "SIGKILL");
      } catch { /* gone */ }
      try {
        Deno.kill(pid, "SIGKILL");
      } catch { /* gone */ }
    }
  });
});

Deno.test("spawnNative: a NUL byte in the environment is refused before anything runs", () => {
  assert.throws(() => spawnNative(["/bin/true"], { A: "x\0y" }), TypeError);
  assert.throws(() => spawnNative(["/bin/true"], { "A=B": "x" }), TypeError);
});

Deno.test("spawnNative: a NUL byte in the environment is CNI code 999 from exec, as with Deno.Command", async () => {
  for (const nativeSpawn of [false, true]) {
    const err = await new ProcessPluginExec({ nativeSpawn }).exec({
      path: "/bin/true",
      stdin: new Uint8Array(),
      env: { ...ENV, CNI_ARGS: "K8S_POD_NAME=a\0b" },
      timeoutMs: 5000,
    }).then(() => undefined, (e) => e);
    assert.ok(err instanceof CniError, `nativeSpawn ${nativeSpawn}: ${err}`);
    assert.equal(err.code, 999);
    assert.equal(err.msg, "failed to execute plugin true");
    assert.match(err.details!, /nul byte|NUL byte/, `nativeSpawn ${nativeSpawn}`);
  }
});

Deno.test("spawnNative: a signal blocked in this thread is not blocked in the child (as Go's os/exec gives; Deno.Command passes it on)", async () => {
  // posix_spawn without POSIX_SPAWN_SETSIGMASK gives the child the calling thread's mask.
  const libc = Deno.dlopen("libc.so.6", {
    pthread_sigmask: { parameters: ["i32", "buffer", "buffer"], result: "i32" },
  });
  const SIG_BLOCK = 0, SIG_SETMASK = 2;
  const old = new Uint8Array(128);
  const usr2 = new Uint8Array(128);
  usr2[(12 - 1) >> 3] |= 1 << ((12 - 1) & 7); // SIGUSR2
  assert.equal(libc.symbols.pthread_sigmask(SIG_BLOCK, usr2, old), 0);
  try {
    await withDir(async (dir) => {
      const sigs = `${dir}/sigs`;
      await Deno.writeTextFile(
        sigs,
        `#!/usr/bin/awk -f\nBEGIN { while ((getline l < "/proc/self/status") > 0) if (l ~ /^SigBlk/) print l }\n`,
        { mode: 0o755 },
      );
      const { deno, native } = await bothWays(sigs, new Uint8Array());
      assert.match(text(native.stdout), /SigBlk:\s*0+$/m, text(native.stdout));
      // Deno.Command (Rust's std) passes this thread's mask on: it is blocked there.
      assert.match(text(deno.stdout), /SigBlk:\s*0+800$/m, text(deno.stdout));
    });
  } finally {
    libc.symbols.pthread_sigmask(SIG_SETMASK, old, null);
    libc.close();
  }
});

Deno.test("spawnNative: a plugin that exits without reading a config larger than a pipe ends the write at once (EPIPE, no SIGPIPE)", async () => {
  await withDir(async (dir) => {
    const path = await script(dir, "deaf", "echo '{}'");
    const big = new Uint8Array(1 << 20).fill(32); // 1 MiB: the write waits for room, then EPIPE
    // The grace is long: a write that did not end on EPIPE would hold the call for all of it.
    const t0 = performance.now();
    const { native } = await bothWays(path, big, { drainGraceMs: 30_000 });
    const ms = performance.now() - t0;
    assert.equal(native.code, 0);
    assert.equal(text(native.stdout), "{}\n");
    assert.ok(
      ms < 20_000,
      `the write ended with the plugin, not with the grace (${ms.toFixed(0)} ms)`,
    );
  });
});

Deno.test("spawnNative: 40 plugins at once all run to their end (a waiting child holds no thread of Deno's blocking pool)", async () => {
  // Deno's blocking pool has 32 threads: a blocking waitpid per child took one for the child's
  // whole life, and from 32 children on no pipe's poll could run — every plugin stalled, its
  // output pipe full, until its timeout.
  await withDir(async (dir) => {
    const path = await script(dir, "slow", "sleep 0.5\nhead -c 200000 /dev/zero");
    const exec = new ProcessPluginExec({ nativeSpawn: true });
    const results = await Promise.all(
      Array.from(
        { length: 40 },
        () => exec.exec({ path, stdin: new Uint8Array(), env: ENV, timeoutMs: 30_000 }),
      ),
    );
    for (const res of results) {
      assert.deepEqual([res.timedOut, res.code, res.stdout.length], [false, 0, 200000]);
    }
  });
});

for (const nativeSpawn of [true, false]) {
  Deno.test({
    name: `a grandchild holding stdin unread does not hold the call past the grace (${
      nativeSpawn ? "posix_spawn" : "Deno.Command"
    })`,
    // Deno.Command's write stays in flight until the grandchild is killed (below): it cannot be
    // cancelled, only left behind; libc may be loaded here first (posix_spawn).
    sanitizeOps: false,
    sanitizeResources: false,
    fn: async () => {
      await withDir(async (dir) => {
        // The plugin exits without reading; its child keeps stdin open and reads nothing, so
        // the write of a config larger than the pipe waits for room that never comes. (dash
        // gives a background job /dev/null as stdin before its own redirections: hence fd 3.)
        const path = await script(
          dir,
          "holder",
          `exec 3<&0\nsleep 5 <&3 3<&- &\necho $! >${dir}/grandchild\necho '{}'\nexit 0`,
        );
        const big = new Uint8Array(1 << 20).fill(32);
        try {
          const t0 = performance.now();
          const res = await new ProcessPluginExec({ nativeSpawn, drainGraceMs: 100 }).exec({
            path,
            stdin: big,
            env: ENV,
            timeoutMs: 10_000,
          });
          const ms = performance.now() - t0;
          assert.equal(res.code, 0);
          assert.equal(text(res.stdout), "{}\n");
          assert.ok(
            ms < 4000,
            `returned after the grace, not the grandchild (${ms.toFixed(0)} ms)`,
          );
        } finally {
          const pid = Number(await Deno.readTextFile(`${dir}/grandchild`));
          try {
            Deno.kill(pid, "SIGKILL");
          } catch { /* gone */ }
        }
      });
    },
  });
}
