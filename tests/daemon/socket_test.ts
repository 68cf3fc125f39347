/**
 * The daemon's socket protocol under bad input (issue 12, "Security and bad input"): a real
 * `manifold daemon` (standalone: no API) gets oversized, malformed, truncated, idle and
 * seeded-fuzzed requests; each gets a CNI error answer or a closed connection, and the daemon
 * keeps serving. `FUZZ_SEED` / `DAEMON_FUZZ_RUNS` (default 300) override the batch.
 */

import assert from "node:assert/strict";
import { frame } from "../../lib/daemon/protocol.ts";
import { caseSeed, mutateBytes, randomJson, randomString, Rng } from "../support/fuzz.ts";
import { decodeAnswer, rawExchange, startDaemon } from "../support/daemon.ts";
import { isRoot, Scratch } from "../support/netns.ts";

const opts = { sanitizeResources: false, sanitizeOps: false };
const enc = new TextEncoder();

function request(env: Record<string, string>, stdin = "{}"): Uint8Array {
  const h = frame(enc.encode(JSON.stringify({ v: 1, env })));
  const b = frame(enc.encode(stdin));
  const out = new Uint8Array(h.length + b.length);
  out.set(h);
  out.set(b, h.length);
  return out;
}

async function withDaemon(fn: (socket: string, alive: () => boolean) => Promise<void>) {
  const dir = await Deno.makeTempDir({ prefix: "mft-sock-" });
  const conf = {
    cniVersion: "1.1.0",
    name: "manifold-net",
    type: "manifold",
    delegates: [{ cniVersion: "1.0.0", name: "lo", type: "loopback" }],
    cniDir: `${dir}/cache`,
    logLevel: "error",
  };
  const d = await startDaemon(dir, conf, { flags: ["--idle-timeout-ms", "300"] });
  let exited = false;
  d.child.status.then(() => exited = true);
  try {
    await fn(d.socket, () => !exited);
  } finally {
    d.kill("SIGKILL");
    await d.exited();
    await Deno.remove(dir, { recursive: true });
  }
}

function errorCode(bytes: Uint8Array): number | undefined {
  const a = decodeAnswer(bytes);
  return a ? JSON.parse(a.stdout).code : undefined;
}

Deno.test(
  "daemon socket: bad requests get CNI errors and the daemon keeps serving",
  opts,
  async () => {
    await withDaemon(async (socket, alive) => {
      const version = decodeAnswer(await rawExchange(socket, request({ CNI_COMMAND: "VERSION" })));
      assert.equal(version?.code, 0);
      assert.ok(JSON.parse(version!.stdout).supportedVersions.includes("1.1.0"));

      const huge = new Uint8Array([0xff, 0xff, 0xff, 0xff, 1, 2, 3]);
      assert.equal(errorCode(await rawExchange(socket, huge, { halfClose: true })), 7, "oversized");
      const notJson = frame(enc.encode("{not json"));
      assert.equal(errorCode(await rawExchange(socket, notJson, { halfClose: true })), 6);
      const wrongShape = frame(enc.encode(JSON.stringify({ v: 2, env: [] })));
      assert.equal(errorCode(await rawExchange(socket, wrongShape, { halfClose: true })), 6);
      const truncated = request({ CNI_COMMAND: "VERSION" }).subarray(0, 9);
      assert.equal(errorCode(await rawExchange(socket, truncated, { halfClose: true })), 5);
      const badCommand = decodeAnswer(await rawExchange(socket, request({ CNI_COMMAND: "NOPE" })));
      assert.equal(JSON.parse(badCommand!.stdout).code, 4, "the dispatcher's own error");

      // A client that connects and never sends is dropped after the idle timeout (300 ms).
      const started = performance.now();
      const idle = await rawExchange(socket, new Uint8Array());
      const ms = performance.now() - started;
      assert.ok(ms >= 250 && ms < 3000, `idle client closed after ${ms} ms`);
      assert.ok(idle.length === 0 || errorCode(idle) === 5);

      assert.ok(alive(), "still running");
      assert.equal(
        decodeAnswer(await rawExchange(socket, request({ CNI_COMMAND: "VERSION" })))?.code,
        0,
      );
    });
  },
);

Deno.test("daemon socket: fuzzed requests never crash the daemon", opts, async () => {
  const seed = Number(Deno.env.get("FUZZ_SEED") ?? 12);
  const runs = Number(Deno.env.get("DAEMON_FUZZ_RUNS") ?? 300);
  const base = request({ CNI_COMMAND: "VERSION", CNI_CONTAINERID: "x" }, '{"cniVersion":"1.0.0"}');
  await withDaemon(async (socket, alive) => {
    for (let i = 0; i < runs; i++) {
      const input = mutateBytes(new Rng(caseSeed(seed, i)), base);
      const out = await rawExchange(socket, input, { halfClose: true });
      if (out.length > 0) {
        const a = decodeAnswer(out);
        assert.ok(a && typeof a.code === "number", `case ${i}: an answer frame`);
        if (a.code !== 0) {
          const e = JSON.parse(a.stdout);
          assert.ok(typeof e.code === "number" && e.msg, `case ${i}: a CNI error, got ${a.stdout}`);
        }
      }
      assert.ok(alive(), `case ${i} (FUZZ_SEED=${seed}) stopped the daemon`);
    }
    assert.equal(decodeAnswer(await rawExchange(socket, base))?.code, 0, "still serving");
  });
});

