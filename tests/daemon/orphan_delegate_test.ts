/**
 * A delegate never outlives its caller's teardown (issue 20 item 7), with `manifold daemon`:
 * the daemon is SIGKILLed while a slow delegate ADD runs (the delegate is its child, left
 * running); the runtime's DEL, served by the restarted daemon, must stop that delegate before
 * its own delegate DELs, so that nothing it would have made appears afterwards (checked at
 * least 5 s after the DEL and after the delegate would have finished). Real daemon
 * processes, the real binary forwarding to them, real bridge + host-local behind a slow
 * wrapper, real netns. Needs root.
 */

import assert from "node:assert/strict";
import { type DaemonProcess, startDaemon } from "../support/daemon.ts";
import { assertNoLeaks } from "../support/leaks.ts";
import { isRoot, linkNames } from "../support/netns.ts";
import { installSlowBridge, runs } from "../support/slow_delegate.ts";
import { exists, until } from "../support/wait.ts";
import { done, expectOk, world } from "../support/world.ts";

const root = { ignore: !isRoot(), sanitizeResources: false, sanitizeOps: false };

/**
 * How long the delegate's ADD sleeps: long enough that the DEL (a process start, or a daemon
 * restart, on a loaded machine) comes while it still runs, so that the DEL has to stop it.
 */
const SLOW_SECONDS = 8;

Deno.test(
  "daemon: SIGKILLed mid-ADD of a slow delegate, DEL via the restarted daemon; then nothing left",
  root,
  async () => {
    const w = await world({ annotations: { "k8s.v1.cni.cncf.io/networks": "bridge-net" } });
    const dir = await w.scratch.dir();
    const daemons: DaemonProcess[] = [];
    try {
      const slow = await installSlowBridge(w.dirs.bin, SLOW_SECONDS);
      const first = await startDaemon(dir, w.conf);
      daemons.push(first);
      const add = w.call("ADD", { config: first.conf });
      const note = `${w.dirs.cache}/delegates/${w.containerId}@eth0.group`;
      await until(() => exists(slow.marker), "the slow delegate's ADD", 30_000);
      const finishes = Date.now() + SLOW_SECONDS * 1000; // when the delegate would be done
      await until(() => exists(note), "the note", 2500).catch(() => {});
      first.kill("SIGKILL");
      assert.equal((await first.exited()).signal, "SIGKILL");
      const lost = await add;
      assert.equal(lost.json?.code, 11, lost.stdout);
      const [delegate] = await slow.pids();
      assert.ok(await runs(delegate), "the delegate outlived the daemon");

      // The DaemonSet restarts the daemon; the runtime's DEL goes to it.
      await Deno.remove(first.socket).catch(() => {});
      const second = await startDaemon(dir, w.conf);
      daemons.push(second);
      const del = await w.call("DEL", { config: second.conf });
      expectOk(del, "DEL via the restarted daemon");
      assert.doesNotMatch(del.stderr, /in-process/, "served by the daemon");
      // 5 s, and until the delegate would have finished its ADD (+ 2 s for the bridge itself).
      const wait = Math.max(5000, finishes + 2000 - Date.now());
      await new Promise((r) => setTimeout(r, wait));
      assert.deepEqual(await linkNames(w.podNetns), [], "no interface in the pod");
      assert.deepEqual(await w.leases(), [], "no host-local lease");

      assert.equal(await runs(delegate), false, "the delegate was stopped");
      assert.equal(await exists(note), false, "the note is gone");
      assert.deepEqual(await slow.pids(), [delegate], "no other ADD ran");
      await assertNoLeaks({
        containerIds: [w.containerId],
        podNetns: w.podNetns,
        ipamDir: w.dirs.ipam,
        cacheDir: w.dirs.cache,
      });
      second.kill("SIGTERM");
      const log = (await second.exited()).stderr;
      assert.match(log, /stopped a delegate ADD its caller left running/);
    } finally {
      for (const d of daemons) d.kill("SIGKILL");
      for (const d of daemons) await d.exited();
      await done(w);
    }
  },
);
