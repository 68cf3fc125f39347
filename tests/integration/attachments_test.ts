/**
 * Attachment identity, teardown and cache upkeep through a real plugin process with real
 * delegates (issue 11 §2 items 1, 2, 3 and 10):
 * - the cache is keyed by (CNI_CONTAINERID, CNI_IFNAME): two ADDs of one container with two
 *   interfaces (podman, nerdctl) coexist, DEL and CHECK act on exactly theirs; a record of the
 *   old per-container layout is migrated;
 * - GC honours the ifname of `cni.dev/valid-attachments` and calls each delegate network's GC
 *   once with its valid attachments (a recording delegate);
 * - a DEL failure of an attachment whose ADD never completed is the final error, the retry
 *   converges, and after the bound the attachment is given up with a `TeardownAbandoned` event
 *   and left to GC;
 * - DEL prunes old tombstones, at most once per interval.
 * Needs root.
 */

import assert from "node:assert/strict";
import { AttachmentCache, CACHE_SCHEMA_VERSION } from "../../lib/multinet/cache/cache.ts";
import { installWrapper, leasesOf, readRecord, recordPath } from "../support/faults.ts";
import { isRoot, linkNames } from "../support/netns.ts";
import { k8sArgs } from "../support/plugin.ts";
import { done, expectOk, NS, POD, UID, type World, world } from "../support/world.ts";

const root = { ignore: !isRoot(), sanitizeResources: false, sanitizeOps: false };

/** lib/multinet/cache/tombstones.ts PRUNE_MARKER and PRUNE_MAX_REMOVALS (literal: this test must run against older code). */
const PRUNE_MARKER = ".tombstones-pruned";
const PRUNE_MAX_REMOVALS = 100;

/** A CNI error JSON line for a wrapper's `printf`. */
function errorJson(code: number, msg: string): string {
  return JSON.stringify({ cniVersion: "1.0.0", code, msg });
}

Deno.test({
  name: "one container, two CNI_IFNAMEs (podman): two records; DEL and CHECK act on theirs only",
  ...root,
  async fn() {
    const w = await world();
    try {
      // A non-Kubernetes runtime attaching two networks: no K8S_* args, one Manifold config
      // per network (the second one's default network on the other bridge), one ifName each.
      const second = `${await w.scratch.dir("mft-net2-")}/net2.conflist`;
      const def = JSON.parse(await Deno.readTextFile(String(w.conf.clusterNetwork)));
      def.name = "net2";
      def.plugins[0].bridge = w.br.sec;
      def.plugins[0].ipam.ranges = [[{ subnet: "10.240.2.0/24" }]];
      await Deno.writeTextFile(second, JSON.stringify(def));
      const podman = { args: "" };
      const eth1 = { ...podman, ifName: "eth1", config: { ...w.conf, clusterNetwork: second } };
      expectOk(await w.call("ADD", { ...podman, ifName: "eth0" }), "ADD eth0");
      expectOk(await w.call("ADD", eth1), "ADD eth1");
      assert.deepEqual(await linkNames(w.podNetns), ["eth0", "eth1"]);
      assert.deepEqual((await leasesOf(w, w.containerId)).length, 2);

      expectOk(await w.call("CHECK", { ...podman, ifName: "eth0" }), "CHECK eth0");
      expectOk(await w.call("CHECK", eth1), "CHECK eth1");
      expectOk(await w.call("DEL", eth1), "DEL eth1");
      assert.deepEqual(await linkNames(w.podNetns), ["eth0"], "DEL eth1 leaves eth0");
      assert.deepEqual((await leasesOf(w, w.containerId)).length, 1);
      expectOk(await w.call("CHECK", { ...podman, ifName: "eth0" }), "CHECK eth0 after DEL eth1");
      const gone = await w.call("CHECK", eth1);
      assert.equal((gone.json as { code?: number })?.code, 3, "CHECK of the deleted one: code 3");

      expectOk(await w.call("DEL", { ...podman, ifName: "eth0" }), "DEL eth0");
      assert.deepEqual(await linkNames(w.podNetns), []);
      assert.deepEqual(await w.leases(), []);
      // Two tombstones: `<containerId>@eth0.json` and `<containerId>@eth1.json`.
      assert.ok((await readRecord(w, w.containerId)).deletedAt);
      assert.ok((await readRecord(w, w.containerId, "eth1")).deletedAt);
    } finally {
      await done(w);
    }
  },
});

