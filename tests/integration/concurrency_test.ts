/**
 * 50 sandboxes at once through the real plugin process (scripts/manifold) with real
 * delegates, against the HTTPS API stand-in: no duplicate interface names or IPs, no cache
 * corruption, no deadlock.
 *
 * 50 pods, each with its own network namespace and its own containerID, select
 * `bridge-net` (bridge + host-local, shared subnet) and `macvlan-net` (static IPAM, each
 * pod its own IP from the annotation's `ips`) besides the default network (bridge +
 * host-local). Phase 1 runs all 50 at once: 40 ADDs, and 10 containers that churn
 * ADD → DEL → ADD, so DELs interleave with the others' ADDs and released leases are
 * reused. Then every ADD must have succeeded, every IP be distinct across all sandboxes
 * (the host-local leases and what `ip -n` shows agree, and match network-status), every
 * sandbox hold exactly `eth0`/`net1`/`net2`, and every cache record be readable and
 * complete. Phase 2 runs the 50 DELs at once, phase 3 containerd's second DEL (no netns)
 * at once; then nothing may be left. host-local serialises on its lock file: that is
 * expected, and part of what the bound covers.
 *
 * The whole test must finish within {@link BOUND_MS}, else it fails naming the phase and
 * the calls still pending (a deadlock). Wall times are printed. Needs root.
 */

import assert from "node:assert/strict";
import { assertNoLeaks } from "../support/leaks.ts";
import { ipJson, isRoot, linkNames } from "../support/netns.ts";
import { k8sArgs, type PluginOutcome, runPlugin } from "../support/plugin.ts";
import { done, NS, type World, world } from "../support/world.ts";

const root = { ignore: !isRoot(), sanitizeResources: false, sanitizeOps: false };

/** Sandboxes run at once. */
const N = 50;
/** How many of them churn ADD → DEL → ADD during phase 1. */
const CHURN = 10;
/** The whole test (setup excluded) must end within this many ms: else a deadlock. */
const BOUND_MS = 120_000;

interface Sandbox {
  index: number;
  pod: string;
  uid: string;
  containerId: string;
  netns: string;
  /** The macvlan-net IP the annotation asks for. */
  staticIp: string;
}

/** Tracks calls still running, for the deadlock message. */
class Pending {
  #running = new Map<number, string>();
  #next = 0;
  phase = "setup";

  async run<T>(what: string, p: () => Promise<T>): Promise<T> {
    const id = this.#next++;
    this.#running.set(id, what);
    try {
      return await p();
    } finally {
      this.#running.delete(id);
    }
  }

