/**
 * A cluster's worth of pods and MultiNetworkPolicies in a real kube-apiserver, for the policy
 * agent's scale test (tests/realapi/policy_scale_test.ts) and benchmark
 * (scripts/scale_policy.ts).
 *
 * - 50 namespaces: the lab's `a` (team=a) and `b` (team=b), `s0`…`s37` (team `t0`…`t5`) that
 *   hold policies, and `s38`…`s47` (team=quiet) that no policy refers to.
 * - N pods, each shaped like a Deployment's pod (labels app/tier/pod-template-hash shared by
 *   the replicas, containers with ports, env and resources, a network-status annotation with
 *   the default network and three secondary networks `a/net1`…`a/net3`, unique addresses per
 *   network), `spec.nodeName` spread over M nodes, one of them the lab's node.
 * - P policies over the three networks in the namespaces `a`, `b`, `s0`…`s37`, each with a
 *   pod selector peer and a namespace+pod selector peer, every fourth with egress too.
 *
 * @module
 */

import type { KubeApiServer } from "../../support/kube_apiserver.ts";

type Json = Record<string, unknown>;

/** The app labels of the generated Deployments. */
export const APPS = ["web", "db", "cache", "api", "batch"] as const;
/** Namespaces holding generated policies (`a`, `b`, `s0`…`s37`). */
export const POLICY_NAMESPACES = ["a", "b", ...Array.from({ length: 38 }, (_, i) => `s${i}`)];
/** Namespaces no policy refers to (team=quiet). */
export const QUIET_NAMESPACES = Array.from({ length: 10 }, (_, i) => `s${38 + i}`);
/** Every generated namespace, in pod order. */
export const NAMESPACES = [...POLICY_NAMESPACES, ...QUIET_NAMESPACES];

/** The namespace labels: `a` → team=a, `b` → team=b, `sN` → team=t(N%6) or quiet. */
export function namespaceLabels(ns: string): Record<string, string> {
  if (ns === "a" || ns === "b") return { team: ns };
  return QUIET_NAMESPACES.includes(ns)
    ? { team: "quiet" }
    : { team: `t${Number(ns.slice(1)) % 6}` };
}

/** Address of pod `i` on network `k` (0 = default, 1–3 = `a/netK`). */
export function podIp(k: number, i: number): string {
  return `10.${k === 0 ? 200 : 100 + k * 10}.${(i >> 8) & 255}.${i & 255}`;
}

/** The network-status annotation of a pod with addresses `ips[0..3]` (default, net1–net3). */
export function networkStatus(ips: string[]): string {
  return JSON.stringify([
    { name: "cbr0", interface: "eth0", ips: [ips[0]], mac: "0a:58:0a:c8:00:02", default: true },
    ...[1, 2, 3].map((k) => ({
      name: `a/net${k}`,
      interface: `net${k}`,
      ips: [ips[k]],
      mac: `0a:58:0a:${(100 + k * 10).toString(16)}:00:02`,
      dns: {},
    })),
  ]);
}

/** Where a generated pod runs and what it is called. */
export interface ScalePodRef {
  namespace: string;
  name: string;
  nodeName: string;
}

/**
 * Pod `i` of the generated cluster, as a creation body.
 * @param i index, 0 ≤ i < 2^16
 * @param opts `nodes` (M), `node` (the lab's node: one pod of every M runs there)
 */
