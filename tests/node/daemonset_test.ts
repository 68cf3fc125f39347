/**
 * Issue 29 §2: `kubectl apply -k tests/node/overlay` — deploy/ with only the image (built
 * offline by scripts/image.sh, imported with `ctr`) and the node's two CNI directories changed —
 * on a real node. The DaemonSet pod becomes Ready; its installer waits for the cluster
 * network's own config, then puts the plugin (the source variant's bundle + launcher), the
 * plugin's kubeconfig and `00-manifold.conflist` in place; pods of a Deployment selecting NADs
 * get their networks through the daemon (network-status = the kernel's view); `manifold
 * doctor` in the DaemonSet's daemon container reports no failure.
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
  containerId,
  daemonSetMissing,
  execIn,
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

const NS = "dsnet";
const missing = nodeTierMissing() ?? daemonSetMissing();
if (missing) {
  console.log(
    `node tier deploy/ scenarios (tests/node/daemonset_test.ts) skipped: missing ${missing}`,
  );
}

/** The DaemonSet's pods (label app.kubernetes.io/name=manifold) in kube-system. */
export function dsPods(node: NodeCluster): Promise<KubeObject[]> {
  return node.listPods("kube-system", "app.kubernetes.io/name=manifold");
}

function ready(pod: KubeObject): boolean {
  // deno-lint-ignore no-explicit-any
  return pod.status?.conditions?.some((c: any) => c.type === "Ready" && c.status === "True");
}

/** Asserts the pod's network-status names exactly the interfaces and addresses its netns has. */
async function assertStatusMatchesKernel(node: NodeCluster, pod: KubeObject): Promise<void> {
  const status = node.networkStatus(pod);
  const snap = await node.podNetns(pod);
  const names = snap.interfaces.map((i) => i.name).filter((n) => n !== "lo").sort();
  assert.deepEqual(
    status.map((s) => s.interface).sort(),
    names,
    `${pod.metadata.name}: interfaces`,
  );
  for (const s of status) {
    const link = snap.interfaces.find((i) => i.name === s.interface)!;
    assert.equal(link.mac, s.mac, `${pod.metadata.name} ${s.interface}: mac`);
    for (const ip of s.ips ?? []) {
      assert.ok(link.addresses.includes(ip), `${pod.metadata.name} ${s.interface}: ${ip}`);
    }
  }
}

/** A container's log lines (kubelet's pod log files; CRI format, the message last). */
async function containerLog(pod: KubeObject, container: string): Promise<string[]> {
  const dir = `/var/log/pods/kube-system_${pod.metadata.name}_${pod.metadata.uid}/${container}`;
  const lines: string[] = [];
  try {
    for await (const e of Deno.readDir(dir)) {
      lines.push(...(await Deno.readTextFile(`${dir}/${e.name}`)).split("\n"));
    }
  } catch { /* no log yet */ }
  return lines;
}

/** The daemon container's log lines of served ADDs (kubelet's pod log files). */
async function servedAdds(pod: KubeObject): Promise<number> {
  const dir = `/var/log/pods/kube-system_${pod.metadata.name}_${pod.metadata.uid}/daemon`;
  let n = 0;
  try {
    for await (const e of Deno.readDir(dir)) {
      const text = await Deno.readTextFile(`${dir}/${e.name}`);
      n += text.split("\n").filter((l) =>
        l.includes('\\"msg\\":\\"served\\"') || l.includes('"msg":"served"')
      ).filter((l) =>
        l.includes("ADD")
      ).length;
    }
  } catch { /* no log yet */ }
  return n;
}

