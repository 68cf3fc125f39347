/**
 * A delegate binary that is not installed, through the real plugin process (standalone, real
 * netns, real bridge + host-local): the ADD fails, and its first DEL gives the attachment up at
 * once when nothing of it ever ran (lib/multinet/verbs/teardown.ts `neverRan`), but keeps failing
 * (the retry bound) when an earlier plugin of the list did run. Needs root.
 */

import assert from "node:assert/strict";
import { isRoot, Scratch } from "../support/netns.ts";
import { runPlugin } from "../support/plugin.ts";

const rootOnly = { ignore: !isRoot(), sanitizeResources: false, sanitizeOps: false };

async function scenario(
  plugins: (s: Scratch, ipam: string) => Record<string, unknown>[],
  check: (
    dels: { code: number; stdout: string; stderr: string }[],
    cache: string,
  ) => void | Promise<void>,
) {
  const s = new Scratch();
  try {
    const netns = await s.netns("mis");
    const cache = await s.dir();
    const ipam = await s.dir();
    const containerId = `missing-${s.id}`;
    const conf = {
      cniVersion: "1.0.0",
      name: "manifold-missing",
      type: "manifold",
      cniDir: cache,
      logLevel: "error",
      delegates: [{ cniVersion: "1.0.0", name: `mft-miss-${s.id}`, plugins: plugins(s, ipam) }],
    };
    const call = (command: "ADD" | "DEL") =>
      runPlugin({ command, config: conf, containerId, netns: `/var/run/netns/${netns}` });
    const add = await call("ADD");
    assert.equal(add.code, 1, add.stdout);
    assert.equal(add.json?.code, 7);
    assert.match(String(add.json?.msg), /failed to find plugin "mft-absent"/);
    const dels = [await call("DEL")];
    if (dels[0].code !== 0) dels.push(await call("DEL"));
    await check(dels, cache);
  } finally {
    await s.cleanup();
  }
}

Deno.test({
  name: "missing delegate binary: nothing ran, so the first DEL gives the attachment up",
  ...rootOnly,
  fn: () =>
    scenario(
      () => [{ type: "mft-absent" }, { type: "tuning" }],
      ([del], cache) => {
        assert.equal(del.code, 0, `first DEL: ${del.stdout}${del.stderr}`);
        assert.match(del.stderr, /giving up the teardown/);
        assert.match(del.stderr, /nothing \(its first plugin is not installed\)/);
        // The record is a tombstone now (its `abandoned` list kept for GC).
        const files = [...Deno.readDirSync(cache)].filter((e) => e.name.endsWith(".json"));
        assert.equal(files.length, 1);
        const record = JSON.parse(Deno.readTextFileSync(`${cache}/${files[0].name}`));
        assert.ok(record.deletedAt, "tombstoned");
        assert.equal(record.abandoned?.length, 1);
        assert.deepEqual(record.attachments, []);
      },
    ),
});

Deno.test({
  name: "missing delegate binary after a plugin that ran: DEL keeps failing (retry bound)",
  ...rootOnly,
  fn: () =>
    scenario(
      (s, ipam) => [
        {
          type: "bridge",
          bridge: s.trackLink(`mfms${s.id}`),
          ipam: { type: "host-local", subnet: "10.247.11.0/24", dataDir: ipam },
        },
        { type: "mft-absent" },
      ],
      ([del]) => {
        assert.equal(del.code, 1, "the bridge's lease is still held: no give-up at once");
        assert.doesNotMatch(del.stderr, /giving up the teardown/);
        return Promise.resolve();
      },
    ),
});
