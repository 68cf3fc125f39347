/**
 * {@link loadKubeconfig}: a context of a kubeconfig (one file or a merged `KUBECONFIG` list, see
 * `document.ts`) as a {@link KubeConnection} — the cluster's server and CA, the user's token,
 * token file or client certificate (PEM files, or base64 `*-data`). An exec user is resolved
 * by `exec.ts`, loaded only then; the in-cluster service account is `../connection.ts`.
 *
 * @module
 */

import { lazyImport } from "../../util/lazy.ts";
import { KubeError } from "../errors.ts";
// Types only: the plugin's ADD with a kubeconfig never loads connection.ts (inClusterConnection).
import type { KubeConnection } from "../connection.ts";
import {
  type ClusterEntry,
  currentContext,
  findEntry,
  readKubeconfigFiles,
  resolvePath,
  type UserEntry,
} from "./document.ts";

/** Options of {@link loadKubeconfig}. */
export interface LoadKubeconfigOptions {
  /** The context to use instead of `current-context` (kubectl `--context`). */
  context?: string;
}

function configError(msg: string, details = ""): KubeError {
  return new KubeError("config", msg, { details });
}

async function readPem(file: string, what: string, marker: string): Promise<string> {
  let text: string;
  try {
    text = await Deno.readTextFile(file);
  } catch (err) {
    throw configError(`Cannot read ${what} file ${file}`, (err as Error).message);
  }
  if (!text.includes(marker)) throw configError(`Kubeconfig ${what} file ${file} is not PEM`);
  return text;
}

function decodePem(data: string, what: string, marker: string): string {
  let text: string;
  try {
    // Uint8Array.fromBase64, not atob: Deno loads atob's module at its first call (≈ 1.2 ms of
    // a plugin ADD); both ignore whitespace and accept missing padding.
    text = new TextDecoder().decode(Uint8Array.fromBase64(data.replace(/\s+/g, "")));
  } catch {
    throw configError(`Kubeconfig ${what} is not valid base64`);
  }
  if (!text.includes(marker)) {
    throw configError(`Kubeconfig ${what} is not base64-encoded PEM`);
  }
  return text;
}

const CERT_MARKER = "-----BEGIN CERTIFICATE-----";
const KEY_MARKER = "PRIVATE KEY-----";

/**
 * The PEM of `entry[field]` (a path, relative to `base`) or of `entry[field + "-data"]`
 * (base64, preferred, as clientcmd does); undefined when neither is set.
 */
async function pemOf<F extends string>(
  entry: Partial<Record<F | `${F}-data`, string>>,
  field: F,
  opts: { where: string; base: string; marker: string },
): Promise<string | undefined> {
  const data = entry[`${field}-data` as const];
  if (data) return decodePem(data, `${field}-data of ${opts.where}`, opts.marker);
  const file = entry[field];
  if (!file) return undefined;
  return await readPem(resolvePath(opts.base, file), `${field} of ${opts.where}`, opts.marker);
}

/**
 * Normalises a kubeconfig `server` value to a base URL without a trailing slash; a
 * bare `host:port` gets `https://` like client-go's `DefaultServerURL`.
 */
