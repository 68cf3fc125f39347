/**
 * The node-local NAD mirror end to end: `manifold mirror` as a real process (through
 * scripts/manifold) against the HTTPS API stand-in, then the plugin's ADD in
 * runtime-annotations mode with `nadMirrorDir` set: no API read at all, only the
 * network-status PATCH. Needs root (real netns and delegates).
 */

import assert from "node:assert/strict";
import { MIRROR_STATE_FILE, mirrorPath } from "../../lib/multinet/nad/mirror.ts";
import { isRoot, linkNames } from "../support/netns.ts";
import { MANIFOLD } from "../support/plugin.ts";
import { done, expectOk, NS, podStatus, type World, world } from "../support/world.ts";
import { exists, until } from "../support/wait.ts";

const root = { ignore: !isRoot(), sanitizeResources: false, sanitizeOps: false };

const SELECTION = JSON.stringify([
  { name: "bridge-net" },
  { name: "macvlan-net", interface: "data0", ips: ["10.240.3.7/24"], mac: "02:00:00:0a:f0:07" },
]);

/** The plugin config of a pod whose annotations come from the runtime, reading the mirror. */
function mirrorConf(w: World, dir: string, selection: string): Record<string, unknown> {
  return {
    ...w.conf,
    nadMirrorDir: dir,
    capabilities: { "io.kubernetes.cri.pod-annotations": true },
    runtimeConfig: {
      "io.kubernetes.cri.pod-annotations": { "k8s.v1.cni.cncf.io/networks": selection },
    },
  };
}

/** Requests to API resources (anything but `/version`, the connection warm-up). */
function apiRequests(w: World, since: number) {
  return w.api.requests.slice(since).filter((r) => r.path.startsWith("/api"));
}

function mirrorProcess(args: string[]): Deno.ChildProcess {
  return new Deno.Command(MANIFOLD, {
    args: ["mirror", ...args],
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
}

Deno.test({
  name: "mirror --once, then ADD with runtime annotations reads no NAD from the API",
  ...root,
  async fn() {
    const w = await world();
    try {
      const dir = `${w.dirs.cache}/nads`;
      const kubeconfig = `${w.dirs.kube}/kubeconfig`;
      const out = await mirrorProcess(["--once", "--dir", dir, "--kubeconfig", kubeconfig])
        .output();
      const stderr = new TextDecoder().decode(out.stderr);
      assert.equal(out.code, 0, stderr);
      // JSON log lines.
      for (const line of stderr.trim().split("\n")) {
        assert.equal(typeof JSON.parse(line).msg, "string");
      }
      assert.ok(await exists(mirrorPath(dir, NS, "bridge-net")));
      assert.ok(await exists(mirrorPath(dir, NS, "macvlan-net")));
      assert.ok(await exists(`${dir}/${MIRROR_STATE_FILE}`));

      const since = w.api.requests.length;
      const conf = mirrorConf(w, dir, SELECTION);
      expectOk(await w.call("ADD", { config: conf }), "ADD");
      assert.deepEqual(await linkNames(w.podNetns), ["data0", "eth0", "net1"]);
      const reqs = apiRequests(w, since);
      assert.deepEqual(
        reqs.map((r) => `${r.method} ${r.path}`),
        [`PATCH /api/v1/namespaces/${NS}/pods/web-0/status`],
        "only the status PATCH",
      );
      assert.equal(podStatus(w).length, 3);
      expectOk(await w.call("DEL", { config: conf }), "DEL");
      assert.deepEqual(await w.leases(), []);

      // Without the mirror's state file the plugin asks the API (one GET per NAD).
      await Deno.remove(`${dir}/${MIRROR_STATE_FILE}`);
      const before = w.api.requests.length;
      expectOk(await w.call("ADD", { config: conf }), "ADD without a synced mirror");
      const gets = apiRequests(w, before).filter((r) => r.method === "GET");
      assert.equal(gets.length, 2, gets.map((r) => r.path).join(", "));
      assert.ok(gets.every((r) => r.path.includes("/network-attachment-definitions/")));
      expectOk(await w.call("DEL", { config: conf }), "DEL");
    } finally {
      await done(w);
    }
  },
});

Deno.test({
  name: "the long-running mirror follows the API; ADD uses a NAD created after it started",
  ...root,
  async fn() {
    const w = await world();
    const dir = `${w.dirs.cache}/nads`;
    const child = mirrorProcess(["--dir", dir, "--kubeconfig", `${w.dirs.kube}/kubeconfig`]);
    const output = child.output();
    let stopped = false;
    try {
      await until(() => exists(`${dir}/${MIRROR_STATE_FILE}`), "the first list", 15_000);
      await until(() => Promise.resolve(w.api.nadWatchCount === 1), "the watch", 15_000);
      w.api.addNad({ namespace: NS, name: "late-net", config: w.nadConfigs["bridge-net"] });
      await until(() => exists(mirrorPath(dir, NS, "late-net")), "the new NAD mirrored", 15_000);

      const since = w.api.requests.length;
      const conf = mirrorConf(w, dir, "late-net@late0");
      expectOk(await w.call("ADD", { config: conf }), "ADD");
      assert.deepEqual(await linkNames(w.podNetns), ["eth0", "late0"]);
      const reqs = apiRequests(w, since).filter((r) => !r.query.includes("watch="));
      assert.deepEqual(reqs.map((r) => r.method), ["PATCH"], "only the status PATCH");
      expectOk(await w.call("DEL", { config: conf }), "DEL");

      // A deleted NAD disappears from the mirror; SIGTERM stops it cleanly.
      w.api.deleteNad(NS, "late-net");
      await until(
        async () => !await exists(mirrorPath(dir, NS, "late-net")),
        "the file removed",
        15_000,
      );
      child.kill("SIGTERM");
      stopped = true;
      const out = await output;
      assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
      assert.ok(!await exists(`${dir}/${MIRROR_STATE_FILE}`), "state removed on stop");
    } finally {
      if (!stopped) {
        try {
          child.kill("SIGKILL");
        } catch { /* already gone */ }
        await output;
      }
      await done(w);
    }
  },
});
