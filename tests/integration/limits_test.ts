/**
 * Input caps through the real plugin process (scripts/manifold): a stdin config nested
 * deeper than 64 levels and an oversized or too-deep NAD `spec.config` fail with the CNI
 * error JSON on stdout, exit 1, and leave nothing behind. Needs root.
 */

import assert from "node:assert/strict";
import { assertNoLeaks } from "../support/leaks.ts";
import { isRoot, linkNames } from "../support/netns.ts";
import { done, NS, world } from "../support/world.ts";

const root = { ignore: !isRoot(), sanitizeResources: false, sanitizeOps: false };

function nested(depth: number): string {
  return "[".repeat(depth) + "]".repeat(depth);
}

Deno.test({
  name: "stdin nested 65+ levels: code 7 error JSON, exit 1, no API request, nothing attached",
  ...root,
  async fn() {
    const w = await world({
      annotations: { "k8s.v1.cni.cncf.io/networks": "bridge-net" },
    });
    try {
      // Deep enough to have crashed a recursive walker (≈ 2 160 levels), within the 1 MiB cap.
      for (const depth of [64, 5_000, 200_000]) {
        const stdin = JSON.stringify(w.conf).replace(/}$/, `,"x":${nested(depth)}}`);
        const before = w.api.requests.length;
        const r = await w.call("ADD", { config: stdin });
        assert.equal(r.code, 1, r.stdout);
        assert.deepEqual(r.json, {
          cniVersion: "1.0.0",
          code: 7,
          msg: "network config on stdin is nested more than 64 levels deep (limit 64)",
          details:
            "Manifold accepts at most 64 levels of nested JSON arrays and objects in untrusted input",
        });
        assert.equal(r.stdout.trim().split("\n").length, 1, "one JSON document on stdout");
        assert.equal(w.api.requests.length, before, "no API request");
        assert.deepEqual(await linkNames(w.podNetns), []);
        assert.deepEqual(await w.leases(), []);
        assert.deepEqual(await Array.fromAsync(Deno.readDir(w.dirs.cache)), [], "no cache");
      }
    } finally {
      await done(w);
    }
  },
});

Deno.test({
  name: "NAD spec.config over 256 KiB or 64 levels: ADD fails with code 7 naming it, nothing left",
  ...root,
  async fn() {
    const w = await world({
      annotations: { "k8s.v1.cni.cncf.io/networks": "bridge-net, huge-net, deep-net" },
    });
    try {
      const base = JSON.parse(w.nadConfigs["bridge-net"]);
      w.api.addNad({
        namespace: NS,
        name: "huge-net",
        config: JSON.stringify({ ...base, pad: "a".repeat(300 * 1024) }),
      });
      w.api.addNad({
        namespace: NS,
        name: "deep-net",
        config: JSON.stringify(base).replace(/}$/, `,"x":${nested(3_000)}}`),
      });
      const r = await w.call("ADD");
      assert.equal(r.code, 1, r.stdout);
      assert.equal(r.json?.code, 7);
      assert.match(
        String(r.json?.msg),
        /network attachment definition "tenant-a\/huge-net": spec\.config is \d+ bytes, more than the limit of 262144 bytes/,
      );
      assert.deepEqual(await linkNames(w.podNetns), [], "the default network was rolled back");
      await assertNoLeaks({
        containerIds: [w.containerId],
        podNetns: w.podNetns,
        ipamDir: w.dirs.ipam,
        cacheDir: w.dirs.cache,
      }, "after the failed ADD");

      // The same pod without the huge NAD trips over the deep one.
      const w2Ann = JSON.stringify([{ name: "bridge-net" }, { name: "deep-net" }]);
      const r2 = await w.call("ADD", {
        config: {
          ...w.conf,
          capabilities: { "io.kubernetes.cri.pod-annotations": true },
          runtimeConfig: {
            "io.kubernetes.cri.pod-annotations": { "k8s.v1.cni.cncf.io/networks": w2Ann },
          },
        },
      });
      assert.equal(r2.code, 1, r2.stdout);
      assert.equal(r2.json?.code, 7);
      assert.equal(
        r2.json?.msg,
        'network attachment definition "tenant-a/deep-net": spec.config is nested more than 64 levels deep (limit 64)',
      );
      await assertNoLeaks({
        containerIds: [w.containerId],
        podNetns: w.podNetns,
        ipamDir: w.dirs.ipam,
        cacheDir: w.dirs.cache,
      }, "after the second failed ADD");
    } finally {
      await done(w);
    }
  },
});