  describe(): string {
    const list = [...this.#running.values()];
    return `phase "${this.phase}", ${list.length} call(s) still running: ${
      list.slice(0, 10).join(", ")
    }${list.length > 10 ? ", …" : ""}`;
  }
}

function call(
  w: World,
  sb: Sandbox,
  command: "ADD" | "DEL",
  pending: Pending,
  netns = `/var/run/netns/${sb.netns}`,
): Promise<PluginOutcome> {
  return pending.run(`${command} ${sb.pod}`, () =>
    runPlugin({
      command,
      config: w.conf,
      containerId: sb.containerId,
      netns,
      ifName: "eth0",
      args: k8sArgs(NS, sb.pod, sb.containerId, sb.uid),
      path: "/usr/lib/cni",
    }));
}

function expectCode0(r: PluginOutcome, what: string) {
  assert.equal(r.code, 0, `${what} failed (${Math.round(r.ms)} ms): ${r.stdout}\n${r.stderr}`);
}

type AddrInfo = {
  ifname: string;
  addr_info: { family: string; local: string; prefixlen: number }[];
};

/** IPv4 addresses per interface of a sandbox, from `ip -j addr`, as "a.b.c.d/nn". */
async function kernelIps(netns: string): Promise<Record<string, string[]>> {
  const out: Record<string, string[]> = {};
  for (const link of await ipJson<AddrInfo[]>(netns, "addr", "show")) {
    if (link.ifname === "lo") continue;
    out[link.ifname] = link.addr_info.filter((a) => a.family === "inet").map((a) =>
      `${a.local}/${a.prefixlen}`
    );
  }
  return out;
}

Deno.test({
  name:
    `${N} parallel ADD/DEL on distinct containers: distinct names and IPs, sound cache, no deadlock`,
  ...root,
  async fn() {
    const w = await world({ conf: { logLevel: "error", apiTimeoutMs: 30_000 } });
    const pending = new Pending();
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      // ---- setup (not timed): 50 netns, 50 pods in the API stand-in.
      const sandboxes: Sandbox[] = [];
      for (let i = 0; i < N; i++) {
        const pod = `web-${i}`;
        const uid = crypto.randomUUID();
        const staticIp = `10.240.3.${10 + i}/24`;
        w.api.addPod({
          namespace: NS,
          name: pod,
          uid,
          annotations: {
            "k8s.v1.cni.cncf.io/networks": JSON.stringify([
              { name: "bridge-net" },
              { name: "macvlan-net", ips: [staticIp] },
            ]),
          },
        });
        sandboxes.push({
          index: i,
          pod,
          uid,
          containerId: `c${w.scratch.id}${String(i).padStart(2, "0")}${
            crypto.randomUUID().replaceAll("-", "").slice(0, 16)
          }`,
          netns: await w.scratch.netns(`c${i}`),
          staticIp,
        });
      }
      const churn = sandboxes.slice(N - CHURN);
      const steady = sandboxes.slice(0, N - CHURN);

      const deadline = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () =>
            reject(
              new Error(
                `no progress within ${BOUND_MS / 1000} s — deadlock? ${pending.describe()}`,
              ),
            ),
          BOUND_MS,
        );
      });
      const bounded = <T>(p: Promise<T>) => Promise.race([p, deadline]);
      const started = performance.now();
      const times: Record<string, number> = {};
      const phase = async <T>(name: string, p: () => Promise<T>): Promise<T> => {
        pending.phase = name;
        const t = performance.now();
        const out = await bounded(p());
        times[name] = Math.round(performance.now() - t);
        return out;
      };

      // ---- phase 1: 40 ADDs at once, while 10 containers churn ADD → DEL → ADD.
      const phase1 = await phase("ADD (40) + churn ADD/DEL/ADD (10)", () =>
        Promise.all([
          ...steady.map(async (sb) => ({ sb, adds: [await call(w, sb, "ADD", pending)] })),
          ...churn.map(async (sb) => {
            const first = await call(w, sb, "ADD", pending);
            expectCode0(first, `first ADD of ${sb.pod}`);
            const del = await call(w, sb, "DEL", pending);
            expectCode0(del, `churn DEL of ${sb.pod}`);
            return { sb, adds: [first, await call(w, sb, "ADD", pending)] };
          }),
        ]));
      for (const { sb, adds } of phase1) {
        for (const r of adds) expectCode0(r, `ADD of ${sb.pod}`);
      }
      const addMs = phase1.flatMap((p) => p.adds.map((r) => r.ms));

      // ---- verification: names, IPs (kernel, leases, network-status), cache.
      const owner = new Map<string, string>(); // IP → "pod:ifname"
      const leaseFiles = await w.leases(); // "<network>/<ip>"
      const leases = new Map<string, string>(); // IP → lease content
      for (const f of leaseFiles) {
        const [net, ip] = f.split("/");
        leases.set(ip, await Deno.readTextFile(`${w.dirs.ipam}/${net}/${ip}`));
      }
      assert.equal(leaseFiles.length, 2 * N, `one lease per host-local attachment: ${leaseFiles}`);
      assert.equal(leases.size, 2 * N, "host-local leases are distinct IPs across networks");