export function scalePod(i: number, opts: { nodes: number; node: string }): Json & {
  metadata: {
    name: string;
    namespace: string;
    labels: Record<string, string>;
    annotations: Record<string, string>;
  };
} {
  const namespace = NAMESPACES[i % NAMESPACES.length];
  const dep = Math.floor(i / NAMESPACES.length) % 20;
  const app = APPS[dep % APPS.length];
  const hash = ((dep * 2654435761 + namespace.length * 97) >>> 0).toString(36).slice(0, 10);
  const name = `${app}-${dep}-${hash}-${i}`;
  // Each block of M pods puts one on every node, shifted by one per block, so every node's
  // pods spread over the namespaces and apps.
  const n = (i + Math.floor(i / opts.nodes)) % opts.nodes;
  const nodeName = n === 0 ? opts.node : `node-${n}`;
  const ips = [0, 1, 2, 3].map((k) => podIp(k, i));
  const container = {
    name: app,
    image: `registry.example.com/team-${i % 7}/${app}:1.${i % 30}.${i % 11}`,
    ports: [
      { name: "http", containerPort: 8080, protocol: "TCP" },
      { name: "metrics", containerPort: 9090, protocol: "TCP" },
    ],
    env: Array.from({ length: 6 }, (_, k) => ({ name: `ENV_VAR_${k}`, value: `value-${k}-${i}` })),
    resources: {
      limits: { cpu: "500m", memory: "512Mi" },
      requests: { cpu: "100m", memory: "128Mi" },
    },
    livenessProbe: { httpGet: { path: "/healthz", port: 8080 }, periodSeconds: 10 },
  };
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name,
      namespace,
      labels: { app, tier: dep % 2 ? "prod" : "dev", "pod-template-hash": hash },
      annotations: {
        "k8s.v1.cni.cncf.io/networks": "a/net1,a/net2,a/net3",
        "k8s.v1.cni.cncf.io/network-status": networkStatus(ips),
      },
    },
    spec: {
      nodeName,
      automountServiceAccountToken: false,
      containers: [container],
      tolerations: [
        { key: "node.kubernetes.io/not-ready", operator: "Exists", effect: "NoExecute" },
      ],
    },
  };
}

/** Policy `j` of the generated cluster, as a creation body (`k8s.cni.cncf.io/v1beta1`). */
export function scalePolicy(j: number): Json {
  const namespace = POLICY_NAMESPACES[j % POLICY_NAMESPACES.length];
  const egress = j % 4 === 0;
  return {
    apiVersion: "k8s.cni.cncf.io/v1beta1",
    kind: "MultiNetworkPolicy",
    metadata: {
      name: `scale-${j}`,
      namespace,
      annotations: { "k8s.v1.cni.cncf.io/policy-for": `a/net${1 + (j % 3)}` },
    },
    spec: {
      podSelector: { matchLabels: { app: APPS[j % APPS.length] } },
      policyTypes: egress ? ["Ingress", "Egress"] : ["Ingress"],
      ingress: [
        {
          from: [{ podSelector: { matchLabels: { app: APPS[(j + 1) % APPS.length] } } }],
          ports: [{ port: 8000 + j }],
        },
        {
          from: [{
            namespaceSelector: { matchLabels: { team: `t${j % 6}` } },
            podSelector: { matchLabels: { tier: "prod" } },
          }],
        },
      ],
      ...(egress
        ? {
          egress: [{
            to: [{ podSelector: { matchLabels: { app: APPS[(j + 2) % APPS.length] } } }],
          }],
        }
        : {}),
    },
  };
}

/**
 * Runs `fn` over `0..n-1`, at most `concurrency` at a time.
 * @returns when every call settled; the first error is thrown after that
 */
export async function pool(
  n: number,
  concurrency: number,
  fn: (i: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  let failure: unknown;
  const worker = async () => {
    while (next < n && failure === undefined) {
      const i = next++;
      try {
        await fn(i);
      } catch (e) {
        failure ??= e;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, n) }, worker));
  if (failure !== undefined) throw failure;
}

/**
 * Creates the namespaces (missing ones; labels set), `pods` pods and `policies` policies in
 * the server (the MultiNetworkPolicy CRD must be installed). A 409 (exists) is accepted, so
 * a partly filled server can be filled again.
 * @param opts counts, `nodes` (M), the lab's `node`, `concurrency` of the creations
 * @returns the pods created, in index order
 */
