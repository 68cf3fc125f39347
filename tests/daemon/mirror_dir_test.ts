/**
 * `manifold daemon` writes the on-disk NAD mirror only where the config's `nadMirrorDir` says:
 * in-process fallbacks read the mirror only then. Without the key it used to write into the
 * host's default mirror dir (/run/k8s.cni.cncf.io/nads), replacing (and on SIGTERM marking
 * stale) whatever mirror another daemon or `manifold mirror` kept there — found by running the
 * conformance suite through the daemon (tests/conformance/daemon_test.ts). Real daemon
 * processes against the API stand-in. Needs root.
 */

import assert from "node:assert/strict";
import { done, world } from "../support/world.ts";
import { isRoot } from "../support/netns.ts";
import { startDaemon } from "../support/daemon.ts";
import { exists, until } from "../support/wait.ts";
import { DEFAULT_NAD_MIRROR_DIR } from "../../lib/multinet/nad/mirror.ts";

const root = { ignore: !isRoot(), sanitizeResources: false, sanitizeOps: false };

Deno.test(
  "daemon: the NAD mirror goes to nadMirrorDir only; without it nothing is written",
  root,
  async () => {
    const w = await world();
    const ns = `mirror-${crypto.randomUUID().slice(0, 8)}`;
    w.api.addNad({ namespace: ns, name: "probe", config: w.nadConfigs["bridge-net"] });
    try {
      const mirrorDir = `${await w.scratch.dir()}/nads`;
      const kept = await startDaemon(await w.scratch.dir(), { ...w.conf, nadMirrorDir: mirrorDir });
      try {
        await until(() => exists(`${mirrorDir}/${ns}/probe.json`), "the mirrored NAD", 10_000);
      } finally {
        kept.kill("SIGTERM");
        assert.equal((await kept.exited()).code, 0);
      }

      const seen = w.api.requests.length;
      const d = await startDaemon(await w.scratch.dir(), w.conf);
      try {
        await until(
          () =>
            w.api.requests.slice(seen).some((r) =>
              r.path.includes("network-attachment-definitions") && r.query.includes("watch")
            ),
          "the NAD watch (after the list was stored)",
          10_000,
        );
        assert.equal(
          await exists(`${DEFAULT_NAD_MIRROR_DIR}/${ns}`),
          false,
          `the daemon wrote the NAD into ${DEFAULT_NAD_MIRROR_DIR} without nadMirrorDir`,
        );
      } finally {
        d.kill("SIGTERM");
        assert.equal((await d.exited()).code, 0);
      }
    } finally {
      await Deno.remove(`${DEFAULT_NAD_MIRROR_DIR}/${ns}`, { recursive: true }).catch(() => {});
      await done(w);
    }
  },
);
