/**
 * Issue 29 §3: deploy/ (tests/node/overlay) on a real node, upgraded and removed while pods
 * start. The DaemonSet is rolled to a second image — built from the same tree with one line
 * changed, so its bundle differs and the launcher really switches — while a Deployment scales
 * 0 → 30: every pod reaches Running with its networks (the in-process fallback covers the gap
 * between the daemon instances); the old bundle goes once nothing runs it; scaling to 0 leaves no
 * lease, cache record or netns. Then `kubectl delete -k` (CRDs, RBAC, the DaemonSet): running
 * pods stay intact, and deleting them later still tears everything down (DEL from the cache,
 * delegates from the bundle left in the CNI bin dir); `kubectl apply -k` again resumes.
 */
import assert from "node:assert/strict";
import { findLeaks } from "../support/leaks.ts";
import {
  type NodeCluster,
  nodeTierMissing,
  poll,
  startNodeCluster,
} from "../support/node_cluster.ts";
import { bridgeNad, deployment } from "../support/node/workloads.ts";
import type { KubeObject } from "../support/kube_rest.ts";
import {
  daemonSetMissing,
  HOST_CACHE_DIR,
  type HostPrep,
  IMAGE_REF,
  imageArchive,
  importImage,
  kubectl,
  lockHost,
  NODE_CNI,
  OVERLAY,
  prepareHost,
  removeImageArchives,
} from "../support/node/daemonset.ts";
import { launcherBundle } from "../../lib/install/mod.ts";

const NS = "dsup";
const PODS = 30;
const IMAGE_2 = "manifold.test/manifold:2";
const missing = nodeTierMissing() ?? daemonSetMissing();
if (missing) {
  console.log(
    `node tier deploy/ upgrade scenario (tests/node/daemonset_upgrade_test.ts) skipped: missing ${missing}`,
  );
}

function ready(pod: KubeObject): boolean {
  // deno-lint-ignore no-explicit-any
  return pod.status?.conditions?.some((c: any) => c.type === "Ready" && c.status === "True");
}

function dsPods(node: NodeCluster): Promise<KubeObject[]> {
  return node.listPods("kube-system", "app.kubernetes.io/name=manifold");
}

async function launcher(): Promise<string | undefined> {
  return launcherBundle(await Deno.readTextFile(`${NODE_CNI.bin}/manifold`).catch(() => ""));
}

/** The tail of a container's log (kubelet's pod log files). */
async function podLog(pod: KubeObject, container: string): Promise<string> {
  const dir =
    `/var/log/pods/${pod.metadata.namespace}_${pod.metadata.name}_${pod.metadata.uid}/${container}`;
  let text = "";
  for await (const e of Deno.readDir(dir)) text += await Deno.readTextFile(`${dir}/${e.name}`);
  return text.split("\n").slice(-30).join("\n");
}

async function netnsExists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch {
    return false;
  }
}

/** Each pod's interfaces (kernel) and network-status agree on eth0 + net1. */
async function assertNetworks(node: NodeCluster, pods: KubeObject[]): Promise<void> {
  for (const pod of pods) {
    const names = (await node.podNetns(pod)).interfaces.map((i) => i.name)
      .filter((n) => n !== "lo").sort();
    assert.deepEqual(names, ["eth0", "net1"], pod.metadata.name);
    assert.deepEqual(node.networkStatus(pod).map((s) => s.interface), ["eth0", "net1"]);
  }
}

/** Sandbox ids and netns paths of `pods`. */
async function sandboxes(node: NodeCluster, pods: KubeObject[]) {
  const out: { id: string; netns: string }[] = [];
  for (const p of pods) out.push(await node.podSandbox(p));
  return out;
}

/** Waits until nothing of `sb` remains: leases, live cache records, netns files. */
async function assertNothingLeft(node: NodeCluster, sb: { id: string; netns: string }[]) {
  const report = async () => ({
    ...(await findLeaks({
      containerIds: sb.map((s) => s.id),
      ipamDir: node.layout.ipamDir,
      cacheDir: HOST_CACHE_DIR,
    })),
    netns: (await Promise.all(sb.map(async (s) => await netnsExists(s.netns) ? s.netns : "")))
      .filter(Boolean),
  });
  const r = await poll(
    "nothing left",
    async () => {
      const r = await report();
      return Object.values(r).every((v) => v.length === 0) ? r : undefined;
    },
    120_000,
    1000,
  ).catch(report);
  assert.deepEqual(r, { interfaces: [], leases: [], cache: [], files: [], netns: [] });
}

