/**
 * The API steps of `manifold doctor`: the plugin's kubeconfig (readable, token file not
 * empty; {@link loadKubeconfigUnder} maps its host paths below the host root) and the API
 * server (reachable; the service account may get pods, patch pods/status, create events and
 * list NetworkAttachmentDefinitions — probed without changing anything: a pod name that does
 * not exist, `dryRun=All`, an event the server must reject after authorisation).
 *
 * @module
 */

import { lazyImport } from "../util/lazy.ts";
import { kubeConnectionFromFlags, kubeFlagsGiven } from "./kube_flags.ts";
import { underRoot } from "../install/mod.ts";
import type { KubeConnection } from "../k8s/connection.ts";
import { errorText, oneLine } from "../util/text.ts";
import type { AddCheck, DoctorStep } from "./doctor_checks.ts";

/** Name of the pod the probes address; it must not exist, so nothing is ever changed. */
export const PROBE_POD = "manifold-doctor-probe-0";

/**
 * The kubeconfig named by Manifold's config: loaded (host paths below the host root), its
 * token file readable and not empty; the connection is left in `ctx.connection` for
 * {@link apiStep}. Standalone mode (`nadDir`) needs none.
 */
export const kubeconfigStep: DoctorStep = {
  name: "kubeconfig",
  async run(ctx) {
    const { conf, hostRoot, host, add, options } = ctx;
    const kube = options.kube;
    if (kube && kubeFlagsGiven(kube.flags, kube.env)) {
      const what = kube.flags.kubeconfig ?? `$KUBECONFIG (${kube.env.KUBECONFIG})`;
      let connection: KubeConnection | undefined;
      try {
        connection = await kubeConnectionFromFlags(kube.flags, kube.env, { runExec: true });
      } catch (e) {
        add("kubeconfig", "fail", `${what}: ${oneLine(errorText(e))}`);
        return;
      }
      ctx.connection = connection;
      add("kubeconfig", "ok", `${what} (server ${connection?.server})`);
      return;
    }
    if (!conf) return;
    if (!conf.kubeconfig) {
      if (conf.nadDir) add("kubeconfig", "ok", `none: standalone mode (nadDir ${conf.nadDir})`);
      else {
        add(
          "kubeconfig",
          "warn",
          "no kubeconfig in the config: the plugin uses in-cluster settings or no API",
          "the plugin runs on the host, where in-cluster settings are usually absent",
        );
      }
      return;
    }
    let connection: KubeConnection;
    try {
      connection = await loadKubeconfigUnder(conf.kubeconfig, hostRoot);
    } catch (e) {
      add(
        "kubeconfig",
        "fail",
        `${conf.kubeconfig}: ${oneLine(errorText(e))}`,
        "rerun `manifold install`",
      );
      return;
    }
    if (connection.tokenFile) {
      const token = await Deno.readTextFile(host(connection.tokenFile)).catch(() => undefined);
      if (!token?.trim()) {
        add(
          "kubeconfig",
          "fail",
          `token file ${connection.tokenFile} is missing or empty`,
          "the installer mirrors the service-account token there; is it running?",
        );
        return;
      }
      connection = { ...connection, tokenFile: host(connection.tokenFile) };
    }
    ctx.connection = connection;
    add("kubeconfig", "ok", `${conf.kubeconfig} (server ${connection.server})`);
  },
};

/** The API server with the kubeconfig's connection: reachable, and the four permissions. */
export const apiStep: DoctorStep = {
  name: "api",
  async run({ connection, options, add }) {
    if (!connection) return;
    await checkApi(connection, {
      timeoutMs: options.apiTimeoutMs ?? 3000,
      namespace: options.probeNamespace ?? "kube-system",
      add,
    });
  },
};

/**
 * Loads a kubeconfig whose path and file paths are host paths. Under a host root other than
 * `/`, a private temporary copy (0600, removed at once) with `certificate-authority`,
 * `client-certificate` and `client-key` mapped below the root is loaded; `tokenFile` stays a
 * host path (callers map it before reading it).
 *
 * @param path host path of the kubeconfig
 * @param hostRoot where the host's file system is mounted
 * @returns the connection (see `loadKubeconfig`)
 * @throws {CniError} code 7 as `loadKubeconfig`
 */
