/**
 * The API writes of a MultiNetworkPolicy daemon lab, over the stand-in
 * (tests/support/kube_api.ts) or a real kube-apiserver (tests/support/kube_apiserver.ts, with
 * the NAD and MultiNetworkPolicy CRDs of deploy/ installed).
 *
 * @module
 */

import type { KubeApiServer } from "../../support/kube_apiserver.ts";
import type { KubeApiStandIn } from "../../support/kube_api.ts";
import { deployObjects, ensureNadCrd } from "../../realapi/cluster.ts";

type Json = Record<string, unknown>;

/** What the lab writes and reads. */
export interface LabApi {
  /** Creates or relabels a namespace. */
  putNamespace(name: string, labels: Record<string, string>): Promise<void>;
  /** Creates a NAD. */
  addNad(namespace: string, name: string, config: string): Promise<void>;
  /** Creates a pod bound to `nodeName`; returns its uid. */
  addPod(
    pod: {
      namespace: string;
      name: string;
      labels: Record<string, string>;
      nodeName: string;
      annotations: Record<string, string>;
    },
  ): Promise<string>;
  /** Replaces a pod's labels. */
  setPodLabels(namespace: string, name: string, labels: Record<string, string>): Promise<void>;
  /** Sets one annotation of a pod, as a third party allowed to patch it would. */
  setPodAnnotation(namespace: string, name: string, key: string, value: string): Promise<void>;
  /** Creates a MultiNetworkPolicy (`metadata.namespace`/`name` set). */
  createPolicy(obj: Json): Promise<void>;
  /** Deletes a MultiNetworkPolicy. */
  deletePolicy(namespace: string, name: string): Promise<void>;
  /** Events about the object `name` in `namespace`. */
  events(namespace: string, name: string): Promise<Json[]>;
  /** Writes a kubeconfig naming `tokenFile` (written too). */
  writeKubeconfig(path: string, tokenFile: string): Promise<void>;
}

/** {@link LabApi} over the stand-in. */
export function standInLabApi(api: KubeApiStandIn): LabApi {
  return {
    putNamespace: (name, labels) => Promise.resolve(void api.putNamespace(name, labels)),
    addNad: (namespace, name, config) => Promise.resolve(api.addNad({ namespace, name, config })),
    addPod: (p) =>
      Promise.resolve(
        String((api.addPod({ ...p, uid: crypto.randomUUID() }).metadata as Json).uid),
      ),
    setPodLabels: (ns, name, labels) => Promise.resolve(api.setPodLabels(ns, name, labels)),
    setPodAnnotation: (ns, name, key, value) =>
      Promise.resolve(api.setPodAnnotation(ns, name, key, value)),
    createPolicy: (obj) =>
      Promise.resolve(
        void api.putMultiNetworkPolicy(obj as { metadata: { name: string; namespace: string } }),
      ),
    deletePolicy: (ns, name) => Promise.resolve(api.deleteMultiNetworkPolicy(ns, name)),
    events: (ns, name) =>
      Promise.resolve(
        api.events.filter((e) =>
          (e.metadata as Json).namespace === ns && (e.involvedObject as Json).name === name
        ),
      ),
    async writeKubeconfig(path, tokenFile) {
      await Deno.writeTextFile(tokenFile, api.token);
      await api.writeKubeconfig(path, { auth: "tokenFile", tokenFile });
    },
  };
}

/** The MultiNetworkPolicy CRD's name (deploy/01-crd-multinetworkpolicy.yaml). */
const MNP_CRD = "multi-networkpolicies.k8s.cni.cncf.io";

/**
 * {@link LabApi} over a real kube-apiserver: installs the CRDs of deploy/ first, and deploy/'s
 * ServiceAccount `kube-system/manifold` with its ClusterRole and binding; the kubeconfig
 * carries a token of that ServiceAccount, so the daemon runs with exactly deploy/'s RBAC.
 */
export async function realLabApi(server: KubeApiServer): Promise<LabApi> {
  const admin = server.admin;
  await ensureNadCrd(admin);
  const objects = await deployObjects();
  const crd = objects.find((o) => o.metadata?.name === MNP_CRD);
  if (!crd) throw new Error(`deploy/ has no ${MNP_CRD}`);
  await admin.installCrd(crd);
  for (const o of objects) {
    if (
      o.metadata?.name === "manifold" &&
      ["ServiceAccount", "ClusterRole", "ClusterRoleBinding"].includes(o.kind)
    ) await admin.ensure(o);
  }
  const token = await admin.serviceAccountToken("kube-system", "manifold");
  const mnps = (ns: string) =>
    `/apis/k8s.cni.cncf.io/v1beta1/namespaces/${ns}/multi-networkpolicies`;
  return {
    async putNamespace(name, labels) {
      const r = await admin.raw("GET", `/api/v1/namespaces/${name}`);
      if (r.status === 404) {
        await admin.createNamespace(name);
      }
      const current = (await admin.get("v1", "Namespace", undefined, name)).metadata.labels ?? {};
      const patch: Json = {};
      for (const k of Object.keys(current)) {
        if (k !== "kubernetes.io/metadata.name" && !(k in labels)) patch[k] = null;
      }
      await admin.patch({ apiVersion: "v1", kind: "Namespace", name }, {
        metadata: { labels: { ...patch, ...labels } },
      });
    },
    async addNad(namespace, name, config) {
      await admin.createNad(namespace, name, config);
    },
    async addPod(p) {
      const pod = await admin.create({
        apiVersion: "v1",
        kind: "Pod",
        metadata: {
          name: p.name,
          namespace: p.namespace,
          labels: p.labels,
          annotations: p.annotations,
        },
        spec: {
          nodeName: p.nodeName,
          automountServiceAccountToken: false,
          containers: [{ name: "app", image: "registry.k8s.io/pause:3.10" }],
        },
      });
      return pod.metadata.uid as string;
    },
    async setPodLabels(namespace, name, labels) {
      const pod = await admin.getPod(namespace, name);
      const patch: Json = {};
      for (const k of Object.keys(pod.metadata.labels ?? {})) if (!(k in labels)) patch[k] = null;
      await admin.patch({ apiVersion: "v1", kind: "Pod", namespace, name }, {
        metadata: { labels: { ...patch, ...labels } },
      });
    },
    async setPodAnnotation(namespace, name, key, value) {
      await admin.patch({ apiVersion: "v1", kind: "Pod", namespace, name }, {
        metadata: { annotations: { [key]: value } },
      });
    },
    async createPolicy(obj) {
      const ns = (obj.metadata as Json).namespace as string;
      await admin.request("POST", mnps(ns), {
        body: { apiVersion: "k8s.cni.cncf.io/v1beta1", kind: "MultiNetworkPolicy", ...obj },
      });
    },
    async deletePolicy(ns, name) {
      await admin.request("DELETE", `${mnps(ns)}/${name}`);
    },
    events: (ns, name) => admin.events(ns, name),
    writeKubeconfig: (path, tokenFile) => server.writeKubeconfig(path, { token, tokenFile }),
  };
}
