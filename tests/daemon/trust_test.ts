/**
 * The daemon's trust boundary (issue 20): a real `manifold daemon`, the real binary forwarding
 * to it, real delegates in a real netns. What a socket client may choose (the per-invocation
 * CNI fields) and what it may not (binaries, paths, the environment), and `--config` followed as
 * it changes. Needs root.
 */

import assert from "node:assert/strict";
import { done, expectOk, NS, POD, podStatus, UID, type World, world } from "../support/world.ts";
import { isRoot, linkNames } from "../support/netns.ts";
import { decodeAnswer, rawExchange, startDaemon } from "../support/daemon.ts";
import { k8sArgs } from "../support/plugin.ts";
import { frame } from "../../lib/daemon/protocol.ts";
import {
  hotPlugWorld,
  setNetworks,
  startHotPlugDaemon,
  statusInterfaces,
  stop,
} from "../support/hotplug_world.ts";
import { until } from "../support/wait.ts";

const root = { ignore: !isRoot(), sanitizeResources: false, sanitizeOps: false };
const enc = new TextEncoder();

/** A framed request with any header `env` (what a hostile client can write). */
function request(env: Record<string, string>, config: Record<string, unknown>): Uint8Array {
  const h = frame(enc.encode(JSON.stringify({ v: 1, env })));
  const b = frame(enc.encode(JSON.stringify(config)));
  const out = new Uint8Array(h.length + b.length);
  out.set(h);
  out.set(b, h.length);
  return out;
}

/** Fake delegates named like the real ones: each would touch `marker`. */
async function evilBin(dir: string, marker: string): Promise<void> {
  await Deno.mkdir(dir, { recursive: true });
  for (const name of ["bridge", "host-local", "macvlan", "loopback"]) {
    await Deno.writeTextFile(`${dir}/${name}`, `#!/bin/sh\ntouch ${marker}\nexit 1\n`, {
      mode: 0o755,
    });
  }
}

/** A `bridge` in the daemon's binDir that records its environment, then runs the real one. */
async function recordingBridge(w: World, log: string): Promise<void> {
  await Deno.writeTextFile(
    `${w.dirs.bin}/bridge`,
    `#!/bin/sh\nenv >> ${log}\necho === >> ${log}\nexec /usr/lib/cni/bridge\n`,
    { mode: 0o755 },
  );
}

async function exists(path: string): Promise<boolean> {
  return await Deno.lstat(path).then(() => true, () => false);
}

Deno.test(
  "daemon trust: a request's binDir and CNI_PATH never choose what runs; another network is code 7",
  root,
  async () => {
    const w = await world();
    const dir = await w.scratch.dir();
    const d = await startDaemon(dir, w.conf);
    try {
      const marker = `${dir}/pwned`;
      await evilBin(`${dir}/evil`, marker);
      const hostile = { ...d.conf, binDir: `${dir}/evil`, cniDir: `${dir}/evil-cache` };
      const add = await w.call("ADD", { config: hostile, path: `${dir}/evil` });
      expectOk(add, "ADD runs with the daemon's binDir and CNI_PATH");
      assert.equal(await exists(marker), false, "no delegate of the request's binDir/CNI_PATH ran");
      assert.equal(await exists(`${dir}/evil-cache`), false, "nor its cniDir used");
      assert.deepEqual((await linkNames(w.podNetns)).sort(), ["eth0"]);
      expectOk(await w.call("DEL", { config: hostile, path: `${dir}/evil` }), "DEL");
      assert.equal(await exists(marker), false);

      const other = await w.call("ADD", { config: { ...d.conf, name: "other-net" } });
      assert.equal(other.code, 1, other.stdout);
      assert.equal(other.json?.code, 7, other.stdout);
      assert.match(String(other.json?.msg), /network name "other-net" is not the daemon's/);
      const type = await w.call("ADD", { config: { ...d.conf, type: "evil" } });
      assert.equal(type.json?.code, 7, type.stdout);
      assert.match(String(type.json?.msg), /type "evil"/);
      assert.deepEqual(await linkNames(w.podNetns), [], "nothing attached by refused requests");
    } finally {
      d.kill("SIGKILL");
      await d.exited();
      await done(w);
    }
  },
);

Deno.test(
  "daemon trust: LD_PRELOAD, PATH and CNI_PATH of a request never reach a delegate",
  root,
  async () => {
    const w = await world({
      annotations: {},
      conf: {},
    });
    const dir = await w.scratch.dir();
    const log = `${dir}/delegate-env`;
    await recordingBridge(w, log);
    const d = await startDaemon(dir, w.conf);
    try {
      const env = {
        CNI_COMMAND: "ADD",
        CNI_CONTAINERID: w.containerId,
        CNI_NETNS: w.netnsPath,
        CNI_IFNAME: "eth0",
        CNI_ARGS: k8sArgs(NS, POD, w.containerId, UID),
        CNI_PATH: `${dir}/evil`,
        LD_PRELOAD: "/nonexistent/evil.so",
        PATH: `${dir}/evil`,
        http_proxy: "http://evil:1",
      };
      const answer = decodeAnswer(await rawExchange(d.socket, request(env, d.conf)));
      assert.equal(answer?.code, 0, String(answer?.stdout));
      const seen = await Deno.readTextFile(log);
      assert.match(seen, /^CNI_COMMAND=ADD$/m, "the delegate ran");
      assert.doesNotMatch(seen, /LD_PRELOAD/);
      assert.doesNotMatch(seen, /evil/);
      // binDir, then the daemon's own CNI_PATH.
      assert.match(seen, /^CNI_PATH=[^\n]*:\/usr\/lib\/cni$/m, "the daemon's own CNI_PATH");
      env.CNI_COMMAND = "DEL";
      assert.equal(decodeAnswer(await rawExchange(d.socket, request(env, d.conf)))?.code, 0);
    } finally {
      d.kill("SIGKILL");
      await d.exited();
      await done(w);
    }
  },
);

Deno.test(
  "daemon trust: --config rewritten → the next request and the next hot-plug pass use its defaultNetworks",
  root,
  async () => {
    const w = await hotPlugWorld();
    let d;
    try {
      d = await startHotPlugDaemon(w);
      // The installer rewrites the file (a new inode, as an atomic rename does).
      const next = { ...d.conf, defaultNetworks: ["bridge-net"], multusNamespace: NS };
      await Deno.writeTextFile(`${d.confPath}.new`, JSON.stringify(next));
      await Deno.rename(`${d.confPath}.new`, d.confPath);

      // The runtime still sends its own copy (without defaultNetworks).
      expectOk(await w.call("ADD", { config: d.conf }), "sandbox ADD through the daemon");
      assert.deepEqual((await linkNames(w.podNetns)).sort(), ["eth0", "net1"]);
      assert.deepEqual(podStatus(w).map((s) => s.interface), ["eth0", "net1"]);

      // Hot-plug plans with the same defaultNetworks: net1 is kept, the new element is net2.
      setNetworks(w, JSON.stringify([{ name: "macvlan-net", ips: ["10.9.0.5/24"] }]));
      await until(() => statusInterfaces(w).includes("net2"), "network-status with net2", 30_000);
      assert.deepEqual(statusInterfaces(w), ["eth0", "net1", "net2"]);
      assert.deepEqual((await linkNames(w.podNetns)).sort(), ["eth0", "net1", "net2"]);
      expectOk(await w.call("DEL", { config: d.conf }), "DEL");
    } finally {
      await stop(d);
      await done(w);
    }
  },
);