export async function loadKubeconfigUnder(
  path: string,
  hostRoot: string,
): Promise<KubeConnection> {
  const { loadKubeconfig } = await lazyImport<typeof import("../k8s/kubeconfig/load.ts")>(
    "../k8s/kubeconfig/load.ts",
    import.meta.url,
  );
  if (underRoot(hostRoot, "/") === "/") return await loadKubeconfig(path);
  const text = await Deno.readTextFile(underRoot(hostRoot, path));
  let doc: Record<string, unknown>;
  try {
    doc = JSON.parse(text);
  } catch {
    const { parse } = await lazyImport<typeof import("yaml")>("yaml");
    doc = parse(text);
  }
  const dir = await Deno.makeTempDir({ prefix: "manifold-doctor-" });
  try {
    const map = (o: unknown, keys: string[]) => {
      if (typeof o !== "object" || o === null) return;
      const rec = o as Record<string, unknown>;
      for (const k of keys) {
        const v = rec[k];
        if (typeof v === "string" && v.startsWith("/")) rec[k] = underRoot(hostRoot, v);
      }
    };
    for (const c of (doc.clusters as { cluster?: unknown }[] | undefined) ?? []) {
      map(c?.cluster, ["certificate-authority"]);
    }
    for (const u of (doc.users as { user?: unknown }[] | undefined) ?? []) {
      map(u?.user, ["client-certificate", "client-key"]);
    }
    await Deno.writeTextFile(`${dir}/kubeconfig`, JSON.stringify(doc), { mode: 0o600 });
    return await loadKubeconfig(`${dir}/kubeconfig`);
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

/** One API answer: the HTTP status and a Status object's `message` (`""` when none). */
interface ApiAnswer {
  status: number;
  message: string;
  /** The parsed JSON body; undefined when not JSON. */
  body?: unknown;
}

/** Sends one request with the connection's credentials; resolves to the answer. */
type ApiRequest = (
  method: string,
  path: string,
  body?: unknown,
  contentType?: string,
) => Promise<ApiAnswer>;

/** A permission probe: what it asks and which answers mean "allowed". */
interface ApiProbe {
  name: string;
  run(request: ApiRequest): Promise<ApiAnswer>;
  allowed: number[];
}

/** The four permissions of deploy/20-clusterrole.yaml, asked without changing anything. */
function apiProbes(namespace: string): ApiProbe[] {
  const ns = encodeURIComponent(namespace);
  const pod = `/api/v1/namespaces/${ns}/pods/${PROBE_POD}`;
  return [
    { name: "get pods", run: (request) => request("GET", pod), allowed: [200, 404] },
    {
      name: "patch pods/status",
      run: (request) =>
        request("PATCH", `${pod}/status?dryRun=All`, {}, "application/merge-patch+json"),
      allowed: [200, 404],
    },
    {
      // No name: the server rejects it (422) after authorising it; dryRun=All besides.
      name: "create events",
      run: (request) =>
        request("POST", `/api/v1/namespaces/${ns}/events?dryRun=All`, {
          apiVersion: "v1",
          kind: "Event",
          metadata: {},
        }, "application/json"),
      allowed: [200, 201, 400, 422],
    },
    {
      name: "list network-attachment-definitions",
      run: (request) =>
        request("GET", "/apis/k8s.cni.cncf.io/v1/network-attachment-definitions?limit=1"),
      allowed: [200],
    },
  ];
}

/** Reachability and the four permissions of deploy/20-clusterrole.yaml, changing nothing. */
async function checkApi(
  conn: KubeConnection,
  opts: { timeoutMs: number; namespace: string; add: AddCheck },
): Promise<void> {
  const { createTransport } = await lazyImport<typeof import("../k8s/transport.ts")>(
    "../k8s/transport.ts",
    import.meta.url,
  );
  const transport = createTransport(conn);
  const request: ApiRequest = async (method, path, body, contentType) => {
    const headers: Record<string, string> = {
      accept: "application/json",
      "user-agent": "manifold-doctor",
    };
    const token = conn.tokenFile ? (await Deno.readTextFile(conn.tokenFile)).trim() : conn.token;
    if (token) headers.authorization = `Bearer ${token}`;
    if (contentType) headers["content-type"] = contentType;
    const res = await transport.send({
      method,
      url: `${conn.server}${path}`,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(opts.timeoutMs),
    });
    let message = "";
    let parsed: unknown;
    try {
      parsed = JSON.parse(res.body);
      message = String((parsed as { message?: unknown })?.message ?? "");
    } catch { /* not JSON */ }
    return { status: res.status, message, body: parsed };
  };
  try {
    try {
      const v = await request("GET", "/version");
      if (v.status >= 500) throw new Error(`HTTP ${v.status}`);
      opts.add("api", "ok", `${conn.server} reachable`);
    } catch (e) {
      opts.add(
        "api",
        "fail",
        `${conn.server} unreachable: ${oneLine(errorText(e))}`,
        "the plugin runs on the host: the server address must be reachable from the node",
      );
      return;
    }
    for (const probe of apiProbes(opts.namespace)) {
      const name = `api: ${probe.name}`;
      try {
        reportProbe(name, probe, await probe.run(request), opts.add);
      } catch (e) {
        opts.add(name, "fail", `request failed: ${oneLine(errorText(e))}`);
      }
    }
    try {
      await checkStatusPolicy(request, opts.add);
    } catch (e) {
      opts.add(STATUS_POLICY_CHECK, "warn", `request failed: ${oneLine(errorText(e))}`);
    }
  } finally {
    transport.close();
  }
}

/** Name of deploy/60-status-policy.yaml's ValidatingAdmissionPolicy and of its binding. */
export const STATUS_POLICY = "manifold-network-status-writers";
/** The doctor check reporting {@link STATUS_POLICY}. */
const STATUS_POLICY_CHECK = "api: network-status admission policy";

/**
 * Whether deploy/60-status-policy.yaml is installed (the ValidatingAdmissionPolicy) and bound
 * (a binding of that name naming it with the `Deny` action). Without it, anyone who may patch
 * a pod may write its network-status (docs/multi-network-policy.md): a warning, not a failure.
 */
async function checkStatusPolicy(request: ApiRequest, add: AddCheck): Promise<void> {
  const base = "/apis/admissionregistration.k8s.io/v1";
  const hint = "apply deploy/60-status-policy.yaml (docs/multi-network-policy.md)";
  const policy = await request("GET", `${base}/validatingadmissionpolicies/${STATUS_POLICY}`);
  if (policy.status !== 200) {
    add(
      STATUS_POLICY_CHECK,
      "warn",
      policy.status === 404
        ? `${STATUS_POLICY} not installed: anyone who may patch a pod may write its network-status`
        : `${STATUS_POLICY} not readable: HTTP ${policy.status} ${policy.message}`,
      hint,
    );
    return;
  }
  const binding = await request(
    "GET",
    `${base}/validatingadmissionpolicybindings/${STATUS_POLICY}`,
  );
  const spec = (binding.body as { spec?: { policyName?: unknown; validationActions?: unknown } })
    ?.spec;
  const bound = binding.status === 200 && spec?.policyName === STATUS_POLICY &&
    Array.isArray(spec.validationActions) && spec.validationActions.includes("Deny");
  if (bound) add(STATUS_POLICY_CHECK, "ok", `${STATUS_POLICY} installed and bound (Deny)`);
  else {
    add(
      STATUS_POLICY_CHECK,
      "warn",
      `${STATUS_POLICY} installed but not bound with Deny (HTTP ${binding.status}): ` +
        "it refuses nothing",
      hint,
    );
  }
}

/** One probe's answer as a check: allowed, or why not and what to do. */
function reportProbe(name: string, probe: ApiProbe, r: ApiAnswer, add: AddCheck): void {
  if (probe.allowed.includes(r.status)) add(name, "ok", "allowed");
  else if (r.status === 401) {
    add(
      name,
      "fail",
      "401 Unauthorized: the token is not accepted",
      "token expired or revoked? rerun the installer",
    );
  } else if (r.status === 403) {
    add(
      name,
      "fail",
      `403 Forbidden: ${r.message}`,
      "apply deploy/20-clusterrole.yaml and 30-clusterrolebinding.yaml",
    );
  } else if (r.status === 404) {
    add(
      name,
      "fail",
      "404: the NetworkAttachmentDefinition CRD is not installed",
      "apply deploy/00-crd.yaml",
    );
  } else add(name, "fail", `unexpected HTTP ${r.status}: ${r.message}`);
}
