/**
 * Multus `logOptions` through the real plugin process (scripts/manifold, as a runtime calls
 * it): a `logFile` at its `maxSize` rotates to `<logFile>.1` when the plugin logs, and an
 * invalid `logOptions` is a code-7 error naming the key. The delegate is the real
 * `loopback` plugin from /usr/lib/cni (its DEL with no netns succeeds and changes nothing).
 */

import assert from "node:assert/strict";
import { runPlugin } from "../support/plugin.ts";

async function scratch(): Promise<
  { dir: string; config(extra: Record<string, unknown>): Record<string, unknown> }
> {
  const dir = await Deno.makeTempDir({ prefix: "manifold-logopts-" });
  await Deno.writeTextFile(
    `${dir}/default.conflist`,
    JSON.stringify({ cniVersion: "1.0.0", name: "lo-net", plugins: [{ type: "loopback" }] }),
  );
  return {
    dir,
    config: (extra) => ({
      cniVersion: "1.0.0",
      name: "manifold-cni-network",
      type: "manifold",
      clusterNetwork: `${dir}/default.conflist`,
      cniDir: `${dir}/cache`,
      binDir: "/usr/lib/cni",
      logLevel: "debug",
      logFile: `${dir}/manifold.log`,
      logToStderr: false,
      ...extra,
    }),
  };
}

Deno.test("plugin process: a logFile at logOptions.maxSize rotates to .1 (maxBackups kept)", async () => {
  const s = await scratch();
  try {
    const log = `${s.dir}/manifold.log`;
    const full = "x".repeat(1024 * 1024 - 100) + "\n"; // 100 bytes short of 1 MiB
    await Deno.writeTextFile(log, full);
    await Deno.writeTextFile(`${log}.1`, "older backup\n");
    const r = await runPlugin({
      command: "DEL",
      config: s.config({ logOptions: { maxSize: 1, maxBackups: 1, compress: false } }),
      containerId: "logopts-1",
    });
    assert.equal(r.code, 0, r.stdout + r.stderr);
    // The old file is the backup now; the one backup allowed pushed "older backup" out.
    assert.equal(await Deno.readTextFile(`${log}.1`).then((t) => t.startsWith(full)), true);
    await assert.rejects(Deno.stat(`${log}.2`), Deno.errors.NotFound);
    const lines = (await Deno.readTextFile(log)).trim().split("\n").map((l) => JSON.parse(l));
    assert.ok(lines.length > 0);
    assert.ok(lines.some((l) => l.msg === "timeline" && l.cmd === "DEL"), JSON.stringify(lines));
    assert.ok((await Deno.stat(log)).size < 1024 * 1024);
  } finally {
    await Deno.remove(s.dir, { recursive: true });
  }
});

Deno.test("plugin process: an invalid logOptions is a code-7 error naming the key", async () => {
  const s = await scratch();
  try {
    for (
      const [logOptions, key] of [
        [{ maxSize: 0 }, "logOptions.maxSize"],
        [{ maxBackups: "3" }, "logOptions.maxBackups"],
        [{ maxsize: 10 }, "maxsize"],
      ] as const
    ) {
      const r = await runPlugin({
        command: "DEL",
        config: s.config({ logOptions }),
        containerId: "c",
      });
      assert.equal(r.code, 1, r.stdout);
      assert.equal(r.json?.code, 7, r.stdout);
      assert.match(String(r.json?.details), new RegExp(key.replace(".", "\\.")), r.stdout);
    }
  } finally {
    await Deno.remove(s.dir, { recursive: true });
  }
});