Deno.test(
  "daemon socket: fuzzed env and config fields never choose a binary, a log file or the environment",
  { ...opts, ignore: !isRoot() },
  async () => {
    const seed = Number(Deno.env.get("FUZZ_SEED") ?? 20);
    const runs = Number(Deno.env.get("DAEMON_FUZZ_RUNS") ?? 300);
    const scratch = new Scratch();
    const netns = `/var/run/netns/${await scratch.netns("fz")}`; // the delegates' (loopback) own
    const dir = await Deno.makeTempDir({ prefix: "mft-sockf-" });
    const conf = {
      cniVersion: "1.1.0",
      name: "manifold-net",
      type: "manifold",
      delegates: [{ cniVersion: "1.0.0", name: "lo", type: "loopback" }],
      cniDir: `${dir}/cache`,
      logLevel: "error",
    };
    // Fake delegates a request might name: each would leave a marker.
    await Deno.mkdir(`${dir}/evil`);
    for (const name of ["loopback", "bridge", "manifold"]) {
      await Deno.writeTextFile(`${dir}/evil/${name}`, `#!/bin/sh\ntouch ${dir}/pwned\n`, {
        mode: 0o755,
      });
    }
    const d = await startDaemon(dir, conf, { flags: ["--idle-timeout-ms", "300"] });
    let exited = false;
    d.child.status.then(() => exited = true);
    const commands = ["ADD", "ADD", "ADD", "DEL", "CHECK", "GC", "STATUS", "VERSION", "", "add"];
    const keys = [
      "CNI_COMMAND",
      "CNI_CONTAINERID",
      "CNI_NETNS",
      "CNI_IFNAME",
      "CNI_ARGS",
      "CNI_PATH",
      "LD_PRELOAD",
      "PATH",
      "MANIFOLD_DELEGATION_DEPTH",
      "MANIFOLD_TEST_CRASHPOINT",
    ];
    try {
      for (let i = 0; i < runs; i++) {
        const r = new Rng(caseSeed(seed, i));
        // Mostly a valid call (so delegates would run), with fuzzed and foreign variables.
        const env: Record<string, string> = {
          CNI_COMMAND: commands[r.int(commands.length)],
          CNI_CONTAINERID: `fz${i % 7}`,
          CNI_NETNS: netns,
          CNI_IFNAME: "eth0",
        };
        for (const k of keys) {
          if (r.chance(0.3)) env[k] = r.chance(0.5) ? `${dir}/evil` : randomString(r);
        }
        if (r.chance(0.3)) env[randomString(r)] = randomString(r);
        const config: Record<string, unknown> = { ...conf, daemonSocket: d.socket };
        const fields = {
          binDir: `${dir}/evil`,
          cniDir: `${dir}/evil-cache`,
          logFile: `${dir}/req.log`,
          chrootDir: `${dir}/evil`,
          clusterNetwork: `${dir}/evil/loopback`,
          kubeconfig: `${dir}/evil/kc`,
          cniVersion: ["0.4.0", "1.0.0", "1.1.0", 7, "9.9.9"][r.int(5)],
          runtimeConfig: randomJson(r),
          args: randomJson(r),
          prevResult: randomJson(r),
          name: r.chance(0.8) ? conf.name : randomString(r),
          type: r.chance(0.8) ? conf.type : randomString(r),
        };
        for (const [k, v] of Object.entries(fields)) if (r.chance(0.5)) config[k] = v;
        const out = await rawExchange(d.socket, request(env, JSON.stringify(config)));
        const a = decodeAnswer(out);
        assert.ok(a && typeof a.code === "number", `case ${i}: an answer frame`);
        if (a.code !== 0) {
          const e = JSON.parse(a.stdout);
          assert.ok(typeof e.code === "number" && e.msg, `case ${i}: a CNI error, got ${a.stdout}`);
        }
        assert.ok(!exited, `case ${i} (FUZZ_SEED=${seed}) stopped the daemon`);
      }
      const there = (p: string) => Deno.lstat(p).then(() => true, () => false);
      assert.equal(await there(`${dir}/pwned`), false, "no binary of a request ran");
      assert.equal(await there(`${dir}/req.log`), false, "no log file of a request");
      assert.equal(await there(`${dir}/evil-cache`), false, "no cache dir of a request");
    } finally {
      d.kill("SIGKILL");
      await d.exited();
      await Deno.remove(dir, { recursive: true });
      await scratch.cleanup();
    }
  },
);

Deno.test(
  "daemon socket: a connection closed before its first byte is a probe, not a bad request",
  opts,
  async () => {
    const dir = await Deno.makeTempDir({ prefix: "mft-sock-" });
    const conf = {
      cniVersion: "1.1.0",
      name: "manifold-net",
      type: "manifold",
      delegates: [{ cniVersion: "1.0.0", name: "lo", type: "loopback" }],
      cniDir: `${dir}/cache`,
    };
    const d = await startDaemon(dir, conf, { flags: ["--log-level", "debug"] });
    try {
      for (let i = 0; i < 3; i++) {
        const conn = await Deno.connect({ transport: "unix", path: d.socket });
        conn.close(); // what `manifold doctor` and the conformance suite's readiness wait do
      }
      // A real request after the probes is still served, and a truncated one still reported.
      const version = decodeAnswer(
        await rawExchange(d.socket, request({ CNI_COMMAND: "VERSION" })),
      );
      assert.equal(version?.code, 0);
      const truncated = request({ CNI_COMMAND: "VERSION" }).subarray(0, 9);
      assert.equal(errorCode(await rawExchange(d.socket, truncated, { halfClose: true })), 5);
    } finally {
      d.kill("SIGTERM");
      const { stderr } = await d.exited();
      await Deno.remove(dir, { recursive: true });
      const lines = stderr.split("\n");
      assert.equal(lines.filter((l) => l.includes("(probe)")).length, 3, stderr);
      assert.equal(lines.filter((l) => l.includes("bad request")).length, 1, stderr);
      assert.ok(!stderr.includes("failed to send the answer"), stderr);
    }
  },
);