      for (const sb of sandboxes) {
        assert.deepEqual(await linkNames(sb.netns), ["eth0", "net1", "net2"], sb.pod);
        const ips = await kernelIps(sb.netns);
        assert.match(ips.eth0?.[0] ?? "", /^10\.240\.1\.\d+\/24$/, `${sb.pod} eth0`);
        assert.match(ips.net1?.[0] ?? "", /^10\.240\.2\.\d+\/24$/, `${sb.pod} net1`);
        assert.deepEqual(ips.net2, [sb.staticIp], `${sb.pod} net2`);
        for (const [ifname, list] of Object.entries(ips)) {
          assert.equal(list.length, 1, `${sb.pod}:${ifname} has one IPv4 address: ${list}`);
          const ip = list[0];
          const prev = owner.get(ip);
          assert.ok(!prev, `${ip} is on both ${prev} and ${sb.pod}:${ifname}`);
          owner.set(ip, `${sb.pod}:${ifname}`);
          if (ifname !== "net2") {
            // The lease names this container and interface (host-local "<id>\r\n<ifname>").
            const lease = leases.get(ip.split("/")[0]);
            assert.ok(lease, `no host-local lease for ${sb.pod}:${ifname} ${ip}`);
            assert.deepEqual(lease.split(/\r?\n/).map((s) => s.trim()).filter(Boolean), [
              sb.containerId,
              ifname,
            ], `lease of ${ip}`);
          }
        }

        // The cache record: readable, complete, this container's, no temp files.
        const text = await Deno.readTextFile(`${w.dirs.cache}/${sb.containerId}@eth0.json`);
        const record = JSON.parse(text) as {
          containerId: string;
          netns: string;
          deletedAt?: string;
          attachments: { ifName: string; statusName: string; state: string }[];
          networkStatus?: { interface?: string; ips?: string[] }[];
        };
        assert.equal(record.containerId, sb.containerId);
        assert.equal(record.netns, `/var/run/netns/${sb.netns}`);
        assert.equal(record.deletedAt, undefined, `${sb.pod}: live record`);
        assert.deepEqual(
          record.attachments.map((a) => [a.statusName, a.ifName, a.state]),
          [["cbr0", "eth0", "added"], [`${NS}/bridge-net`, "net1", "added"], [
            `${NS}/macvlan-net`,
            "net2",
            "added",
          ]],
          `${sb.pod} cache record`,
        );
        // What was cached and published is what the kernel holds.
        assert.deepEqual(
          record.networkStatus?.map((s) => [s.interface, s.ips]),
          [["eth0", ips.eth0], ["net1", ips.net1], ["net2", ips.net2]],
          `${sb.pod} cached network-status`,
        );
        const pod = w.api.getPod(NS, sb.pod) as {
          metadata: { annotations: Record<string, string> };
        };
        const status = JSON.parse(pod.metadata.annotations["k8s.v1.cni.cncf.io/network-status"]);
        assert.deepEqual(
          status.map((s: { interface: string; ips: string[] }) => [s.interface, s.ips]),
          [["eth0", ips.eth0], ["net1", ips.net1], ["net2", ips.net2]],
          `${sb.pod} network-status`,
        );
      }
      const stray = (await Array.fromAsync(Deno.readDir(w.dirs.cache)))
        .map((e) => e.name).filter((n) => n.includes(".tmp"));
      assert.deepEqual(stray, [], "no cache temp files left");
      assert.equal(owner.size, 3 * N, "3 distinct IPs per sandbox");

      // ---- phase 2: 50 DELs at once; phase 3: containerd's second DEL, no netns, at once.
      const dels = await phase(
        "DEL (50)",
        () => Promise.all(sandboxes.map((sb) => call(w, sb, "DEL", pending))),
      );
      dels.forEach((r, i) => expectCode0(r, `DEL of ${sandboxes[i].pod}`));
      const again = await phase(
        "second DEL without netns (50)",
        () => Promise.all(sandboxes.map((sb) => call(w, sb, "DEL", pending, ""))),
      );
      again.forEach((r, i) => expectCode0(r, `second DEL of ${sandboxes[i].pod}`));
      const total = Math.round(performance.now() - started);

      for (const sb of sandboxes) {
        await assertNoLeaks({
          containerIds: [sb.containerId],
          podNetns: sb.netns,
          ipamDir: w.dirs.ipam,
          cacheDir: w.dirs.cache,
        }, `after DEL of ${sb.pod}`);
      }
      await assertNoLeaks({
        containerIds: sandboxes.map((sb) => sb.containerId),
        ipamDir: w.dirs.ipam,
        cacheDir: w.dirs.cache,
      }, "after all DELs");

      const delMs = dels.map((r) => r.ms);
      console.log(
        `concurrency: ${N} sandboxes, wall ${total} ms; phases ${JSON.stringify(times)}; ` +
          `ADD per call max ${Math.round(Math.max(...addMs))} ms, ` +
          `DEL per call max ${Math.round(Math.max(...delMs))} ms`,
      );
      assert.ok(total < BOUND_MS, `took ${total} ms`);
    } finally {
      clearTimeout(timer);
      await done(w);
    }
  },
});
