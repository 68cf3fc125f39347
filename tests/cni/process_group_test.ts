/**
 * Tests of lib/cni/process_group.ts and the process groups of {@link ProcessPluginExec}
 * (issue 20 item 7): every plugin leads a process group of its own with its own PID (setsid(1)
 * exec'd in place, Deno's `detached` when setsid is absent, or posix_spawn's `POSIX_SPAWN_SETSID`
 * with `nativeSpawn`), a timeout kills the whole
 * group, and {@link stopProcessGroup} stops a noted group — only when the note still names it.
 * Real processes; no root needed.
 */

import assert from "node:assert/strict";
import { type ExecRequest, type GroupTracker, ProcessPluginExec } from "../../lib/cni/exec.ts";
import {
  parseStat,
  type ProcessGroup,
  processGroupOf,
  stopProcessGroup,
} from "../../lib/cni/process_group.ts";
import { readProcFile } from "../../lib/fs/procfs.ts";

const ENV = { CNI_COMMAND: "ADD", CNI_CONTAINERID: "c1", CNI_IFNAME: "eth0" };

/** How a plugin is started: setsid(1), Deno's `detached` (no setsid(1)), posix_spawn. */
const VARIANTS = (dir: string): [string | undefined, boolean][] => [
  [undefined, false],
  [`${dir}/no-setsid`, false],
  [undefined, true],
];

/** The `/proc/<pid>/stat` fields of a running process, or undefined when it is gone. */
function stat(pid: number) {
  const text = readProcFile(`/proc/${pid}/stat`);
  return text === undefined ? undefined : parseStat(text);
}

/** Whether `pid` runs code (not gone, not a zombie). */
function runs(pid: number): boolean {
  const s = stat(pid);
  return s !== undefined && s.state !== "Z" && s.state !== "X";
}

async function script(dir: string, name: string, body: string): Promise<string> {
  const path = `${dir}/${name}`;
  await Deno.writeTextFile(path, `#!/bin/sh\n${body}\n`, { mode: 0o755 });
  return path;
}

/** Runs a Deno script with read, run and env permissions but no `--allow-ffi`. */
function runWithoutFfi(script: string): Promise<Deno.CommandOutput> {
  return new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "--quiet",
      "--no-check",
      "--no-prompt",
      "--allow-read",
      "--allow-run",
      "--allow-env",
      script,
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
}

/** A tracker that records what it is told (and tracks everything). */
function recorder() {
  const seen: { event: string; group: ProcessGroup }[] = [];
  const tracker: GroupTracker = {
    tracks: () => true,
    started: (_req: ExecRequest, group) => void seen.push({ event: "started", group }),
    ended: (_req: ExecRequest, group) => void seen.push({ event: "ended", group }),
  };
  return { seen, tracker };
}

Deno.test("parseStat: fields after the command name, whatever it holds", () => {
  const tail = "S 1 4242 4242 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 777 0 0";
  assert.deepEqual(parseStat(`4242 (sh) ${tail}`), { state: "S", pgrp: 4242, startTime: 777 });
  assert.deepEqual(parseStat(`4242 (a) (b c)) ${tail}`), {
    state: "S",
    pgrp: 4242,
    startTime: 777,
  });
  assert.equal(parseStat("garbage"), undefined);
  assert.equal(parseStat("1 (x) S 1 y"), undefined);
});