Deno.test({
  name: "a record of the per-container layout (<containerId>.json) is migrated and torn down",
  ...root,
  async fn() {
    const w = await world({ annotations: { "k8s.v1.cni.cncf.io/networks": "bridge-net" } });
    try {
      expectOk(await w.call("ADD"), "ADD");
      const legacy = `${w.dirs.cache}/${w.containerId}.json`;
      await Deno.rename(recordPath(w, w.containerId), legacy); // as an older Manifold wrote it
      expectOk(await w.call("CHECK"), "CHECK reads the legacy record");
      assert.ok(await Deno.stat(recordPath(w, w.containerId)), "renamed to the new layout");
      await assert.rejects(Deno.stat(legacy), Deno.errors.NotFound);

      await Deno.rename(recordPath(w, w.containerId), legacy);
      expectOk(await w.call("DEL"), "DEL from the legacy record");
      assert.deepEqual(await linkNames(w.podNetns), []);
      assert.deepEqual(await w.leases(), []);
      assert.ok((await readRecord(w, w.containerId)).deletedAt, "tombstone in the new layout");
      await assert.rejects(Deno.stat(legacy), Deno.errors.NotFound);
    } finally {
      await done(w);
    }
  },
});

/**
 * A bridge delegate speaking CNI 1.1 for GC: GC writes its stdin to a new file in `dir` and
 * succeeds; every other command runs the real bridge plugin (which knows CNI ≤ 1.0.0) with the
 * config's cniVersion lowered to 1.0.0.
 */
function gcRecordingBridge(dir: string): string {
  return [
    "#!/bin/sh",
    'if [ "$CNI_COMMAND" = GC ]; then',
    `  cat > "$(mktemp -p '${dir}' gc.XXXXXX)"`,
    "  exit 0",
    "fi",
    `sed -E 's/"cniVersion": *"1\\.1\\.0"/"cniVersion":"1.0.0"/g' | /usr/lib/cni/bridge "$@"`,
    "",
  ].join("\n");
}

/** The GC calls the recording delegate saw: network name → sorted "containerID/ifname" lists. */
async function gcCalls(dir: string): Promise<[string, string[]][]> {
  const calls: [string, string[]][] = [];
  for await (const e of Deno.readDir(dir)) {
    if (!e.name.startsWith("gc.")) continue;
    const conf = JSON.parse(await Deno.readTextFile(`${dir}/${e.name}`)) as {
      name: string;
      "cni.dev/valid-attachments": { containerID: string; ifname: string }[];
    };
    calls.push([
      conf.name,
      conf["cni.dev/valid-attachments"].map((a) => `${a.containerID}/${a.ifname}`).sort(),
    ]);
  }
  return calls.sort((a, b) => a[0] < b[0] ? -1 : 1);
}

Deno.test({
  name: "GC: valid-attachments by (containerID, ifname); each network's GC once with its list",
  ...root,
  async fn() {
    const w = await world({
      cniVersion: "1.1.0",
      annotations: { "k8s.v1.cni.cncf.io/networks": "bridge-net" },
    });
    try {
      const record = await w.scratch.dir("mft-gc-");
      await installWrapper(w, "gcbridge", gcRecordingBridge(record));
      const def = JSON.parse(await Deno.readTextFile(String(w.conf.clusterNetwork)));
      def.cniVersion = "1.1.0";
      def.plugins[0].type = "gcbridge";
      await Deno.writeTextFile(String(w.conf.clusterNetwork), JSON.stringify(def));
      const nad = JSON.parse(w.nadConfigs["bridge-net"]);
      w.api.addNad({
        namespace: NS,
        name: "bridge-net",
        config: JSON.stringify({ ...nad, cniVersion: "1.1.0", type: "gcbridge" }),
      });

      // Three runtime attachments: A/eth0 and B/eth0 (the pod: default + bridge-net), and
      // B/eth1 (a second interface of B without a pod: the default network alone).
      const a = `${w.containerId}a`;
      const b = `${w.containerId}b`;
      const nsB = await w.scratch.netns("b");
      const call = (cmd: "ADD" | "GC", id: string, netns: string, ifName: string, pod = true) =>
        w.call(cmd, {
          containerId: id,
          netns: `/var/run/netns/${netns}`,
          ifName,
          args: pod ? k8sArgs(NS, POD, id, UID) : "",
        });
      expectOk(await call("ADD", a, w.podNetns, "eth0"), "ADD A/eth0");
      expectOk(await call("ADD", b, nsB, "eth0"), "ADD B/eth0");
      expectOk(await call("ADD", b, nsB, "eth1", false), "ADD B/eth1");
      assert.deepEqual(await linkNames(nsB), ["eth0", "eth1", "net1"]);
      assert.equal((await leasesOf(w, b)).length, 3);

      const gc = await w.call("GC", {
        config: {
          ...w.conf,
          "cni.dev/valid-attachments": [
            { containerID: a, ifname: "eth0" },
            { containerID: b, ifname: "eth0" },
          ],
        },
      });
      expectOk(gc, "GC");
      // Exactly B/eth1 went: its link, its lease, its record.
      assert.deepEqual(await linkNames(w.podNetns), ["eth0", "net1"]);
      assert.deepEqual(await linkNames(nsB), ["eth0", "net1"]);
      assert.equal((await leasesOf(w, a)).length, 2);
      assert.equal((await leasesOf(w, b)).length, 2);
      await assert.rejects(Deno.stat(recordPath(w, b, "eth1")), Deno.errors.NotFound);
      assert.equal((await readRecord(w, b)).attachments.length, 2);
      // Each network's delegate got GC once, with the attachments valid on it.
      assert.deepEqual(await gcCalls(record), [
        ["bridge-net", [`${a}/net1`, `${b}/net1`]],
        ["cbr0", [`${a}/eth0`, `${b}/eth0`]],
      ]);
    } finally {
      await done(w);
    }
  },
});