Deno.test({
  name: "node: kubectl apply -k deploy/ (image built offline): DaemonSet Ready, plugin + " +
    "config + kubeconfig installed after the primary, NAD pods through the daemon, doctor green",
  ignore: missing !== undefined,
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const lock = await lockHost();
    try {
      const image = imageArchive(IMAGE_REF);
      const node = await startNodeCluster({
        cniDirs: { bin: NODE_CNI.bin, conf: NODE_CNI.conf },
        installManifold: false,
      });
      let host: HostPrep | undefined;
      const tag = crypto.randomUUID().slice(0, 4);
      const brA = `mda${tag}`, brB = `mdb${tag}`;
      try {
        host = await prepareHost(node);
        const img = await image;
        console.log(
          `image ${IMAGE_REF}: ${
            (img.bytes / 1048576).toFixed(1)
          } MiB archive, built in ${img.ms} ms`,
        );
        await importImage(node, img.archive);
        // The cluster network's own config is not there yet: the installer must wait for it.
        const primary = `${NODE_CNI.conf}/10-cluster.conflist`;
        const primaryText = await Deno.readTextFile(primary);
        await Deno.remove(primary);

        const applied = performance.now();
        await kubectl(node, "apply", "-k", OVERLAY);
        // The installer puts the plugin in place first, and no config while the primary is missing.
        const launcher = await poll(
          "launcher in the CNI bin dir",
          async () => launcherBundle(await Deno.readTextFile(`${NODE_CNI.bin}/manifold`)),
          300_000,
          500,
        );
        const pluginMs = Math.round(performance.now() - applied);
        assert.match(launcher, new RegExp(`^${NODE_CNI.bin}/\\.manifold/[0-9a-f]{32}$`));
        const st = await Deno.stat(launcher);
        assert.equal(st.uid, 0);
        assert.equal(st.mode! & 0o777, 0o755);
        assert.equal((await Deno.stat(`${NODE_CNI.bin}/manifold`)).mode! & 0o777, 0o755);
        await new Promise((r) => setTimeout(r, 3000));
        await assert.rejects(
          Deno.stat(`${NODE_CNI.conf}/00-manifold.conflist`),
          Deno.errors.NotFound,
          "no Manifold config before the cluster network's",
        );
        await Deno.writeTextFile(primary, primaryText);
        const primaryAt = performance.now();

        const pod = await poll(
          "DaemonSet pod Ready",
          async () => {
            const pods = await dsPods(node);
            return pods.length === 1 && ready(pods[0]) ? pods[0] : undefined;
          },
          300_000,
          500,
        );
        const readyMs = Math.round(performance.now() - applied);
        const primaryToReadyMs = Math.round(performance.now() - primaryAt);
        // deno-lint-ignore no-explicit-any
        const readyAt = pod.status.conditions.find((c: any) =>
          c.type === "Ready"
        ).lastTransitionTime;
        const podStartToReady = Date.parse(readyAt) - Date.parse(pod.status.startTime);
        console.log(
          `DaemonSet pod: apply → plugin installed ${pluginMs} ms; apply → Ready ${readyMs} ms; ` +
            `pod start → Ready ${podStartToReady} ms (API times, 1 s resolution), of which the ` +
            `installer waited for the primary; primary written → Ready ${primaryToReadyMs} ms`,
        );

        const installLog = await containerLog(pod, "install");
        const copied = installLog.map((l) =>
          /installed the plugin bundle.*"bytes":(\d+),"ms":(\d+)/.exec(l)
        )
          .find((m) => m);
        if (copied) {
          console.log(
            `installer: bundle of ${
              (Number(copied[1]) / 1048576).toFixed(1)
            } MiB copied into the ` +
              `node's CNI bin dir in ${copied[2]} ms`,
          );
        }
        const conf = JSON.parse(await Deno.readTextFile(`${NODE_CNI.conf}/00-manifold.conflist`));
        const entry = conf.plugins[0];
        assert.equal(entry.type, "manifold");
        assert.equal(entry.clusterNetwork, primary);
        assert.equal(entry.daemonSocket, "/run/manifold/manifold.sock");
        assert.equal(
          entry.binDir,
          NODE_CNI.bin,
          "the daemon finds delegates in the node's bin dir",
        );
        assert.equal(entry.kubeconfig, `${NODE_CNI.conf}/manifold.d/manifold.kubeconfig`);
        const kc = await Deno.readTextFile(entry.kubeconfig);
        assert.match(kc, /https:\/\/10\.96\.0\.1:443/);
        assert.ok((await Deno.stat(`${NODE_CNI.conf}/manifold.d/token`)).size > 0);

        // Pods selecting NADs, through the daemon.
        await node.createNamespace(NS);
        await node.createNad(NS, "net-a", bridgeNad(node, "net-a", brA, "10.37.1.0/24"));
        await node.createNad(NS, "net-b", bridgeNad(node, "net-b", brB, "10.37.2.0/24"));
        await node.apply(deployment(NS, "web", 5, "net-a,net-b"));
        const pods = await node.waitPodsRunning(NS, "app=web", 5, 300_000);
        const ids: string[] = [];
        for (const p of pods) {
          await assertStatusMatchesKernel(node, p);
          assert.deepEqual(node.networkStatus(p).map((s) => s.interface), ["eth0", "net1", "net2"]);
          ids.push((await node.podSandbox(p)).id);
        }
        const served = await servedAdds(pod);
        console.log(`daemon served ${served} ADDs (its log)`);
        assert.ok(served >= 5, `the daemon served the ADDs (${served} served lines)`);

        // doctor in the daemon container, as `kubectl exec ds/manifold -- manifold doctor`.
        const cid = await containerId(node, pod.metadata.name, "daemon");
        const doc = await execIn(node, cid, [
          "/usr/local/bin/manifold",
          "doctor",
          `--cni-conf-dir=${NODE_CNI.conf}`,
          `--cni-bin-dir=${NODE_CNI.bin}`,
          "-o",
          "json",
        ]);
        const report = JSON.parse(doc.stdout);
        // deno-lint-ignore no-explicit-any
        const checks: any[] = report.checks ?? report;
        const failed = checks.filter((c) => c.status === "fail");
        console.log(
          `doctor in the daemon container: ${
            checks.map((c) => `${c.name}=${c.status}`).join(", ")
          }`,
        );
        assert.deepEqual(failed, [], doc.stdout + doc.stderr);
        assert.equal(doc.code, 0, doc.stderr);

        await node.scale(NS, "web", 0);
        await node.waitPodsGone(NS, "app=web", 180_000);
        const leaks = await poll(
          "no leaks",
          async () => {
            const r = await findLeaks({
              containerIds: ids,
              ipamDir: node.layout.ipamDir,
              cacheDir: HOST_CACHE_DIR,
            });
            return Object.values(r).every((v) => v.length === 0) ? r : undefined;
          },
          90_000,
          1000,
        );
        assert.deepEqual(leaks, { interfaces: [], leases: [], cache: [], files: [] });
      } finally {
        await kubectl(node, "delete", "-k", OVERLAY, "--wait=false").catch(() => {});
        await node.stop();
        await host?.restore();
        for (const b of [brA, brB]) {
          await new Deno.Command("ip", { args: ["link", "del", b], stderr: "null" }).output();
        }
      }
    } finally {
      await removeImageArchives();
      lock.close();
    }
  },
});
