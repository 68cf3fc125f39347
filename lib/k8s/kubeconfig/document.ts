/**
 * Kubeconfig files as checked documents (`clientcmd/api/v1` `Config`), and kubectl's merge of a
 * list of them. On the per-call path (issue 30): the text is parsed with `JSON.parse` (the
 * installer writes JSON, which is YAML too) and checked by {@link KUBECONFIG_SHAPE}; `yaml.ts`
 * and zod with `schema.ts` are loaded only for a file that is not JSON or that the fast check
 * does not accept.
 *
 * Secrets (tokens, keys) are never copied into error messages: errors name the file, the
 * context/cluster/user and the field, never a value.
 *
 * @module
 */

import { lazyImport } from "../../util/lazy.ts";
import { KubeError } from "../errors.ts";
import { tuneZod } from "../../cni/decode.ts";
import {
  array,
  bool,
  fastCheck,
  loose,
  NOT_FAST,
  nullish,
  type Shape,
  str,
} from "../../util/shape.ts";

/** A cluster entry's `cluster` (clientcmd/api/v1 `Cluster`: the keys read, others kept). */
export interface ClusterEntry {
  /** The API server: a URL, or `host:port` (`https://` added). */
  server?: string;
  /** Path of a PEM CA bundle, relative to the file's directory. */
  "certificate-authority"?: string;
  /** The PEM CA bundle, base64. */
  "certificate-authority-data"?: string;
  /** Do not verify the server's certificate. */
  "insecure-skip-tls-verify"?: boolean;
  /** Read, not used. */
  "tls-server-name"?: string;
  /** Keys not read (`proxy-url`, `extensions`, …), kept. */
  [key: string]: unknown;
}

/** A user entry's `exec` (clientcmd/api/v1 `ExecConfig`). */
export interface ExecEntry {
  /** The command: a name looked up in `PATH`, or a path (relative to the file's directory). */
  command: string;
  /** Its arguments. */
  args?: string[] | null;
  /** Variables added to its environment. */
  env?: { name: string; value: string; [key: string]: unknown }[] | null;
  /** `client.authentication.k8s.io/v1` or `/v1beta1`. */
  apiVersion: string;
  /** Shown when the command cannot be found. */
  installHint?: string;
  /** Whether `KUBERNETES_EXEC_INFO` carries the cluster. */
  provideClusterInfo?: boolean;
  /** `Never`, `IfAvailable` or `Always` (refused: no terminal). */
  interactiveMode?: string;
  /** Keys not read, kept. */
  [key: string]: unknown;
}

/** A user entry's `user` (clientcmd/api/v1 `AuthInfo`: the keys read, others kept). */
export interface UserEntry {
  /** Path of a PEM client certificate (chain), relative to the file's directory. */
  "client-certificate"?: string;
  /** The PEM client certificate (chain), base64. */
  "client-certificate-data"?: string;
  /** Path of the PEM private key of the certificate. */
  "client-key"?: string;
  /** The PEM private key, base64. */
  "client-key-data"?: string;
  /** A static bearer token. */
  token?: string;
  /** Path of a file holding the bearer token. */
  tokenFile?: string;
  /** Basic authentication (refused). */
  username?: string;
  /** An exec credential plugin. */
  exec?: ExecEntry | null;
  /** An auth-provider plugin (refused). */
  "auth-provider"?: { name?: string; [key: string]: unknown } | null;
  /** Keys not read (`as`, `impersonate-*`, …), kept. */
  [key: string]: unknown;
}

/** A context entry's `context` (clientcmd/api/v1 `Context`). */
export interface ContextEntry {
  /** The cluster entry's name. */
  cluster: string;
  /** The user entry's name; none: no credentials. */
  user?: string;
  /** Read, not used. */
  namespace?: string;
  /** Keys not read, kept. */
  [key: string]: unknown;
}

/** An entry of one of a kubeconfig's lists: `{ name, <K>: T }`. */
export type Named<K extends string, T> = { name: string } & Partial<Record<K, T | null>>;

/**
 * A checked kubeconfig document (clientcmd/api/v1 `Config`), as {@link KUBECONFIG_SHAPE} and
 * the zod schema of `schema.ts` return it: the keys read, unknown keys kept.
 */