/**
 * A bridge delegate whose ADD runs the real ADD (an interface and a host-local lease exist)
 * and then fails, and whose DEL fails while `stateFile` exists; otherwise the real bridge.
 */
function halfAddFailingDel(stateFile: string): string {
  return [
    "#!/bin/sh",
    'if [ "$CNI_COMMAND" = ADD ]; then',
    '  /usr/lib/cni/bridge "$@" > /dev/null || exit $?',
    `  printf '%s\\n' '${errorJson(150, "injected ADD failure")}'`,
    "  exit 1",
    "fi",
    `if [ "$CNI_COMMAND" = DEL ] && [ -e '${stateFile}' ]; then`,
    "  cat > /dev/null",
    `  printf '%s\\n' '${errorJson(151, "injected DEL failure")}'`,
    "  exit 1",
    "fi",
    'exec /usr/lib/cni/bridge "$@"',
    "",
  ].join("\n");
}

/** Points the world's `bridge-net` NAD at a delegate type. */
function useBridgeType(w: World, type: string) {
  const nad = JSON.parse(w.nadConfigs["bridge-net"]);
  w.api.addNad({ namespace: NS, name: "bridge-net", config: JSON.stringify({ ...nad, type }) });
}

Deno.test({
  name: "DEL of an unfinished ADD: the failure is the final error, the retry converges",
  ...root,
  async fn() {
    const w = await world({ annotations: { "k8s.v1.cni.cncf.io/networks": "bridge-net" } });
    try {
      const state = `${await w.scratch.dir("mft-state-")}/del-fails`;
      await Deno.writeTextFile(state, "");
      await installWrapper(w, "hbridge", halfAddFailingDel(state));
      useBridgeType(w, "hbridge");

      const add = await w.call("ADD");
      assert.equal((add.json as { code?: number })?.code, 150, add.stdout);
      // The rollback's DEL of bridge-net failed: its lease is still held, and cached.
      assert.equal((await leasesOf(w, w.containerId)).length, 1, "bridge-net's lease held");
      const del = await w.call("DEL");
      assert.equal(del.code, 1, "the DEL failure is the final error");
      assert.equal((del.json as { code?: number })?.code, 151);
      assert.match((del.json as { msg: string }).msg, /tenant-a\/bridge-net\] injected DEL/);
      const kept = await readRecord(w, w.containerId) as unknown as {
        attachments: { state: string; delFailures?: { count: number } }[];
      };
      assert.deepEqual(kept.attachments.map((a) => [a.state, a.delFailures?.count]), [
        ["adding", 2],
      ]);

      await Deno.remove(state); // the cause goes away: the runtime's retry converges
      expectOk(await w.call("DEL"), "retried DEL");
      assert.deepEqual(await w.leases(), [], "nothing leaked");
      assert.deepEqual(await linkNames(w.podNetns), []);
      assert.equal(w.api.events.filter((e) => e.reason === "TeardownAbandoned").length, 0);
    } finally {
      await done(w);
    }
  },
});

