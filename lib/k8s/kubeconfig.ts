/**
 * A kubeconfig (`clientcmd/api/v1` `Config`) as a {@link KubeConnection}: one file or a
 * `KUBECONFIG` list merged as kubectl merges it, a context chosen by name or
 * `current-context`, users with a token, token file, client certificate or exec credential
 * plugin (run later, by the client: `exec_credential.ts`). The in-cluster service account is
 * `connection.ts`.
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

import { lazyImport } from "../util/lazy.ts";
import type { z } from "zod";
import type { ExecCredentialConfig, KubeConnection } from "./connection.ts";
import { KubeError } from "./errors.ts";
import { tuneZod } from "../cni/decode.ts";
import {
  array,
  bool,
  fastCheck,
  loose,
  NOT_FAST,
  nullish,
  type Shape,
  str,
} from "../util/shape.ts";

// Types only: the plugin's ADD with a kubeconfig never loads connection.ts (inClusterConnection).
export type { ExecCredentialConfig, InClusterOptions, KubeConnection } from "./connection.ts";

/** Options of {@link loadKubeconfig}. */
export interface LoadKubeconfigOptions {
  /** The context to use instead of `current-context` (kubectl `--context`). */
  context?: string;
}

/** The API versions of `ExecCredential` an exec credential plugin may speak. */
export const EXEC_API_VERSIONS: readonly string[] = [
  "client.authentication.k8s.io/v1",
  "client.authentication.k8s.io/v1beta1",
];

/**
 * Checks a kubeconfig document with its zod schema — what a file that does not pass
 * {@link KUBECONFIG_SHAPE} goes through: zod is loaded only then (issue 30), and its issues
 * word the error.
 * @param z zod's namespace.
 * @param doc the decoded document.
 * @returns zod's output (loose objects: unknown keys kept), or its prettified issues.
 */
export function checkKubeconfigWithZod(
  z: typeof import("zod").z,
  doc: unknown,
): { success: true; data: unknown } | { success: false; details: string } {
  const parsed = (builtSchema ??= kubeconfigSchemaOf(z)).safeParse(doc);
  return parsed.success
    ? { success: true, data: parsed.data }
    : { success: false, details: z.prettifyError(parsed.error) };
}

let builtSchema: ReturnType<typeof kubeconfigSchemaOf> | undefined;

