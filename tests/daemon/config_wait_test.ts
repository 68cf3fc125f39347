/**
 * `manifold daemon` started before its config exists (the DaemonSet's daemon container starts
 * with the installer, which writes `00-manifold.conflist` only once the cluster network's
 * config exists and the plugin is in place): a real daemon process waits instead of exiting
 * into the kubelet's restart back-off — `/healthz` answers, `/readyz` says it waits — then
 * serves once the file appears; SIGTERM while waiting exits 0.
 */

import assert from "node:assert/strict";
import { MANIFOLD } from "../support/plugin.ts";
import { loopbackPort } from "../support/ports.ts";
import { until } from "../support/wait.ts";

const opts = { sanitizeResources: false, sanitizeOps: false };

function spawnDaemon(dir: string, port: number): Deno.ChildProcess {
  return new Deno.Command(MANIFOLD, {
    args: [
      "daemon",
      "--config",
      `${dir}/net.d/00-manifold.conflist`,
      "--socket",
      `${dir}/run/manifold.sock`,
      "--metrics-address",
      `127.0.0.1:${port}`,
    ],
    clearEnv: true,
    env: { PATH: "/usr/sbin:/usr/bin:/sbin:/bin", CNI_PATH: "/usr/lib/cni" },
    stdout: "null",
    stderr: "piped",
  }).spawn();
}

function waitUntil(what: string, cond: () => Promise<boolean>, ms: number): Promise<unknown> {
  return until(cond, what, ms);
}

async function get(port: number, path: string): Promise<{ status: number; text: string }> {
  const r = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: r.status, text: await r.text() };
}

Deno.test(
  "daemon: waits for a config that does not exist yet, healthy and not ready, then serves",
  opts,
  async () => {
    const dir = await Deno.makeTempDir({ prefix: "mft-cfgwait-" });
    const port = loopbackPort();
    // The config's directory exists from the start (deploy/: a DirectoryOrCreate hostPath);
    // the file does not.
    await Deno.mkdir(`${dir}/net.d`);
    const child = spawnDaemon(dir, port);
    try {
      await Deno.mkdir(`${dir}/run`);
      // Liveness answers while the config is missing; readiness says why not.
      await waitUntil(
        "healthz",
        async () => (await get(port, "/healthz").catch(() => undefined))?.status === 200,
        30_000,
      );
      const r = await get(port, "/readyz");
      assert.equal(r.status, 503);
      assert.match(r.text, /waiting for the config/);
      await new Promise((res) => setTimeout(res, 1500));
      assert.equal((await get(port, "/healthz")).status, 200, "still running after 1.5 s");

      await Deno.writeTextFile(
        `${dir}/net.d/00-manifold.conflist`,
        JSON.stringify({
          cniVersion: "1.1.0",
          name: "manifold-net",
          type: "manifold",
          delegates: [{ cniVersion: "1.0.0", name: "lo", type: "loopback" }],
          cniDir: `${dir}/cache`,
          daemonSocket: `${dir}/run/manifold.sock`,
          logLevel: "error",
        }),
      );
      await waitUntil(
        "socket",
        async () =>
          (await Deno.stat(`${dir}/run/manifold.sock`).catch(() => undefined))?.isSocket === true,
        30_000,
      );
      await waitUntil(
        "not waiting any more",
        async () => !(await get(port, "/readyz")).text.includes("waiting for the config"),
        30_000,
      );
      child.kill("SIGTERM");
      const out = await child.output();
      assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
    } finally {
      try {
        child.kill("SIGKILL");
      } catch { /* gone */ }
      await child.status.catch(() => {});
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
);

Deno.test("daemon: SIGTERM while waiting for the config exits 0", opts, async () => {
  const dir = await Deno.makeTempDir({ prefix: "mft-cfgwait-" });
  const port = loopbackPort();
  await Deno.mkdir(`${dir}/net.d`);
  const child = spawnDaemon(dir, port);
  try {
    await waitUntil(
      "healthz",
      async () => (await get(port, "/healthz").catch(() => undefined))?.status === 200,
      30_000,
    );
    child.kill("SIGTERM");
    const out = await child.output();
    assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  } finally {
    try {
      child.kill("SIGKILL");
    } catch { /* gone */ }
    await child.status.catch(() => {});
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
});