Deno.test({
  name: "DEL of an unfinished ADD failing forever: given up at the bound, event, left to GC",
  ...root,
  async fn() {
    const w = await world({
      annotations: { "k8s.v1.cni.cncf.io/networks": "bridge-net" },
      cniVersion: "1.1.0",
    });
    try {
      const state = `${await w.scratch.dir("mft-state-")}/del-fails`;
      await Deno.writeTextFile(state, "");
      await installWrapper(w, "hbridge", halfAddFailingDel(state));
      useBridgeType(w, "hbridge");

      assert.equal((await w.call("ADD")).code, 1); // failed DEL 1 (rollback)
      assert.equal((await w.call("DEL")).code, 1); // failed DEL 2
      const del = await w.call("DEL"); // failed DEL 3: the bound
      expectOk(del, "DEL at the bound");
      assert.match(del.stderr, /giving up the teardown/);
      const events = w.api.events.filter((e) => e.reason === "TeardownAbandoned");
      assert.equal(events.length, 1, "one TeardownAbandoned event reached the API");
      assert.equal(events[0].type, "Warning");
      assert.match(String(events[0].message), /tenant-a\/bridge-net.*net1.*hbridge.*host-local/);
      const tomb = await readRecord(w, w.containerId) as unknown as {
        deletedAt?: string;
        abandoned?: { statusName: string }[];
      };
      assert.ok(tomb.deletedAt);
      assert.deepEqual(tomb.abandoned?.map((a) => a.statusName), [`${NS}/bridge-net`]);
      assert.equal((await leasesOf(w, w.containerId)).length, 1, "the lease is what leaked");
      expectOk(await w.call("DEL"), "DEL after the tombstone is a no-op");

      // GC, once the runtime forgot the sandbox, retries the given-up DEL.
      await Deno.remove(state);
      expectOk(
        await w.call("GC", { config: { ...w.conf, "cni.dev/valid-attachments": [] } }),
        "GC",
      );
      assert.deepEqual(await w.leases(), [], "GC released the lease");
      await assert.rejects(Deno.stat(recordPath(w, w.containerId)), Deno.errors.NotFound);
    } finally {
      await done(w);
    }
  },
});

Deno.test({
  name: "DEL prunes tombstones older than a day, at most once per interval; live records stay",
  ...root,
  async fn() {
    const w = await world();
    try {
      const cache = new AttachmentCache(w.dirs.cache);
      const now = Date.now();
      const DAY = 24 * 3600_000;
      const put = async (id: string, ageMs: number, tombstone: boolean) => {
        const at = new Date(now - ageMs);
        const record = {
          schemaVersion: CACHE_SCHEMA_VERSION,
          containerId: id,
          netns: "",
          ifName: "eth0",
          pod: { namespace: NS, name: id, uid: "" },
          cniVersion: "1.0.0",
          createdAt: at.toISOString(),
          attachments: [],
        };
        if (tombstone) await cache.writeTombstone(record, { now: at });
        else await cache.write(record);
        await Deno.utime(cache.path(id, "eth0"), at, at);
      };
      for (let i = 0; i < 5; i++) await put(`old${i}`, 2 * DAY, true);
      await put("young", 3600_000, true);
      await put("live", 30 * DAY, false);
      const sandbox = (n: number) => {
        const id = `${w.containerId}p${n}`;
        return { containerId: id, args: k8sArgs(NS, POD, id, UID) };
      };
      const cycle = async (n: number) => {
        expectOk(await w.call("ADD", sandbox(n)), `ADD ${n}`);
        expectOk(await w.call("DEL", sandbox(n)), `DEL ${n}`);
      };
      const ids = async () =>
        (await Array.fromAsync(Deno.readDir(w.dirs.cache)))
          .filter((e) => e.isFile && !e.name.startsWith("."))
          .map((e) => e.name.replace(/(@.*)?\.json$/, "")).sort();

      await cycle(1);
      assert.deepEqual(await ids(), [sandbox(1).containerId, "live", "young"].sort());
      // Within the interval, a new old tombstone stays…
      await put("old9", 2 * DAY, true);
      await cycle(2);
      assert.ok((await ids()).includes("old9"), "not pruned again within the interval");
      // …and is pruned by the first DEL after it; one prune removes at most PRUNE_MAX_REMOVALS.
      for (let i = 0; i < PRUNE_MAX_REMOVALS + 20; i++) await put(`many${i}`, 2 * DAY, true);
      const earlier = new Date(now - 11 * 60_000);
      await Deno.utime(`${w.dirs.cache}/${PRUNE_MARKER}`, earlier, earlier);
      await cycle(3);
      const left = await ids();
      assert.ok(left.includes("live") && left.includes("young"), "live and young records stay");
      const many = left.filter((id) => id.startsWith("many") || id === "old9").length;
      assert.ok(many >= 21 && many < PRUNE_MAX_REMOVALS + 21, `${many} old tombstones left`);
    } finally {
      await done(w);
    }
  },
});
