/**
 * `manifold daemon` end to end (issue 12): a real daemon process against the API stand-in,
 * the real binary (scripts/manifold) forwarding to it exactly as a runtime runs it (env +
 * stdin with `daemonSocket`), real delegates in a real netns. Needs root.
 */

import assert from "node:assert/strict";
import { done, expectOk, podStatus, type World, world } from "../support/world.ts";
import { isRoot, linkNames } from "../support/netns.ts";
import { type DaemonProcess, startDaemon } from "../support/daemon.ts";
import { exists, until } from "../support/wait.ts";

const root = { ignore: !isRoot(), sanitizeResources: false, sanitizeOps: false };
const ANNOTATIONS_CAP = "io.kubernetes.cri.pod-annotations";

/** A world whose pod annotations come from the runtime (so ADD needs no pod GET). */
async function runtimeAnnotatedWorld(): Promise<World> {
  const annotations = { "k8s.v1.cni.cncf.io/networks": "bridge-net" };
  return await world({
    annotations,
    conf: {
      capabilities: { [ANNOTATIONS_CAP]: true },
      runtimeConfig: { [ANNOTATIONS_CAP]: annotations },
    },
  });
}

/** Cache files (relative paths), lock files left out. */
async function cacheFiles(dir: string, sub = ""): Promise<string[]> {
  const out: string[] = [];
  for await (const e of Deno.readDir(`${dir}${sub}`)) {
    if (e.name === "locks" || e.name.startsWith(".")) continue;
    if (e.isDirectory) out.push(...await cacheFiles(dir, `${sub}/${e.name}`));
    else out.push(`${sub}/${e.name}`);
  }
  return out.sort();
}

/** What a comparison between the two paths looks at after an ADD. */
async function snapshot(w: World, stdout: string) {
  const result = JSON.parse(stdout);
  return {
    status: podStatus(w).map((s) => ({
      name: s.name,
      interface: s.interface,
      default: s.default,
      ips: (s.ips as string[]).length,
    })),
    result: { interfaces: result.interfaces.length, ips: result.ips.length },
    cache: await cacheFiles(w.dirs.cache),
    links: (await linkNames(w.podNetns)).sort(),
    leases: (await w.leases()).length,
  };
}

async function stopDaemon(d: DaemonProcess): Promise<string> {
  d.kill("SIGKILL");
  return (await d.exited()).stderr;
}

Deno.test(
  "daemon: ADD, CHECK, DEL, DEL match the in-process path; ADD sends 0 GETs",
  root,
  async () => {
    const w = await runtimeAnnotatedWorld();
    const d = await startDaemon(await w.scratch.dir(), w.conf);
    try {
      const local = await w.call("ADD");
      expectOk(local, "in-process ADD");
      const before = await snapshot(w, local.stdout);
      expectOk(await w.call("DEL"), "in-process DEL");
      assert.deepEqual(await w.leases(), []);
      const cleared = {
        cache: await cacheFiles(w.dirs.cache),
        links: await linkNames(w.podNetns),
      };

      await until(() => w.api.requests.some((r) => r.query.includes("watch")), "the NAD watch");
      const seen = w.api.requests.length;
      const add = await w.call("ADD", { config: d.conf });
      expectOk(add, "daemon ADD");
      assert.doesNotMatch(add.stderr, /in-process/, "served by the daemon, no fallback");
      const during = w.api.requests.slice(seen);
      assert.deepEqual(during.map((r) => r.method), ["PATCH"], "one status PATCH, no GET");
      assert.deepEqual(await snapshot(w, add.stdout), before, "same status, cache and kernel");

      expectOk(await w.call("CHECK", { config: d.conf }), "daemon CHECK");
      expectOk(await w.call("DEL", { config: d.conf }), "daemon DEL");
      expectOk(await w.call("DEL", { config: d.conf }), "daemon DEL again");
      assert.deepEqual(await w.leases(), []);
      assert.deepEqual(
        { cache: await cacheFiles(w.dirs.cache), links: await linkNames(w.podNetns) },
        cleared,
        "the same cache and kernel state as after the in-process DEL",
      );
    } finally {
      await stopDaemon(d);
      await done(w);
    }
  },
);

