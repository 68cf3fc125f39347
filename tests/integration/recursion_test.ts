/**
 * No recursive delegation, through the real plugin process (scripts/manifold) against the
 * API stand-in: a NAD whose `type` is Manifold is refused before anything runs (static
 * guard), and a NAD whose plugin is a symlink or a wrapper script to Manifold is refused by
 * the nested process itself (dynamic guard, `MANIFOLD_DELEGATION_DEPTH`). Every ADD fails
 * cleanly with code 7, nothing stays attached, and Manifold is started exactly as often as
 * expected (no process storm). Needs root.
 */

import assert from "node:assert/strict";
import { assertNoLeaks } from "../support/leaks.ts";
import { isRoot, linkNames } from "../support/netns.ts";
import { MANIFOLD } from "../support/plugin.ts";
import { done, NS, POD, type World, world } from "../support/world.ts";

const root = { ignore: !isRoot(), sanitizeResources: false, sanitizeOps: false };

/** Generous bound on one ADD: a recursion storm would blow far past it. */
const ADD_BOUND_MS = 60_000;

function selecting(networks: string) {
  return { annotations: { "k8s.v1.cni.cncf.io/networks": networks } };
}

async function noLeaks(w: World, what: string) {
  await assertNoLeaks({
    containerIds: [w.containerId],
    podNetns: w.podNetns,
    ipamDir: w.dirs.ipam,
    cacheDir: w.dirs.cache,
  }, what);
}

/** A NAD whose plugin `type` is `type` (a bridge config otherwise). */
function addNad(w: World, name: string, type: string) {
  const config = { ...JSON.parse(w.nadConfigs["bridge-net"]), type };
  w.api.addNad({ namespace: NS, name, config: JSON.stringify(config) });
}

Deno.test({
  name: "a NAD of type manifold is refused before anything is attached (static guard)",
  ...root,
  async fn() {
    const w = await world(selecting("bridge-net, self-net"));
    try {
      addNad(w, "self-net", "manifold");
      const r = await w.call("ADD");
      assert.equal(r.code, 1, r.stdout);
      assert.equal(r.json?.code, 7);
      assert.equal(
        r.json?.msg,
        `network attachment definition "${NS}/self-net": plugin type "manifold" (plugins[0]) is Manifold itself: recursive delegation refused`,
      );
      assert.deepEqual(await linkNames(w.podNetns), []);
      await noLeaks(w, "after the refused ADD");
    } finally {
      await done(w);
    }
  },
});

for (const kind of ["symlink", "wrapper"] as const) {
  Deno.test({
    name:
      `a NAD whose plugin is a ${kind} to Manifold fails with code 7, nothing attached, no storm`,
    ...root,
    async fn() {
      const w = await world(selecting("bridge-net, evil-net"));
      try {
        const starts = `${w.dirs.kube}/manifold-starts`;
        await Deno.writeTextFile(starts, "");
        if (kind === "symlink") {
          await Deno.symlink(MANIFOLD, `${w.dirs.bin}/evil`);
          addNad(w, "evil-net", "evil");
        } else {
          // A wrapper counts its starts, then becomes Manifold; a safety stop after 5 starts
          // keeps a broken guard from flooding the machine.
          await Deno.writeTextFile(
            `${w.dirs.bin}/evil`,
            [
              "#!/bin/sh",
              `echo "$CNI_COMMAND $MANIFOLD_DELEGATION_DEPTH" >> ${starts}`,
              `[ "$(wc -l < ${starts})" -gt 5 ] && exit 99`,
              `exec ${MANIFOLD} "$@"`,
            ].join("\n") + "\n",
            { mode: 0o755 },
          );
          // A valid Manifold config whose cluster network is itself, through the wrapper:
          // without the dynamic guard every nested Manifold would start another one.
          const loop = `${w.dirs.conf}/loop.conf`;
          const config = JSON.stringify({
            cniVersion: "1.0.0",
            name: "evil-loop",
            type: "evil",
            clusterNetwork: loop,
            cniDir: `${w.dirs.kube}/loop-cache`,
            binDir: w.dirs.bin,
          });
          await Deno.writeTextFile(loop, config);
          w.api.addNad({ namespace: NS, name: "evil-net", config });
        }

        const started = performance.now();
        const r = await w.call("ADD");
        const ms = performance.now() - started;
        assert.ok(ms < ADD_BOUND_MS, `ADD took ${Math.round(ms)} ms`);
        assert.equal(r.code, 1, r.stdout);
        assert.equal(r.json?.code, 7, r.stdout);
        assert.equal(
          r.json?.msg,
          `[${NS}/${POD}:${NS}/evil-net] recursive delegation refused: Manifold was started as a delegate of Manifold`,
        );
        assert.match(String(r.json?.details), /MANIFOLD_DELEGATION_DEPTH=1/);
        // The default network and bridge-net were attached, then rolled back.
        assert.deepEqual(await linkNames(w.podNetns), []);
        await noLeaks(w, "after the refused ADD");
        if (kind === "wrapper") {
          // Once for the ADD (refused), once for the rollback's DEL (a no-op): no storm.
          assert.deepEqual((await Deno.readTextFile(starts)).trim().split("\n"), [
            "ADD 1",
            "DEL 1",
          ]);
        }

        // The runtime's DEL after the failed ADD is a clean no-op.
        const del = await w.call("DEL");
        assert.equal(del.code, 0, del.stdout);
        await noLeaks(w, "after DEL");
      } finally {
        await done(w);
      }
    },
  });
}
