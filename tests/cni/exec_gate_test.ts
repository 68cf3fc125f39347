/**
 * The stdin gate of {@link ProcessPluginExec} (`ExecRequest.stdinGate`, used by ADD for its
 * first delegate while the intent record becomes durable): the plugin process exists at once,
 * but its config — and the note of its process group — come only once the gate opens; a gate
 * that rejects stops the plugin before it read anything, notes nothing, and is the error. Real
 * processes; no root needed. Each runs with Deno.Command and with posix_spawn (`nativeSpawn`).
 */

import assert from "node:assert/strict";
import { type ExecRequest, type GroupTracker, ProcessPluginExec } from "../../lib/cni/exec.ts";
import type { ProcessGroup } from "../../lib/cni/process_group.ts";

const ENV = { CNI_COMMAND: "ADD", CNI_CONTAINERID: "c1", CNI_IFNAME: "eth0" };

function recorder() {
  const seen: { event: string; group: ProcessGroup; at: number }[] = [];
  const tracker: GroupTracker = {
    tracks: () => true,
    started: (_req: ExecRequest, group) =>
      void seen.push({ event: "started", group, at: performance.now() }),
    ended: (_req: ExecRequest, group) =>
      void seen.push({ event: "ended", group, at: performance.now() }),
  };
  return { seen, tracker };
}

/** Polls `ok` every 10 ms for up to `ms`; true once it held. */
async function until(ok: () => boolean, ms = 5000): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end;) {
    if (ok()) return true;
    await new Promise((r) => setTimeout(r, 10));
  }
  return ok();
}

async function withPlugin(fn: (dir: string, plugin: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "exec-gate-" });
  try {
    const plugin = `${dir}/plugin`;
    // Says it started (its PID), then copies its stdin to a file and prints a result.
    await Deno.writeTextFile(
      plugin,
      `#!/bin/sh\necho $$ > ${dir}/started\ncat > ${dir}/stdin\necho '{"cniVersion":"1.0.0"}'\n`,
      { mode: 0o755 },
    );
    await fn(dir, plugin);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

function exists(path: string): boolean {
  try {
    Deno.statSync(path);
    return true;
  } catch {
    return false;
  }
}

for (const nativeSpawn of [false, true]) {
  Deno.test(`stdinGate: the plugin starts at once, gets its config (and is noted) only once the gate opens${nativeSpawn ? " (posix_spawn)" : ""}`, async () => {
    await withPlugin(async (dir, plugin) => {
      const { seen, tracker } = recorder();
      const exec = new ProcessPluginExec({ groups: tracker, nativeSpawn });
      let open!: () => void;
      const gate = new Promise<void>((r) => open = r);
      const running = exec.exec({
        path: plugin,
        stdin: new TextEncoder().encode('{"gated":true}'),
        env: ENV,
        timeoutMs: 10_000,
        stdinGate: gate,
      });
      assert.ok(
        await until(() => exists(`${dir}/started`)),
        "the plugin runs before the gate opens",
      );
      await new Promise((r) => setTimeout(r, 100));
      assert.equal(seen.length, 0, "no group noted while the gate is closed");
      const stdinBefore = exists(`${dir}/stdin`) ? Deno.readTextFileSync(`${dir}/stdin`) : "";
      assert.equal(stdinBefore, "", "nothing written to the plugin's stdin before the gate opens");
      const openedAt = performance.now();
      open();
      const res = await running;
      assert.equal(res.code, 0);
      assert.equal(Deno.readTextFileSync(`${dir}/stdin`), '{"gated":true}');
      assert.deepEqual(seen.map((s) => s.event), ["started", "ended"]);
      assert.ok(seen[0].at >= openedAt, "the group is noted once the gate opened");
      assert.equal(seen[0].group.pgid, Number(Deno.readTextFileSync(`${dir}/started`).trim()));
    });
  });
}

for (const nativeSpawn of [false, true]) {
  Deno.test(`stdinGate: a gate that rejects stops the plugin unread, notes nothing, and is the error${nativeSpawn ? " (posix_spawn)" : ""}`, async () => {
    await withPlugin(async (dir, plugin) => {
      const { seen, tracker } = recorder();
      const exec = new ProcessPluginExec({ groups: tracker, nativeSpawn });
      let fail!: (e: Error) => void;
      const gate = new Promise<void>((_, r) => fail = r);
      const running = exec.exec({
        path: plugin,
        stdin: new TextEncoder().encode('{"never":true}'),
        env: ENV,
        timeoutMs: 30_000,
        stdinGate: gate,
      });
      assert.ok(await until(() => exists(`${dir}/started`)));
      const pid = Number(Deno.readTextFileSync(`${dir}/started`).trim());
      const err = new Error("intent record not written: disk full");
      const t0 = performance.now();
      fail(err);
      await assert.rejects(running, (e) => e === err);
      assert.ok(performance.now() - t0 < 5000, "stopped at once, not at its timeout");
      assert.equal(seen.length, 0, "nothing noted");
      const stdin = exists(`${dir}/stdin`) ? Deno.readTextFileSync(`${dir}/stdin`) : "";
      assert.equal(stdin, "", "the config never reached the plugin");
      assert.ok(
        await until(() =>
          !exists(`/proc/${pid}/stat`) ||
          /\) [ZX] /.test(Deno.readTextFileSync(`/proc/${pid}/stat`))
        ),
        "the plugin is gone",
      );
    });
  });
}

for (const nativeSpawn of [false, true]) {
  Deno.test(`stdinGate: a plugin that exits before the gate opens leaves no note behind${nativeSpawn ? " (posix_spawn)" : ""}`, async () => {
    const dir = await Deno.makeTempDir({ prefix: "exec-gate-" });
    try {
      const plugin = `${dir}/plugin`;
      await Deno.writeTextFile(plugin, "#!/bin/sh\nexit 3\n", { mode: 0o755 });
      const { seen, tracker } = recorder();
      const exec = new ProcessPluginExec({ groups: tracker, nativeSpawn });
      let open!: () => void;
      const gate = new Promise<void>((r) => open = r);
      const running = exec.exec({
        path: plugin,
        stdin: new TextEncoder().encode("{}"),
        env: ENV,
        timeoutMs: 10_000,
        stdinGate: gate,
      });
      await new Promise((r) => setTimeout(r, 200)); // it has exited by now
      open();
      const res = await running;
      assert.equal(res.code, 3);
      await new Promise((r) => setTimeout(r, 50));
      assert.deepEqual(seen, [], "a note written after the exit would never be removed");
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  });
}
