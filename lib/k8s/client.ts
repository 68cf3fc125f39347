/**
 * A small Kubernetes API client with exactly the calls Manifold needs: read a Pod and
 * NetworkAttachmentDefinitions, write the network-status annotation through the
 * `pods/status` subresource, post Events, and list and watch a collection
 * (`manifold mirror`). How requests are sent (authentication, timeouts, retries) is
 * `request.ts`; what a failure is, `errors.ts` ({@link KubeError}).
 *
 * This module does not import `yaml` (see kubeconfig/yaml.ts) or any Kubernetes SDK, to keep
 * process start-up short; the streaming transport and the watch decoder are loaded by the
 * first watch only.
 *
 * @module
 */

import { lazyImport } from "../util/lazy.ts";
import { KubeError } from "./errors.ts";
import { type KubeClientOptions, KubeRequester } from "./request.ts";
import {
  NAD_GROUP,
  NAD_RESOURCE,
  NAD_VERSION,
  type NetworkAttachmentDefinition,
  parseList,
  parseNetworkAttachmentDefinition,
  parsePod,
  type Pod,
} from "./types.ts";

export type { KubeClientOptions } from "./request.ts";

/** The object an Event is about (`core/v1 ObjectReference`). */
export interface EventObjectReference {
  /** e.g. `"Pod"`. */
  kind: string;
  /** The object's name. */
  name: string;
  /** The object's namespace. */
  namespace: string;
  /** The object's UID, when known. */
  uid?: string;
  /** Default `"v1"`. */
  apiVersion?: string;
}

/** What {@link KubeClient.createEvent} posts (`core/v1 Event`). */
export interface EventInit {
  /** The object the event is about. */
  involvedObject: EventObjectReference;
  /** CamelCase machine reason, e.g. `"AddedInterface"`. */
  reason: string;
  /** Human message; truncated to 1024 characters. */
  message: string;
  /** `"Normal"` or `"Warning"`. */
  type: "Normal" | "Warning";
  /** `source.component`; default `"manifold"`. */
  component?: string;
}

/** Query parameters of {@link KubeClient.list} and {@link KubeClient.watch}; `undefined` values are left out. */
export type QueryParams = Record<string, string | number | boolean | undefined>;

const NAME_FORBIDDEN = /[/%]/;
const MAX_EVENT_MESSAGE = 1024;

/**
 * Checks one REST path segment (a namespace or object name) and percent-encodes it.
 * Names cannot be `.`/`..` or contain `/` or `%` (apimachinery `path.IsValidPathSegmentName`).
 */
function segment(what: string, value: string): string {
  if (!value || value === "." || value === ".." || NAME_FORBIDDEN.test(value)) {
    throw new KubeError("config", `Invalid ${what} name ${JSON.stringify(value)}`);
  }
  return encodeURIComponent(value);
}

function nadPath(namespace?: string): string {
  const base = `/apis/${NAD_GROUP}/${NAD_VERSION}`;
  return namespace === undefined
    ? `${base}/${NAD_RESOURCE}`
    : `${base}/namespaces/${segment("namespace", namespace)}/${NAD_RESOURCE}`;
}

function podPath(namespace: string, name: string): string {
  return `/api/v1/namespaces/${segment("namespace", namespace)}/pods/${segment("pod", name)}`;
}

/**
 * Appends `params` to `path` as a query string (`?` or `&`), in insertion order.
 * @example withQuery("/a", { watch: 1, resourceVersion: "5", x: undefined }) // "/a?watch=1&resourceVersion=5"
 */
function withQuery(path: string, params: QueryParams): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) q.set(k, String(v));
  const text = q.toString();
  if (text === "") return path;
  return `${path}${path.includes("?") ? "&" : "?"}${text}`;
}

