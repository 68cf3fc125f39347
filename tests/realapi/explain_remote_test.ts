/**
 * `kubectl manifold explain` from a workstation (issue 31 §5): a machine with only a
 * kubeconfig (`~/.kube/config`, no /etc/cni/net.d) explains a pod with deploy/'s ConfigMap
 * `kube-system/manifold-config` as the nodes' installers read it — the NADs from the API, and
 * the node-local inputs (cluster network file, NAD mirror) said to be assumed. `--config` still
 * wins; a cluster without the ConfigMap gets a clear error. The real kubectl-plugin path:
 * scripts/manifold reached through a `kubectl-manifold` symlink, HOME holding the kubeconfig.
 * Needs `MANIFOLD_KUBE_APISERVER` (else skipped with one line).
 */

import assert from "node:assert/strict";
import { realApiSuite } from "../support/kube_apiserver.ts";
import { deployObjects } from "./cluster.ts";

const suite = realApiSuite();
const LAUNCHER = new URL("../../scripts/manifold", import.meta.url).pathname;
const NS = "explain-remote";

/** A workstation: HOME with ~/.kube/config, a kubectl-manifold symlink, no node config. */
async function workstation(api: { writeKubeconfig(p: string): Promise<void> }) {
  const home = await Deno.makeTempDir({ prefix: "mft-ws-" });
  await Deno.mkdir(`${home}/.kube`);
  await api.writeKubeconfig(`${home}/.kube/config`);
  await Deno.mkdir(`${home}/bin`);
  await Deno.symlink(LAUNCHER, `${home}/bin/kubectl-manifold`);
  await Deno.mkdir(`${home}/no-cni-conf`);
  return {
    home,
    /** Runs `kubectl-manifold ARGS` as kubectl would: HOME, no KUBECONFIG. */
    async run(args: string[]) {
      const out = await new Deno.Command(`${home}/bin/kubectl-manifold`, {
        args: [...args, "--cni-conf-dir", `${home}/no-cni-conf`],
        env: {
          HOME: home,
          PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
          // The launcher runs from source: keep Deno's module cache (the binary has none).
          DENO_DIR: Deno.env.get("DENO_DIR") ?? `${Deno.env.get("HOME")}/.cache/deno`,
        },
        clearEnv: true,
        stdout: "piped",
        stderr: "piped",
      }).output();
      const d = new TextDecoder();
      return { code: out.code, stdout: d.decode(out.stdout), stderr: d.decode(out.stderr) };
    },
  };
}

suite.test("explain from a workstation: deploy/'s ConfigMap, NADs from the API, assumptions said", async (api) => {
  const ws = await workstation(api);
  try {
    // Before deploy/ is applied: a clear error, not "readfile /etc/cni/net.d/…".
    await api.admin.createNamespace(NS);
    await api.admin.create({
      apiVersion: "v1",
      kind: "Pod",
      metadata: {
        namespace: NS,
        name: "web",
        annotations: { "k8s.v1.cni.cncf.io/networks": "macvlan-conf@data1" },
      },
      spec: { nodeName: "worker-1", containers: [{ name: "c", image: "pause" }] },
    });
    const missing = await ws.run(["explain", "web", "-n", NS]);
    assert.equal(missing.code, 1, missing.stderr);
    assert.match(missing.stderr, /no configmap kube-system\/manifold-config in the cluster/);

    for (const o of await deployObjects()) {
      if (o.kind === "CustomResourceDefinition") await api.admin.installCrd(o);
      else await api.admin.create(o);
    }
    await api.admin.create({
      apiVersion: "k8s.cni.cncf.io/v1",
      kind: "NetworkAttachmentDefinition",
      metadata: { namespace: NS, name: "macvlan-conf" },
      spec: {
        config: JSON.stringify({
          cniVersion: "1.0.0",
          type: "macvlan",
          master: "eth0",
          ipam: { type: "static" },
        }),
      },
    });
    const r = await ws.run(["explain", "web", "-n", NS, "-o", "json"]);
    assert.equal(r.code, 0, r.stderr);
    const report = JSON.parse(r.stdout);
    assert.match(report.config, /^configmap kube-system\/manifold-config \(cluster view/);
    assert.deepEqual(
      report.attachments.map((a: { network: string; ifName: string; source: string }) => [
        a.network,
        a.ifName,
        a.source,
      ]),
      [
        ["cluster-network", "eth0", "inline:delegates[0]"],
        [`${NS}/macvlan-conf`, "data1", `nad:${NS}/macvlan-conf`],
      ],
    );
    // The ConfigMap's keys reached the plan (daemonSocket is not a plan input; the mirror and
    // chroot paths are the node's): each node-local input is named.
    const assumed: string[] = report.assumed;
    // Which node's view: the one the pod is bound to, named first.
    assert.match(assumed[0], /^the pod runs on node "worker-1": /, assumed.join("\n"));
    assert.ok(assumed.some((a) => a.includes('"nadMirrorDir"')), assumed.join("\n"));
    assert.ok(assumed.some((a) => a.includes('"chrootDir"')), assumed.join("\n"));
    assert.ok(assumed.some((a) => a.includes("cluster network")), assumed.join("\n"));

    // The text form says the same for people.
    const text = await ws.run(["explain", "web", "-n", NS]);
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, /^Config configmap kube-system\/manifold-config/m);
    assert.match(text.stdout, /^assumed: the cluster network is each node's first CNI config/m);
    assert.match(text.stdout, /^assumed: the pod runs on node "worker-1"/m);

    // The ConfigMap is the source of truth: a key changed there shows in the next explain.
    await api.admin.patch(
      { apiVersion: "v1", kind: "ConfigMap", namespace: "kube-system", name: "manifold-config" },
      {
        data: {
          "plugin-conf.json": JSON.stringify({
            clusterNetwork: "kube-system/cluster-net",
            namespaceIsolation: true,
          }),
        },
      },
    );
    await api.admin.create({
      apiVersion: "k8s.cni.cncf.io/v1",
      kind: "NetworkAttachmentDefinition",
      metadata: { namespace: "kube-system", name: "cluster-net" },
      spec: { config: JSON.stringify({ cniVersion: "1.0.0", type: "bridge", name: "cluster" }) },
    });
    const pinned = JSON.parse((await ws.run(["explain", "web", "-n", NS, "-o", "json"])).stdout);
    assert.deepEqual(pinned.attachments[0].source, "nad:kube-system/cluster-net");

    // --config still wins: a file named on the command line is read, never the ConfigMap.
    const file = `${ws.home}/manifold.conflist`;
    await Deno.writeTextFile(
      file,
      JSON.stringify({
        cniVersion: "1.0.0",
        name: "manifold-cni-network",
        plugins: [{
          type: "manifold",
          delegates: [{ cniVersion: "1.0.0", name: "from-file", type: "ptp" }],
        }],
      }),
    );
    const own = await ws.run(["explain", "web", "-n", NS, "-o", "json", "--config", file]);
    assert.equal(own.code, 0, own.stderr);
    const ownReport = JSON.parse(own.stdout);
    assert.equal(ownReport.config, file);
    assert.equal(ownReport.assumed, undefined);
    assert.equal(ownReport.attachments[0].network, "from-file");
  } finally {
    await Deno.remove(ws.home, { recursive: true });
  }
});

suite.end();