export interface KubeconfigDoc {
  /** The context used without `--context`. */
  "current-context"?: string;
  /** Named clusters. */
  clusters?: Named<"cluster", ClusterEntry>[] | null;
  /** Named users (`AuthInfo`s). */
  users?: Named<"user", UserEntry>[] | null;
  /** Named contexts: a cluster and a user. */
  contexts?: Named<"context", ContextEntry>[] | null;
  /** Keys not read (`apiVersion`, `kind`, `preferences`, …), kept. */
  [key: string]: unknown;
}

/** One kubeconfig file, read and checked. */
export interface KubeconfigFile {
  /** The path it was read from; relative paths in it are relative to its directory. */
  path: string;
  /** Its document. */
  doc: KubeconfigDoc;
}

/**
 * A path of a kubeconfig relative to the directory of the file defining it (clientcmd's rule).
 * @param base that directory
 * @param p the path as written
 * @returns `p` when absolute, else `base/p`
 * @example resolvePath("/etc/kube", "ca.crt") // "/etc/kube/ca.crt"
 */
export function resolvePath(base: string, p: string): string {
  return p.startsWith("/") ? p : `${base}/${p}`;
}

function configError(msg: string, details = ""): KubeError {
  return new KubeError("config", msg, { details });
}

function dirname(path: string): string {
  const i = path.lastIndexOf("/");
  if (i < 0) return ".";
  return i === 0 ? "/" : path.slice(0, i);
}

/** `z.string().min(1)`. */
const nonEmpty: Shape<string> = (v) => {
  if (typeof v !== "string" || v === "") throw NOT_FAST;
  return v;
};

/**
 * The fast twin of `schema.ts`'s zod schema (a conservative subset, see lib/util/shape.ts): a
 * document it accepts is used as zod would return it, without loading zod. The fuzz target
 * `kubeconfigshape` asserts zod accepts, with a deep-equal value, whatever it accepts.
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

async function decodeKubeconfig(path: string, text: string): Promise<KubeconfigDoc> {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    raw = await (await lazyImport<typeof import("./yaml.ts")>("./yaml.ts", import.meta.url))
      .parseKubeconfigYaml(path, text);
  }
  const fast = fastCheck(KUBECONFIG_SHAPE, raw);
  if (fast !== undefined) return fast as KubeconfigDoc;
  const [{ z }, { checkKubeconfigWithZod }] = await Promise.all([
    lazyImport<typeof import("zod")>("zod"),
    lazyImport<typeof import("./schema.ts")>("./schema.ts", import.meta.url),
  ]);
  tuneZod(z);
  const parsed = checkKubeconfigWithZod(z, raw);
  if (!parsed.success) throw configError(`Kubeconfig ${path} is malformed`, parsed.details);
  return parsed.data as KubeconfigDoc;
}

/**
 * Reads and checks one kubeconfig file, or a list to merge (the `KUBECONFIG` variable's files,
 * of which those that do not exist are skipped, as kubectl skips them).
 * @param path one file (it must exist), or a list
 * @returns the files read, in order
 * @throws {KubeError} `"config"`: a file unreadable, none of the listed files exists, a file
 *   neither JSON nor YAML or not a kubeconfig (zod's issues in `details`)
 */
export async function readKubeconfigFiles(
  path: string | readonly string[],
): Promise<KubeconfigFile[]> {
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
    files.push({ path: p, doc: await decodeKubeconfig(p, text) });
  }
  if (files.length === 0) {
    throw configError(`None of the kubeconfig files ${paths.join(":")} exists`);
  }
  return files;
}

/**
 * The merged `current-context` (kubectl: the first file setting one wins).
 * @param files the files, in order
 * @returns the context's name, or undefined when no file sets one
 */
export function currentContext(files: readonly KubeconfigFile[]): string | undefined {
  return files.map((f) => f.doc["current-context"]).find((c) => c);
}

/**
 * The merged entry named `name` (kubectl: the first file defining it wins).
 * @param files the files, in order
 * @param key `"clusters"`, `"users"` or `"contexts"`
 * @param name the entry's name
 * @returns the entry and `base`, the directory of the file defining it (for
 *   {@link resolvePath}); undefined when no file defines it
 */
export function findEntry<K extends "clusters" | "users" | "contexts">(
  files: readonly KubeconfigFile[],
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
