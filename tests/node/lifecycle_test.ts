/**
 * Issue 27 §2, node life-cycle events, per call and daemon:
 * - kubelet restarted (SIGKILL) and containerd restarted (SIGKILL): the pods keep running on
 *   the same sandboxes, nothing is re-ADDed (the sandbox ids, the host-local leases and the
 *   cache records are byte-for-byte the same);
 * - node reboot (NodeCluster.reboot: power cut — processes and netns gone, cache and leases
 *   kept as on a disk): kubelet recreates the sandboxes, which get their networks; the dead
 *   sandboxes' leases and cache records are gone within one minute. The mechanism: kubelet's
 *   StopPodSandbox of each dead sandbox → containerd's CNI DEL with the vanished netns path →
 *   Manifold's DEL (delegates called without the netns, cache record tombstoned).
 */
import assert from "node:assert/strict";
import { findLeaks } from "../support/leaks.ts";
import {
  type NodeCluster,
  type NodeMode,
  nodeTest,
  startNodeCluster,
} from "../support/node_cluster.ts";
import { bridgeNad, deployment } from "../support/node/workloads.ts";

const NS = "life";

/** Every file under `dir` with its content (leases, cache records). */
async function snapshotFiles(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  async function walk(d: string) {
    for await (const e of Deno.readDir(d)) {
      const p = `${d}/${e.name}`;
      if (e.isDirectory) await walk(p);
      else if (e.isFile && !p.includes("/network-status/")) out[p] = await Deno.readTextFile(p);
    }
  }
  await walk(dir).catch(() => {});
  return out;
}

async function sandboxIds(node: NodeCluster): Promise<string[]> {
  const ids = [];
  for (const pod of await node.waitPodsRunning(NS, "app=web", 3)) {
    ids.push((await node.podSandbox(pod)).id);
  }
  return ids.sort();
}

function scenario(mode: NodeMode) {
  nodeTest(
    `node (${mode}): kubelet and containerd restarts re-ADD nothing; a reboot leaves nothing of the dead sandboxes`,
    async () => {
      const node = await startNodeCluster({ mode });
      const br = `mfl${crypto.randomUUID().slice(0, 5)}`;
      try {
        await node.createNamespace(NS);
        await node.createNad(NS, "net-a", bridgeNad(node, "net-a", br, "10.32.1.0/24"));
        await node.apply(deployment(NS, "web", 3, "net-a"));
        const before = await sandboxIds(node);
        const files = async () => ({
          ...(await snapshotFiles(node.layout.ipamDir)),
          ...(await snapshotFiles(node.layout.cacheDir)),
        });
        const state = await files();

        await node.restartKubelet(true);
        await new Promise((r) => setTimeout(r, 5000)); // a kubelet sync after its restart
        assert.deepEqual(await sandboxIds(node), before, "sandboxes after kubelet restart");
        assert.deepEqual(await files(), state, "leases and cache after kubelet restart");

        await node.restartContainerd(true);
        await new Promise((r) => setTimeout(r, 5000));
        assert.deepEqual(await sandboxIds(node), before, "sandboxes after containerd restart");
        assert.deepEqual(await files(), state, "leases and cache after containerd restart");

        const t0 = Date.now();
        await node.reboot();
        const after = await poll(async () => {
          const ids = await sandboxIds(node);
          return ids.some((id) => before.includes(id)) ? undefined : ids;
        });
        for (const pod of await node.waitPodsRunning(NS, "app=web", 3)) {
          const names = node.networkStatus(pod).map((s) => s.interface);
          assert.deepEqual(names, ["eth0", "net1"]);
          const snap = await node.podNetns(pod);
          assert.ok(snap.interfaces.some((i) => i.name === "net1"), "net1 in the new sandbox");
        }
        assert.equal(after.length, 3);
        // Within one minute of the boot: nothing of the dead sandboxes.
        let leaks = await findLeaks({
          containerIds: before,
          ipamDir: node.layout.ipamDir,
          cacheDir: node.layout.cacheDir,
        });
        while (Object.values(leaks).some((v) => v.length) && Date.now() - t0 < 60_000) {
          await new Promise((r) => setTimeout(r, 1000));
          leaks = await findLeaks({
            containerIds: before,
            ipamDir: node.layout.ipamDir,
            cacheDir: node.layout.cacheDir,
          });
        }
        assert.deepEqual(
          leaks,
          { interfaces: [], leases: [], cache: [], files: [] },
          "dead sandboxes' traces",
        );
        const kubelet = await Deno.readTextFile(node.logPath("kubelet"));
        const failedDel = kubelet.split("\n").filter((l) =>
          /StopPodSandbox.*failed|failed to destroy network/i.test(l)
        );
        assert.deepEqual(failedDel, [], "every DEL of a vanished netns succeeds");
      } finally {
        await node.stop();
        await new Deno.Command("ip", { args: ["link", "del", br], stderr: "null" }).output();
      }
    },
  );
}

async function poll<T>(f: () => Promise<T | undefined>, ms = 90_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error("timed out waiting for the new sandboxes");
    await new Promise((r) => setTimeout(r, 1000));
  }
}

scenario("per-call");
scenario("daemon");
