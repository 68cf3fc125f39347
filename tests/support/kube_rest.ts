/**
 * A small Kubernetes REST client for tests against a real API server
 * (tests/support/kube_apiserver.ts): create/get/patch/delete of the few kinds the tests use,
 * namespaces with their `default` ServiceAccount (there is no controller-manager), the NAD CRD
 * from deploy/ waited until Established, pods bound to a node, TokenRequest, events, and raw
 * watches. Plain `fetch` over `Deno.createHttpClient` with a bearer token; independent of the
 * code under test.
 *
 * @module
 */

/** A Kubernetes object as JSON. */
// deno-lint-ignore no-explicit-any
export type KubeObject = Record<string, any>;

/** An HTTP answer: status and the body (parsed JSON when it is JSON, else the text). */
export interface RawAnswer {
  status: number;
  // deno-lint-ignore no-explicit-any
  body: any;
}

/** A failed request (status ≥ 400), with the server's `Status` reason and message. */
export class KubeRestError extends Error {
  constructor(
    readonly status: number,
    readonly method: string,
    readonly path: string,
    body: unknown,
  ) {
    const b = body as { reason?: string; message?: string } | string;
    super(
      `${method} ${path}: ${status} ${
        typeof b === "string" ? b.slice(0, 300) : `${b?.reason ?? ""} ${b?.message ?? ""}`
      }`,
    );
  }
}

/** Collection paths by `apiVersion/kind` (the kinds the tests and deploy/ use). */
const RESOURCES: Record<string, { plural: string; namespaced: boolean }> = {
  "v1/Namespace": { plural: "namespaces", namespaced: false },
  "v1/ServiceAccount": { plural: "serviceaccounts", namespaced: true },
  "v1/Secret": { plural: "secrets", namespaced: true },
  "v1/ConfigMap": { plural: "configmaps", namespaced: true },
  "v1/Pod": { plural: "pods", namespaced: true },
  "v1/Event": { plural: "events", namespaced: true },
  "apps/v1/DaemonSet": { plural: "daemonsets", namespaced: true },
  "apps/v1/Deployment": { plural: "deployments", namespaced: true },
  "multinetwork.manifold.dev/v1alpha1/PodNetwork": { plural: "podnetworks", namespaced: false },
  "multinetwork.manifold.dev/v1alpha1/PodNetworkAttachment": {
    plural: "podnetworkattachments",
    namespaced: true,
  },
  "rbac.authorization.k8s.io/v1/ClusterRole": { plural: "clusterroles", namespaced: false },
  "rbac.authorization.k8s.io/v1/ClusterRoleBinding": {
    plural: "clusterrolebindings",
    namespaced: false,
  },
  "apiextensions.k8s.io/v1/CustomResourceDefinition": {
    plural: "customresourcedefinitions",
    namespaced: false,
  },
  "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy": {
    plural: "validatingadmissionpolicies",
    namespaced: false,
  },
  "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding": {
    plural: "validatingadmissionpolicybindings",
    namespaced: false,
  },
  "k8s.cni.cncf.io/v1/NetworkAttachmentDefinition": {
    plural: "network-attachment-definitions",
    namespaced: true,
  },
  "k8s.cni.cncf.io/v1beta1/MultiNetworkPolicy": {
    plural: "multi-networkpolicies",
    namespaced: true,
  },
};

/** The NAD CRD's name (deploy/00-crd.yaml). */
export const NAD_CRD = "network-attachment-definitions.k8s.cni.cncf.io";

/**
 * REST path of an object (with `name`) or of its collection.
 * @throws Error for a kind not in the table.
 */
export function objectPath(
  apiVersion: string,
  kind: string,
  namespace?: string,
  name?: string,
): string {
  const r = RESOURCES[`${apiVersion}/${kind}`];
  if (!r) throw new Error(`kube_rest: unknown kind ${apiVersion}/${kind}`);
  const prefix = apiVersion.includes("/") ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
  const ns = r.namespaced && namespace ? `/namespaces/${namespace}` : "";
  return `${prefix}${ns}/${r.plural}${name ? `/${name}` : ""}`;
}

/** A bearer-token client of one API server. `close()` it (or let the test process end). */
export class KubeRest {
  #client?: Deno.HttpClient;

  constructor(readonly server: string, readonly caPem: string, readonly token: string) {}

  /** Closes pooled connections; the next request opens new ones. */
  close(): void {
    this.#client?.close();
    this.#client = undefined;
  }

