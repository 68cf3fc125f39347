/**
 * Memory of `manifold daemon` with MultiNetworkPolicy on (its cluster-wide pod list+watch):
 * the API stand-in (tests/support/kube_api.ts) holds `--pods` pods (default 5000) of other
 * nodes in 50 namespaces, each shaped like a real Deployment pod (≈ 4 KiB of JSON: labels,
 * `last-applied-configuration`, network-status, containers with env/ports/volumeMounts/probes,
 * volumes, tolerations, status with conditions and containerStatuses). A real daemon
 * (scripts/manifold, `--node-name`, `--metrics-address`) is started twice, without and with
 * `"multiNetworkPolicy": true`; after `/readyz` and a settle time, and again after `--churn`
 * pod updates (default 2000: a label changed, delivered by the watch), its `VmRSS` and `VmHWM`
 * (peak) are read from `/proc/<pid>/status` and its V8 heap from `/metrics`. Those depend on
 * when V8 collects; so first, in this process (`--v8-flags=--expose-gc`), the pod list is run
 * through the agent's own `listWatch` + {@link POD_LIST_WATCH} (and, for comparison, the same
 * resource without `trimPod`): the V8 heap the whole list holds when it reaches the
 * handler (the peak: every page's items at once), and what the reconciler keeps after it, both
 * measured after a full GC.
 *
 * Usage: deno run -A --v8-flags=--expose-gc scripts/mem_policy_pods.ts [--pods 5000]
 *   [--churn 2000] [--settle-ms 4000]
 *
 * @module
 */

import { KubeClient, listWatch, loadKubeconfig } from "../lib/k8s/mod.ts";
import { type KubeObject, POD_LIST_WATCH } from "../lib/daemon/policy/mod.ts";
import { PolicyReconciler } from "../lib/policy/reconcile.ts";
import { type KubeApiStandIn, startKubeApi } from "../tests/support/kube_api.ts";
import { startDaemon } from "../tests/support/daemon.ts";
import { until } from "../tests/support/wait.ts";

function flag(name: string, fallback: number): number {
  const i = Deno.args.indexOf(`--${name}`);
  return i >= 0 ? Number(Deno.args[i + 1]) : fallback;
}
const nPods = flag("pods", 5000), churn = flag("churn", 2000), settleMs = flag("settle-ms", 4000);
const NAMESPACES = 50;

