/**
 * A delegate never outlives its caller's teardown (issue 20 item 7), without a daemon: the
 * runtime kills the plugin process on its timeout (containerd and CRI-O kill the plugin's PID,
 * not its group) while a slow delegate ADD runs; the runtime's DEL must stop that delegate
 * before its own delegate DELs, so that nothing it would have made appears afterwards (checked
 * at least 5 s after the DEL and after the delegate would have finished). Real
 * plugin process (scripts/manifold), real bridge + host-local behind a slow wrapper, real netns.
 * Needs root.
 */

import assert from "node:assert/strict";
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
  "orphaned delegate: plugin SIGKILLed mid-ADD, DEL; once the delegate would be done, nothing left",
  root,
  async () => {
    const w = await world({ annotations: { "k8s.v1.cni.cncf.io/networks": "bridge-net" } });
    try {
      const slow = await installSlowBridge(w.dirs.bin, SLOW_SECONDS);
      let plugin: Deno.ChildProcess | undefined;
      const add = w.call("ADD", { onSpawn: (c) => plugin = c });
      const note = `${w.dirs.cache}/delegates/${w.containerId}@eth0.group`;
      // A runtime's timeout comes seconds later: the delegate runs (and its group is noted;
      // code without the notes is killed at the same point of the slow delegate).
      await until(() => exists(slow.marker), "the slow delegate's ADD", 30_000);
      const finishes = Date.now() + SLOW_SECONDS * 1000; // when the delegate would be done
      await until(() => exists(note), "the note", 2500).catch(() => {});
      plugin!.kill("SIGKILL"); // the runtime's timeout: the plugin's PID only
      const killed = await add;
      assert.equal(killed.code, 137, killed.stderr.slice(-2000));
      const [delegate] = await slow.pids();
      assert.ok(await runs(delegate), "the delegate outlived the plugin");

      const del = await w.call("DEL");
      expectOk(del, "DEL after the kill");
      // 5 s, and until the delegate would have finished its ADD (+ 2 s for the bridge itself).
      const wait = Math.max(5000, finishes + 2000 - Date.now());
      await new Promise((r) => setTimeout(r, wait));
      assert.deepEqual(await linkNames(w.podNetns), [], "no interface in the pod");
      assert.deepEqual(await w.leases(), [], "no host-local lease");

      assert.match(del.stderr, /stopped a delegate ADD its caller left running/);
      assert.equal(await runs(delegate), false, "the delegate was stopped");
      assert.equal(await exists(note), false, "the note is gone");
      assert.deepEqual(await slow.pids(), [delegate], "no other ADD ran");
      await assertNoLeaks({
        containerIds: [w.containerId],
        podNetns: w.podNetns,
        ipamDir: w.dirs.ipam,
        cacheDir: w.dirs.cache,
      });
    } finally {
      await done(w);
    }
  },
);
