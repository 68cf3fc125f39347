/**
 * PolicyApplier with a recording runner (no kernel): full, set-only and unchanged applies,
 * fallback to a full batch when a set update is refused, release on remove/forget; and the
 * libnftables symbol table (lazy, only the free is nonblocking).
 */

import assert from "node:assert/strict";
import {
  NftablesError,
  type NftRunner,
  type PodRuleset,
  PolicyApplier,
} from "../../lib/policy/mod.ts";
import { LIBNFTABLES_SYMBOLS, openLibnftables } from "../../native/libnftables.ts";

class Recorder implements NftRunner {
  readonly name = "recorder";
  batches: { netns: string; kinds: string[] }[] = [];
  released: string[] = [];
  refuseFlush = false;
  run(netns: string, batch: string): Promise<string> {
    const kinds = (JSON.parse(batch).nftables as Record<string, unknown>[]).map((c) =>
      Object.keys(c)[0]
    );
    if (this.refuseFlush && kinds[0] === "flush") {
      return Promise.reject(
        new NftablesError("nft_run_cmd_from_buffer failed", "No such file or directory"),
      );
    }
    this.batches.push({ netns, kinds });
    return Promise.resolve("");
  }
  release(netns: string): void {
    this.released.push(netns);
  }
}

const rs = (peers: string[], port = 80): PodRuleset => ({
  interfaces: [{
    ifName: "net1",
    network: "a/net1",
    ingress: [{
      comment: "c",
      set: "in_net1_0_v4",
      port: { protocol: "tcp", from: port, to: port },
    }],
  }],
  sets: [{ name: "in_net1_0_v4", family: "ipv4", interval: false, elements: peers }],
});

Deno.test("applier: full first, then set-only, unchanged, full again on a rule change", async () => {
  const r = new Recorder();
  const a = new PolicyApplier(r);
  assert.equal(await a.apply("/ns/x", rs(["10.0.0.1"])), "full");
  assert.equal(await a.apply("/ns/x", rs(["10.0.0.2"])), "sets");
  assert.equal(await a.apply("/ns/x", rs(["10.0.0.2"])), "unchanged");
  assert.equal(await a.apply("/ns/x", rs(["10.0.0.2"], 81)), "full");
  assert.equal(await a.apply("/ns/y", rs(["10.0.0.2"])), "full", "per namespace");
  assert.deepEqual(r.batches.map((b) => b.kinds[0]), ["add", "flush", "add", "add"]);
  // A new applier (daemon restart) re-applies in full: level-triggered.
  assert.equal(await new PolicyApplier(r).apply("/ns/x", rs(["10.0.0.2"])), "full");
});

Deno.test("applier: a refused set update falls back to the full batch", async () => {
  const r = new Recorder();
  const a = new PolicyApplier(r);
  await a.apply("/ns/x", rs(["10.0.0.1"]));
  r.refuseFlush = true; // e.g. someone deleted the table
  assert.equal(await a.apply("/ns/x", rs(["10.0.0.3"])), "full");
});

Deno.test("applier: remove and forget release the runner's context", async () => {
  const r = new Recorder();
  const a = new PolicyApplier(r);
  await a.apply("/ns/x", rs([]));
  await a.remove("/ns/x");
  assert.deepEqual(r.batches.at(-1)!.kinds, ["add", "delete"]);
  a.forget("/ns/y");
  assert.deepEqual(r.released, ["/ns/x", "/ns/y"]);
  assert.equal(await a.apply("/ns/x", rs([])), "full", "forgotten after remove");
});

Deno.test("libnftables: only the context free runs off the main thread", () => {
  for (const [name, def] of Object.entries(LIBNFTABLES_SYMBOLS)) {
    assert.equal("nonblocking" in def && def.nonblocking, name === "nft_ctx_free_deferred", name);
  }
});

Deno.test({
  name: "libnftables: every declared symbol resolves",
  ignore: Deno.permissions.querySync({ name: "ffi" }).state !== "granted",
  fn() {
    const lib = openLibnftables();
    assert.equal(openLibnftables(), lib, "cached");
    for (const name of Object.keys(LIBNFTABLES_SYMBOLS)) {
      assert.equal(typeof lib.symbols[name as keyof typeof LIBNFTABLES_SYMBOLS], "function");
    }
    assert.throws(() => openLibnftables("/nonexistent/libnftables.so.1"));
  },
});

Deno.test("applier: a path that now names another namespace gets the full ruleset", async () => {
  const dir = await Deno.makeTempDir({ prefix: "mft-apply-" });
  try {
    const path = `${dir}/ns`; // stands for a reused /proc/<pid>/ns/net: same path, new inode
    await Deno.writeTextFile(path, "old");
    const r = new Recorder();
    const a = new PolicyApplier(r);
    assert.equal(await a.apply(path, rs(["10.0.0.1"])), "full");
    assert.equal(await a.apply(path, rs(["10.0.0.1"])), "unchanged");
    await Deno.writeTextFile(`${dir}/next`, "new");
    await Deno.rename(`${dir}/next`, path); // a new inode while the old one still exists
    assert.equal(await a.apply(path, rs(["10.0.0.1"])), "full", "not 'unchanged'");
    assert.equal(await a.apply(path, rs(["10.0.0.1"])), "unchanged");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