Deno.test("ProcessPluginExec: the plugin keeps its PID and leads its own process group", async () => {
  const dir = await Deno.makeTempDir();
  try {
    // Prints its PID and its process group and session (proc(5) fields 5 and 6).
    const path = await script(
      dir,
      "who",
      `read -r s </proc/$$/stat; set -- \${s##*) }; echo "{\\"pid\\":$$,\\"pgrp\\":$3,\\"sid\\":$4}"`,
    );
    for (const [setsidBinary, nativeSpawn] of VARIANTS(dir)) {
      const { seen, tracker } = recorder();
      const exec = new ProcessPluginExec({ groups: tracker, setsidBinary, nativeSpawn });
      const res = await exec.exec({ path, stdin: new Uint8Array(), env: ENV, timeoutMs: 10_000 });
      assert.equal(res.code, 0, new TextDecoder().decode(res.stderr));
      const me = JSON.parse(new TextDecoder().decode(res.stdout));
      const how = nativeSpawn ? "posix_spawn" : `setsid ${setsidBinary ?? "default"}`;
      assert.equal(me.pgrp, me.pid, `its own group (${how})`);
      assert.equal(me.sid, me.pid, "its own session");
      assert.deepEqual(seen.map((s) => s.event), ["started", "ended"]);
      assert.equal(seen[0].group.pgid, me.pid, "the tracker is told the plugin's PID");
      assert.ok(seen[0].group.startTime > 0);
      assert.match(seen[0].group.bootId, /^[0-9a-f-]{36}$/);
      assert.match(seen[0].group.pidNs, /^pid:\[\d+\]$/);
    }
    // The plugin's exit status is its own, through setsid and without it.
    const fail = await script(dir, "fail", "echo oops >&2; exit 126");
    for (const [setsidBinary, nativeSpawn] of VARIANTS(dir)) {
      const res = await new ProcessPluginExec({ setsidBinary, nativeSpawn }).exec({
        path: fail,
        stdin: new Uint8Array(),
        env: ENV,
        timeoutMs: 10_000,
      });
      assert.equal(res.code, 126);
      assert.equal(new TextDecoder().decode(res.stderr), "oops\n");
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("ProcessPluginExec: a timeout kills the plugin's whole group, its children too", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = await script(
      dir,
      "spawner",
      `sleep 30 </dev/null >/dev/null 2>&1 &\necho $! >${dir}/child\nsleep 30`,
    );
    for (const nativeSpawn of [false, true]) {
      const res = await new ProcessPluginExec({ drainGraceMs: 50, nativeSpawn }).exec({
        path,
        stdin: new Uint8Array(),
        env: ENV,
        timeoutMs: 500,
      });
      assert.equal(res.timedOut, true);
      const child = Number(await Deno.readTextFile(`${dir}/child`));
      assert.ok(child > 0);
      const deadline = performance.now() + 2000;
      while (runs(child) && performance.now() < deadline) {
        await new Promise((r) => setTimeout(r, 20));
      }
      assert.equal(runs(child), false, `the plugin's child was killed with it (${nativeSpawn})`);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/** Starts `sh -c body` leading its own group; returns it and its identity. */
function group(body: string): { child: Deno.ChildProcess; group: ProcessGroup } {
  const child = new Deno.Command("/bin/sh", {
    args: ["-c", body],
    detached: true,
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).spawn();
  return { child, group: processGroupOf(child.pid)! };
}

Deno.test("stopProcessGroup: SIGTERM, then SIGKILL for members that ignore it", async () => {
  const polite = group("sleep 30 & wait");
  const started = performance.now();
  assert.equal(await stopProcessGroup(polite.group, { graceMs: 2000 }), "terminated");
  assert.ok(performance.now() - started < 2000);
  await polite.child.status;

  // The shell and its sleep ignore SIGTERM (an ignored signal stays ignored across exec).
  const stubborn = group("trap '' TERM; sleep 30 & wait");
  await new Promise((r) => setTimeout(r, 100)); // the trap is set
  assert.equal(await stopProcessGroup(stubborn.group, { graceMs: 200 }), "killed");
  assert.equal((await stubborn.child.status).signal, "SIGKILL");
  assert.equal(await stopProcessGroup(stubborn.group), "gone", "nothing left to stop");
});

Deno.test("stopProcessGroup: a note that no longer names the group signals nothing", async () => {
  const g = group("sleep 30");
  try {
    for (
      const other of [
        { ...g.group, startTime: g.group.startTime + 1 }, // the PID was recycled
        { ...g.group, bootId: "00000000-0000-0000-0000-000000000000" }, // noted before a reboot
        { ...g.group, pidNs: "pid:[1]" }, // noted in another PID namespace
      ]
    ) {
      assert.equal(await stopProcessGroup(other, { graceMs: 100 }), "gone");
      assert.ok(runs(g.child.pid), "left alone");
    }
  } finally {
    g.child.kill("SIGKILL");
    await g.child.status;
  }
});

for (const nativeSpawn of [false, true]) {
  Deno.test(
    `exec: a delegate whose group cannot be identified (no FFI) is killed, never left running its config unnoted${
      nativeSpawn ? " (nativeSpawn: falls back to Deno.Command)" : ""
    }`,
    async () => {
      const dir = await Deno.makeTempDir({ prefix: "manifold-pg-noffi-" });
      try {
        // The delegate records the config it was given, if any reached it.
        await Deno.writeTextFile(
          `${dir}/delegate`,
          `#!/bin/sh\nc=$(cat)\n[ -n "$c" ] && printf '%s' "$c" > ${dir}/got-config\nexit 0\n`,
          { mode: 0o755 },
        );
        const execUrl = new URL("../../lib/cni/exec.ts", import.meta.url).href;
        await Deno.writeTextFile(
          `${dir}/run.ts`,
          `import { ProcessPluginExec } from ${JSON.stringify(execUrl)};
const exec = new ProcessPluginExec({
  groups: { tracks: () => true, started() {}, ended() {} },
  nativeSpawn: ${nativeSpawn},
});
const err = await exec.exec({
  path: ${JSON.stringify(`${dir}/delegate`)},
  stdin: new TextEncoder().encode('{"cniVersion":"1.1.0"}'),
  env: { CNI_COMMAND: "ADD" },
  timeoutMs: 10000,
}).then(() => "resolved", (e) => e.name);
console.log(err);
await new Promise((r) => setTimeout(r, 300));
`,
        );
        // Without --allow-ffi: identifying the group (procfs through libc) throws after the spawn.
        const out = await runWithoutFfi(`${dir}/run.ts`);
        const said = new TextDecoder().decode(out.stdout).trim();
        assert.equal(said, "NotCapable", new TextDecoder().decode(out.stderr));
        // Its process is gone and the delegate's pipe closed: give a delegate that got its config
        // time to record it.
        let got = false;
        for (let ms = 0; !got && ms < 1500; ms += 50) {
          await new Promise((r) => setTimeout(r, 50));
          got = await Deno.stat(`${dir}/got-config`).then(() => true, () => false);
        }
        assert.ok(!got, "the delegate ran with its config although its group was never noted");
      } finally {
        await Deno.remove(dir, { recursive: true });
      }
    },
  );
}

Deno.test("ProcessPluginExec: a plugin that exits at once is noted all the same (its group read before it can be reaped)", async () => {
  // posix_spawn returns once the plugin exec'd, and a fast one may already have exited: a
  // reap that ran before the group was read (on a thread of the blocking pool, or in a
  // microtask of an eagerly completed poll) left it unnoted, and its PID free for another
  // process whose group the note would then name.
  for (const nativeSpawn of [false, true]) {
    const { seen, tracker } = recorder();
    const exec = new ProcessPluginExec({ groups: tracker, nativeSpawn });
    for (let i = 0; i < 300; i++) {
      const res = await exec.exec({
        path: "/bin/true",
        stdin: new Uint8Array(),
        env: ENV,
        timeoutMs: 10_000,
      });
      assert.equal(res.code, 0);
    }
    assert.equal(
      seen.filter((s) => s.event === "started").length,
      300,
      `every run noted (nativeSpawn ${nativeSpawn})`,
    );
  }
});

Deno.test("exec: nativeSpawn where posix_spawn cannot be used (no FFI) puts the plugin in its session through setsid(1), as docs/node-agent.md says", async () => {
  const dir = await Deno.makeTempDir({ prefix: "manifold-pg-fallback-" });
  try {
    // A setsid(1) stand-in that says it ran, then execs the real one.
    await Deno.writeTextFile(
      `${dir}/setsid`,
      `#!/bin/sh\necho via-setsid >&2\nexec /usr/bin/setsid "$@"\n`,
      { mode: 0o755 },
    );
    await Deno.writeTextFile(
      `${dir}/delegate`,
      `#!/bin/sh\nread -r s </proc/$$/stat; set -- \${s##*) }; echo "$$ $3"\n`,
      { mode: 0o755 },
    );
    const execUrl = new URL("../../lib/cni/exec.ts", import.meta.url).href;
    await Deno.writeTextFile(
      `${dir}/run.ts`,
      `import { ProcessPluginExec } from ${JSON.stringify(execUrl)};
const res = await new ProcessPluginExec({ nativeSpawn: true, setsidBinary: ${
        JSON.stringify(`${dir}/setsid`)
      } }).exec({
  path: ${JSON.stringify(`${dir}/delegate`)},
  stdin: new Uint8Array(),
  env: { CNI_COMMAND: "ADD" },
  timeoutMs: 3000, // this process lives until the exec's timer would have fired
});
const d = new TextDecoder();
console.log(JSON.stringify({ code: res.code, stdout: d.decode(res.stdout), stderr: d.decode(res.stderr) }));
`,
    );
    const out = await runWithoutFfi(`${dir}/run.ts`);
    const said = JSON.parse(new TextDecoder().decode(out.stdout));
    assert.equal(said.code, 0, new TextDecoder().decode(out.stderr));
    const [pid, pgrp] = said.stdout.trim().split(" ");
    assert.equal(pgrp, pid, "its own group");
    assert.equal(said.stderr, "via-setsid\n", "started through setsid(1), not a fork (`detached`)");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