Deno.test({
  name: `node: DaemonSet rolled to a new image while ${PODS} pods start; kubectl delete -k ` +
    "leaves pods intact and their deletion clean; apply -k resumes",
  ignore: missing !== undefined,
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const lock = await lockHost();
    try {
      const images = Promise.all([imageArchive(IMAGE_REF), imageArchive(IMAGE_2, "upgrade")]);
      const node = await startNodeCluster({
        cniDirs: { bin: NODE_CNI.bin, conf: NODE_CNI.conf },
        installManifold: false,
      });
      let host: HostPrep | undefined;
      const br = `mdu${crypto.randomUUID().slice(0, 5)}`;
      let stopWatch = false;
      try {
        host = await prepareHost(node);
        const [one, two] = await images;
        await importImage(node, one.archive);
        await importImage(node, two.archive);
        const applied = performance.now();
        await kubectl(node, "apply", "-k", OVERLAY);
        const first = await poll(
          "DaemonSet pod Ready",
          async () => {
            const p = await dsPods(node);
            return p.length === 1 && ready(p[0]) ? p[0] : undefined;
          },
          300_000,
          500,
        );
        const readyMs = Math.round(performance.now() - applied);
        // deno-lint-ignore no-explicit-any
        const readyAt = first.status.conditions.find((c: any) => c.type === "Ready")
          .lastTransitionTime;
        console.log(
          `DaemonSet pod (primary config present): apply → Ready ${readyMs} ms; pod start → Ready ` +
            `${Date.parse(readyAt) - Date.parse(first.status.startTime)} ms (API times, 1 s steps)`,
        );
        const bundle1 = await poll("launcher", launcher, 120_000, 500);
        assert.ok(bundle1);

        await node.createNamespace(NS);
        await node.createNad(NS, "net-a", bridgeNad(node, "net-a", br, "10.38.0.0/24"));
        await node.apply(deployment(NS, "web", 0, "net-a"));

        // Watch: when each web pod is first Running, when the new DaemonSet pod is Ready.
        const runningAt = new Map<string, number>();
        let dsReadyAt = 0;
        let switchedAt = 0;
        const oldDs = (await dsPods(node))[0].metadata.name;
        const watch = (async () => {
          while (!stopWatch) {
            const pods = await node.listPods(NS, "app=web").catch(() => []);
            for (const p of pods) {
              if (p.status?.phase === "Running" && !runningAt.has(p.metadata.name)) {
                runningAt.set(p.metadata.name, performance.now());
              }
            }
            if (!switchedAt) {
              const b = await launcher();
              if (b && b !== bundle1) switchedAt = performance.now();
            }
            if (!dsReadyAt) {
              const ds = await dsPods(node).catch(() => []);
              if (ds.some((p) => p.metadata.name !== oldDs && ready(p))) {
                dsReadyAt = performance.now();
              }
            }
            await new Promise((r) => setTimeout(r, 300));
          }
        })();

        const began = performance.now();
        await kubectl(
          node,
          "-n",
          "kube-system",
          "set",
          "image",
          "ds/manifold",
          `daemon=${IMAGE_2}`,
          `install=${IMAGE_2}`,
        );
        await node.scale(NS, "web", PODS);
        await kubectl(
          node,
          "-n",
          "kube-system",
          "rollout",
          "status",
          "ds/manifold",
          "--timeout=300s",
        );
        const pods = await node.waitPodsRunning(NS, "app=web", PODS, 400_000);
        await poll("new DaemonSet pod seen Ready", () => dsReadyAt > 0, 30_000);
        // The new pod's daemon can be Ready before its installer has copied the new bundle.
        await poll("launcher switched to the new bundle", () => switchedAt > 0, 120_000);
        stopWatch = true;
        await watch;
        const bundle2 = (await launcher())!;
        assert.notEqual(bundle2, bundle1);
        await assertNetworks(node, pods);
        // The update: from the image change until the new pod is Ready and its launcher is in place.
        const updated = Math.max(dsReadyAt, switchedAt);
        const during = [...runningAt.values()].filter((t) => t >= began && t <= updated).length;
        const events = await node.admin.request("GET", `/api/v1/namespaces/${NS}/events`);
        // deno-lint-ignore no-explicit-any
        const failures = (events.items ?? []).filter((e: any) =>
          e.reason === "FailedCreatePodSandBox"
        );
        console.log(
          `rolling update: new DaemonSet pod Ready ${Math.round(dsReadyAt - began)} ms, launcher ` +
            `switched ${Math.round(switchedAt - began)} ms after the image change; ` +
            `${during}/${PODS} pods Running during the update, all ${PODS} after ` +
            `${Math.round(Math.max(...runningAt.values()) - began)} ms; ` +
            `${failures.length} sandbox failures (FailedCreatePodSandBox events, retried by ` +
            `kubelet)${
              // deno-lint-ignore no-explicit-any
              failures.map((f: any) => `\n  ${f.count}× ${String(f.message).slice(0, 300)}`).join(
                "",
              )}`,
        );
        // The old bundle goes once nothing names or runs it (the installer's grace: 60 s).
        await poll(
          "old bundle pruned",
          async () => {
            try {
              await Deno.stat(bundle1);
              return false;
            } catch {
              return true;
            }
          },
          150_000,
          1000,
        ).catch(async (e) => {
          const users: string[] = [];
          for await (const d of Deno.readDir("/proc")) {
            const cmd = await Deno.readTextFile(`/proc/${d.name}/cmdline`).catch(() => "");
            if (cmd.includes(bundle1)) users.push(`${d.name}: ${cmd.replaceAll("\0", " ")}`);
          }
          const ds = (await dsPods(node))[0];
          throw new Error(
            `${e.message}\nprocesses naming it: ${users.join("\n")}\ninstaller log:\n${await podLog(
              ds,
              "install",
            ).catch((x) => `${x}`)}`,
          );
        });

        // Scale down: nothing of the 30 sandboxes left.
        const sb = await sandboxes(node, pods);
        await node.scale(NS, "web", 0);
        await node.waitPodsGone(NS, "app=web", 300_000);
        await assertNothingLeft(node, sb);
        console.log(`scale ${PODS} → 0 after the update: no lease, cache record or netns left`);

        // Removal while pods run.
        await node.scale(NS, "web", 5);
        const five = await node.waitPodsRunning(NS, "app=web", 5, 300_000);
        const sb5 = await sandboxes(node, five);
        await kubectl(node, "delete", "-k", OVERLAY, "--timeout=180s");
        await poll("DaemonSet pods gone", async () => (await dsPods(node)).length === 0, 120_000);
        await new Promise((r) => setTimeout(r, 5000));
        const still = await node.listPods(NS, "app=web");
        assert.equal(still.length, 5);
        assert.ok(
          still.every((p) => p.status?.phase === "Running" && !p.metadata.deletionTimestamp),
        );
        for (const s of sb5) assert.ok(await netnsExists(s.netns), `${s.netns} still there`);
        await assertNetworks(node, still);
        // The plugin stays on the node: the pods' DELs need it (CRDs and NADs are gone now).
        assert.equal(await launcher(), bundle2);
        await node.scale(NS, "web", 0);
        await node.waitPodsGone(NS, "app=web", 300_000);
        await assertNothingLeft(node, sb5);
        console.log(
          "kubectl delete -k: 5 running pods intact; their deletion afterwards left nothing",
        );

        // Reinstall resumes.
        await kubectl(node, "apply", "-k", OVERLAY);
        await poll(
          "DaemonSet pod Ready again",
          async () => {
            const p = await dsPods(node);
            return p.length === 1 && ready(p[0]);
          },
          300_000,
          500,
        );
        await poll(
          "NAD CRD served again",
          () => node.createNad(NS, "net-a", bridgeNad(node, "net-a", br, "10.38.0.0/24")),
          60_000,
          1000,
        );
        await node.scale(NS, "web", 3);
        await assertNetworks(node, await node.waitPodsRunning(NS, "app=web", 3, 300_000));
      } finally {
        stopWatch = true;
        await kubectl(node, "delete", "-k", OVERLAY, "--wait=false").catch(() => {});
        await node.stop();
        await host?.restore();
        await new Deno.Command("ip", { args: ["link", "del", br], stderr: "null" }).output();
      }
    } finally {
      await removeImageArchives();
      lock.close();
    }
  },
});