/** A pod as a Deployment's ReplicaSet creates it and kubelet reports it (trimmed of nothing). */
function realisticPod(i: number) {
  const ns = `ns${i % NAMESPACES}`;
  const app = ["web", "db", "cache", "api", "batch"][i % 5];
  const name = `${app}-${(i * 2654435761 >>> 0).toString(36).slice(0, 9)}-${i}`;
  const ip = `10.${100 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`;
  const image = `registry.example.com/team-${i % 7}/${app}:1.${i % 30}.${i % 11}`;
  const container = {
    name: app,
    image,
    imagePullPolicy: "IfNotPresent",
    ports: [{ name: "http", containerPort: 8080, protocol: "TCP" }, {
      name: "metrics",
      containerPort: 9090,
      protocol: "TCP",
    }],
    env: Array.from({ length: 8 }, (_, k) => ({ name: `ENV_VAR_${k}`, value: `value-${k}-${i}` })),
    resources: {
      limits: { cpu: "500m", memory: "512Mi" },
      requests: { cpu: "100m", memory: "128Mi" },
    },
    volumeMounts: [
      { name: "config", mountPath: "/etc/app" },
      {
        name: "kube-api-access-x7k2p",
        readOnly: true,
        mountPath: "/var/run/secrets/kubernetes.io/serviceaccount",
      },
    ],
    livenessProbe: {
      httpGet: { path: "/healthz", port: 8080, scheme: "HTTP" },
      timeoutSeconds: 1,
      periodSeconds: 10,
      successThreshold: 1,
      failureThreshold: 3,
    },
    terminationMessagePath: "/dev/termination-log",
    terminationMessagePolicy: "File",
  };
  const at = "2026-11-20T10:00:00Z";
  return {
    namespace: ns,
    name,
    nodeName: `node-${i % 100}`,
    labels: { app, "pod-template-hash": "5d8f7c9b6d", tier: i % 2 ? "prod" : "dev" },
    annotations: {
      "k8s.v1.cni.cncf.io/networks": "net1",
      "k8s.v1.cni.cncf.io/network-status": JSON.stringify([
        { name: "cbr0", interface: "eth0", ips: [ip], mac: "02:42:ac:11:00:02", default: true },
        {
          name: `${ns}/net1`,
          interface: "net1",
          ips: [`10.1.${(i >> 8) & 255}.${i & 255}`],
          mac: "02:42:ac:11:00:03",
        },
      ]),
      "kubectl.kubernetes.io/restartedAt": at,
      "kubectl.kubernetes.io/last-applied-configuration": JSON.stringify({
        apiVersion: "apps/v1",
        kind: "Deployment",
        metadata: { name: app, namespace: ns },
        spec: { template: { spec: { containers: [container] } } },
      }),
    },
    spec: {
      containers: [container],
      volumes: [
        { name: "config", configMap: { name: `${app}-config`, defaultMode: 420 } },
        {
          name: "kube-api-access-x7k2p",
          projected: {
            defaultMode: 420,
            sources: [
              { serviceAccountToken: { expirationSeconds: 3607, path: "token" } },
              {
                configMap: { name: "kube-root-ca.crt", items: [{ key: "ca.crt", path: "ca.crt" }] },
              },
            ],
          },
        },
      ],
      tolerations: [
        {
          key: "node.kubernetes.io/not-ready",
          operator: "Exists",
          effect: "NoExecute",
          tolerationSeconds: 300,
        },
        {
          key: "node.kubernetes.io/unreachable",
          operator: "Exists",
          effect: "NoExecute",
          tolerationSeconds: 300,
        },
      ],
    },
    status: {
      phase: "Running",
      conditions: ["Initialized", "Ready", "ContainersReady", "PodScheduled"].map((type) => ({
        type,
        status: "True",
        lastProbeTime: null,
        lastTransitionTime: at,
      })),
      hostIP: `192.168.${(i % 100) >> 8}.${i % 100}`,
      podIP: ip,
      podIPs: [{ ip }],
      startTime: at,
      containerStatuses: [{
        name: app,
        state: { running: { startedAt: at } },
        lastState: {},
        ready: true,
        restartCount: 0,
        image,
        imageID: `${image}@sha256:${"0123456789abcdef".repeat(4)}`,
        containerID: `containerd://${"fedcba9876543210".repeat(4)}`,
        started: true,
      }],
    },
  };
}

async function vm(pid: number): Promise<{ rss: number; hwm: number }> {
  const text = await Deno.readTextFile(`/proc/${pid}/status`);
  const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, "m").exec(text)![1]);
  return { rss: kb("VmRSS") / 1024, hwm: kb("VmHWM") / 1024 };
}

/** V8 heap used, heap total and external memory (prom-client's series), MiB. */
async function heap(port: number): Promise<{ used: number; total: number; external: number }> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const mib = (name: string) => Number(new RegExp(`^${name} (\\S+)`, "m").exec(text)![1]) / 2 ** 20;
  return {
    used: mib("nodejs_heap_size_used_bytes"),
    total: mib("nodejs_heap_size_total_bytes"),
    external: mib("nodejs_external_memory_bytes"),
  };
}

const gc = (globalThis as { gc?: () => void }).gc;

/** Heap used after a full GC, MiB (NaN without `--expose-gc`). */
function heapAfterGc(): number {
  if (!gc) return NaN;
  gc();
  gc();
  return Deno.memoryUsage().heapUsed / 2 ** 20;
}

/**
 * Lists every pod through `listWatch` with the resource, hands them to a reconciler as the
 * agent does; returns the heap the list holds at `replace` and the reconciler after it (MiB).
 */
async function inProcess(kubeconfig: string, trim: boolean) {
  const kube = new KubeClient({ connection: await loadKubeconfig(kubeconfig) });
  const resource = trim ? POD_LIST_WATCH : { ...POD_LIST_WATCH, parse: untrimmed };
  const reconciler = new PolicyReconciler({ netnsOf: () => undefined }); // no sync is run
  try {
    const base = heapAfterGc();
    let atList = 0;
    await listWatch<KubeObject>(kube, {
      replace(items) {
        atList = heapAfterGc() - base;
        for (const o of items) reconciler.upsertPod(o);
        return Promise.resolve();
      },
      apply: () => Promise.resolve(),
      progress: () => Promise.resolve(),
    }, { resource, signal: new AbortController().signal, once: true });
    const kept = heapAfterGc() - base;
    return { atList, kept, reconciler };
  } finally {
    kube.close();
  }
}

