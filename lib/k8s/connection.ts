/**
 * Where the Kubernetes API is and how to authenticate to it ({@link KubeConnection}), and the
 * in-cluster connection of a pod's service account ({@link inClusterConnection}). A kubeconfig
 * is turned into a connection by `kubeconfig/load.ts`.
 *
 * @module
 */

import { KubeError } from "./errors.ts";

/**
 * An exec credential plugin of a kubeconfig user (`users[].user.exec`, clientcmd/api/v1
 * `ExecConfig`), resolved: run `command` with `args` and `env` to obtain an
 * `ExecCredential` (client.authentication.k8s.io `v1` or `v1beta1`).
 */
export interface ExecCredentialConfig {
  /** The command: a name looked up in `PATH`, or a path (a relative one made absolute). */
  command: string;
  /** Its arguments. */
  args: string[];
  /** Variables added to the process environment of the command. */
  env: Record<string, string>;
  /** `client.authentication.k8s.io/v1` or `client.authentication.k8s.io/v1beta1`. */
  apiVersion: string;
  /** Whether `KUBERNETES_EXEC_INFO` carries `spec.cluster` (kubeconfig `provideClusterInfo`). */
  provideClusterInfo: boolean;
  /** kubeconfig `installHint`, shown when the command cannot be found. */
  installHint?: string;
  /** The kubeconfig user entry's name, for messages. */
  user: string;
}

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
  /**
   * An exec credential plugin giving the token or client certificate, run on the first
   * request and again when its credential expires or the server answers 401; it takes
   * precedence over `token`, `tokenFile` and `clientCertPem`.
   */
  exec?: ExecCredentialConfig;
}

/** Options of {@link inClusterConnection}. */
export interface InClusterOptions {
  /** Service-account directory; default `/var/run/secrets/kubernetes.io/serviceaccount`. */
  saDir?: string;
}

/** The default service-account mount (`rest.InClusterConfig`). */
export const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";

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
 * @throws {KubeError} `"config"` when the environment says in-cluster but the token file is
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
    throw new KubeError("config", `Cannot read service account token ${tokenFile}`, {
      details: (err as Error).message,
    });
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