Deno.test(
  "daemon: stopped → the next ADD falls back in-process; daemonFallback false → code 11",
  root,
  async () => {
    const w = await runtimeAnnotatedWorld();
    const d = await startDaemon(await w.scratch.dir(), w.conf);
    try {
      d.kill("SIGTERM");
      const end = await d.exited();
      assert.equal(end.code, 0, end.stderr);
      assert.equal(await exists(d.socket), false, "socket removed");

      const strict = await w.call("ADD", { config: { ...d.conf, daemonFallback: false } });
      assert.equal(strict.code, 1);
      assert.equal(strict.json?.code, 11, strict.stdout);
      assert.deepEqual(await w.leases(), [], "nothing ran");

      const add = await w.call("ADD", { config: d.conf });
      expectOk(add, "fallback ADD");
      assert.match(add.stderr, /running the request in-process/);
      assert.equal(podStatus(w).length, 2);
      const counted = await Deno.readTextFile(`${d.socket.replace(/\/[^/]+$/, "")}/fallbacks`);
      assert.equal(counted.trim().split("\n").length, 1, "one fallback counted");
      expectOk(await w.call("DEL", { config: d.conf }), "fallback DEL");
      assert.deepEqual(await w.leases(), []);
    } finally {
      await stopDaemon(d);
      await done(w);
    }
  },
);

Deno.test(
  "daemon: SIGKILLed mid-ADD → the binary reports code 11, then DEL converges",
  root,
  async () => {
    const w = await runtimeAnnotatedWorld();
    // The daemon dies right after the first delegate ADD (a lease is taken, nothing cached final).
    const d = await startDaemon(await w.scratch.dir(), w.conf, {
      env: { MANIFOLD_TEST_CRASHPOINT: "add:after-delegate" },
    });
    try {
      const add = await w.call("ADD", { config: d.conf });
      assert.equal(add.code, 1, add.stdout);
      assert.equal(add.json?.code, 11, add.stdout);
      assert.doesNotMatch(add.stderr, /in-process/, "never run a second time");
      const end = await d.exited();
      assert.equal(end.signal, "SIGKILL");
      assert.equal((await w.leases()).length, 1, "the delegate's lease was taken");

      expectOk(await w.call("DEL", { config: d.conf }), "DEL after the crash (fallback)");
      assert.deepEqual(await w.leases(), [], "no leaked lease");
      assert.deepEqual(await linkNames(w.podNetns), [], "no interface left in the pod");
    } finally {
      await stopDaemon(d);
      await done(w);
    }
  },
);

/** Replaces `bridge` in binDir (searched first) by a wrapper that logs and sleeps. */
async function slowBridge(w: World, seconds: number): Promise<string> {
  const log = `${w.dirs.bin}/bridge.log`;
  await Deno.writeTextFile(
    `${w.dirs.bin}/bridge`,
    `#!/bin/sh\necho "$CNI_COMMAND start" >>${log}\nsleep ${seconds}\n` +
      `/usr/lib/cni/bridge\nrc=$?\necho "$CNI_COMMAND end" >>${log}\nexit $rc\n`,
    { mode: 0o755 },
  );
  return log;
}

async function logLines(path: string): Promise<string[]> {
  return (await Deno.readTextFile(path).catch(() => "")).trim().split("\n").filter((l) => l);
}

Deno.test(
  "daemon: requests for one container are serialized across the daemon and in-process paths",
  root,
  async () => {
    const w = await runtimeAnnotatedWorld();
    const log = await slowBridge(w, 0.4);
    const d = await startDaemon(await w.scratch.dir(), w.conf);
    try {
      const add = w.call("ADD", { config: d.conf }); // through the daemon
      await until(
        async () => (await logLines(log)).includes("ADD start"),
        "the daemon's ADD",
        20_000,
      );
      const del = w.call("DEL"); // in-process, same container, while the ADD runs
      expectOk(await add, "daemon ADD");
      expectOk(await del, "in-process DEL");
      const lines = await logLines(log);
      const firstDel = lines.indexOf("DEL start");
      assert.ok(firstDel > lines.lastIndexOf("ADD end"), `DEL waited for ADD: ${lines.join(", ")}`);
      assert.deepEqual(await w.leases(), [], "the DEL after the ADD removed everything");
    } finally {
      await stopDaemon(d);
      await done(w);
    }
  },
);

Deno.test(
  "daemon: SIGTERM finishes the request in flight, removes the socket, exits 0",
  root,
  async () => {
    const w = await runtimeAnnotatedWorld();
    const log = await slowBridge(w, 0.5);
    const d = await startDaemon(await w.scratch.dir(), w.conf);
    try {
      const add = w.call("ADD", { config: d.conf });
      await until(
        async () => (await logLines(log)).includes("ADD start"),
        "the daemon's ADD",
        20_000,
      );
      d.kill("SIGTERM");
      await until(async () => !await exists(d.socket), "the socket removed", 5_000);
      const r = await add;
      expectOk(r, "ADD in flight at SIGTERM");
      const end = await d.exited();
      assert.equal(end.code, 0, end.stderr.slice(-2000));
      assert.equal(podStatus(w).length, 2);
      const del = await w.call("DEL", { config: d.conf });
      expectOk(del, "DEL after the daemon left (fallback)");
      assert.match(del.stderr, /running the request in-process/);
      assert.deepEqual(await w.leases(), []);
    } finally {
      await stopDaemon(d);
      await done(w);
    }
  },
);
