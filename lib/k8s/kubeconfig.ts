/**
 * Where the Kubernetes API is and how to authenticate to it: a kubeconfig file
 * (`clientcmd/api/v1` `Config`) or the in-cluster service account.
 *
 * Start-up cost matters (one short process per pod), so the kubeconfig is parsed with
 * `JSON.parse` first (JSON is valid YAML and the installer writes JSON) and the `yaml`
 * package (≈50 ms to import) is loaded only when that fails.
 *
 * Secrets (tokens, keys) are never copied into error messages: errors name the file,
 * the context/cluster/user and the field, never a value.
 *
 * @module
 */

import { z } from "zod";
import { CniError, CniErrorCode } from "../cni/errors.ts";

/**
 * Everything needed to reach the API server. PEM strings are the decoded contents
 * (never paths). `tokenFile` is an absolute path, read again on every request so a
 * rotated service-account token is picked up (Multus #852).
 */
export interface KubeConnection {
  /** Base URL, e.g. `"https://10.96.0.1:443"` or `"https://[fd00::1]:6443"`; no trailing slash. */
  server: string;
  /** PEM CA bundle verifying the server; absent → the system roots. */
  caCertPem?: string;
  /** PEM client certificate (chain) for mTLS; always paired with `clientKeyPem`. */
  clientCertPem?: string;
  /** PEM private key (PKCS#8, SEC1 or PKCS#1) of `clientCertPem`. */
  clientKeyPem?: string;
  /** Static bearer token. */
  token?: string;
  /** Absolute path of a file holding the bearer token; takes precedence over `token`. */
  tokenFile?: string;
  /** kubeconfig `insecure-skip-tls-verify`: do not verify the server certificate. */
  insecureSkipTlsVerify: boolean;
}

/** Options of {@link inClusterConnection}. */
export interface InClusterOptions {
  /** Service-account directory; default `/var/run/secrets/kubernetes.io/serviceaccount`. */
  saDir?: string;
}

/** The default service-account mount (`rest.InClusterConfig`). */
export const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";

/** The kubeconfig schema, built on first use (zod construction costs a few ms at start-up). */
function buildKubeconfigSchema() {
  const clusterSchema = z.looseObject({
    server: z.string().optional(),
    "certificate-authority": z.string().optional(),
    "certificate-authority-data": z.string().optional(),
    "insecure-skip-tls-verify": z.boolean().optional(),
    "tls-server-name": z.string().optional(),
  });

  const userSchema = z.looseObject({
    "client-certificate": z.string().optional(),
    "client-certificate-data": z.string().optional(),
    "client-key": z.string().optional(),
    "client-key-data": z.string().optional(),
    token: z.string().optional(),
    tokenFile: z.string().optional(),
    username: z.string().optional(),
    exec: z.unknown().optional(),
    "auth-provider": z.unknown().optional(),
  });

  const contextSchema = z.looseObject({
    cluster: z.string(),
    user: z.string().optional(),
    namespace: z.string().optional(),
  });

  const kubeconfigSchema = z.looseObject({
    "current-context": z.string().optional(),
    clusters: z.array(z.looseObject({ name: z.string(), cluster: clusterSchema.nullish() }))
      .nullish(),
    users: z.array(z.looseObject({ name: z.string(), user: userSchema.nullish() })).nullish(),
    contexts: z.array(z.looseObject({ name: z.string(), context: contextSchema.nullish() }))
      .nullish(),
  });
  return kubeconfigSchema;
}

type KubeconfigDoc = z.infer<ReturnType<typeof buildKubeconfigSchema>>;
type ClusterEntry = NonNullable<NonNullable<KubeconfigDoc["clusters"]>[number]["cluster"]>;
type UserEntry = NonNullable<NonNullable<KubeconfigDoc["users"]>[number]["user"]>;

function configError(msg: string, details = ""): CniError {
  return new CniError(CniErrorCode.InvalidNetworkConfig, msg, details);
}

function dirname(path: string): string {
  const i = path.lastIndexOf("/");
  if (i < 0) return ".";
  return i === 0 ? "/" : path.slice(0, i);
}