/**
 * The Kubernetes API client. One instance per CNI invocation; connections are kept
 * alive between its requests and closed by {@link KubeClient.close}.
 *
 * Every method throws {@link KubeError}: kind `"request"` when the call failed (`status`,
 * `reason`; `transient` for connection errors, timeouts, 401, 429 and 5xx once retries are
 * spent; 404 → `isNotFound`), `"decoding"` when the answer is malformed, `"config"` for an
 * invalid name or unusable TLS material, `"credentials"` when no credential can be obtained.
 *
 * @example
 * ```ts
 * using kube = new KubeClient({ connection: await loadKubeconfig("/etc/cni/net.d/manifold.d/manifold.kubeconfig") });
 * const pod = await kube.getPod("default", "api-sample");
 * ```
 */
export class KubeClient {
  #api: KubeRequester;

  #onListPageShrunk: ((path: string, limit: number) => void) | undefined;

  /**
   * Creates a client; nothing is opened until the first request.
   * @param opts connection and retry policy
   */
  constructor(opts: KubeClientOptions) {
    this.#api = new KubeRequester(opts);
    this.#onListPageShrunk = opts.onListPageShrunk;
  }

  /**
   * Reports that a lister halved its page size (see `KubeClientOptions.onListPageShrunk`).
   * @param path the collection
   * @param limit the new page size
   */
  listPageShrunk(path: string, limit: number): void {
    try {
      this.#onListPageShrunk?.(path, limit);
    } catch { /* an observer must not break listing */ }
  }

  /** HTTP requests actually sent so far, retries included. */
  get requestCount(): number {
    return this.#api.requestCount;
  }

  /**
   * `GET /api/v1/namespaces/{namespace}/pods/{name}`.
   * @param namespace the pod's namespace
   * @param name the pod's name
   * @returns the Pod (validated metadata + raw object).
   * @throws {KubeError} (404 → `isNotFound`)
   */
  async getPod(namespace: string, name: string): Promise<Pod> {
    return parsePod(await this.#api.request("GET", podPath(namespace, name)));
  }

  /**
   * `GET /apis/k8s.cni.cncf.io/v1/namespaces/{namespace}/network-attachment-definitions/{name}`
   * (NPWG v1.3 §3).
   * @param namespace the NAD's namespace
   * @param name the NAD's name
   * @returns the NetworkAttachmentDefinition
   * @throws {KubeError} (404 → `isNotFound`)
   */
  async getNetworkAttachmentDefinition(
    namespace: string,
    name: string,
  ): Promise<NetworkAttachmentDefinition> {
    const path = `${nadPath(namespace)}/${segment("NetworkAttachmentDefinition", name)}`;
    return parseNetworkAttachmentDefinition(await this.#api.request("GET", path));
  }

  /**
   * Lists NetworkAttachmentDefinitions of one namespace, or of all namespaces when
   * `namespace` is omitted (`GET /apis/k8s.cni.cncf.io/v1/network-attachment-definitions`).
   * @param namespace the namespace; all when omitted
   * @returns the NADs in API order
   * @throws {KubeError}
   */
  async listNetworkAttachmentDefinitions(
    namespace?: string,
  ): Promise<NetworkAttachmentDefinition[]> {
    return parseList(
      await this.#api.request("GET", nadPath(namespace)),
      parseNetworkAttachmentDefinition,
    );
  }

  /**
   * Sets (string) or deletes (`null`) Pod annotations through the status subresource:
   * `PATCH /api/v1/namespaces/{ns}/pods/{name}/status`, `application/merge-patch+json`
   * (RFC 7386) `{"metadata":{"annotations":{…}}}`. Needs only `patch pods/status`
   * (how Multus writes `k8s.v1.cni.cncf.io/network-status`, NPWG v1.3 §5). No
   * resourceVersion is sent, so other writers never make it conflict. Retried on transient
   * errors: a merge patch of absolute values is idempotent (RFC 7396). With `opts.uid` the patch carries `metadata.uid`, which acts as a
   * precondition: a pod of the same name with another UID (deleted and recreated, e.g. by a
   * StatefulSet) is not written and the call fails, never retried — kube-apiserver answers
   * 422 Invalid `metadata.uid: … field is immutable` (see `isUidMismatch`).
   * @param namespace the pod's namespace
   * @param name the pod's name
   * @param annotations values to set, `null` to delete
   * @param opts `uid`: the pod's `metadata.uid` the write is meant for (`""`/absent: none)
   * @returns the updated Pod.
   * @throws {KubeError} (`isUidMismatch`: the pod was replaced; 404: deleted)
   */
  async patchPodStatusAnnotations(
    namespace: string,
    name: string,
    annotations: Record<string, string | null>,
    opts: { uid?: string } = {},
  ): Promise<Pod> {
    const metadata = opts.uid ? { uid: opts.uid, annotations } : { annotations };
    const raw = await this.#api.request("PATCH", `${podPath(namespace, name)}/status`, {
      body: JSON.stringify({ metadata }),
      contentType: "application/merge-patch+json",
      // A JSON merge patch of absolute values is idempotent (RFC 7396: applying it twice
      // gives the same document), so a retry cannot write anything a first copy did not.
      idempotent: true,
    });
    return parsePod(raw);
  }