function normaliseServer(server: string, where: string): string {
  const withScheme = server.includes("://") ? server : `https://${server}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    throw configError(`Server of ${where} is not a valid URL`, server);
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw configError(`Server of ${where} must be an https or http URL`, server);
  }
  if (url.search || url.hash) {
    throw configError(`Server of ${where} must not have a query`, server);
  }
  return withScheme.replace(/\/+$/, "");
}

async function clusterConnection(
  cluster: ClusterEntry,
  name: string,
  base: string,
): Promise<Pick<KubeConnection, "server" | "caCertPem" | "insecureSkipTlsVerify">> {
  const where = `cluster "${name}"`;
  if (!cluster.server) throw configError(`Kubeconfig ${where} has no server`);
  const out: Pick<KubeConnection, "server" | "caCertPem" | "insecureSkipTlsVerify"> = {
    server: normaliseServer(cluster.server, where),
    insecureSkipTlsVerify: cluster["insecure-skip-tls-verify"] === true,
  };
  const ca = await pemOf(cluster, "certificate-authority", { where, base, marker: CERT_MARKER });
  if (ca) out.caCertPem = ca;
  if (out.insecureSkipTlsVerify && out.caCertPem) {
    // Same rule as client-go's config validation.
    throw configError(
      `Kubeconfig ${where} sets both insecure-skip-tls-verify and a certificate authority`,
    );
  }
  return out;
}

type UserPart = Pick<
  KubeConnection,
  "clientCertPem" | "clientKeyPem" | "token" | "tokenFile" | "exec"
>;

async function userConnection(
  user: UserEntry,
  name: string,
  base: string,
): Promise<UserPart> {
  const where = `user "${name}"`;
  const alternatives = "use an exec credential plugin, a token, tokenFile or client certificate";
  if (user["auth-provider"]) {
    const provider = user["auth-provider"].name ? ` "${user["auth-provider"].name}"` : "";
    throw configError(
      `Kubeconfig ${where} uses auth-provider${provider}, which is not supported`,
      alternatives,
    );
  }
  if (user.username !== undefined && user.username !== null) {
    throw configError(
      `Kubeconfig ${where} uses basic authentication, which is not supported`,
      alternatives,
    );
  }
  const out: UserPart = {};
  const cert = await pemOf(user, "client-certificate", { where, base, marker: CERT_MARKER });
  const key = await pemOf(user, "client-key", { where, base, marker: KEY_MARKER });
  if (cert) out.clientCertPem = cert;
  if (key) out.clientKeyPem = key;
  if ((out.clientCertPem === undefined) !== (out.clientKeyPem === undefined)) {
    throw configError(
      `Kubeconfig ${where} has a client ${
        out.clientCertPem ? "certificate without a key" : "key without a certificate"
      }`,
    );
  }
  if (user.token) out.token = user.token;
  if (user.tokenFile) out.tokenFile = resolvePath(base, user.tokenFile);
  if (user.exec) {
    const { execConfig } = await lazyImport<typeof import("./exec.ts")>(
      "./exec.ts",
      import.meta.url,
    );
    out.exec = execConfig(user.exec, { user: name, base });
  }
  return out;
}

/**
 * Loads a kubeconfig and resolves a context (`current-context`, or `opts.context`) to a
 * {@link KubeConnection}.
 *
 * Given a list of files (the `KUBECONFIG` variable, see `kubeconfigPaths`), they are
 * merged as kubectl does: files that do not exist are skipped, the first file defining a
 * cluster, user or context name wins, the first `current-context` set wins, and relative
 * paths are resolved against the directory of the file defining the entry.
 *
 * Supported: cluster `server`, `certificate-authority(-data)`,
 * `insecure-skip-tls-verify`; user `client-certificate(-data)`, `client-key(-data)`,
 * `token`, `tokenFile`, `exec` (client.authentication.k8s.io `v1` / `v1beta1`, run by the
 * client on its first request). Relative file paths are resolved against the kubeconfig's
 * directory (clientcmd's rule). `tls-server-name` and `proxy-url` are ignored.
 *
 * @param path one kubeconfig file (JSON or YAML; it must exist), or a list to merge.
 * @param opts `context`: the context to use instead of `current-context`.
 * @returns the connection of the context; certificate and key files are read now,
 *   `tokenFile` is kept as a path and read per request, `exec` is kept to run later.
 * @throws {KubeError} `"config"` naming the problem (unreadable file, none of the listed files
 *   exists, not JSON/YAML, no current-context, unknown context/cluster/user, missing server,
 *   bad base64/PEM, certificate without key, auth-provider/basic auth, an exec plugin with an
 *   unsupported apiVersion or interactive mode, CA with insecure-skip-tls-verify). Token and
 *   key contents are never included.
 */
export async function loadKubeconfig(
  path: string | readonly string[],
  opts: LoadKubeconfigOptions = {},
): Promise<KubeConnection> {
  const files = await readKubeconfigFiles(path);
  const where = (typeof path === "string" ? [path] : path).join(":");
  const contextName = opts.context ?? currentContext(files);
  if (!contextName) throw configError(`Kubeconfig ${where} has no current-context`);
  const context = findEntry(files, "contexts", contextName)?.entry.context;
  if (!context) {
    throw configError(`Kubeconfig ${where} has no context named "${contextName}"`);
  }
  const cluster = findEntry(files, "clusters", context.cluster);
  if (!cluster?.entry.cluster) {
    throw configError(
      `Kubeconfig ${where} has no cluster named "${context.cluster}" (context "${contextName}")`,
    );
  }
  let user: UserEntry = {};
  let userBase = cluster.base;
  if (context.user) {
    const found = findEntry(files, "users", context.user);
    if (!found) {
      throw configError(
        `Kubeconfig ${where} has no user named "${context.user}" (context "${contextName}")`,
      );
    }
    user = found.entry.user ?? {};
    userBase = found.base;
  }
  return {
    ...await clusterConnection(cluster.entry.cluster, context.cluster, cluster.base),
    ...await userConnection(user, context.user ?? "", userBase),
  };
}
