/**
 * The daemon's resources and socket ownership (issue 20 §3, §4): a real `manifold daemon`
 * (standalone: no API, a loopback delegate). Descriptors stay flat under load with a log
 * file, accept errors back off instead of spinning, one daemon per socket, a dead daemon's
 * socket is reclaimed, unsafe socket directories are refused.
 */

import assert from "node:assert/strict";
import { frame } from "../../lib/daemon/protocol.ts";
import { type DaemonProcess, decodeAnswer, rawExchange, startDaemon } from "../support/daemon.ts";
import { MANIFOLD } from "../support/plugin.ts";
import { until } from "../support/wait.ts";

const opts = { sanitizeResources: false, sanitizeOps: false };
const enc = new TextEncoder();

function conf(dir: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    cniVersion: "1.1.0",
    name: "manifold-net",
    type: "manifold",
    delegates: [{ cniVersion: "1.0.0", name: "lo", type: "loopback" }],
    cniDir: `${dir}/cache`,
    logLevel: "error",
    ...extra,
  };
}

function request(env: Record<string, string>, stdin: unknown): Uint8Array {
  const h = frame(enc.encode(JSON.stringify({ v: 1, env })));
  const b = frame(enc.encode(JSON.stringify(stdin)));
  const out = new Uint8Array(h.length + b.length);
  out.set(h);
  out.set(b, h.length);
  return out;
}

async function fds(pid: number): Promise<number> {
  let n = 0;
  for await (const _ of Deno.readDir(`/proc/${pid}/fd`)) n++;
  return n;
}

async function stopDaemon(d: DaemonProcess): Promise<string> {
  d.kill("SIGKILL");
  return (await d.exited()).stderr;
}