  /**
   * Posts a `core/v1` Event: `POST /api/v1/namespaces/{namespace}/events` with
   * `metadata.generateName` `"<involvedObject.name>."` (the server appends 5 random
   * characters), `source.component`, `count: 1` and first/last timestamps of now. Not
   * idempotent (a second POST is a second Event): sent again only when it never reached the
   * server, on 429, or on a 5xx with `Retry-After`, as client-go.
   * @param namespace where the event goes (the object's namespace)
   * @param ev the event
   * @throws {KubeError} (callers usually log and ignore it).
   */
  async createEvent(namespace: string, ev: EventInit): Promise<void> {
    const now = new Date().toISOString().replace(/\.\d+Z$/, "Z");
    const ref: Record<string, string> = {
      apiVersion: ev.involvedObject.apiVersion ?? "v1",
      kind: ev.involvedObject.kind,
      name: ev.involvedObject.name,
      namespace: ev.involvedObject.namespace,
    };
    if (ev.involvedObject.uid) ref.uid = ev.involvedObject.uid;
    const body = {
      apiVersion: "v1",
      kind: "Event",
      metadata: { generateName: `${ev.involvedObject.name}.`, namespace },
      involvedObject: ref,
      reason: ev.reason,
      message: ev.message.length > MAX_EVENT_MESSAGE
        ? `${ev.message.slice(0, MAX_EVENT_MESSAGE - 3)}...`
        : ev.message,
      type: ev.type,
      source: { component: ev.component ?? "manifold" },
      firstTimestamp: now,
      lastTimestamp: now,
      count: 1,
    };
    await this.#api.request(
      "POST",
      `/api/v1/namespaces/${segment("namespace", namespace)}/events`,
      {
        body: JSON.stringify(body),
        contentType: "application/json",
      },
    );
  }

  /**
   * `GET {path}?{params}` with this client's retries, timeout and authentication,
   * e.g. one page of a collection:
   * `list("/apis/k8s.cni.cncf.io/v1/network-attachment-definitions", { limit: 500 })`.
   *
   * @param path request path without the server prefix; may already hold a query
   * @param params query parameters; `undefined` values are left out
   * @returns the decoded JSON body, unvalidated (validate it with zod where it is used)
   * @throws {KubeError} as every call (e.g. 403 without `list` permission); `"decoding"` when
   *   the body is not JSON.
   */
  async list(path: string, params: QueryParams = {}): Promise<unknown> {
    return await this.#api.request("GET", withQuery(path, params));
  }

  /**
   * One request of any verb with this client's retries, timeout and authentication, for the
   * objects that have no method of their own (KEP-3698 PodNetworks: `GET` one, `PATCH` its
   * finalizers or `status` with `application/merge-patch+json`).
   *
   * @param method `"GET"`, `"PATCH"`, `"PUT"`, …
   * @param path request path without the server prefix
   * @param body JSON-encoded here when given
   * @param contentType of `body`; default `application/json`
   * @returns the decoded JSON body, unvalidated
   * @throws {KubeError} as every call: `"request"` with the HTTP status (404 → `isNotFound`,
   *   409 a conflict; 429/5xx after retries — for a POST, or a PATCH other than a merge
   *   patch, only when it never reached the server, 429, or 5xx with `Retry-After`),
   *   `"decoding"` when the body is not JSON.
   */
  async send(
    method: string,
    path: string,
    body?: unknown,
    contentType = "application/json",
  ): Promise<unknown> {
    if (body === undefined) return await this.#api.request(method, path);
    // A JSON merge patch is idempotent (RFC 7396); other POST/PATCH bodies are sent again
    // only when they never reached the server (request.ts).
    const idempotent = contentType === "application/merge-patch+json" ? true : undefined;
    return await this.#api.request(method, path, {
      body: JSON.stringify(body),
      contentType,
      idempotent,
    });
  }

  /**
   * Opens a watch, `GET {path}?watch=1&{params}` (e.g. `resourceVersion`,
   * `allowWatchBookmarks`, `timeoutSeconds`), and yields each line of the chunked answer
   * decoded (`metav1.WatchEvent`: `{"type":"ADDED|MODIFIED|DELETED|BOOKMARK|ERROR","object":{…}}`),
   * unvalidated, until the server ends the response. One attempt, no retries (the caller's
   * list/watch loop decides about backoff and resuming); `timeoutMs` bounds only the wait for
   * the status line, not the stream. Breaking out of the loop releases the connection;
   * {@link KubeClient.close} ends every open watch.
   *
   * @param path a collection path, e.g. `/apis/k8s.cni.cncf.io/v1/network-attachment-definitions`
   * @param params query parameters; `watch=1` is added
   * @param signal stops the watch: the iterator then throws a {@link KubeError} with
   *   reason `"Aborted"`
   * @param onOpen called once the server has answered 2xx, before the first line arrives
   *   (a quiet watch may send nothing for minutes)
   * @returns an async iterator of the decoded lines
   * @throws {KubeError} `"request"` when the answer is not 2xx (`status` and the Status
   *   `reason`, e.g. 410 `"Expired"`/`"Gone"`), when connecting fails or times out (status 0),
   *   when the stream breaks (status 0, `"ConnectionFailed"`), or is aborted (`"Aborted"`);
   *   `"decoding"` when a line is not JSON or exceeds 16 MiB.
   */
  async *watch(
    path: string,
    params: QueryParams = {},
    signal?: AbortSignal,
    onOpen?: () => void,
  ): AsyncGenerator<unknown, void, undefined> {
    const full = withQuery(path, { watch: 1, ...params });
    const { watchLines } = await lazyImport<typeof import("./watch_stream.ts")>(
      "./watch_stream.ts",
      import.meta.url,
    );
    const res = await this.#api.openStream(full, signal);
    yield* watchLines(res, { path: full, aborted: () => this.#api.aborted(signal), onOpen });
  }

  /**
   * Opens the connection of the next request ahead of it (TCP, TLS, the CA pin check), when
   * none is open: for a caller that knows a request will follow and has time now (a per-call
   * ADD while its delegates run, when nothing was read from the API before: the status PATCH
   * then finds it open). Nothing is sent.
   * @returns resolves when done or given up (request timeout, failure); never rejects
   */
  preconnect(): Promise<void> {
    return this.#api.preconnect();
  }

  /** Cancels in-flight requests and closes pooled connections and open watches; idempotent. */
  close(): void {
    this.#api.close();
  }

  /** Same as {@link KubeClient.close}, for `using`. */
  [Symbol.dispose](): void {
    this.close();
  }
}
