/**
 * Issue 27 §2, daemon mode: `manifold daemon` SIGKILLed, and later stopped cleanly and restarted,
 * in the middle of a 30-pod scale-up. Every pod ends Running with network-status agreeing with
 * its netns; after scaling to 0 the node holds nothing of any sandbox that ever ran — no
 * host-local lease on any network, no live cache record, no veth on the secondary bridge —
 * including the sandboxes whose ADD the crash cut short (kubelet's StopPodSandbox → DEL).
 */
import assert from "node:assert/strict";
import { ipJson } from "../support/netns.ts";
import { type NodeCluster, nodeTest, poll, startNodeCluster } from "../support/node_cluster.ts";
import { bridgeNad, deployment } from "../support/node/workloads.ts";

const NS = "crash";
const PODS = 30;

async function bridgePorts(bridge: string): Promise<string[]> {
  const links = await ipJson<{ ifname: string }[]>(undefined, "link", "show", "master", bridge)
    .catch(() => []);
  return links.map((l) => l.ifname);
}

async function walk(dir: string): Promise<string[]> {
  const out: string[] = [];
  for await (const e of Deno.readDir(dir)) {
    const p = `${dir}/${e.name}`;
    if (e.isDirectory) out.push(...await walk(p));
    else out.push(p);
  }
  return out;
}

/**
 * Every container id the node's disk still names: cache records (`<id>@<if>.json`, `<id>.json`)
 * and host-local leases (first line of a file named by an address).
 */
async function idsOnDisk(node: NodeCluster): Promise<string[]> {
  const ids = new Set<string>();
  for (const p of await walk(node.layout.cacheDir).catch(() => [])) {
    const base = p.slice(p.lastIndexOf("/") + 1);
    const m = /^([0-9a-f]{64})(@[^/]*)?\.json/.exec(base);
    if (m) ids.add(m[1]);
  }
  for (const p of await walk(node.layout.ipamDir).catch(() => [])) {
    if (!/\/[0-9.]+$|\/[0-9a-f:]+$/.test(p)) continue;
    const id = (await Deno.readTextFile(p)).split(/\r?\n/)[0].trim();
    if (id) ids.add(id);
  }
  return [...ids];
}

/** ADDs the daemon answered so far (its log's `served` lines, every incarnation). */
async function servedAdds(node: NodeCluster): Promise<number> {
  const log = await Deno.readTextFile(node.logPath("daemon")).catch(() => "");
  return log.split("\n").filter((l) =>
    l.includes('"msg":"served"') && l.includes('"command":"ADD"')
  )
    .length;
}

nodeTest(
  `node (daemon): daemon SIGKILLed and restarted during a ${PODS}-pod scale-up; all Running, nothing leaked`,
  async () => {
    const node = await startNodeCluster({ mode: "daemon" });
    const br = `mdc${crypto.randomUUID().slice(0, 5)}`;
    try {
      await node.createNamespace(NS);
      await node.createNad(NS, "net-a", bridgeNad(node, "net-a", br, "10.35.0.0/24"));
      await node.apply(deployment(NS, "web", 0, "net-a"));
      // Two bursts of 15 pods: the daemon is SIGKILLed during the first, stopped cleanly
      // (SIGTERM) during the second, each time once it has served 2 ADDs of the burst (its log,
      // polled every 20 ms: ADDs take ≈ 80 ms each here, so the rest are queued or in flight), and
      // restarted 2 s later. Meanwhile the forwarder runs the requests in-process
      // (`daemonFallback`).
      const bounce = async (scaleTo: number, kill: boolean) => {
        const base = await servedAdds(node);
        await node.scale(NS, "web", scaleTo);
        await poll("2 ADDs served", async () => (await servedAdds(node)) >= base + 2, 180_000, 20);
        await node.stopDaemon(kill);
        const served = (await servedAdds(node)) - base;
        console.log(
          `daemon ${kill ? "SIGKILLed" : "stopped (SIGTERM)"} after ${served}/${
            scaleTo - (kill ? 0 : PODS / 2)
          } ADDs of the burst`,
        );
        await new Promise((r) => setTimeout(r, 2000));
        await node.startDaemon();
      };
      await bounce(PODS / 2, true);
      await node.waitPodsRunning(NS, "app=web", PODS / 2, 300_000);
      await bounce(PODS, false);

      const pods = await node.waitPodsRunning(NS, "app=web", PODS, 300_000);
      for (const pod of pods) {
        const names = (await node.podNetns(pod)).interfaces.map((i) => i.name)
          .filter((n) => n !== "lo").sort();
        assert.deepEqual(names, ["eth0", "net1"], pod.metadata.name);
        assert.deepEqual(
          node.networkStatus(pod).map((s) => s.interface),
          ["eth0", "net1"],
          pod.metadata.name,
        );
      }
      assert.equal((await bridgePorts(br)).length, PODS, "one veth per pod on net-a");

      await node.scale(NS, "web", 0);
      await node.waitPodsGone(NS, "app=web", 180_000);
      // No pod is left on the node: whatever the disk still names must be a tombstone.
      const report = async () => {
        const ids = await idsOnDisk(node);
        return { ...(await node.leaks(ids)), ports: await bridgePorts(br) };
      };
      const leaks = await poll(
        "nothing left",
        async () => {
          const r = await report();
          return Object.values(r).every((v) => v.length === 0) ? r : undefined;
        },
        90_000,
        1000,
      ).catch(report);
      assert.deepEqual(leaks, { interfaces: [], leases: [], cache: [], files: [], ports: [] });
    } finally {
      await node.stop();
      await new Deno.Command("ip", { args: ["link", "del", br], stderr: "null" }).output();
    }
  },
);