/** Runs `manifold daemon` to its exit (a second daemon is expected to give up). */
async function runDaemonToExit(confPath: string, socket: string, ms = 15_000) {
  const child = new Deno.Command(MANIFOLD, {
    args: ["daemon", "--config", confPath, "--socket", socket],
    clearEnv: true,
    env: { PATH: "/usr/bin:/bin", CNI_PATH: "/usr/lib/cni" },
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const timer = setTimeout(() => child.kill("SIGKILL"), ms);
  const out = await child.output();
  clearTimeout(timer);
  return { code: out.code, signal: out.signal, stderr: new TextDecoder().decode(out.stderr) };
}

const VERSION = request({ CNI_COMMAND: "VERSION" }, {});

Deno.test(
  "daemon resources: 1,000 requests with logFile set leave its descriptors flat",
  opts,
  async () => {
    const dir = await Deno.makeTempDir({ prefix: "mft-fd-" });
    const c = conf(dir, { logFile: `${dir}/manifold.log`, logLevel: "debug", logToStderr: false });
    const d = await startDaemon(dir, c);
    try {
      const del = (i: number) =>
        request({
          CNI_COMMAND: "DEL",
          CNI_CONTAINERID: `c${i}`,
          CNI_NETNS: "",
          CNI_IFNAME: "eth0",
          CNI_PATH: "/usr/lib/cni", // ignored by the daemon; what an older one needed
        }, d.conf);
      // Warm up (module loads, the log file opened once), then measure.
      for (let i = 0; i < 20; i++) await rawExchange(d.socket, del(i));
      const before = await fds(d.child.pid);
      for (let i = 0; i < 1000; i += 10) {
        const answers = await Promise.all(
          Array.from({ length: 10 }, (_, k) => rawExchange(d.socket, del(100 + i + k))),
        );
        for (const a of answers) {
          assert.equal(decodeAnswer(a)?.code, 0, String(decodeAnswer(a)?.stdout));
        }
      }
      const after = await fds(d.child.pid);
      assert.ok(Math.abs(after - before) <= 10, `descriptors ${before} → ${after}`);
      assert.ok((await Deno.stat(`${dir}/manifold.log`)).size > 0, "the requests logged");
    } finally {
      await stopDaemon(d);
      await Deno.remove(dir, { recursive: true });
    }
  },
);

Deno.test(
  "daemon resources: out of descriptors → accept backs off (no spin), clients get code 11 fast",
  opts,
  async () => {
    const dir = await Deno.makeTempDir({ prefix: "mft-emfile-" });
    // Measure what an idle daemon holds, then run one with a few descriptors to spare.
    const probe = await startDaemon(dir, conf(dir), { socket: `${dir}/probe/manifold.sock` });
    await rawExchange(probe.socket, VERSION);
    const idle = await fds(probe.child.pid);
    await stopDaemon(probe);
    const limit = idle + 6;
    const d = await startDaemon(dir, conf(dir), {
      launcher: ["prlimit", `--nofile=${limit}`],
      flags: ["--idle-timeout-ms", "4000", "--log-level", "debug"],
    });
    const idlers: Deno.UnixConn[] = [];
    try {
      assert.equal(decodeAnswer(await rawExchange(d.socket, VERSION))?.code, 0);
      // Idle clients take every spare descriptor (each is held until the idle timeout).
      for (let i = 0; i < 12; i++) {
        idlers.push(await Deno.connect({ transport: "unix", path: d.socket }));
      }
      await new Promise((r) => setTimeout(r, 300));
      const t0 = performance.now();
      const answers = await Promise.all(
        Array.from({ length: 3 }, () => rawExchange(d.socket, VERSION)),
      );
      const ms = performance.now() - t0;
      for (const a of answers) {
        const answer = decodeAnswer(a);
        assert.ok(answer, "an answer, not a hang");
        const doc = JSON.parse(answer.stdout);
        // Either served (a descriptor came free) or told to try again.
        if (answer.code !== 0) assert.equal(doc.code, 11, answer.stdout);
      }
      assert.ok(ms < 2500, `answered in ${ms} ms`);
      await new Promise((r) => setTimeout(r, 1500)); // still exhausted: back-off, not a spin
      for (const c of idlers) c.close();
      idlers.length = 0;
      // Recovered once the idle clients are gone (within the longest back-off).
      await until(
        async () => decodeAnswer(await rawExchange(d.socket, VERSION))?.code === 0,
        "served again",
        5_000,
      );
      const stderr = await stopDaemon(d);
      const attempts = stderr.split("\n").filter((l) => l.includes('"accept failed"')).length;
      const episodes = stderr.split("\n").filter((l) => l.includes("backing off")).length;
      assert.ok(attempts > 0, "accept failed at least once");
      assert.ok(attempts < 60, `${attempts} failed accepts in ≈ 3 s: backing off, not spinning`);
      assert.ok(episodes >= 1 && episodes <= attempts, `${episodes} back-off episodes logged`);
    } finally {
      for (const c of idlers) c.close();
      await stopDaemon(d);
      await Deno.remove(dir, { recursive: true });
    }
  },
);

Deno.test(
  "daemon socket: a second daemon exits 1 naming the first's PID; a killed one's socket is reclaimed",
  opts,
  async () => {
    const dir = await Deno.makeTempDir({ prefix: "mft-own-" });
    const first = await startDaemon(dir, conf(dir));
    let next: DaemonProcess | undefined;
    try {
      const second = await runDaemonToExit(first.confPath, first.socket);
      assert.equal(second.code, 1, second.stderr);
      assert.match(
        second.stderr,
        new RegExp(`another manifold daemon \\(pid ${first.child.pid}\\)`),
      );
      assert.equal(decodeAnswer(await rawExchange(first.socket, VERSION))?.code, 0, "first serves");
      assert.equal(
        (await Deno.readTextFile(`${first.socket}.lock`)).split("\n")[0],
        String(first.child.pid),
      );

      await stopDaemon(first); // SIGKILL: the socket file stays behind
      assert.ok((await Deno.lstat(first.socket)).isSocket, "a stale socket is left");
      next = await startDaemon(dir, conf(dir));
      // startDaemon saw the stale socket file at once: the new daemon answers once it has
      // replaced it (under the lock), which may be a moment later.
      const reclaimed = next;
      await until(
        () =>
          rawExchange(reclaimed.socket, VERSION).then(
            (a) => decodeAnswer(a)?.code === 0,
            () => false,
          ),
        "the next daemon answering on the reclaimed socket",
        20_000,
      );
      next.kill("SIGTERM");
      assert.equal((await next.exited()).code, 0);
      assert.equal(await Deno.lstat(next.socket).then(() => true, () => false), false, "removed");
    } finally {
      await stopDaemon(first);
      if (next) await stopDaemon(next);
      await Deno.remove(dir, { recursive: true });
    }
  },
);

Deno.test(
  "daemon socket: a group/world-writable socket directory or a relative daemonSocket is refused",
  opts,
  async () => {
    const dir = await Deno.makeTempDir({ prefix: "mft-dir-" });
    try {
      await Deno.mkdir(`${dir}/shared`, { mode: 0o777 });
      await Deno.chmod(`${dir}/shared`, 0o1777);
      await Deno.writeTextFile(`${dir}/daemon.conf`, JSON.stringify(conf(dir)));
      const out = await runDaemonToExit(`${dir}/daemon.conf`, `${dir}/shared/manifold.sock`);
      assert.equal(out.code, 1, out.stderr);
      assert.match(out.stderr, /writable by its group or others \(mode 1777\)/);
      assert.equal((await Deno.stat(`${dir}/shared`)).mode! & 0o7777, 0o1777, "never chmodded");

      await Deno.writeTextFile(
        `${dir}/rel.conf`,
        JSON.stringify(conf(dir, { daemonSocket: "run/manifold.sock" })),
      );
      const child = await new Deno.Command(MANIFOLD, {
        args: ["daemon", "--config", `${dir}/rel.conf`],
        clearEnv: true,
        env: { PATH: "/usr/bin:/bin" },
        cwd: dir,
        stdout: "null",
        stderr: "piped",
      }).output();
      const stderr = new TextDecoder().decode(child.stderr);
      assert.equal(child.code, 1, stderr);
      assert.match(stderr, /Expected an absolute path\s+→ at daemonSocket/);
      assert.equal(await Deno.lstat(`${dir}/run`).then(() => true, () => false), false);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
);