/** {@link POD_LIST_WATCH}'s parse before `trimPod`: the whole pod kept. */
function untrimmed(raw: unknown): KubeObject {
  const o = POD_LIST_WATCH.parse(raw); // identity checked (trimmed)
  return { ...(raw as KubeObject), metadata: { ...(raw as KubeObject).metadata, ...o.metadata } };
}

async function run(api: KubeApiStandIn, dir: string, policy: boolean) {
  const port = 20000 + Math.floor(Math.random() * 20000);
  const conf = {
    cniVersion: "1.0.0",
    name: "manifold-net",
    type: "manifold",
    clusterNetwork: `${dir}/10-default.conflist`,
    kubeconfig: `${dir}/kubeconfig`,
    confDir: dir,
    cniDir: `${dir}/cache-${policy}`,
    logLevel: "info",
    multiNetworkPolicy: policy,
  };
  const d = await startDaemon(await Deno.makeTempDir({ dir }), conf, {
    flags: ["--node-name", "node-self", "--metrics-address", `127.0.0.1:${port}`],
  });
  try {
    const t0 = performance.now();
    await until(
      async () => {
        const r = await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined);
        await r?.body?.cancel();
        return r?.status === 200;
      },
      "the daemon ready",
      120_000,
    );
    const readyMs = performance.now() - t0;
    await new Promise((r) => setTimeout(r, settleMs));
    const listed = { ...await vm(d.child.pid), ...await heap(port) };
    for (let i = 0; i < churn; i++) {
      const p = realisticPod((i * 7) % nPods);
      api.setPodLabels(p.namespace, p.name, { ...p.labels, rev: String(i) });
    }
    await new Promise((r) => setTimeout(r, settleMs));
    const churned = { ...await vm(d.child.pid), ...await heap(port) };
    return { readyMs, listed, churned };
  } finally {
    d.kill("SIGKILL");
    await d.exited();
  }
}

const api = await startKubeApi();
const dir = await Deno.makeTempDir({ prefix: "manifold-mem-" });
try {
  await Deno.writeTextFile(
    `${dir}/10-default.conflist`,
    JSON.stringify({ cniVersion: "1.0.0", name: "cbr0", plugins: [{ type: "loopback" }] }),
  );
  await Deno.writeTextFile(`${dir}/token`, api.token);
  await api.writeKubeconfig(`${dir}/kubeconfig`, { auth: "tokenFile", tokenFile: `${dir}/token` });
  for (let n = 0; n < NAMESPACES; n++) api.putNamespace(`ns${n}`, { team: `t${n % 5}` });
  let bytes = 0;
  for (let i = 0; i < nPods; i++) {
    const p = realisticPod(i);
    bytes += JSON.stringify(api.addPod(p)).length;
  }
  console.log(
    `${nPods} pods in the stand-in, ${(bytes / nPods / 1024).toFixed(1)} KiB of JSON each ` +
      `(${(bytes / 2 ** 20).toFixed(1)} MiB); churn ${churn} label updates; settle ${settleMs} ms`,
  );
  const f = (x: number) => `${x.toFixed(1)} MiB`;
  for (const trim of [false, true]) {
    const r = await inProcess(`${dir}/kubeconfig`, trim);
    console.log(
      `in process, ${trim ? "trimPod" : "whole pods"}: the list at replace holds ${f(r.atList)} ` +
        `of V8 heap; kept after it (reconciler) ${f(r.kept)}`,
    );
  }
  type Sample = Awaited<ReturnType<typeof vm>> & Awaited<ReturnType<typeof heap>>;
  const show = (x: Sample) =>
    `RSS ${f(x.rss)} (peak ${f(x.hwm)}), V8 heap used ${f(x.used)} of ${f(x.total)}, ` +
    `external ${f(x.external)}`;
  for (const policy of [false, true]) {
    const r = await run(api, dir, policy);
    console.log(`multiNetworkPolicy ${policy}: ready in ${Math.round(r.readyMs)} ms`);
    console.log(`  listed:      ${show(r.listed)}`);
    console.log(`  after churn: ${show(r.churned)}`);
  }
} finally {
  await api.stop();
  await Deno.remove(dir, { recursive: true });
}