  #http(): Deno.HttpClient {
    return this.#client ??= Deno.createHttpClient({ caCerts: [this.caPem] });
  }

  /** One request; never throws on an HTTP status (only on a transport failure). */
  async raw(
    method: string,
    path: string,
    opts: { body?: unknown; contentType?: string; signal?: AbortSignal } = {},
  ): Promise<RawAnswer> {
    const headers: Record<string, string> = {
      authorization: `Bearer ${this.token}`,
      accept: "application/json",
    };
    if (opts.body !== undefined) headers["content-type"] = opts.contentType ?? "application/json";
    const res = await fetch(`${this.server}${path}`, {
      method,
      headers,
      body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
      client: this.#http(),
      signal: opts.signal ?? AbortSignal.timeout(30_000),
    });
    const text = await res.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch { /* text */ }
    return { status: res.status, body };
  }

  /** Like {@link raw}, but a status ≥ 400 throws {@link KubeRestError}. */
  async request(
    method: string,
    path: string,
    opts: { body?: unknown; contentType?: string } = {},
  ): Promise<KubeObject> {
    const r = await this.raw(method, path, opts);
    if (r.status >= 400) throw new KubeRestError(r.status, method, path, r.body);
    return r.body;
  }

  /** Creates `obj` (POST to its collection). @throws KubeRestError (409 when it exists). */
  create(obj: KubeObject): Promise<KubeObject> {
    const path = objectPath(obj.apiVersion, obj.kind, obj.metadata?.namespace);
    return this.request("POST", path, { body: obj });
  }

  /** Creates `obj`, or leaves the existing object when it already exists. */
  async ensure(obj: KubeObject): Promise<KubeObject> {
    const path = objectPath(obj.apiVersion, obj.kind, obj.metadata?.namespace);
    const r = await this.raw("POST", path, { body: obj });
    if (r.status === 409) {
      return this.get(obj.apiVersion, obj.kind, obj.metadata?.namespace, obj.metadata.name);
    }
    if (r.status >= 400) throw new KubeRestError(r.status, "POST", path, r.body);
    return r.body;
  }

  /** Reads one object. @throws KubeRestError (404 when missing). */
  get(apiVersion: string, kind: string, namespace: string | undefined, name: string) {
    return this.request("GET", objectPath(apiVersion, kind, namespace, name));
  }

  /** JSON merge patch (RFC 7386) of one object, or of its `subresource` (e.g. `status`). */
  patch(
    ref: { apiVersion: string; kind: string; namespace?: string; name: string },
    patch: unknown,
    subresource?: string,
  ): Promise<KubeObject> {
    const path = objectPath(ref.apiVersion, ref.kind, ref.namespace, ref.name) +
      (subresource ? `/${subresource}` : "");
    return this.request("PATCH", path, {
      body: patch,
      contentType: "application/merge-patch+json",
    });
  }

  /** Deletes one object with grace period 0; a missing object is fine. */
  async delete(apiVersion: string, kind: string, namespace: string | undefined, name: string) {
    const path = objectPath(apiVersion, kind, namespace, name);
    const r = await this.raw("DELETE", path, { body: { gracePeriodSeconds: 0 } });
    if (r.status >= 400 && r.status !== 404) {
      throw new KubeRestError(r.status, "DELETE", path, r.body);
    }
  }

  /** Creates a namespace and its `default` ServiceAccount (no controller-manager does it). */
  async createNamespace(name: string): Promise<void> {
    await this.create({ apiVersion: "v1", kind: "Namespace", metadata: { name } });
    await this.create({
      apiVersion: "v1",
      kind: "ServiceAccount",
      metadata: { name: "default", namespace: name },
    });
  }

  /**
   * Applies deploy/00-crd.yaml's object (given parsed) and waits until the CRD is
   * Established and its resource is served.
   */
  async installCrd(crd: KubeObject, timeoutMs = 30_000): Promise<void> {
    await this.ensure(crd);
    const name = crd.metadata.name as string;
    const plural = crd.spec.names.plural as string;
    const version = (crd.spec.versions as { name: string }[])[0].name;
    const end = Date.now() + timeoutMs;
    for (;;) {
      const got = await this.get(
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        undefined,
        name,
      );
      const established = (got.status?.conditions ?? []).some((c: KubeObject) =>
        c.type === "Established" && c.status === "True"
      );
      if (established) {
        const list = await this.raw("GET", `/apis/${crd.spec.group}/${version}/${plural}?limit=1`);
        if (list.status === 200) return;
      }
      if (Date.now() > end) throw new Error(`CRD ${name} not Established after ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** Creates a NetworkAttachmentDefinition with `spec.config` (a JSON string). */
  createNad(namespace: string, name: string, config: string): Promise<KubeObject> {
    return this.create({
      apiVersion: "k8s.cni.cncf.io/v1",
      kind: "NetworkAttachmentDefinition",
      metadata: { name, namespace },
      spec: { config },
    });
  }

  /** Creates a pod bound to `nodeName` (it stays Pending: no kubelet). */
  createPod(
    namespace: string,
    name: string,
    opts: { annotations?: Record<string, string>; nodeName?: string } = {},
  ): Promise<KubeObject> {
    return this.create({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name, namespace, annotations: opts.annotations ?? {} },
      spec: {
        nodeName: opts.nodeName ?? "envtest-node",
        automountServiceAccountToken: false,
        containers: [{ name: "app", image: "registry.k8s.io/pause:3.10" }],
      },
    });
  }

  /** Reads a pod. */
  getPod(namespace: string, name: string): Promise<KubeObject> {
    return this.get("v1", "Pod", namespace, name);
  }

  /**
   * Mints a ServiceAccount token (TokenRequest API,
   * `POST …/serviceaccounts/<name>/token`).
   * @returns the bearer token.
   */
  async serviceAccountToken(namespace: string, name: string, seconds = 3600): Promise<string> {
    const r = await this.request(
      "POST",
      `/api/v1/namespaces/${namespace}/serviceaccounts/${name}/token`,
      {
        body: {
          apiVersion: "authentication.k8s.io/v1",
          kind: "TokenRequest",
          spec: { expirationSeconds: seconds },
        },
      },
    );
    return r.status.token as string;
  }

  /** Events of the namespace about `involvedName` (`kubectl get events --field-selector`). */
  async events(namespace: string, involvedName: string): Promise<KubeObject[]> {
    const sel = encodeURIComponent(`involvedObject.name=${involvedName}`);
    const r = await this.request(
      "GET",
      `/api/v1/namespaces/${namespace}/events?fieldSelector=${sel}`,
    );
    return r.items;
  }
}
