/**
 * Exec credential plugins (kubeconfig `users[].user.exec`, KEP-541; what `kubectl` runs for
 * managed clusters: `aws eks get-token`, `gke-gcloud-auth-plugin`, `kubelogin`…). The command
 * runs with its `args`, the process environment plus its `env`, and `KUBERNETES_EXEC_INFO`
 * set as kubectl sets it (`{"apiVersion":…,"kind":"ExecCredential","spec":{"interactive":false}}`,
 * with `spec.cluster` when `provideClusterInfo`); stdin is closed and its stderr goes to ours.
 * Its stdout must be an `ExecCredential` of the same apiVersion whose `status` holds a `token`
 * or a `clientCertificateData`/`clientKeyData` pair (PEM), optionally with an
 * `expirationTimestamp` (RFC 3339) after which the command is run again.
 *
 * Loaded only when a kubeconfig has an exec user: the plugin's ADD with a token never imports it.
 *
 * @module
 */

import { z } from "zod";
import type { ExecCredentialConfig, KubeConnection } from "./connection.ts";
import { KubeError } from "./errors.ts";
import { tuneZod } from "../cni/decode.ts";

tuneZod(z);

/** What an exec credential plugin returned. */
export interface ExecCredential {
  /** Bearer token. */
  token?: string;
  /** PEM client certificate (chain); paired with `clientKeyPem`. */
  clientCertPem?: string;
  /** PEM private key of `clientCertPem`. */
  clientKeyPem?: string;
  /** When the credential expires, ms since the epoch; absent: valid until a 401. */
  expiresAt?: number;
}

/** The cluster an exec plugin is told about with `provideClusterInfo` (`spec.cluster`). */
export interface ExecClusterInfo {
  /** API server URL. */
  server: string;
  /** PEM CA bundle, sent base64-encoded as `certificate-authority-data`. */
  caCertPem?: string;
  /** kubeconfig `insecure-skip-tls-verify`. */
  insecureSkipTlsVerify: boolean;
}

/** Options of {@link runExecCredentialPlugin} and {@link ExecCredentialSource}. */
export interface ExecCredentialOptions {
  /** The cluster, for `spec.cluster` of `KUBERNETES_EXEC_INFO` (with `provideClusterInfo`). */
  cluster: ExecClusterInfo;
  /** Kills the command when aborted. */
  signal?: AbortSignal;
  /** Clock in ms since the epoch (tests); default `Date.now`. */
  now?: () => number;
}

function credentialSchema() {
  return z.looseObject({
    apiVersion: z.string(),
    kind: z.literal("ExecCredential"),
    status: z.looseObject({
      token: z.string().optional(),
      clientCertificateData: z.string().optional(),
      clientKeyData: z.string().optional(),
      expirationTimestamp: z.string().optional(),
    }).nullish(),
  });
}

/**
 * The `KUBERNETES_EXEC_INFO` value kubectl sets for an exec plugin.
 * @param config the exec plugin
 * @param cluster the cluster, included when `config.provideClusterInfo`
 * @returns the JSON text of an `ExecCredential` with only `spec`
 * @example
 * ```ts
 * execInfo({ command: "x", args: [], env: {}, apiVersion: "client.authentication.k8s.io/v1",
 *   provideClusterInfo: false, user: "u" }, { server: "https://a", insecureSkipTlsVerify: false });
 * // '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","spec":{"interactive":false}}'
 * ```
 */
export function execInfo(config: ExecCredentialConfig, cluster: ExecClusterInfo): string {
  const spec: Record<string, unknown> = { interactive: false };
  if (config.provideClusterInfo) {
    const c: Record<string, unknown> = { server: cluster.server };
    if (cluster.caCertPem) {
      const bytes = new TextEncoder().encode(cluster.caCertPem);
      c["certificate-authority-data"] = btoa(String.fromCharCode(...bytes));
    }
    if (cluster.insecureSkipTlsVerify) c["insecure-skip-tls-verify"] = true;
    spec.cluster = c;
  }
  return JSON.stringify({ apiVersion: config.apiVersion, kind: "ExecCredential", spec });
}

/**
 * Runs an exec credential plugin once.
 *
 * @param config the exec plugin (see `loadKubeconfig`)
 * @param opts the cluster (for `provideClusterInfo`), a signal killing the command
 * @returns the credential
 * @throws {KubeError} `"credentials"` naming the command and the kubeconfig user when the
 *   command cannot be started (with its `installHint`), exits non-zero, or prints something
 *   other than an `ExecCredential` of its apiVersion with a token or a certificate and key.
 */