/** The kubeconfig schema (zod). */
function kubeconfigSchemaOf(z: typeof import("zod").z) {
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
    exec: z.looseObject({
      command: z.string().min(1),
      args: z.array(z.string()).nullish(),
      env: z.array(z.looseObject({ name: z.string().min(1), value: z.string() })).nullish(),
      apiVersion: z.string(),
      installHint: z.string().optional(),
      provideClusterInfo: z.boolean().optional(),
      interactiveMode: z.string().optional(),
    }).nullish(),
    "auth-provider": z.looseObject({ name: z.string().optional() }).nullish(),
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

/** `z.string().min(1)`. */
const nonEmpty: Shape<string> = (v) => {
  if (typeof v !== "string" || v === "") throw NOT_FAST;
  return v;
};

/**
 * The fast twin of {@link checkKubeconfigWithZod}'s schema (a conservative subset, see
 * lib/util/shape.ts): a document it accepts is used as zod would return it, without loading
 * zod. The fuzz target `kubeconfigshape` asserts zod accepts, with a deep-equal value,
 * whatever it accepts.
 */
export const KUBECONFIG_SHAPE: (value: unknown) => unknown = loose({
  "current-context": { optional: str },
  clusters: nullish(array(loose({
    name: str,
    cluster: nullish(loose({
      server: { optional: str },
      "certificate-authority": { optional: str },
      "certificate-authority-data": { optional: str },
      "insecure-skip-tls-verify": { optional: bool },
      "tls-server-name": { optional: str },
    })),
  }))),
  users: nullish(array(loose({
    name: str,
    user: nullish(loose({
      "client-certificate": { optional: str },
      "client-certificate-data": { optional: str },
      "client-key": { optional: str },
      "client-key-data": { optional: str },
      token: { optional: str },
      tokenFile: { optional: str },
      username: { optional: str },
      exec: nullish(loose({
        command: nonEmpty,
        args: nullish(array(str)),
        env: nullish(array(loose({ name: nonEmpty, value: str }))),
        apiVersion: str,
        installHint: { optional: str },
        provideClusterInfo: { optional: bool },
        interactiveMode: { optional: str },
      })),
      "auth-provider": nullish(loose({ name: { optional: str } })),
    })),
  }))),
  contexts: nullish(array(loose({
    name: str,
    context: nullish(loose({
      cluster: str,
      user: { optional: str },
      namespace: { optional: str },
    })),
  }))),
});

type KubeconfigDoc = z.infer<ReturnType<typeof kubeconfigSchemaOf>>;
type ClusterEntry = NonNullable<NonNullable<KubeconfigDoc["clusters"]>[number]["cluster"]>;
type UserEntry = NonNullable<NonNullable<KubeconfigDoc["users"]>[number]["user"]>;

function configError(msg: string, details = ""): KubeError {
  return new KubeError("config", msg, { details });
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
  const { parse, YAMLParseError } = await lazyImport<typeof import("yaml")>("yaml");
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
  if (!text.includes(marker)) throw configError(`Kubeconfig ${what} is not base64-encoded PEM`);
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
  if (user.exec) out.exec = execConfig(user.exec, name, base);
  return out;
}

function execConfig(
  exec: NonNullable<UserEntry["exec"]>,
  user: string,
  base: string,
): ExecCredentialConfig {
  const where = `user "${user}"`;
  if (!EXEC_API_VERSIONS.includes(exec.apiVersion)) {
    throw configError(
      `Kubeconfig ${where} has an exec plugin with apiVersion "${exec.apiVersion}", which is not supported`,
      `supported: ${EXEC_API_VERSIONS.join(", ")}`,
    );
  }
  if (exec.interactiveMode === "Always") {
    throw configError(
      `Kubeconfig ${where} has an exec plugin that needs an interactive terminal (interactiveMode Always), which is not supported`,
    );
  }
  const env: Record<string, string> = {};
  for (const e of exec.env ?? []) env[e.name] = e.value;
  // clientcmd: a command with a path separator is relative to the kubeconfig's directory.
  const command = exec.command.includes("/") ? resolvePath(base, exec.command) : exec.command;
  const out: ExecCredentialConfig = {
    command,
    args: exec.args ?? [],
    env,
    apiVersion: exec.apiVersion,
    provideClusterInfo: exec.provideClusterInfo === true,
    user,
  };
  if (exec.installHint) out.installHint = exec.installHint;
  return out;
}

/**
 * The files of a `KUBECONFIG` value, in order: split on `:`, empty entries and repeats left out.
 *
 * @param value the variable's value, e.g. `"/root/.kube/config:/tmp/extra.yaml"`
 * @returns the paths; `[]` when unset or empty
 * @example kubeconfigPaths("a::b:a") // ["a", "b"]
 */
export function kubeconfigPaths(value: string | undefined): string[] {
  return [...new Set((value ?? "").split(":").filter((p) => p !== ""))];
}

/** One kubeconfig file, validated. */
interface KubeconfigFile {
  path: string;
  doc: KubeconfigDoc;
}

async function readKubeconfigFile(path: string, text: string): Promise<KubeconfigFile> {
  const raw = await parseText(path, text);
  const fast = fastCheck(KUBECONFIG_SHAPE, raw);
  if (fast !== undefined) return { path, doc: fast as KubeconfigDoc };
  const { z } = await lazyImport<typeof import("zod")>("zod"); // only for a document the fast check does not accept
  tuneZod(z);
  const parsed = checkKubeconfigWithZod(z, raw);
  if (!parsed.success) throw configError(`Kubeconfig ${path} is malformed`, parsed.details);
  return { path, doc: parsed.data as KubeconfigDoc };
}

/** The first entry named `name` in any file, with the directory of the file defining it. */
function findEntry<K extends "clusters" | "users" | "contexts">(
  files: KubeconfigFile[],
  key: K,
  name: string,
): { entry: NonNullable<KubeconfigDoc[K]>[number]; base: string } | undefined {
  for (const f of files) {
    const entry = f.doc[key]?.find((e) => e.name === name);
    if (entry) {
      return { entry: entry as NonNullable<KubeconfigDoc[K]>[number], base: dirname(f.path) };
    }
  }
  return undefined;
}

/**
 * Loads a kubeconfig and resolves a context (`current-context`, or `opts.context`) to a
 * {@link KubeConnection}.
 *
 * Given a list of files (the `KUBECONFIG` variable, see {@link kubeconfigPaths}), they are
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
  const paths = typeof path === "string" ? [path] : path;
  const files: KubeconfigFile[] = [];
  for (const p of paths) {
    let text: string;
    try {
      text = await Deno.readTextFile(p);
    } catch (err) {
      if (typeof path !== "string" && err instanceof Deno.errors.NotFound) continue;
      throw configError(`Cannot read kubeconfig ${p}`, (err as Error).message);
    }
    files.push(await readKubeconfigFile(p, text));
  }
  const where = paths.join(":");
  if (files.length === 0) throw configError(`None of the kubeconfig files ${where} exists`);
  const contextName = opts.context ??
    files.map((f) => f.doc["current-context"]).find((c) => c);
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
