/**
 * Where NetworkAttachmentDefinitions come from: the {@link NadSource} interface that
 * delegate resolution reads through, a {@link DirectoryNadSource} for standalone mode
 * (manifests on disk, no API server) and a {@link StaticNadSource} for tests and for
 * callers that already hold the objects.
 *
 * @module
 */

import { lazyImport } from "../../util/lazy.ts";
import { CniError, CniErrorCode } from "../../cni/errors.ts";
import {
  type NetworkAttachmentDefinition,
  parseNetworkAttachmentDefinition,
} from "../../k8s/types.ts";
import { KubeError } from "../../k8s/errors.ts";
import { errorText } from "../../util/text.ts";

/**
 * Read access to NetworkAttachmentDefinitions (NPWG v1.3 §3) by namespace and name.
 * Implementations: the Kubernetes API client, {@link DirectoryNadSource},
 * {@link StaticNadSource}.
 */
export interface NadSource {
  /**
   * Looks up one NetworkAttachmentDefinition.
   *
   * @param namespace the NAD's namespace
   * @param name the NAD's name
   * @returns the object, or `undefined` when it does not exist
   * @throws {CniError} when the source itself fails (I/O code 5, invalid manifest code 7,
   *   API unreachable code 11…); "not found" is never an error
   */
  get(namespace: string, name: string): Promise<NetworkAttachmentDefinition | undefined>;
}

/**
 * An in-memory {@link NadSource} over a fixed list of objects.
 *
 * @example
 * ```ts
 * const nads = new StaticNadSource([{
 *   metadata: { name: "macvlan-conf", namespace: "default" },
 *   spec: { config: '{"cniVersion":"1.0.0","type":"macvlan"}' },
 * }]);
 * await nads.get("default", "macvlan-conf"); // the object
 * await nads.get("default", "other"); // undefined
 * ```
 */
export class StaticNadSource implements NadSource {
  #byKey = new Map<string, NetworkAttachmentDefinition>();

  /**
   * Indexes the given objects by namespace/name.
   * @param nads the objects; a later object with the same namespace/name replaces an earlier one
   */
  constructor(nads: Iterable<NetworkAttachmentDefinition>) {
    for (const nad of nads) this.#byKey.set(key(nad.metadata.namespace, nad.metadata.name), nad);
  }

  /** See {@link NadSource.get}; never throws. */
  get(namespace: string, name: string): Promise<NetworkAttachmentDefinition | undefined> {
    return Promise.resolve(this.#byKey.get(key(namespace, name)));
  }
}

/** Options of {@link DirectoryNadSource}. */
export interface DirectoryNadSourceOptions {
  /** Namespace of manifests without `metadata.namespace` (as `kubectl apply` would); default `"default"`. */
  defaultNamespace?: string;
}

/** File name endings read by {@link DirectoryNadSource}. */
const MANIFEST_EXTENSIONS = [".yaml", ".yml", ".json"];

/**
 * Standalone-mode {@link NadSource}: every `*.yaml`, `*.yml` and `*.json` manifest directly
 * in a directory (no recursion; symlinks followed, as in a mounted ConfigMap). A file may
 * hold several YAML documents (`---`) and `kind: List` (or `…List`) objects with `items`;
 * objects of kind `NetworkAttachmentDefinition` are kept, other kinds are ignored, empty
 * documents are skipped. Files are read once, lazily, on the first {@link get}, in
 * lexical order; the `yaml` package is imported only when a YAML file exists. A failed
 * load is not cached: the next call tries again.
 *
 * Permissions: read on `dir`; YAML files also need env access to `LOG_TOKENS` and
 * `LOG_STREAM`, which the `yaml` package reads while parsing.
 *
 * @example
 * ```ts
 * const nads = new DirectoryNadSource("/etc/manifold/nads");
 * const nad = await nads.get("default", "macvlan-conf");
 * ```
 */
export class DirectoryNadSource implements NadSource {
  /** The directory read. */
  readonly dir: string;
  #defaultNamespace: string;
  #loading?: Promise<Map<string, NetworkAttachmentDefinition>>;