export async function runExecCredentialPlugin(
  config: ExecCredentialConfig,
  opts: ExecCredentialOptions,
): Promise<ExecCredential> {
  const what = `Exec credential plugin ${
    JSON.stringify(config.command)
  } of kubeconfig user "${config.user}"`;
  const fail = (msg: string, details = "") =>
    new KubeError("credentials", `${what} ${msg}`, { details });
  let out: Deno.CommandOutput;
  try {
    out = await new Deno.Command(config.command, {
      args: config.args,
      env: { ...config.env, KUBERNETES_EXEC_INFO: execInfo(config, opts.cluster) },
      stdin: "null",
      stdout: "piped",
      stderr: "inherit",
      signal: opts.signal,
    }).output();
  } catch (err) {
    const hint = err instanceof Deno.errors.NotFound && config.installHint
      ? `; ${config.installHint.trim()}`
      : "";
    throw fail("could not be run", `${(err as Error).message}${hint}`);
  }
  if (!out.success) {
    throw fail(
      out.signal ? `was killed by ${out.signal}` : `exited with code ${out.code}`,
      "its standard error is above",
    );
  }
  let raw: unknown;
  try {
    raw = JSON.parse(new TextDecoder().decode(out.stdout));
  } catch (err) {
    throw fail("did not print JSON", (err as Error).message);
  }
  const r = credentialSchema().safeParse(raw);
  if (!r.success) throw fail("did not print an ExecCredential", z.prettifyError(r.error));
  if (r.data.apiVersion !== config.apiVersion) {
    throw fail(
      `answered with apiVersion ${r.data.apiVersion}`,
      `the kubeconfig asks for ${config.apiVersion}`,
    );
  }
  const st = r.data.status;
  if (!st) throw fail("returned no status");
  const cred: ExecCredential = {};
  if (st.clientCertificateData || st.clientKeyData) {
    if (!st.clientCertificateData || !st.clientKeyData) {
      throw fail("returned a client certificate without a key, or a key without a certificate");
    }
    cred.clientCertPem = st.clientCertificateData;
    cred.clientKeyPem = st.clientKeyData;
  }
  if (st.token) cred.token = st.token;
  if (!cred.token && !cred.clientCertPem) {
    throw fail("returned neither a token nor a client certificate and key");
  }
  if (st.expirationTimestamp) {
    const at = Date.parse(st.expirationTimestamp);
    if (Number.isNaN(at)) {
      throw fail("returned an invalid expirationTimestamp", st.expirationTimestamp);
    }
    cred.expiresAt = at;
  }
  return cred;
}

/**
 * The credential of an exec plugin, cached: the command runs on the first {@link get}, and
 * again once the credential's `expirationTimestamp` has passed or after {@link invalidate}
 * (the server answered 401). Concurrent callers share one run.
 */
export class ExecCredentialSource {
  #config: ExecCredentialConfig;
  #opts: ExecCredentialOptions;
  #now: () => number;
  #cached: ExecCredential | undefined;
  #running: Promise<ExecCredential> | undefined;

  /**
   * Creates the source; the plugin runs on the first {@link get}.
   * @param config the exec plugin
   * @param opts the cluster, a signal killing the command, a clock
   */
  constructor(config: ExecCredentialConfig, opts: ExecCredentialOptions) {
    this.#config = config;
    this.#opts = opts;
    this.#now = opts.now ?? Date.now;
  }

  /**
   * The current credential, running the plugin when there is none or it has expired.
   * @returns the credential
   * @throws {KubeError} `"credentials"` as {@link runExecCredentialPlugin}
   */
  get(): Promise<ExecCredential> {
    const c = this.#cached;
    if (c && (c.expiresAt === undefined || this.#now() < c.expiresAt)) return Promise.resolve(c);
    return this.#running ??= runExecCredentialPlugin(this.#config, this.#opts).then(
      (cred) => {
        this.#cached = cred;
        this.#running = undefined;
        return cred;
      },
      (err) => {
        this.#running = undefined;
        throw err;
      },
    );
  }

  /**
   * Forgets the cached credential after the server answered 401 to a request sent with
   * `used`: the next {@link get} runs the plugin again. Once per 401 streak, as client-go's
   * exec round-tripper (`maybeRefreshCreds`): a 401 to a credential that was already
   * replaced (concurrent requests, a watch opened before the refresh) changes nothing.
   * @param used the credential the refused request carried; omitted: forget whatever is cached
   * @returns true when the cached credential was forgotten
   */
  invalidate(used?: ExecCredential): boolean {
    if (used !== undefined && this.#cached !== used) return false;
    const had = this.#cached !== undefined;
    this.#cached = undefined;
    return had;
  }
}

/**
 * A connection whose exec credential plugin has been run once: its token or client
 * certificate replaces `exec` (and any static token or token file), for callers that send
 * requests themselves (`manifold doctor`). Without `exec` the connection is returned as is.
 *
 * @param conn the connection
 * @param signal kills the command when aborted
 * @returns a connection without `exec`
 * @throws {KubeError} `"credentials"` as {@link runExecCredentialPlugin}
 */
export async function withExecCredential(
  conn: KubeConnection,
  signal?: AbortSignal,
): Promise<KubeConnection> {
  if (!conn.exec) return conn;
  const cred = await runExecCredentialPlugin(conn.exec, { cluster: conn, signal });
  const { exec: _exec, token: _token, tokenFile: _tokenFile, ...rest } = conn;
  const out: KubeConnection = { ...rest };
  if (cred.token) out.token = cred.token;
  if (cred.clientCertPem) {
    out.clientCertPem = cred.clientCertPem;
    out.clientKeyPem = cred.clientKeyPem;
  }
  return out;
}
