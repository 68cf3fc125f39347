/**
 * Hot-plug over the node's sandbox index (lib/daemon/sandbox_index.ts) under concurrent passes:
 * workers look pods up at once, and a slow read that listed the directory before a pod's
 * sandbox record appeared must not leave that pod unfound — the directory-mtime gate would then
 * never read for it again, and its hot-plug would be lost for good on a quiet node. Real cache directory and pod store; the API sources are fakes (no
 * delegate runs: the pod's selection stays empty, so a pass only compares network-status).
 */

import assert from "node:assert/strict";
import { startHotPlug } from "../../../lib/daemon/hotplug/hotplug.ts";
import { PodStore } from "../../../lib/daemon/pod_informer.ts";
import type { Pod } from "../../../lib/k8s/mod.ts";
import { nullLogger } from "../../../lib/log/mod.ts";
import {
  AttachmentCache,
  CACHE_SCHEMA_VERSION,
  type CacheRecord,
} from "../../../lib/multinet/mod.ts";
import { parseManifoldConf } from "../../../lib/multinet/config.ts";
import type { ApiDeps } from "../../../lib/multinet/wiring.ts";
import { until } from "../../support/wait.ts";

const NETS = "k8s.v1.cni.cncf.io/networks";

function record(pod: string): CacheRecord {
  const attachment = {
    statusName: "default",
    isDefault: true,
    ifName: "eth0",
    conflist: { cniVersion: "1.0.0", name: "default", plugins: [{ type: "bridge" }] },
    capabilityArgs: {},
    cniArgs: [] as [string, string][],
    state: "added" as const,
  };
  return {
    schemaVersion: CACHE_SCHEMA_VERSION,
    containerId: `c-${pod}`,
    netns: "/proc/self/ns/net", // exists: the sandbox counts as running
    ifName: "eth0",
    pod: { namespace: "ns", name: pod, uid: `uid-${pod}` },
    cniVersion: "1.0.0",
    createdAt: new Date().toISOString(),
    attachments: [attachment],
    networkStatus: [{ name: "default", interface: "eth0", default: true }],
  };
}

function pod(name: string, rv: string, networks?: string): Pod {
  const metadata = {
    namespace: "ns",
    name,
    uid: `uid-${name}`,
    resourceVersion: rv,
    annotations: (networks === undefined ? {} : { [NETS]: networks }) as Record<string, string>,
  };
  return { metadata, raw: { metadata } };
}

/**
 * A hot-plug controller over a real cache in `dir` and a real pod store, whose first cache
 * scan lists the directory and then stalls until `release()`; the API sources are fakes.
 */
function stalledScanWorld(dir: string) {
  const files = AttachmentCache.prototype.files;
  let release!: () => void;
  const gate = new Promise<void>((r) => release = r);
  let calls = 0;
  AttachmentCache.prototype.files = async function (this: AttachmentCache) {
    const keys = await files.call(this);
    if (calls++ === 0) await gate;
    return keys;
  };
  const outcomes: string[] = [];
  const store = new PodStore();
  const fail = () => Promise.reject(new Error("not used"));
  const api: ApiDeps = {
    nads: { get: fail },
    pods: { get: fail },
    podNetworks: { podNetwork: fail, attachment: fail } as unknown as ApiDeps["podNetworks"],
    status: { kind: "api", publish: () => Promise.resolve() },
    events: { emit() {}, flush: () => Promise.resolve() },
  };
  const hotPlug = startHotPlug({
    conf: parseManifoldConf({
      cniVersion: "1.0.0",
      name: "manifold",
      type: "manifold",
      cniDir: dir,
      hotPlug: true,
      events: "none",
      delegates: [{ cniVersion: "1.0.0", name: "default", type: "bridge" }],
    }),
    pods: store,
    api: () => Promise.resolve(api),
    events: api.events,
    env: { CNI_PATH: "/usr/lib/cni" },
    logger: nullLogger,
    onOutcome: (p, o) => outcomes.push(`${p} ${o.kind}`),
  });
  return {
    store,
    outcomes,
    hotPlug,
    release,
    scans: () => calls,
    async close() {
      release();
      AttachmentCache.prototype.files = files;
      await hotPlug.stop();
    },
  };
}