  /**
   * A source reading the manifests in `dir` (read on first use).
   * @param dir directory holding the manifests
   * @param options see {@link DirectoryNadSourceOptions}
   */
  constructor(dir: string, options: DirectoryNadSourceOptions = {}) {
    this.dir = dir;
    this.#defaultNamespace = options.defaultNamespace ?? "default";
  }

  /**
   * See {@link NadSource.get}.
   *
   * @throws {CniError} code 7 when the directory does not exist or a manifest is invalid
   *   (bad YAML/JSON, a NAD without `metadata.name`, `spec.config` not a string, the same
   *   namespace/name defined twice) — `msg` names the file; code 5 when reading fails
   */
  async get(namespace: string, name: string): Promise<NetworkAttachmentDefinition | undefined> {
    return (await this.#load()).get(key(namespace, name));
  }

  /**
   * All NetworkAttachmentDefinitions found, in file order.
   *
   * @returns the objects
   * @throws {CniError} as {@link get}
   */
  async list(): Promise<NetworkAttachmentDefinition[]> {
    return [...(await this.#load()).values()];
  }

  #load(): Promise<Map<string, NetworkAttachmentDefinition>> {
    if (!this.#loading) {
      this.#loading = loadDirectory(this.dir, this.#defaultNamespace);
      this.#loading.catch(() => this.#loading = undefined);
    }
    return this.#loading;
  }
}

async function loadDirectory(
  dir: string,
  defaultNamespace: string,
): Promise<Map<string, NetworkAttachmentDefinition>> {
  const files: string[] = [];
  try {
    for await (const entry of Deno.readDir(dir)) {
      if (entry.isDirectory) continue;
      if (MANIFEST_EXTENSIONS.some((ext) => entry.name.endsWith(ext))) files.push(entry.name);
    }
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) {
      throw new CniError(
        CniErrorCode.InvalidNetworkConfig,
        `NetworkAttachmentDefinition directory ${dir} does not exist`,
      );
    }
    throw new CniError(
      CniErrorCode.IoFailure,
      `cannot read NetworkAttachmentDefinition directory ${dir}`,
      String(err),
    );
  }
  files.sort();
  const out = new Map<string, NetworkAttachmentDefinition>();
  const origin = new Map<string, string>();
  for (const file of files) {
    const path = `${dir.replace(/\/+$/, "")}/${file}`;
    let text: string;
    try {
      text = await Deno.readTextFile(path);
    } catch (err) {
      if (err instanceof Deno.errors.IsADirectory || err instanceof Deno.errors.NotFound) continue;
      throw new CniError(CniErrorCode.IoFailure, `cannot read manifest ${path}`, String(err));
    }
    for (const nad of await parseManifest(text, { path, defaultNamespace })) {
      const k = key(nad.metadata.namespace, nad.metadata.name);
      const first = origin.get(k);
      if (first !== undefined) {
        throw new CniError(
          CniErrorCode.InvalidNetworkConfig,
          `invalid manifest ${path}: NetworkAttachmentDefinition ${k} is already defined in ${first}`,
        );
      }
      origin.set(k, path);
      out.set(k, nad);
    }
  }
  return out;
}

/** Options of {@link parseManifest}. */
export interface ParseManifestOptions {
  /** File path, for error messages; a `.json` ending selects the JSON parser. */
  path: string;
  /** Namespace of objects without `metadata.namespace`. */
  defaultNamespace: string;
}

/**
 * Extracts the NetworkAttachmentDefinitions of one manifest file: JSON (`.json`) or
 * multi-document YAML, with `kind: List` objects flattened; other kinds are ignored.
 *
 * @param text the file contents
 * @param options file path and default namespace
 * @returns the NADs in document order (missing `spec` → `{}`)
 * @throws {CniError} code 7 naming the file (and document/item) when the text does not
 *   parse, a document is not an object, or a NAD is invalid (details = the validation error);
 *   code 999 when YAML parsing lacks env access to `LOG_TOKENS`/`LOG_STREAM`
 * @example
 * ```ts
 * await parseManifest(
 *   "kind: NetworkAttachmentDefinition\nmetadata: {name: a}\n",
 *   { path: "a.yaml", defaultNamespace: "default" },
 * ); // [{metadata: {name: "a", namespace: "default"}, spec: {}, raw: {...}}]
 * ```
 */
export async function parseManifest(
  text: string,
  options: ParseManifestOptions,
): Promise<NetworkAttachmentDefinition[]> {
  const { path } = options;
  const fail = (where: string, why: string, details = ""): never => {
    throw new CniError(
      CniErrorCode.InvalidNetworkConfig,
      `invalid manifest ${path}${where}: ${why}`,
      details,
    );
  };
  const documents: unknown[] = [];
  if (path.endsWith(".json")) {
    try {
      documents.push(JSON.parse(text));
    } catch (err) {
      fail("", "not valid JSON", errorText(err));
    }
  } else {
    const yaml = await lazyImport<typeof import("yaml")>("yaml");
    try {
      for (const doc of yaml.parseAllDocuments(text)) {
        if (doc.errors.length > 0) fail("", "not valid YAML", doc.errors[0].message);
        documents.push(doc.toJS());
      }
    } catch (err) {
      if (err instanceof CniError) throw err;
      if (err instanceof Deno.errors.NotCapable) {
        throw new CniError(
          CniErrorCode.Internal,
          `reading YAML manifest ${path} needs --allow-env=LOG_TOKENS,LOG_STREAM (read by the yaml package)`,
          err.message,
        );
      }
      fail("", "not valid YAML", errorText(err));
    }
  }
  const nads: NetworkAttachmentDefinition[] = [];
  documents.forEach((doc, docIndex) => {
    const where = documents.length > 1 ? ` (document ${docIndex + 1})` : "";
    if (doc === null || doc === undefined) return;
    if (!isObject(doc)) return fail(where, "not an object");
    if (typeof doc.kind === "string" && doc.kind.endsWith("List")) {
      if (!Array.isArray(doc.items)) return fail(where, `${doc.kind} without an items list`);
      // A typed list may omit the kind of its items.
      const itemKind = doc.kind === "NetworkAttachmentDefinitionList"
        ? "NetworkAttachmentDefinition"
        : undefined;
      doc.items.forEach((item: unknown, i: number) => {
        if (!isObject(item)) return fail(`${where} items[${i}]`, "not an object");
        if ((item.kind ?? itemKind) === "NetworkAttachmentDefinition") {
          nads.push(toNad(item, options, `${where} items[${i}]`, fail));
        }
      });
    } else if (doc.kind === "NetworkAttachmentDefinition") {
      nads.push(toNad(doc, options, where, fail));
    }
  });
  return nads;
}

function toNad(
  obj: Record<string, unknown>,
  options: ParseManifestOptions,
  where: string,
  fail: (where: string, why: string, details?: string) => never,
): NetworkAttachmentDefinition {
  const meta = obj.metadata;
  let withNamespace: unknown = obj;
  if (isObject(meta) && (meta.namespace === undefined || meta.namespace === "")) {
    withNamespace = { ...obj, metadata: { ...meta, namespace: options.defaultNamespace } };
  }
  try {
    return parseNetworkAttachmentDefinition(withNamespace);
  } catch (err) {
    if (!(err instanceof KubeError)) throw err;
    const name = isObject(meta) && typeof meta.name === "string" ? ` ${meta.name}` : "";
    return fail(where, `invalid NetworkAttachmentDefinition${name}`, err.details);
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function key(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}