export async function fillCluster(
  server: KubeApiServer,
  opts: {
    pods: number;
    policies: number;
    nodes: number;
    node: string;
    concurrency?: number;
    onProgress?: (done: number) => void;
  },
): Promise<ScalePodRef[]> {
  const admin = server.admin;
  const ok = (status: number, what: string, body: unknown) => {
    if (status >= 300 && status !== 409) {
      throw new Error(`${what}: ${status} ${JSON.stringify(body).slice(0, 300)}`);
    }
  };
  for (const ns of NAMESPACES) {
    const r = await admin.raw("POST", "/api/v1/namespaces", {
      body: { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } },
    });
    ok(r.status, `namespace ${ns}`, r.body);
    const sa = await admin.raw("POST", `/api/v1/namespaces/${ns}/serviceaccounts`, {
      body: { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "default" } },
    });
    ok(sa.status, `namespace ${ns} ServiceAccount`, sa.body);
    const p = await admin.raw("PATCH", `/api/v1/namespaces/${ns}`, {
      body: { metadata: { labels: namespaceLabels(ns) } },
      contentType: "application/merge-patch+json",
    });
    ok(p.status, `namespace ${ns} labels`, p.body);
  }
  const refs = await createPods(server, 0, opts.pods, opts);
  for (let j = 0; j < opts.policies; j++) {
    const p = scalePolicy(j);
    const ns = (p.metadata as Json).namespace as string;
    const r = await admin.raw(
      "POST",
      `/apis/k8s.cni.cncf.io/v1beta1/namespaces/${ns}/multi-networkpolicies`,
      { body: p },
    );
    ok(r.status, `policy ${ns}/scale-${j}`, r.body);
  }
  return refs;
}

/**
 * Creates the generated pods `from` … `to - 1` (their namespaces must exist); a 409 (exists)
 * is accepted.
 * @param opts `nodes` (M), the lab's `node`, `concurrency` of the creations (default 16)
 * @returns the pods, in index order
 */
export async function createPods(
  server: KubeApiServer,
  from: number,
  to: number,
  opts: { nodes: number; node: string; concurrency?: number; onProgress?: (n: number) => void },
): Promise<ScalePodRef[]> {
  const refs: ScalePodRef[] = new Array(to - from);
  let done = 0;
  await pool(to - from, opts.concurrency ?? 16, async (k) => {
    const pod = scalePod(from + k, opts);
    const { namespace, name } = pod.metadata;
    refs[k] = { namespace, name, nodeName: (pod.spec as Json).nodeName as string };
    const r = await server.admin.raw("POST", `/api/v1/namespaces/${namespace}/pods`, {
      body: pod,
    });
    if (r.status >= 300 && r.status !== 409) {
      throw new Error(
        `pod ${namespace}/${name}: ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`,
      );
    }
    if (++done % 1000 === 0) opts.onProgress?.(done);
  });
  return refs;
}

/**
 * Replaces the labels of a pod (merge patch; `null` removes a key).
 * @param labels the new labels (keys of `old` missing here are removed)
 */
export async function relabel(
  server: KubeApiServer,
  pod: { namespace: string; name: string },
  labels: Record<string, string | null>,
): Promise<void> {
  const r = await server.admin.raw(
    "PATCH",
    `/api/v1/namespaces/${pod.namespace}/pods/${pod.name}`,
    {
      body: { metadata: { labels } },
      contentType: "application/merge-patch+json",
    },
  );
  if (r.status >= 300) throw new Error(`relabel ${pod.namespace}/${pod.name}: ${r.status}`);
}

/**
 * Creates a pod of another node in the server (no sandbox): `labels`, a network-status with
 * `ips` (default, net1, net2, net3).
 */
export async function createRemotePod(
  server: KubeApiServer,
  pod: { namespace: string; name: string; nodeName: string; labels: Record<string, string> },
  ips: string[],
): Promise<void> {
  const r = await server.admin.raw("POST", `/api/v1/namespaces/${pod.namespace}/pods`, {
    body: {
      apiVersion: "v1",
      kind: "Pod",
      metadata: {
        name: pod.name,
        namespace: pod.namespace,
        labels: pod.labels,
        annotations: { "k8s.v1.cni.cncf.io/network-status": networkStatus(ips) },
      },
      spec: {
        nodeName: pod.nodeName,
        automountServiceAccountToken: false,
        containers: [{ name: "app", image: "registry.k8s.io/pause:3.10" }],
      },
    },
  });
  if (r.status >= 300) throw new Error(`pod ${pod.namespace}/${pod.name}: ${r.status}`);
}