function resolvePath(base: string, p: string): string {
  return p.startsWith("/") ? p : `${base}/${p}`;
}

async function parseText(path: string, text: string): Promise<unknown> {
  try {
    return JSON.parse(text);
  } catch {
    // Not JSON: fall back to YAML, loaded only now (≈50 ms import).
  }
  const { parse, YAMLParseError } = await import("yaml");
  try {
    return parse(text);
  } catch (err) {
    // The yaml library quotes the offending lines; a kubeconfig holds secrets, so keep
    // only the error code and position.
    let where = "";
    if (err instanceof YAMLParseError) {
      const pos = err.linePos?.[0];
      where = `${err.code}${pos ? ` at line ${pos.line}, column ${pos.col}` : ""}`;
    }
    throw configError(`Kubeconfig ${path} is neither valid JSON nor valid YAML`, where);
  }
}

async function readPem(
  file: string,
  what: string,
  marker: string,
): Promise<string> {
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
    const bin = atob(data.replace(/\s+/g, ""));
    text = new TextDecoder().decode(Uint8Array.from(bin, (c) => c.charCodeAt(0)));
  } catch {
    throw configError(`Kubeconfig ${what} is not valid base64`);
  }
  if (!text.includes(marker)) throw configError(`Kubeconfig ${what} is not base64-encoded PEM`);
  return text;
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
  if (url.search || url.hash) throw configError(`Server of ${where} must not have a query`, server);
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
  const marker = "-----BEGIN CERTIFICATE-----";
  if (cluster["certificate-authority-data"]) {
    out.caCertPem = decodePem(
      cluster["certificate-authority-data"],
      `certificate-authority-data of ${where}`,
      marker,
    );
  } else if (cluster["certificate-authority"]) {
    out.caCertPem = await readPem(
      resolvePath(base, cluster["certificate-authority"]),
      `certificate-authority of ${where}`,
      marker,
    );
  }
  if (out.insecureSkipTlsVerify && out.caCertPem) {
    // Same rule as client-go's config validation.
    throw configError(
      `Kubeconfig ${where} sets both insecure-skip-tls-verify and a certificate authority`,
    );
  }
  return out;
}

async function userConnection(
  user: UserEntry,
  name: string,
  base: string,
): Promise<Pick<KubeConnection, "clientCertPem" | "clientKeyPem" | "token" | "tokenFile">> {
  const where = `user "${name}"`;
  for (const unsupported of ["exec", "auth-provider", "username"] as const) {
    if (user[unsupported] !== undefined && user[unsupported] !== null) {
      throw configError(
        `Kubeconfig ${where} uses ${
          unsupported === "username" ? "basic" : unsupported
        } authentication, which is not supported`,
        "use a token, tokenFile or client certificate",
      );
    }
  }
  const out: Pick<KubeConnection, "clientCertPem" | "clientKeyPem" | "token" | "tokenFile"> = {};
  const certMarker = "-----BEGIN CERTIFICATE-----";
  const keyMarker = "PRIVATE KEY-----";
  if (user["client-certificate-data"]) {
    out.clientCertPem = decodePem(
      user["client-certificate-data"],
      `client-certificate-data of ${where}`,
      certMarker,
    );
  } else if (user["client-certificate"]) {
    out.clientCertPem = await readPem(
      resolvePath(base, user["client-certificate"]),
      `client-certificate of ${where}`,
      certMarker,
    );
  }
  if (user["client-key-data"]) {
    out.clientKeyPem = decodePem(user["client-key-data"], `client-key-data of ${where}`, keyMarker);
  } else if (user["client-key"]) {
    out.clientKeyPem = await readPem(
      resolvePath(base, user["client-key"]),
      `client-key of ${where}`,
      keyMarker,
    );
  }
  if ((out.clientCertPem === undefined) !== (out.clientKeyPem === undefined)) {
    throw configError(
      `Kubeconfig ${where} has a client ${
        out.clientCertPem ? "certificate without a key" : "key without a certificate"
      }`,
    );
  }
  if (user.token) out.token = user.token;
  if (user.tokenFile) out.tokenFile = resolvePath(base, user.tokenFile);
  return out;
}