Deno.test("hot-plug: a slow cache scan does not hide a sandbox a later scan found", async () => {
  const dir = await Deno.makeTempDir({ prefix: "mft-hpidx-" });
  const { store, outcomes, release, scans, close } = stalledScanWorld(dir);
  try {
    const cache = new AttachmentCache(dir);
    await cache.write(record("a"));
    await Deno.mkdir(`${dir}/locks`); // as on a node: container locks exist already
    await store.replace([pod("a", "1")], "1"); // pass for a: its scan stalls after listing
    await until(() => scans() === 1, "the first scan");

    await cache.write(record("x")); // x's sandbox appears after that listing
    await new Promise((r) => setTimeout(r, 1100)); // … and the cache stays quiet a while
    await store.apply({ type: "ADDED", object: pod("x", "2"), resourceVersion: "2" });
    // x's lookup waits for the slow read, then reads once more (it listed before x appeared).
    release(); // the stale read ends now
    await until(() => outcomes.includes("ns/a unchanged"), "a's pass");
    await until(() => outcomes.includes("ns/x unchanged"), "x's first pass (a new read)");

    // x's selection changes: its sandbox must still be found.
    await store.apply({ type: "MODIFIED", object: pod("x", "3", "[]"), resourceVersion: "3" });
    await until(
      () => outcomes.filter((o) => o === "ns/x unchanged").length === 2,
      "x's second pass",
      2000,
    );
    assert.deepEqual(outcomes.filter((o) => o.startsWith("ns/x")), [
      "ns/x unchanged",
      "ns/x unchanged",
    ]);
  } finally {
    await close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("hot-plug: a pod deleted while its pass runs is not remembered afterwards", async () => {
  const dir = await Deno.makeTempDir({ prefix: "mft-hpidx-" });
  const { store, outcomes, hotPlug, release, scans, close } = stalledScanWorld(dir);
  try {
    await new AttachmentCache(dir).write(record("a"));
    await store.replace([pod("a", "1")], "1");
    await until(() => scans() === 1, "a's pass is scanning");
    await store.apply({ type: "DELETED", object: pod("a", "2"), resourceVersion: "2" });
    release();
    await until(() => outcomes.includes("ns/a unchanged"), "a's pass ends");
    assert.equal(hotPlug.tracked, 0, "nothing kept for the deleted pod");
  } finally {
    await close();
    await Deno.remove(dir, { recursive: true });
  }
});

for (const order of ["older first", "newer first"]) {
  Deno.test(`hot-plug: a pod's newest live record is its sandbox (${order})`, async () => {
    const dir = await Deno.makeTempDir({ prefix: "mft-hpidx-" });
    const { store, outcomes, release, close } = stalledScanWorld(dir);
    release(); // no stall here
    try {
      const cache = new AttachmentCache(dir);
      // A sandbox restarted across a node reboot: the old record never got its DEL, and its
      // netns is gone; the new sandbox's record is newer.
      const old = {
        ...record("a"),
        containerId: "c-old",
        netns: `${dir}/gone-netns`,
        createdAt: new Date(Date.now() - 60_000).toISOString(),
      };
      const fresh = { ...record("a"), containerId: "c-new" };
      for (const r of order === "older first" ? [old, fresh] : [fresh, old]) {
        await cache.write(r);
      }
      await store.replace([pod("a", "1")], "1");
      await until(() => outcomes.includes("ns/a unchanged"), "a pass on the new sandbox");
    } finally {
      await close();
      await Deno.remove(dir, { recursive: true });
    }
  });
}