/**
 * Loads a kubeconfig and resolves its `current-context` to a {@link KubeConnection}.
 *
 * Supported: cluster `server`, `certificate-authority(-data)`,
 * `insecure-skip-tls-verify`; user `client-certificate(-data)`, `client-key(-data)`,
 * `token`, `tokenFile`. Relative file paths are resolved against the kubeconfig's
 * directory (clientcmd's rule). `tls-server-name` and `proxy-url` are ignored.
 *
 * @param path kubeconfig file, JSON or YAML.
 * @returns the connection of the current context; certificate and key files are read
 *   now, `tokenFile` is kept as a path and read per request.
 * @throws {CniError} code 7 naming the problem (unreadable file, not JSON/YAML, no
 *   current-context, unknown context/cluster/user, missing server, bad base64/PEM,
 *   certificate without key, exec/auth-provider/basic auth, CA with
 *   insecure-skip-tls-verify). Token and key contents are never included.
 */
export async function loadKubeconfig(path: string): Promise<KubeConnection> {
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (err) {
    throw configError(`Cannot read kubeconfig ${path}`, (err as Error).message);
  }
  const parsed = buildKubeconfigSchema().safeParse(await parseText(path, text));
  if (!parsed.success) {
    throw configError(`Kubeconfig ${path} is malformed`, z.prettifyError(parsed.error));
  }
  const cfg = parsed.data;
  const contextName = cfg["current-context"];
  if (!contextName) throw configError(`Kubeconfig ${path} has no current-context`);
  const context = cfg.contexts?.find((c) => c.name === contextName)?.context;
  if (!context) {
    throw configError(`Kubeconfig ${path} has no context named "${contextName}"`);
  }
  const cluster = cfg.clusters?.find((c) => c.name === context.cluster)?.cluster;
  if (!cluster) {
    throw configError(
      `Kubeconfig ${path} has no cluster named "${context.cluster}" (context "${contextName}")`,
    );
  }
  let user: UserEntry = {};
  if (context.user) {
    const found = cfg.users?.find((u) => u.name === context.user);
    if (!found) {
      throw configError(
        `Kubeconfig ${path} has no user named "${context.user}" (context "${contextName}")`,
      );
    }
    user = found.user ?? {};
  }
  const base = dirname(path);
  return {
    ...await clusterConnection(cluster, context.cluster, base),
    ...await userConnection(user, context.user ?? "", base),
  };
}

/**
 * The in-cluster connection (`rest.InClusterConfig`): `https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT`
 * (an IPv6 host is bracketed), the service-account token as `tokenFile` (re-read per
 * request, so projected-token rotation works) and `ca.crt` as the CA.
 *
 * @param env the process environment, e.g. `Deno.env.toObject()`.
 * @param opts where the service-account files are.
 * @returns the connection, or `undefined` when either environment variable is unset
 *   (not running in a pod). When `ca.crt` is missing the system roots are used, like
 *   client-go.
 * @throws {CniError} code 7 when the environment says in-cluster but the token file is
 *   missing.
 * @example
 * ```ts
 * inClusterConnection({}); // undefined: not in a pod
 * inClusterConnection(Deno.env.toObject())?.server; // e.g. "https://[fd00::1]:443"
 * ```
 */
export function inClusterConnection(
  env: Record<string, string | undefined>,
  opts: InClusterOptions = {},
): KubeConnection | undefined {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (!host || !port) return undefined;
  const saDir = opts.saDir ?? SERVICE_ACCOUNT_DIR;
  const tokenFile = `${saDir}/token`;
  try {
    Deno.statSync(tokenFile);
  } catch (err) {
    throw configError(`Cannot read service account token ${tokenFile}`, (err as Error).message);
  }
  const conn: KubeConnection = {
    server: `https://${host.includes(":") ? `[${host}]` : host}:${port}`,
    tokenFile,
    insecureSkipTlsVerify: false,
  };
  try {
    conn.caCertPem = Deno.readTextFileSync(`${saDir}/ca.crt`);
  } catch {
    // client-go logs and continues with the system roots.
  }
  return conn;
}
