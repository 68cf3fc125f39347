/**
 * An in-process stand-in for kube-apiserver v1.32, serving HTTPS on 127.0.0.1 (ephemeral
 * port) for tests that run the plugin as a child process. It answers the few REST calls
 * Manifold makes with the paths, status codes, `Status` bodies and content-type rules of
 * the real server (captured `*.http` answers, see `MANIFOLD_KUBE_API_CAPTURES`):
 *
 * - `GET /version`
 * - `GET /api/v1/namespaces/{ns}/pods[?limit=&continue=]`, `GET /api/v1/namespaces/{ns}/pods/{name}[/status]`,
 *   the cluster-wide `GET /api/v1/pods`; both lists take `fieldSelector` (`spec.nodeName=N`,
 *   `metadata.name`, `metadata.namespace`, `status.phase`, … with `=`, `==`, `!=`; another field
 *   → 400 `field label not supported: x`)
 * - pod watches `GET /api/v1[/namespaces/{ns}]/pods?watch=1[&fieldSelector=…]`, served as the
 *   NAD watches below; a filtered watch sees a pod entering its selector as ADDED and one
 *   leaving it as DELETED (apiserver's cacher). Pod writes ({@link KubeApiStandIn.addPod},
 *   `patchPod`, `deletePod`, a PATCH request) are sent to them; `deletePod(…, {graceful})`
 *   sets `deletionTimestamp` (MODIFIED) as apiserver does before kubelet confirms.
 * - `PATCH …/pods/{name}[/status]`: only `application/merge-patch+json` (else 415), RFC 7386
 *   (`null` deletes), invalid JSON → 400, stale `metadata.resourceVersion` → 409, another
 *   `metadata.uid` → 422 `metadata.uid: … field is immutable` (as kube-apiserver), a write
 *   bumps `resourceVersion`; the status subresource ignores spec changes, the main
 *   resource ignores status changes
 * - `GET /apis/k8s.cni.cncf.io/v1/namespaces/{ns}/network-attachment-definitions[/{name}]`
 *   and the cluster-wide list `GET /apis/k8s.cni.cncf.io/v1/network-attachment-definitions`
 *   (`metadata.resourceVersion` = the store's current one; `limit`/`continue` paging)
 * - NAD watches, namespaced or cluster-wide: `GET …/network-attachment-definitions?watch=1`
 *   `[&resourceVersion=N][&allowWatchBookmarks=true][&timeoutSeconds=S]`, answered like
 *   kube-apiserver's watch cache: 200 `application/json`, chunked, one
 *   `{"type":"ADDED|MODIFIED|DELETED|BOOKMARK|ERROR","object":{…}}` per line; without a
 *   resourceVersion (or `"0"`) synthetic ADDED events for the current objects come first;
 *   a resourceVersion older than the retained history ({@link KubeApiStandIn.compactNadHistory})
 *   gets 200 and one `ERROR` event carrying a `410 Expired` Status
 *   (`too old resource version: N (M)`), a future one an `ERROR` with `504 Timeout`
 *   (`Too large resource version`); `timeoutSeconds` ends the stream cleanly. Every NAD
 *   write ({@link KubeApiStandIn.addNad}, `updateNad`, `deleteNad`) takes a new
 *   resourceVersion from the same counter as pods and events (etcd's revision) and is sent
 *   to the open watches. (No real watch capture exists among the captured answers;
 *   the shapes follow apiserver's `cacher` and `metav1.WatchEvent`.) An HTTP `410 Gone`
 *   answer, as older apiservers and etcd-direct watches give, is injected with
 *   `fault({ path, status: 410 })`.
 * - cluster-wide list and watch of namespaces (`GET /api/v1/namespaces`)
 *   and MultiNetworkPolicies (`GET /apis/k8s.cni.cncf.io/v1beta1[/namespaces/{ns}]/multi-networkpolicies`),
 *   with `labelSelector`, `fieldSelector` (`metadata.name`, `metadata.namespace`, `spec.nodeName`,
 *   `status.phase`), `limit`/`continue`, and the same watch semantics as NADs
 *   (tests/support/kube_api_feeds.ts); `setPodLabels` reaches the pod watches above,
 *   `putNamespace`, `putMultiNetworkPolicy` and `deleteMultiNetworkPolicy` reach the open watches
 * - `POST /api/v1/namespaces/{ns}/events` (`application/json`, `generateName` → name with
 *   5 random characters, 201)
 * - `GET /apis/multinetwork.manifold.dev/v1alpha1/podnetworks/{name}` and
 *   `GET …/v1alpha1/namespaces/{ns}/podnetworkattachments/{name}` (the KEP-3698 CRDs of
 *   deploy/02-crd-multinetwork.yaml, objects put with {@link KubeApiStandIn.putObject}; a
 *   missing one is the CRD's 404 `podnetworks.multinetwork.manifold.dev "x" not found`)
 * - Dynamic Resource Allocation (`resource.k8s.io`, the versions in `resourceVersions`; v1.32
 *   with the `DynamicResourceAllocation` gate serves `v1beta1` only, the default):
 *   `GET …/{v}/namespaces/{ns}/resourceclaims/{name}` and
 *   `GET …/{v}/resourceslices[?fieldSelector=spec.driver=D,spec.nodeName=N]`, objects put with
 *   {@link KubeApiStandIn.putDra} in either version's shape and served converted to the version
 *   asked (ResourceSlice devices: `v1` `devices[].attributes`, `v1beta1`
 *   `devices[].basic.attributes`; ResourceClaim requests: `v1` `exactly: {…}`, `v1beta1` flat).
 *   As captured from kube-apiserver v1.32.13: an unserved version is 404 `the server could not
 *   find the requested resource` with empty `details`, a missing claim 404
 *   `resourceclaims.resource.k8s.io "x" not found`, an unsupported field selector 400
 *   `field label not supported for resource.k8s.io/v1beta1, Kind=ResourceSlice: spec.pool.name`,
 *   list items carry no `kind`/`apiVersion`.
 *
 * Authentication, in kube-apiserver's order: a client certificate (verified against the
 * CA: chain, validity period and the `clientAuth` extended key usage; the user is CN, the
 * group O), else a bearer token (unknown → 401), else anonymous (only `/version`, else 403).
 * A presented but unverifiable client certificate closes the connection right after the
 * handshake (kube-apiserver fails the handshake itself; Deno's `node:https` cannot
 * reject only bad certificates while allowing none). `denyRbac(tokenOrUser)` → 403 with
 * the real message.
 *
 * @module
 */

import https from "node:https";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { TLSSocket } from "node:tls";
import { stringify as toYaml } from "yaml";
import { type CertSet, defaultCertSet } from "./certs.ts";
import { listAnswer, selectorFilter, WatchFeed } from "./kube_api_feeds.ts";

/** A pod to create with {@link KubeApiStandIn.addPod}. */
export interface PodInit {
  namespace: string;
  name: string;
  uid?: string;
  annotations?: Record<string, string>;
  /** `metadata.labels`. */
  labels?: Record<string, string>;
  /** `spec.nodeName`: the node the pod is bound to (field selector `spec.nodeName=…`). */
  nodeName?: string;
  /** Merged into the default `spec` (e.g. `nodeName`, `resourceClaims`). */
  spec?: Record<string, unknown>;
  /** Merged into the default `status` (e.g. `resourceClaimStatuses`). */
  status?: Record<string, unknown>;
}

/** A `resource.k8s.io` object for {@link KubeApiStandIn.putDra}, `v1` or `v1beta1` shape. */
export interface DraObject {
  apiVersion: "resource.k8s.io/v1" | "resource.k8s.io/v1beta1";
  kind: "ResourceClaim" | "ResourceSlice" | "DeviceClass";
  metadata: { name: string; namespace?: string };
  [key: string]: unknown;
}

/** A NetworkAttachmentDefinition to create with {@link KubeApiStandIn.addNad}. */
export interface NadInit {
  namespace: string;
  name: string;
  /** `spec.config`, the delegate CNI config as a JSON string. */
  config?: string;
  annotations?: Record<string, string>;
}

/** One request as the stand-in saw it. */
export interface SeenRequest {
  method: string;
  /** URL path without the query, e.g. `/api/v1/namespaces/default/pods/p`. */
  path: string;
  /** HTTP status answered; 0 when the connection was reset by a fault. */
  status: number;
  /** The query string including `?`, or `""`. */
  query: string;
  /** Authenticated user name; `"system:anonymous"` without credentials; `""` if rejected. */
  user: string;
  /** The request's `content-type`, or `""`. */
  contentType: string;
  /** The request body as text. */
  body: string;
  /** `performance.now()` when the request was received (its body read), ms. */
  at: number;
}

/** A failure injected before normal handling (see {@link KubeApiStandIn.fault}). */
export interface Fault {
  /** Match only this method (case-insensitive); any when absent. */
  method?: string;
  /** Match only paths (without query) matching this; any when absent. */
  path?: RegExp;
  /** Answer this status with a realistic `Status` body instead of handling the request. */
  status?: number;
  /** Wait this long (ms) first; alone, the request is then handled normally. */
  delayMs?: number;
  /** How many matching requests it applies to; default 1, `Infinity` allowed. */
  times?: number;
  /** Close the connection instead of answering (after `delayMs`). */
  reset?: boolean;
  /** With status 429/5xx: `Retry-After` seconds (default 1 for 429, none for 5xx); `null` omits it. */
  retryAfterSeconds?: number | null;
  /**
   * Applies to one matching request in `every` (the 1st, the `every + 1`-th, …); the others
   * pass on to later faults and normal handling. Default 1 (all). `times` counts those it
   * applied to.
   */
  every?: number;
  /** Send this raw body (e.g. HTML from a proxy, broken JSON) with `status` (default 200). */
  body?: string;
  /** Content type of `body`; default `application/json`. */
  contentType?: string;
}

/** Options of {@link writeKubeconfig}. */
export interface KubeconfigWriteOptions {
  /** How the user authenticates; default `"token"`. */
  auth?: "token" | "tokenFile" | "clientCert";
  /** With `auth: "tokenFile"`: the file to reference; default `<dir>/token`, written with the valid token. */
  tokenFile?: string;
  /** Write YAML instead of JSON. */
  yaml?: boolean;
  /** Embed CA, client certificate and key as `*-data` (base64) instead of file paths. */
  inline?: boolean;
}

/** The running stand-in. */
export interface KubeApiStandIn {
  /** Base URL, `https://127.0.0.1:<port>`. */
  url: string;
  caCertPem: string;
  caCertPath: string;
  clientCertPath: string;
  clientKeyPath: string;
  /** Kubernetes user name of the client certificate (its CN). */
  clientCertUser: string;
  /** A token accepted at start. */
  token: string;
  /** User name that valid tokens authenticate as. */
  tokenUser: string;
  /** Temp dir holding the certificates (removed by `stop`). */
  dir: string;
  /** Writes a kubeconfig pointing at this stand-in (JSON unless `yaml: true`). */
  writeKubeconfig(path: string, opts?: KubeconfigWriteOptions): Promise<void>;
  /**
   * Creates or replaces a pod; returns a copy of the stored object. Sends ADDED (MODIFIED when
   * replacing) to the open pod watches.
   */
  addPod(pod: PodInit): Record<string, unknown>;
  /**
   * Deletes a pod. `graceful`: as kube-apiserver does for a pod with a grace period, only sets
   * `metadata.deletionTimestamp` and `deletionGracePeriodSeconds` (MODIFIED; kubelet then tears
   * the pod down); otherwise the pod is removed (DELETED, its object at the new resourceVersion).
   */
  deletePod(namespace: string, name: string, opts?: { graceful?: boolean }): void;
  /**
   * Applies an RFC 7386 merge patch to a pod as `PATCH …/pods/{name}` does (main resource:
   * status is kept; identity fields are immutable); sends MODIFIED when the pod changed.
   * Returns a copy of the stored object.
   * @throws Error when the pod does not exist
   */
  patchPod(
    namespace: string,
    name: string,
    patch: Record<string, unknown>,
  ): Record<string, unknown>;
  /** A copy of the stored pod, or undefined. */
  getPod(namespace: string, name: string): Record<string, unknown> | undefined;
  /**
   * Creates a NAD (or replaces one with the same namespace/name, with a new uid); sends
   * ADDED (MODIFIED when replacing) to the open watches.
   */
  addNad(nad: NadInit): void;
  /** Removes a NAD (no-op when absent); sends DELETED, its object at the new resourceVersion. */
  deleteNad(namespace: string, name: string): void;
  /**
   * Replaces an existing NAD's `spec.config` and annotations (`kubectl replace`): uid and
   * creationTimestamp are kept, `generation` is bumped when the spec changes, a new
   * resourceVersion is taken; sends MODIFIED. Returns a copy of the stored object.
   * @throws Error when the NAD does not exist
   */
  updateNad(nad: NadInit): Record<string, unknown>;
  /** A copy of the stored NAD, or undefined. */
  getNad(namespace: string, name: string): Record<string, unknown> | undefined;
  /**
   * Creates or replaces a `resource.k8s.io` object (ResourceClaim with its `status`,
   * ResourceSlice, DeviceClass) given in `v1` or `v1beta1` shape; returns it as stored.
   */
  putDra(obj: DraObject): Record<string, unknown>;
  /**
   * Creates or replaces a KEP-3698 object (`kind` PodNetwork or PodNetworkAttachment; the
   * server fills `apiVersion`, uid, generation, resourceVersion, creationTimestamp).
   * Returns a copy of the stored object.
   */
  putObject(
    obj: { kind: "PodNetwork" | "PodNetworkAttachment" } & Record<string, unknown>,
  ): Record<string, unknown>;
  /** The store's current resourceVersion (what a list answers), as a number. */
  readonly resourceVersion: number;
  /**
   * Forgets the NAD event history (etcd compaction / watch-cache window moving on): a
   * watch from a resourceVersion older than now gets the ERROR 410 `Expired` event.
   */
  compactNadHistory(): void;
  /** Sends a BOOKMARK (current resourceVersion) to every NAD watch that allowed bookmarks. */
  nadBookmark(): void;
  /**
   * Ends every open NAD watch: `clean` (default) finishes the chunked response as a server
   * timeout does; `clean: false` resets the connection (a dropped stream).
   */
  endNadWatches(opts?: { clean?: boolean }): void;
  /** NAD watches currently open. */
  readonly nadWatchCount: number;
  /**
   * Creates or replaces a MultiNetworkPolicy (`k8s.cni.cncf.io/v1beta1`; the server fills
   * uid, generation, resourceVersion); sends ADDED/MODIFIED to the open watches.
   */
  putMultiNetworkPolicy(
    obj: {
      metadata: { name: string; namespace: string; annotations?: Record<string, string> };
    } & Record<string, unknown>,
  ): Record<string, unknown>;
  /** Removes a MultiNetworkPolicy (no-op when absent); sends DELETED. */
  deleteMultiNetworkPolicy(namespace: string, name: string): void;
  /** Creates or replaces a Namespace with these labels; sends ADDED/MODIFIED. */
  putNamespace(name: string, labels?: Record<string, string>): Record<string, unknown>;
  /** Replaces a pod's labels (new resourceVersion, MODIFIED to the pod watches). */
  setPodLabels(namespace: string, name: string, labels: Record<string, string>): void;
  /** Sets one annotation of a stored pod (a third party's patch), reaching its watches. */
  setPodAnnotation(namespace: string, name: string, key: string, value: string): void;
  /** Pod, Namespace and MultiNetworkPolicy watches open now. */
  readonly policyWatchCount: number;
  /** Forgets the pod, Namespace and MultiNetworkPolicy watch history (→ 410 for older watches). */
  compactPolicyHistory(): void;
  /** Ends the open pod, Namespace and MultiNetworkPolicy watches (`clean: false`: reset). */
  endPolicyWatches(opts?: { clean?: boolean }): void;
  /** Forgets the pod event history (as {@link KubeApiStandIn.compactNadHistory} for NADs). */
  compactPodHistory(): void;
  /** Ends every open pod watch (as {@link KubeApiStandIn.endNadWatches}). */
  endPodWatches(opts?: { clean?: boolean }): void;
  /** Pod watches currently open. */
  readonly podWatchCount: number;
  /** Replaces the set of accepted bearer tokens (others get 401). */
  setTokens(valid: string[]): void;
  /** Makes every resource request of this token (or client-certificate user) get 403. */
  denyRbac(tokenOrUser: string): void;
  /** Created events, as stored (with server-filled metadata). */
  events: Record<string, unknown>[];
  /** Every request seen, in order. */
  requests: SeenRequest[];
  /** Client certificates rejected after the handshake, with the verification error. */
  tlsRejections: { subject: string; error: string }[];
  /** TCP connections accepted so far (to check keep-alive reuse). */
  readonly connectionCount: number;
  /** Injects a failure before normal handling; faults are matched in the order added. */
  fault(f: Fault): void;
  /** Drops every injected fault not used up yet (e.g. one with `times: Infinity`). */
  clearFaults(): void;
  /** While down, connections are closed as soon as they are accepted (API unreachable). */
  down(isDown: boolean): void;
  /** Closes the server and every connection and removes `dir`; idempotent. */
  stop(): Promise<void>;
}

/** Options of {@link startKubeApi}. */
export interface StartKubeApiOptions {
  /**
   * Request and accept client certificates (default true, like a kube-apiserver with
   * `--client-ca-file`). When false the server does not ask for one, so only tokens work.
   */
  clientCertAuth?: boolean;
  /**
   * Send a BOOKMARK on every NAD watch that allowed bookmarks this often (ms), as
   * kube-apiserver ≥ 1.27 does about once a minute; default: never (only `nadBookmark()`).
   */
  watchBookmarkIntervalMs?: number;
  /** Versions of `resource.k8s.io` served; default `["v1beta1"]` (v1.32 with the DRA gate). */
  resourceVersions?: ("v1" | "v1beta1")[];
}

type Json = Record<string, unknown>;

const NAD_GROUP = "k8s.cni.cncf.io";
const NAD_RESOURCE = "network-attachment-definitions";
const MULTINET_GROUP = "multinetwork.manifold.dev";
const RESOURCE_GROUP = "resource.k8s.io";
const TOKEN_USER = "system:serviceaccount:kube-system:manifold";
const ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789";

const REASONS: Record<number, string> = {
  400: "BadRequest",
  401: "Unauthorized",
  403: "Forbidden",
  404: "NotFound",
  405: "MethodNotAllowed",
  409: "Conflict",
  410: "Expired",
  415: "UnsupportedMediaType",
  422: "Invalid",
  429: "TooManyRequests",
  500: "InternalError",
  503: "ServiceUnavailable",
  504: "Timeout",
};

class HttpError extends Error {
  constructor(readonly status: number, readonly body: Json | string, readonly headers: Json = {}) {
    super(typeof body === "string" ? body : String(body.message ?? status));
  }
}

/** A `metav1.Status` failure, keys in kube-apiserver's order. */
function statusBody(code: number, reason: string, message: string, details?: Json): Json {
  const s: Json = {
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message,
    reason,
  };
  if (details !== undefined) s.details = details;
  s.code = code;
  return s;
}

function faultBody(status: number, f: Fault): Json {
  switch (status) {
    case 401:
      return statusBody(401, "Unauthorized", "Unauthorized");
    case 429:
      return statusBody(429, "TooManyRequests", "Too many requests, please try again later.", {
        retryAfterSeconds: f.retryAfterSeconds ?? 1,
      });
    case 500:
      return statusBody(500, "InternalError", "Internal error occurred: injected fault", {
        causes: [{ message: "injected fault" }],
      });
    case 503:
      return statusBody(
        503,
        "ServiceUnavailable",
        "the server is currently unable to handle the request",
      );
    case 504:
      return statusBody(
        504,
        "Timeout",
        "The server was unable to return a response in the time allotted, but may still be processing the request",
      );
    default:
      return statusBody(status, REASONS[status] ?? "", `injected fault ${status}`, {});
  }
}

function notFound(resource: string, name: string, group = ""): HttpError {
  const full = group ? `${resource}.${group}` : resource;
  const details: Json = { name };
  if (group) details.group = group;
  details.kind = resource;
  return new HttpError(404, statusBody(404, "NotFound", `${full} "${name}" not found`, details));
}

const unknownResource = () =>
  new HttpError(
    404,
    statusBody(404, "NotFound", "the server could not find the requested resource", {}),
  );

function isObject(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * JSON merge patch (RFC 7386): objects merge recursively, `null` deletes, anything else
 * (arrays included) replaces.
 * @example mergePatch({ a: { b: 1, c: 2 } }, { a: { b: null, d: 3 } }) // { a: { c: 2, d: 3 } }
 */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return patch;
  const out: Json = isObject(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

/** Go's `encoding/json` wording for the common JSON syntax errors. */
function goJsonError(text: string): string {
  try {
    JSON.parse(text);
    return "";
  } catch (err) {
    const m = (err as Error).message;
    if (/end of (JSON )?input|Unterminated/i.test(m) || text.trim() === "") {
      return "unexpected end of JSON input";
    }
    const ch = m.match(/token '?(.)'?/)?.[1] ?? text.trim()[0] ?? "";
    return `invalid character '${ch}' looking for beginning of value`;
  }
}

function mediaType(ct: string | undefined): string {
  return (ct ?? "").split(";")[0].trim().toLowerCase();
}

function randomSuffix(n = 5): string {
  const b = crypto.getRandomValues(new Uint8Array(n));
  return Array.from(b, (x) => ALPHANUMS[x % ALPHANUMS.length]).join("");
}

function now(): string {
  return new Date().toISOString().replace(/\.\d+Z$/, "Z");
}

function key(ns: string, name: string): string {
  return `${ns}/${name}`;
}

interface RequestInfo {
  verb: string;
  resource: string;
  subresource?: string;
  group: string;
  namespace?: string;
  name?: string;
}

function forbidden(user: string, info: RequestInfo): HttpError {
  const full = info.group ? `${info.resource}.${info.group}` : info.resource;
  const what = info.name ? `${full} "${info.name}"` : full;
  const res = info.subresource ? `${info.resource}/${info.subresource}` : info.resource;
  const scope = info.namespace ? `in the namespace "${info.namespace}"` : "at the cluster scope";
  const details: Json = {};
  if (info.name) details.name = info.name;
  if (info.group) details.group = info.group;
  details.kind = info.resource;
  return new HttpError(
    403,
    statusBody(
      403,
      "Forbidden",
      `${what} is forbidden: User "${user}" cannot ${info.verb} resource "${res}" in API group "${info.group}" ${scope}`,
      details,
    ),
  );
}

class StandIn implements KubeApiStandIn {
  url = "";
  caCertPem = "";
  caCertPath = "";
  clientCertPath = "";
  clientKeyPath = "";
  clientCertUser = "";
  token = `standin-${crypto.randomUUID()}`;
  tokenUser = TOKEN_USER;
  dir = "";
  events: Json[] = [];
  requests: SeenRequest[] = [];
  tlsRejections: { subject: string; error: string }[] = [];

  #certs: CertSet;
  #clientCertAuth: boolean;
  #server: https.Server | undefined;
  #sockets = new Set<Socket>();
  #pods = new Map<string, Json>();
  #nads = new Map<string, Json>();
  /** KEP-3698 objects by `<plural>/<namespace or "">/<name>`. */
  #multinet = new Map<string, Json>();
  #tokens = new Set<string>([this.token]);
  #denied = new Set<string>();
  #faults: (Fault & { left: number; seen: number })[] = [];
  #isDown = false;
  #rv = 1000;
  #timers = new Set<{ id: ReturnType<typeof setTimeout> | undefined; resolve: () => void }>();
  #stopped = false;
  #connections = 0;
  /** NAD events with resourceVersion > `#nadCompactedRv`, oldest first (the watch history). */
  #nadEvents: { rv: number; type: string; object: Json }[] = [];
  /** Watches from a resourceVersion below this get `410 Expired`. */
  #nadCompactedRv = 0;
  #nadWatchers = new Set<Watcher>();
  /** Pod events with resourceVersion > `#podCompactedRv`, oldest first; `prev` = the pod before. */
  #podEvents: { rv: number; type: string; object: Json; prev?: Json }[] = [];
  #podCompactedRv = 0;
  #podWatchers = new Set<Watcher>();
  #bookmarkIntervalMs: number | undefined;
  #mnps = new Map<string, Json>();
  #namespaces = new Map<string, Json>();
  #mnpFeed = new WatchFeed("MultiNetworkPolicy", `${NAD_GROUP}/v1beta1`);
  #namespaceFeed = new WatchFeed("Namespace", "v1");
  /** `resource.k8s.io` objects in `v1` shape by `<plural>/<namespace or "">/<name>`. */
  #dra = new Map<string, Json>();
  #resourceVersions: Set<string>;

  constructor(
    certs: CertSet,
    clientCertAuth: boolean,
    bookmarkIntervalMs?: number,
    resourceVersions: string[] = ["v1beta1"],
  ) {
    this.#resourceVersions = new Set(resourceVersions);
    this.#certs = certs;
    this.#clientCertAuth = clientCertAuth;
    this.#bookmarkIntervalMs = bookmarkIntervalMs;
    this.caCertPem = certs.ca.certPem;
    this.clientCertUser = certs.clientUser;
  }

  async start(): Promise<void> {
    this.dir = await Deno.makeTempDir({ prefix: "manifold-kube-api-" });
    this.caCertPath = `${this.dir}/ca.crt`;
    this.clientCertPath = `${this.dir}/client.crt`;
    this.clientKeyPath = `${this.dir}/client.key`;
    await Deno.writeTextFile(this.caCertPath, this.#certs.ca.certPem);
    await Deno.writeTextFile(this.clientCertPath, this.#certs.client.certPem);
    await Deno.writeTextFile(this.clientKeyPath, this.#certs.client.keyPem, { mode: 0o600 });
    await Deno.writeTextFile(`${this.dir}/server.crt`, this.#certs.server.certPem);
    const server = https.createServer({
      key: this.#certs.server.keyPem,
      cert: this.#certs.server.certPem,
      ca: this.#certs.ca.certPem,
      requestCert: this.#clientCertAuth,
      rejectUnauthorized: false,
    }, (req, res) => {
      this.#handle(req, res).catch(() => {
        try {
          res.socket?.destroy();
        } catch { /* already gone */ }
      });
    });
    server.on("connection", (sock: Socket) => {
      if (this.#isDown || this.#stopped) {
        sock.destroy();
        return;
      }
      this.#connections++;
      this.#sockets.add(sock);
      sock.on("close", () => this.#sockets.delete(sock));
    });
    server.on("secureConnection", (tls: TLSSocket) => {
      if (!this.#clientCertAuth) return;
      const peer = tls.getPeerCertificate();
      if (peer && Object.keys(peer).length > 0 && !tls.authorized) {
        this.tlsRejections.push({
          subject: JSON.stringify(peer.subject ?? {}),
          error: String(tls.authorizationError ?? "unverified"),
        });
        tls.destroy();
      }
    });
    server.on("tlsClientError", () => {});
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => resolve());
    });
    this.#server = server;
    const addr = server.address();
    if (!addr || typeof addr === "string") throw new Error("Stand-in has no TCP address");
    this.url = `https://127.0.0.1:${addr.port}`;
  }

  get connectionCount(): number {
    return this.#connections;
  }

  async writeKubeconfig(path: string, opts: KubeconfigWriteOptions = {}): Promise<void> {
    const b64 = (s: string) => btoa(s);
    const cluster: Json = { server: this.url };
    if (opts.inline) cluster["certificate-authority-data"] = b64(this.caCertPem);
    else cluster["certificate-authority"] = this.caCertPath;
    const user: Json = {};
    switch (opts.auth ?? "token") {
      case "token":
        user.token = this.token;
        break;
      case "tokenFile": {
        const file = opts.tokenFile ?? `${this.dir}/token`;
        if (!opts.tokenFile) await Deno.writeTextFile(file, this.token, { mode: 0o600 });
        user.tokenFile = file;
        break;
      }
      case "clientCert":
        if (opts.inline) {
          user["client-certificate-data"] = b64(this.#certs.client.certPem);
          user["client-key-data"] = b64(this.#certs.client.keyPem);
        } else {
          user["client-certificate"] = this.clientCertPath;
          user["client-key"] = this.clientKeyPath;
        }
        break;
    }
    const cfg = {
      apiVersion: "v1",
      kind: "Config",
      clusters: [{ name: "stand-in", cluster }],
      users: [{ name: "manifold", user }],
      contexts: [{ name: "stand-in", context: { cluster: "stand-in", user: "manifold" } }],
      "current-context": "stand-in",
    };
    const text = opts.yaml ? toYaml(cfg) : JSON.stringify(cfg, null, 2) + "\n";
    await Deno.writeTextFile(path, text, { mode: 0o600 });
  }

  addPod(pod: PodInit): Json {
    const metadata: Json = {
      name: pod.name,
      namespace: pod.namespace,
      uid: pod.uid ?? crypto.randomUUID(),
      resourceVersion: String(++this.#rv),
      creationTimestamp: now(),
    };
    if (pod.annotations && Object.keys(pod.annotations).length) {
      metadata.annotations = { ...pod.annotations };
    }
    if (pod.labels && Object.keys(pod.labels).length) metadata.labels = { ...pod.labels };
    const obj: Json = {
      kind: "Pod",
      apiVersion: "v1",
      metadata,
      spec: {
        containers: [{
          name: "c",
          image: "example.invalid/none",
          resources: {},
          terminationMessagePath: "/dev/termination-log",
          terminationMessagePolicy: "File",
          imagePullPolicy: "Always",
        }],
        restartPolicy: "Always",
        terminationGracePeriodSeconds: 30,
        dnsPolicy: "ClusterFirst",
        serviceAccountName: "default",
        serviceAccount: "default",
        securityContext: {},
        schedulerName: "default-scheduler",
        priority: 0,
        enableServiceLinks: true,
        preemptionPolicy: "PreemptLowerPriority",
      },
      status: { phase: "Pending", qosClass: "BestEffort" },
    };
    if (pod.nodeName) (obj.spec as Json).nodeName = pod.nodeName;
    Object.assign(obj.spec as Json, pod.spec ?? {});
    Object.assign(obj.status as Json, pod.status ?? {});
    const k = key(pod.namespace, pod.name);
    const prev = this.#pods.get(k);
    this.#pods.set(k, obj);
    this.#emitPod(prev ? "MODIFIED" : "ADDED", obj, prev);
    return structuredClone(obj);
  }

  deletePod(namespace: string, name: string, opts: { graceful?: boolean } = {}): void {
    const k = key(namespace, name);
    const old = this.#pods.get(k);
    if (!old) return;
    if (opts.graceful) {
      const next = structuredClone(old);
      const m = next.metadata as Json;
      if (m.deletionTimestamp) return;
      m.deletionTimestamp = now();
      m.deletionGracePeriodSeconds = (next.spec as Json).terminationGracePeriodSeconds ?? 30;
      m.resourceVersion = String(++this.#rv);
      this.#pods.set(k, next);
      this.#emitPod("MODIFIED", next, old);
      return;
    }
    this.#pods.delete(k);
    this.#emitPod("DELETED", this.#bumped(old), old);
  }

  patchPod(namespace: string, name: string, patch: Json): Json {
    if (!this.#pods.has(key(namespace, name))) {
      throw new Error(`pod ${key(namespace, name)} does not exist`);
    }
    return structuredClone(this.#applyPodPatch(namespace, name, undefined, patch));
  }

  getPod(namespace: string, name: string): Json | undefined {
    const p = this.#pods.get(key(namespace, name));
    return p && structuredClone(p);
  }

  addNad(nad: NadInit): void {
    const metadata: Json = {};
    if (nad.annotations && Object.keys(nad.annotations).length) {
      metadata.annotations = { ...nad.annotations };
    }
    Object.assign(metadata, {
      creationTimestamp: now(),
      generation: 1,
      name: nad.name,
      namespace: nad.namespace,
      resourceVersion: String(++this.#rv),
      uid: crypto.randomUUID(),
    });
    const k = key(nad.namespace, nad.name);
    const existed = this.#nads.has(k);
    const obj: Json = {
      apiVersion: `${NAD_GROUP}/v1`,
      kind: "NetworkAttachmentDefinition",
      metadata,
      spec: nad.config === undefined ? {} : { config: nad.config },
    };
    this.#nads.set(k, obj);
    this.#emitNad(existed ? "MODIFIED" : "ADDED", obj);
  }

  deleteNad(namespace: string, name: string): void {
    const k = key(namespace, name);
    const old = this.#nads.get(k);
    this.#nads.delete(k);
    if (!old) return;
    const gone = structuredClone(old);
    (gone.metadata as Json).resourceVersion = String(++this.#rv);
    this.#emitNad("DELETED", gone);
  }

  updateNad(nad: NadInit): Json {
    const k = key(nad.namespace, nad.name);
    const old = this.#nads.get(k);
    if (!old) throw new Error(`NetworkAttachmentDefinition ${k} does not exist`);
    const oldMeta = old.metadata as Json;
    const spec: Json = nad.config === undefined ? {} : { config: nad.config };
    const metadata: Json = {};
    if (nad.annotations && Object.keys(nad.annotations).length) {
      metadata.annotations = { ...nad.annotations };
    }
    const specChanged = JSON.stringify(spec) !== JSON.stringify(old.spec);
    Object.assign(metadata, {
      creationTimestamp: oldMeta.creationTimestamp,
      generation: Number(oldMeta.generation ?? 1) + (specChanged ? 1 : 0),
      name: nad.name,
      namespace: nad.namespace,
      resourceVersion: String(++this.#rv),
      uid: oldMeta.uid,
    });
    const obj: Json = { ...old, metadata, spec };
    this.#nads.set(k, obj);
    this.#emitNad("MODIFIED", obj);
    return structuredClone(obj);
  }

  putObject(obj: Json): Json {
    const kind = obj.kind as string;
    const plural = kind === "PodNetwork" ? "podnetworks" : "podnetworkattachments";
    const meta = { ...(obj.metadata as Json) };
    const ns = kind === "PodNetwork" ? "" : String(meta.namespace ?? "default");
    const k = `${plural}/${ns}/${meta.name}`;
    const old = this.#multinet.get(k)?.metadata as Json | undefined;
    const stored: Json = {
      ...obj,
      apiVersion: `${MULTINET_GROUP}/v1alpha1`,
      metadata: {
        ...meta,
        ...(ns ? { namespace: ns } : {}),
        creationTimestamp: old?.creationTimestamp ?? now(),
        generation: Number(old?.generation ?? 0) + 1,
        resourceVersion: String(++this.#rv),
        uid: old?.uid ?? crypto.randomUUID(),
      },
    };
    if (kind === "PodNetwork") {
      const spec = { ...(stored.spec as Json) };
      spec.enabled ??= true; // the CRD's default
      stored.spec = spec;
    }
    this.#multinet.set(k, stored);
    return structuredClone(stored);
  }

  getNad(namespace: string, name: string): Json | undefined {
    const n = this.#nads.get(key(namespace, name));
    return n && structuredClone(n);
  }

  putDra(obj: DraObject): Json {
    const plural = `${obj.kind.toLowerCase()}s`;
    const meta = { ...obj.metadata };
    const ns = obj.kind === "ResourceClaim" ? String(meta.namespace ?? "default") : "";
    const k = `${plural}/${ns}/${meta.name}`;
    const old = this.#dra.get(k)?.metadata as Json | undefined;
    const v1 = draConvert(structuredClone(obj) as Json, "v1");
    const stored: Json = {
      ...v1,
      metadata: {
        ...meta,
        ...(ns ? { namespace: ns } : {}),
        uid: old?.uid ?? crypto.randomUUID(),
        resourceVersion: String(++this.#rv),
        ...(obj.kind === "ResourceClaim" ? {} : { generation: Number(old?.generation ?? 0) + 1 }),
        creationTimestamp: old?.creationTimestamp ?? now(),
      },
    };
    if (obj.kind === "ResourceClaim") stored.status ??= {};
    this.#dra.set(k, stored);
    return structuredClone(stored);
  }

  get resourceVersion(): number {
    return this.#rv;
  }

  compactNadHistory(): void {
    this.#nadCompactedRv = this.#rv;
    this.#nadEvents = [];
  }

  nadBookmark(): void {
    for (const w of this.#nadWatchers) if (w.bookmarks) this.#sendBookmark(w);
  }

  endNadWatches(opts: { clean?: boolean } = {}): void {
    for (const w of [...this.#nadWatchers]) this.#closeWatcher(w, opts.clean ?? true);
  }

  get nadWatchCount(): number {
    return this.#nadWatchers.size;
  }

  compactPodHistory(): void {
    this.#podCompactedRv = this.#rv;
    this.#podEvents = [];
  }

  endPodWatches(opts: { clean?: boolean } = {}): void {
    for (const w of [...this.#podWatchers]) this.#closeWatcher(w, opts.clean ?? true);
  }

  get podWatchCount(): number {
    return this.#podWatchers.size;
  }

  /**
   * Records a pod change in the watch history and sends it to the open pod watches, as the
   * watch cache does for a filtered watch: an object entering the filter is ADDED, one
   * leaving it DELETED, one outside it before and after is not sent.
   */
  #emitPod(type: string, object: Json, prev: Json | undefined): void {
    const rv = Number((object.metadata as Json).resourceVersion);
    const ev = { rv, type, object: structuredClone(object), prev: prev && structuredClone(prev) };
    this.#podEvents.push(ev);
    for (const w of this.#podWatchers) {
      const t = filteredType(w.match, ev);
      if (t) this.#writeEvent(w, t, ev.object);
    }
  }

  /** Records a NAD change in the watch history and sends it to the matching open watches. */
  #emitNad(type: string, object: Json): void {
    const rv = Number((object.metadata as Json).resourceVersion);
    const ev = { rv, type, object: structuredClone(object) };
    this.#nadEvents.push(ev);
    for (const w of this.#nadWatchers) {
      if (w.match(object)) this.#writeEvent(w, type, ev.object);
    }
  }

  #writeEvent(w: Watcher, type: string, object: Json): void {
    if (w.res.destroyed || w.res.writableEnded) return;
    w.res.write(JSON.stringify({ type, object }) + "\n");
  }

  #sendBookmark(w: Watcher): void {
    this.#writeEvent(w, "BOOKMARK", {
      kind: w.kind === "pods" ? "Pod" : "NetworkAttachmentDefinition",
      apiVersion: w.kind === "pods" ? "v1" : `${NAD_GROUP}/v1`,
      metadata: { resourceVersion: String(this.#rv) },
    });
  }

  #closeWatcher(w: Watcher, clean: boolean): void {
    const set = w.kind === "pods" ? this.#podWatchers : this.#nadWatchers;
    if (!set.delete(w)) return;
    for (const t of w.timers) clearTimeout(t);
    if (clean) w.res.end();
    else w.res.socket?.destroy();
  }

  /**
   * Serves `GET …/network-attachment-definitions?watch=…` and `GET …/pods?watch=…` (with
   * `fieldSelector`) like the watch cache (see the module doc); throws an {@link HttpError}
   * for requests refused before the stream starts.
   */
  #watch(
    kind: "nads" | "pods",
    url: URL,
    user: { name: string; identity: string },
    res: ServerResponse,
    seen: SeenRequest,
  ): void {
    const parts = url.pathname.split("/").filter((p) => p !== "").map(decodeURIComponent);
    let rest = parts.slice(kind === "pods" ? 2 : 3);
    let namespace: string | undefined;
    if (rest[0] === "namespaces") {
      namespace = rest[1];
      rest = rest.slice(2);
    }
    const resource = kind === "pods" ? "pods" : NAD_RESOURCE;
    if (rest.length !== 1 || rest[0] !== resource) throw unknownResource();
    this.#authorize(user, {
      verb: "watch",
      resource,
      group: kind === "pods" ? "" : NAD_GROUP,
      namespace,
    });
    const podFields = kind === "pods"
      ? podFieldSelector(url.searchParams.get("fieldSelector"))
      : undefined;
    const podLabels = kind === "pods" ? podLabelSelector(url) : undefined;
    const fields = podFields && podLabels ? (o: Json) => podFields(o) && podLabels(o) : () => true;
    const rvParam = url.searchParams.get("resourceVersion") ?? "";
    if (rvParam !== "" && !/^\d+$/.test(rvParam)) {
      throw new HttpError(
        400,
        statusBody(
          400,
          "BadRequest",
          `invalid resource version: strconv.ParseUint: parsing "${rvParam}": invalid syntax`,
        ),
      );
    }
    const timeoutSeconds = Number(url.searchParams.get("timeoutSeconds") ?? "0");
    const w: Watcher = {
      kind,
      match: (o) =>
        (namespace === undefined || (o.metadata as Json).namespace === namespace) && fields(o),
      res,
      bookmarks: isTrue(url.searchParams.get("allowWatchBookmarks")),
      timers: [],
    };
    seen.status = 200;
    res.writeHead(200, {
      "audit-id": crypto.randomUUID(),
      "cache-control": "no-cache, private",
      "content-type": "application/json",
    });
    res.flushHeaders();
    const store = kind === "pods" ? this.#pods : this.#nads;
    const history = kind === "pods" ? this.#podEvents : this.#nadEvents;
    const compactedRv = kind === "pods" ? this.#podCompactedRv : this.#nadCompactedRv;
    if (rvParam === "" || rvParam === "0") {
      // "Start at most recent / any": the current objects as synthetic ADDED events.
      for (const [k, o] of [...store.entries()].sort(([a], [b]) => a < b ? -1 : 1)) {
        if (w.match(o)) this.#writeEvent(w, "ADDED", store.get(k)!);
      }
    } else {
      const rv = Number(rvParam);
      if (rv < compactedRv) {
        this.#writeEvent(
          w,
          "ERROR",
          statusBody(410, "Expired", `too old resource version: ${rv} (${compactedRv})`),
        );
        res.end();
        return;
      }
      if (rv > this.#rv) {
        this.#writeEvent(
          w,
          "ERROR",
          statusBody(504, "Timeout", `Too large resource version: ${rv}, current: ${this.#rv}`, {
            causes: [{ reason: "ResourceVersionTooLarge", message: "Too large resource version" }],
            retryAfterSeconds: 1,
          }),
        );
        res.end();
        return;
      }
      for (const ev of history) {
        if (ev.rv <= rv) continue;
        const t = filteredType(w.match, ev);
        if (t) this.#writeEvent(w, t, ev.object);
      }
    }
    (kind === "pods" ? this.#podWatchers : this.#nadWatchers).add(w);
    res.on("close", () => this.#closeWatcher(w, false));
    if (timeoutSeconds > 0) {
      w.timers.push(setTimeout(() => {
        // apiserver sends a last bookmark right before the deadline.
        if (w.bookmarks) this.#sendBookmark(w);
        this.#closeWatcher(w, true);
      }, timeoutSeconds * 1000));
    }
    if (w.bookmarks && this.#bookmarkIntervalMs) {
      w.timers.push(setInterval(() => this.#sendBookmark(w), this.#bookmarkIntervalMs));
    }
  }

  putMultiNetworkPolicy(obj: Json): Json {
    const meta = obj.metadata as Json;
    const k = key(String(meta.namespace), String(meta.name));
    const old = this.#mnps.get(k)?.metadata as Json | undefined;
    const stored: Json = {
      ...obj,
      apiVersion: `${NAD_GROUP}/v1beta1`,
      kind: "MultiNetworkPolicy",
      metadata: {
        ...meta,
        creationTimestamp: old?.creationTimestamp ?? now(),
        generation: Number(old?.generation ?? 0) + 1,
        resourceVersion: String(++this.#rv),
        uid: old?.uid ?? crypto.randomUUID(),
      },
    };
    this.#mnps.set(k, stored);
    this.#mnpFeed.emit(old ? "MODIFIED" : "ADDED", stored);
    return structuredClone(stored);
  }

  deleteMultiNetworkPolicy(namespace: string, name: string): void {
    const old = this.#mnps.get(key(namespace, name));
    this.#mnps.delete(key(namespace, name));
    if (old) this.#mnpFeed.emit("DELETED", this.#bumped(old));
  }

  putNamespace(name: string, labels: Record<string, string> = {}): Json {
    const old = this.#namespaces.get(name);
    const stored: Json = {
      kind: "Namespace",
      apiVersion: "v1",
      metadata: {
        name,
        uid: (old?.metadata as Json | undefined)?.uid ?? crypto.randomUUID(),
        resourceVersion: String(++this.#rv),
        creationTimestamp: (old?.metadata as Json | undefined)?.creationTimestamp ?? now(),
        labels: { "kubernetes.io/metadata.name": name, ...labels },
      },
      spec: { finalizers: ["kubernetes"] },
      status: { phase: "Active" },
    };
    this.#namespaces.set(name, stored);
    this.#namespaceFeed.emit(old ? "MODIFIED" : "ADDED", stored);
    return structuredClone(stored);
  }

  setPodLabels(namespace: string, name: string, labels: Record<string, string>): void {
    const pod = this.#pods.get(key(namespace, name));
    if (!pod) throw new Error(`pod ${namespace}/${name} does not exist`);
    const prev = structuredClone(pod);
    const meta = pod.metadata as Json;
    if (Object.keys(labels).length) meta.labels = { ...labels };
    else delete meta.labels;
    meta.resourceVersion = String(++this.#rv);
    this.#emitPod("MODIFIED", pod, prev);
  }

  setPodAnnotation(namespace: string, name: string, annotation: string, value: string): void {
    const pod = this.#pods.get(key(namespace, name));
    if (!pod) throw new Error(`pod ${namespace}/${name} does not exist`);
    const prev = structuredClone(pod);
    const meta = pod.metadata as Json;
    meta.annotations = { ...(meta.annotations as Json | undefined), [annotation]: value };
    meta.resourceVersion = String(++this.#rv);
    this.#emitPod("MODIFIED", pod, prev);
  }

  get policyWatchCount(): number {
    return this.#podWatchers.size + this.#mnpFeed.watchCount + this.#namespaceFeed.watchCount;
  }

  compactPolicyHistory(): void {
    for (const f of [this.#mnpFeed, this.#namespaceFeed]) f.compact(this.#rv);
    this.compactPodHistory();
  }

  endPolicyWatches(opts: { clean?: boolean } = {}): void {
    for (const f of [this.#mnpFeed, this.#namespaceFeed]) f.endAll(opts.clean ?? true);
    this.endPodWatches(opts);
  }

  /** A copy of `obj` at a new resourceVersion (what a DELETED event carries). */
  #bumped(obj: Json): Json {
    const gone = structuredClone(obj);
    (gone.metadata as Json).resourceVersion = String(++this.#rv);
    return gone;
  }

  /**
   * Cluster-wide list and watch of namespaces (`/api/v1/namespaces`)
   * and MultiNetworkPolicies (`/apis/k8s.cni.cncf.io/v1beta1[/namespaces/{ns}]/multi-networkpolicies`),
   * with `labelSelector`/`fieldSelector`; false when the path is none of these.
   */
  #serveCollection(
    url: URL,
    user: { name: string; identity: string },
    res: ServerResponse,
    seen: SeenRequest,
  ): boolean {
    const parts = url.pathname.split("/").filter((p) => p !== "").map(decodeURIComponent);
    let target: { feed: WatchFeed; store: Map<string, Json>; resource: string; group: string };
    let namespace: string | undefined;
    let list: { kind: string; apiVersion: string; keepKind: boolean };
    if (parts.length === 3 && parts[0] === "api" && parts[2] === "namespaces") {
      if (parts[1] !== "v1") return false;
      target = {
        feed: this.#namespaceFeed,
        store: this.#namespaces,
        resource: "namespaces",
        group: "",
      };
      list = { kind: "NamespaceList", apiVersion: "v1", keepKind: false };
    } else if (
      parts[0] === "apis" && parts[1] === NAD_GROUP && parts[2] === "v1beta1" &&
      parts.at(-1) === "multi-networkpolicies" &&
      (parts.length === 4 || (parts.length === 6 && parts[3] === "namespaces"))
    ) {
      namespace = parts.length === 6 ? parts[4] : undefined;
      target = {
        feed: this.#mnpFeed,
        store: this.#mnps,
        resource: "multi-networkpolicies",
        group: NAD_GROUP,
      };
      list = { kind: "MultiNetworkPolicyList", apiVersion: `${NAD_GROUP}/v1beta1`, keepKind: true };
    } else return false;
    const watch = isTrue(url.searchParams.get("watch"));
    this.#authorize(user, {
      verb: watch ? "watch" : "list",
      resource: target.resource,
      group: target.group,
      namespace,
    });
    const current = [...target.store.entries()]
      .filter(([k]) => namespace === undefined || k.startsWith(`${namespace}/`))
      .sort(([a], [b]) => a < b ? -1 : 1).map(([, v]) => v);
    try {
      if (watch) {
        if (namespace !== undefined) {
          url.searchParams.append("fieldSelector", `metadata.namespace=${namespace}`);
        }
        seen.status = 200;
        target.feed.serve(url, res, {
          current,
          rv: this.#rv,
          bookmarkIntervalMs: this.#bookmarkIntervalMs,
        });
        return true;
      }
      const body = listAnswer({ ...list, items: current, rv: this.#rv }, url);
      seen.status = 200;
      res.writeHead(200, {
        "audit-id": crypto.randomUUID(),
        "cache-control": "no-cache, private",
        "content-type": "application/json",
      });
      res.end(JSON.stringify(body));
      return true;
    } catch (e) {
      const msg = (e as Error).message;
      const text = msg === "continue"
        ? "continue key is not valid: illegal base64 data"
        : msg === "rv"
        ? `invalid resource version: strconv.ParseUint: parsing "${
          url.searchParams.get("resourceVersion")
        }": invalid syntax`
        : msg;
      throw new HttpError(400, statusBody(400, "BadRequest", text));
    }
  }

  setTokens(valid: string[]): void {
    this.#tokens = new Set(valid);
  }

  denyRbac(tokenOrUser: string): void {
    this.#denied.add(tokenOrUser);
  }

  fault(f: Fault): void {
    this.#faults.push({ ...f, left: f.times ?? 1, seen: 0 });
  }

  clearFaults(): void {
    this.#faults.length = 0;
  }

  down(isDown: boolean): void {
    this.#isDown = isDown;
    if (isDown) { for (const s of this.#sockets) s.destroy(); }
  }

  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    this.endNadWatches({ clean: false });
    for (const f of [this.#mnpFeed, this.#namespaceFeed]) f.endAll(false);
    this.endPodWatches({ clean: false });
    for (const t of this.#timers) {
      clearTimeout(t.id);
      t.resolve();
    }
    this.#timers.clear();
    for (const s of this.#sockets) s.destroy();
    const server = this.#server;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
    await Deno.remove(this.dir, { recursive: true }).catch(() => {});
  }

  #delay(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t: { id: ReturnType<typeof setTimeout> | undefined; resolve: () => void } = {
        id: undefined,
        resolve,
      };
      t.id = setTimeout(() => {
        this.#timers.delete(t);
        resolve();
      }, ms);
      this.#timers.add(t);
    });
  }

  #takeFault(method: string, path: string): Fault | undefined {
    const i = this.#faults.findIndex((f) => {
      if (f.method && f.method.toUpperCase() !== method) return false;
      if (f.path && !f.path.test(path)) return false;
      return (f.seen++ % (f.every ?? 1)) === 0;
    });
    if (i < 0) return undefined;
    const f = this.#faults[i];
    if (--f.left <= 0) this.#faults.splice(i, 1);
    return f;
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const method = (req.method ?? "GET").toUpperCase();
    const url = new URL(req.url ?? "/", "https://stand-in");
    const chunks: Uint8Array[] = [];
    for await (const c of req) chunks.push(c as Uint8Array);
    const bytes = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
    chunks.reduce((off, c) => (bytes.set(c, off), off + c.length), 0);
    const body = new TextDecoder().decode(bytes);
    const seen: SeenRequest = {
      method,
      path: url.pathname,
      status: 0,
      query: url.search,
      user: "",
      contentType: String(req.headers["content-type"] ?? ""),
      body,
      at: performance.now(),
    };
    this.requests.push(seen);
    const pretty = /^(curl|wget)\//i.test(String(req.headers["user-agent"] ?? ""));
    const send = (status: number, payload: Json | string, headers: Json = {}) => {
      seen.status = status;
      if (this.#stopped || res.destroyed) return;
      const text = typeof payload === "string"
        ? payload
        : JSON.stringify(payload, null, pretty ? 2 : undefined);
      res.writeHead(status, {
        "audit-id": crypto.randomUUID(),
        "cache-control": "no-cache, private",
        "content-type": "application/json",
        ...headers,
      } as Record<string, string>);
      res.end(text);
    };

    const f = this.#takeFault(method, url.pathname);
    if (f) {
      if (f.delayMs) await this.#delay(f.delayMs);
      if (this.#stopped) return;
      if (f.reset) {
        seen.status = 0;
        req.socket.destroy();
        return;
      }
      if (f.body !== undefined) {
        send(f.status ?? 200, f.body, { "content-type": f.contentType ?? "application/json" });
        return;
      }
      if (f.status !== undefined) {
        const headers: Json = {};
        const ra = f.retryAfterSeconds === undefined
          ? (f.status === 429 ? 1 : undefined)
          : f.retryAfterSeconds;
        if (ra !== null && ra !== undefined && (f.status === 429 || f.status >= 500)) {
          headers["retry-after"] = String(ra);
        }
        send(f.status, faultBody(f.status, f), headers);
        return;
      }
    }

    try {
      const user = this.#authenticate(req);
      seen.user = user.name;
      if (method === "GET" && this.#serveCollection(url, user, res, seen)) return;
      if (
        method === "GET" && isTrue(url.searchParams.get("watch")) &&
        url.pathname.startsWith(`/apis/${NAD_GROUP}/v1/`)
      ) {
        this.#watch("nads", url, user, res, seen);
        return;
      }
      if (
        method === "GET" && isTrue(url.searchParams.get("watch")) &&
        /^\/api\/v1\/(namespaces\/[^/]+\/)?pods$/.test(url.pathname)
      ) {
        this.#watch("pods", url, user, res, seen);
        return;
      }
      const out = this.#route(method, url, user, req, body);
      send(out.status, out.body);
    } catch (err) {
      if (err instanceof HttpError) send(err.status, err.body, err.headers);
      else {
        send(
          500,
          statusBody(500, "InternalError", `Internal error occurred: ${(err as Error).message}`, {
            causes: [{ message: (err as Error).message }],
          }),
        );
      }
    }
  }

  #authenticate(req: IncomingMessage): { name: string; identity: string } {
    if (this.#clientCertAuth) {
      const tls = req.socket as TLSSocket;
      const peer = tls.getPeerCertificate?.();
      const cn = peer?.subject?.CN;
      if (tls.authorized && cn) {
        const name = Array.isArray(cn) ? cn[0] : cn;
        return { name, identity: name };
      }
    }
    const auth = String(req.headers.authorization ?? "");
    if (auth) {
      const m = auth.match(/^Bearer\s+(\S+)$/i);
      if (!m || !this.#tokens.has(m[1])) {
        throw new HttpError(401, statusBody(401, "Unauthorized", "Unauthorized"));
      }
      return { name: TOKEN_USER, identity: m[1] };
    }
    return { name: "system:anonymous", identity: "" };
  }

  #authorize(user: { name: string; identity: string }, info: RequestInfo): void {
    if (user.name === "system:anonymous" || this.#denied.has(user.identity)) {
      throw forbidden(user.name, info);
    }
  }

  #route(
    method: string,
    url: URL,
    user: { name: string; identity: string },
    req: IncomingMessage,
    body: string,
  ): { status: number; body: Json } {
    const parts = url.pathname.split("/").filter((p) => p !== "").map(decodeURIComponent);
    const p = url.pathname;
    if (p === "/version") {
      if (method !== "GET") throw methodNotAllowed();
      return {
        status: 200,
        body: {
          major: "1",
          minor: "32",
          gitVersion: "v1.32.0",
          gitCommit: "0000000000000000000000000000000000000000",
          gitTreeState: "clean",
          buildDate: "2024-12-11T18:04:20Z",
          goVersion: "go1.23.3",
          compiler: "gc",
          platform: "linux/amd64",
        },
      };
    }
    // /api/v1/pods: every namespace's pods (list only)
    if (p === "/api/v1/pods") {
      if (method !== "GET") throw methodNotAllowed();
      this.#authorize(user, { verb: "list", resource: "pods", group: "" });
      return { status: 200, body: this.#listPods(undefined, url) };
    }
    // /api/v1/namespaces/{ns}/{resource}[/{name}[/{sub}]]
    if (parts[0] === "api" && parts[1] === "v1" && parts[2] === "namespaces" && parts.length >= 5) {
      const [ns, resource, name, sub] = parts.slice(3);
      if (parts.length > 7) throw unknownResource();
      if (resource === "pods") {
        if (sub !== undefined && sub !== "status") throw unknownResource();
        if (name === undefined) {
          if (method !== "GET") throw methodNotAllowed();
          this.#authorize(user, { verb: "list", resource, group: "", namespace: ns });
          return { status: 200, body: this.#listPods(ns, url) };
        }
        const verb = method === "GET" ? "get" : method === "PATCH" ? "patch" : "";
        if (!verb) throw methodNotAllowed();
        this.#authorize(user, { verb, resource, subresource: sub, group: "", namespace: ns, name });
        const pod = this.#pods.get(key(ns, name));
        if (verb === "get") {
          if (!pod) throw notFound("pods", name);
          return { status: 200, body: pod };
        }
        return { status: 200, body: this.#patchPod(ns, name, sub, req, body) };
      }
      if (resource === "events" && name === undefined) {
        if (method !== "POST") throw methodNotAllowed();
        this.#authorize(user, { verb: "create", resource, group: "", namespace: ns });
        return { status: 201, body: this.#createEvent(ns, req, body) };
      }
      throw unknownResource();
    }
    // /apis/k8s.cni.cncf.io/v1[/namespaces/{ns}]/network-attachment-definitions[/{name}]
    if (parts[0] === "apis" && parts[1] === NAD_GROUP && parts[2] === "v1") {
      let ns: string | undefined;
      let rest = parts.slice(3);
      if (rest[0] === "namespaces") {
        ns = rest[1];
        rest = rest.slice(2);
      }
      if (rest[0] !== NAD_RESOURCE || rest.length > 2 || (ns === undefined && rest.length > 1)) {
        throw unknownResource();
      }
      if (method !== "GET") throw methodNotAllowed();
      const name = rest[1];
      const info = {
        verb: name ? "get" : "list",
        resource: NAD_RESOURCE,
        group: NAD_GROUP,
        namespace: ns,
        name,
      };
      this.#authorize(user, info);
      if (name !== undefined) {
        const nad = this.#nads.get(key(ns!, name));
        if (!nad) throw notFound(NAD_RESOURCE, name, NAD_GROUP);
        return { status: 200, body: nad };
      }
      const all = [...this.#nads.entries()]
        .filter(([k]) => ns === undefined || k.startsWith(`${ns}/`))
        .sort(([a], [b]) => a < b ? -1 : 1)
        .map(([, v]) => v);
      // Paging (`limit`/`continue`): the token pins the first page's resourceVersion.
      let start = 0;
      let listRv = this.#rv;
      const cont = url.searchParams.get("continue");
      if (cont) {
        try {
          const t = JSON.parse(atob(cont));
          start = Number(t.start) || 0;
          listRv = Number(t.rv) || listRv;
        } catch {
          throw new HttpError(
            400,
            statusBody(400, "BadRequest", "continue key is not valid: illegal base64 data"),
          );
        }
      }
      const limit = Number(url.searchParams.get("limit") ?? "0");
      const end = limit > 0 ? Math.min(all.length, start + limit) : all.length;
      const metadata: Json = { continue: "", resourceVersion: String(listRv) };
      if (end < all.length) {
        metadata.continue = btoa(JSON.stringify({ rv: listRv, start: end }));
        metadata.remainingItemCount = all.length - end;
      }
      return {
        status: 200,
        body: {
          apiVersion: `${NAD_GROUP}/v1`,
          items: all.slice(start, end),
          kind: "NetworkAttachmentDefinitionList",
          metadata,
        },
      };
    }
    // /apis/multinetwork.manifold.dev/v1alpha1/{podnetworks/{name} | namespaces/{ns}/podnetworkattachments/{name}}
    if (parts[0] === "apis" && parts[1] === MULTINET_GROUP && parts[2] === "v1alpha1") {
      const rest = parts.slice(3);
      const [ns, resource, name] = rest[0] === "namespaces"
        ? [rest[1], rest[2], rest[3]]
        : ["", rest[0], rest[1]];
      const known = (resource === "podnetworks" && ns === "" && rest.length === 2) ||
        (resource === "podnetworkattachments" && ns !== "" && rest.length === 4);
      if (!known || name === undefined) throw unknownResource();
      if (method !== "GET") throw methodNotAllowed();
      this.#authorize(user, {
        verb: "get",
        resource,
        group: MULTINET_GROUP,
        namespace: ns || undefined,
        name,
      });
      const obj = this.#multinet.get(`${resource}/${ns}/${name}`);
      if (!obj) throw notFound(resource, name, MULTINET_GROUP);
      return { status: 200, body: obj };
    }
    if (parts[0] === "apis" && parts[1] === RESOURCE_GROUP && parts.length > 3) {
      return this.#routeDra(method, parts, url, user);
    }
    if (parts[0] === "api" || parts[0] === "apis") throw unknownResource();
    // Non-resource paths: the Go mux's plain-text answer.
    throw new HttpError(404, "404 page not found\n", {
      "content-type": "text/plain; charset=utf-8",
      "x-content-type-options": "nosniff",
    });
  }

  /** `resource.k8s.io/{v}`: GET one ResourceClaim, LIST ResourceSlices (see the module text). */
  #routeDra(
    method: string,
    parts: string[],
    url: URL,
    user: { name: string; identity: string },
  ): { status: number; body: Json } {
    const version = parts[2];
    if (!this.#resourceVersions.has(version)) throw unknownResource();
    const rest = parts.slice(3);
    const [ns, resource, name] = rest[0] === "namespaces"
      ? [rest[1], rest[2], rest[3]]
      : [undefined, rest[0], rest[1]];
    const known = (resource === "resourceclaims" && ns !== undefined && rest.length <= 4) ||
      (resource === "resourceslices" && ns === undefined && rest.length <= 2) ||
      (resource === "deviceclasses" && ns === undefined && rest.length <= 2);
    if (!known) throw unknownResource();
    if (method !== "GET") throw methodNotAllowed();
    const apiVersion = `${RESOURCE_GROUP}/${version}`;
    this.#authorize(user, {
      verb: name ? "get" : "list",
      resource,
      group: RESOURCE_GROUP,
      namespace: ns,
      name,
    });
    if (name !== undefined) {
      const obj = this.#dra.get(`${resource}/${ns ?? ""}/${name}`);
      if (!obj) throw notFound(resource, name, RESOURCE_GROUP);
      return { status: 200, body: draConvert(structuredClone(obj), version) };
    }
    const fields: [string, string][] = [];
    for (const term of (url.searchParams.get("fieldSelector") ?? "").split(",")) {
      if (!term) continue;
      const m = term.match(/^([^=!]+)==?(.*)$/);
      const supported = resource === "resourceslices"
        ? ["metadata.name", "spec.nodeName", "spec.driver"]
        : ["metadata.name", "metadata.namespace"];
      if (!m || !supported.includes(m[1])) {
        const kind = resource === "resourceslices"
          ? "ResourceSlice"
          : resource === "resourceclaims"
          ? "ResourceClaim"
          : "DeviceClass";
        throw new HttpError(
          400,
          statusBody(
            400,
            "BadRequest",
            `field label not supported for ${apiVersion}, Kind=${kind}: ${m?.[1] ?? term}`,
          ),
        );
      }
      fields.push([m[1], m[2]]);
    }
    const field = (o: Json, path: string): string => {
      const v = path.split(".").reduce<unknown>((x, k) => (x as Json | undefined)?.[k], o);
      return typeof v === "string" ? v : "";
    };
    const items = [...this.#dra.entries()]
      .filter(([k]) =>
        k.startsWith(`${resource}/`) && (ns === undefined || k.startsWith(`${resource}/${ns}/`))
      )
      .sort(([a], [b]) => a < b ? -1 : 1)
      .map(([, o]) => o)
      .filter((o) => fields.every(([f, v]) => field(o, f) === v))
      .map((o) => {
        const { kind: _k, apiVersion: _a, ...item } = draConvert(structuredClone(o), version);
        return item;
      });
    const kind = resource === "resourceslices"
      ? "ResourceSliceList"
      : resource === "resourceclaims"
      ? "ResourceClaimList"
      : "DeviceClassList";
    return {
      status: 200,
      body: { kind, apiVersion, metadata: { resourceVersion: String(this.#rv) }, items },
    };
  }

  #listPods(ns: string | undefined, url: URL): Json {
    const fields = podFieldSelector(url.searchParams.get("fieldSelector"));
    const labels = podLabelSelector(url);
    const all = [...this.#pods.entries()]
      .filter(([k, v]) => (ns === undefined || k.startsWith(`${ns}/`)) && fields(v) && labels(v))
      .sort(([a], [b]) => a < b ? -1 : 1);
    let start = 0;
    const cont = url.searchParams.get("continue");
    if (cont) {
      try {
        start = Number(JSON.parse(atob(cont)).start) || 0;
      } catch {
        throw new HttpError(
          400,
          statusBody(400, "BadRequest", "continue key is not valid: illegal base64 data"),
        );
      }
    }
    const limit = Number(url.searchParams.get("limit") ?? "0");
    const end = limit > 0 ? Math.min(all.length, start + limit) : all.length;
    const metadata: Json = { resourceVersion: String(this.#rv) };
    if (end < all.length) {
      metadata.continue = btoa(JSON.stringify({ start: end }));
      metadata.remainingItemCount = all.length - end;
    }
    const items = all.slice(start, end).map(([, v]) => {
      const { kind: _k, apiVersion: _a, ...rest } = v;
      return rest;
    });
    return { kind: "PodList", apiVersion: "v1", metadata, items };
  }

  #patchPod(
    ns: string,
    name: string,
    sub: string | undefined,
    req: IncomingMessage,
    body: string,
  ): Json {
    if (mediaType(req.headers["content-type"]) !== "application/merge-patch+json") {
      throw new HttpError(
        415,
        statusBody(415, "UnsupportedMediaType", "415: Unsupported Media Type", {}),
      );
    }
    const pod = this.#pods.get(key(ns, name));
    if (!pod) throw notFound("pods", name);
    const err = goJsonError(body);
    if (err) {
      throw new HttpError(400, statusBody(400, "BadRequest", `error decoding patch: ${err}`));
    }
    return this.#applyPodPatch(ns, name, sub, JSON.parse(body) as unknown);
  }

  /** A merge patch on the stored pod (main resource or `status`); MODIFIED when it changed. */
  #applyPodPatch(ns: string, name: string, sub: string | undefined, patch: unknown): Json {
    const pod = this.#pods.get(key(ns, name))!;
    const meta = pod.metadata as Json;
    const conflict = () =>
      new HttpError(
        409,
        statusBody(
          409,
          "Conflict",
          `Operation cannot be fulfilled on pods "${name}": the object has been modified; please apply your changes to the latest version and try again`,
          { name, kind: "pods" },
        ),
      );
    if (isObject(patch) && isObject(patch.metadata)) {
      const rv = patch.metadata.resourceVersion;
      if (rv !== undefined && rv !== null && rv !== meta.resourceVersion) throw conflict();
      const uid = patch.metadata.uid;
      if (typeof uid === "string" && uid !== meta.uid) {
        // kube-apiserver's answer to a merge patch with another pod's UID (nothing written).
        const message = `Invalid value: ${JSON.stringify(uid)}: field is immutable`;
        throw new HttpError(
          422,
          statusBody(422, "Invalid", `Pod "${name}" is invalid: metadata.uid: ${message}`, {
            name,
            kind: "Pod",
            causes: [{ reason: "FieldValueInvalid", message, field: "metadata.uid" }],
          }),
        );
      }
    }
    const merged = mergePatch(pod, patch);
    if (!isObject(merged) || !isObject(merged.metadata)) {
      throw new HttpError(
        400,
        statusBody(400, "BadRequest", "error decoding patch: the patch must be a JSON object"),
      );
    }
    const m = merged.metadata;
    const ann = m.annotations;
    if (ann !== undefined) {
      if (!isObject(ann) || Object.values(ann).some((v) => typeof v !== "string")) {
        throw new HttpError(
          400,
          statusBody(
            400,
            "BadRequest",
            "json: cannot unmarshal into Go struct field ObjectMeta.metadata.annotations of type string",
          ),
        );
      }
      if (Object.keys(ann).length === 0) delete m.annotations;
    }
    // Identity fields are immutable; each endpoint only writes its part of the object.
    for (const k of ["name", "namespace", "uid", "creationTimestamp", "resourceVersion"]) {
      if (meta[k] === undefined) delete m[k];
      else m[k] = meta[k];
    }
    merged.kind = "Pod";
    merged.apiVersion = "v1";
    if (sub === "status") merged.spec = pod.spec;
    else merged.status = pod.status;
    if (JSON.stringify(merged) !== JSON.stringify(pod)) {
      m.resourceVersion = String(++this.#rv);
      this.#pods.set(key(ns, name), merged);
      this.#emitPod("MODIFIED", merged, pod);
    }
    return this.#pods.get(key(ns, name))!;
  }

  #createEvent(ns: string, req: IncomingMessage, body: string): Json {
    if (mediaType(req.headers["content-type"]) !== "application/json") {
      throw new HttpError(
        415,
        statusBody(415, "UnsupportedMediaType", "415: Unsupported Media Type", {}),
      );
    }
    const err = goJsonError(body);
    if (err) {
      throw new HttpError(
        400,
        statusBody(400, "BadRequest", `couldn't get version/kind; json parse error: ${err}`),
      );
    }
    const ev = JSON.parse(body) as unknown;
    if (!isObject(ev)) {
      throw new HttpError(
        400,
        statusBody(400, "BadRequest", "couldn't get version/kind; json parse error: not an object"),
      );
    }
    const meta: Json = isObject(ev.metadata) ? { ...ev.metadata } : {};
    if (meta.namespace !== undefined && meta.namespace !== ns) {
      throw new HttpError(
        400,
        statusBody(
          400,
          "BadRequest",
          "the namespace of the provided object does not match the namespace sent on the request",
        ),
      );
    }
    const invalid = (field: string, message: string, name = "") =>
      new HttpError(
        422,
        statusBody(422, "Invalid", `Event "${name}" is invalid: ${field}: ${message}`, {
          name,
          kind: "Event",
          causes: [{ reason: "FieldValueInvalid", message, field }],
        }),
      );
    let name = typeof meta.name === "string" ? meta.name : "";
    const generateName = typeof meta.generateName === "string" ? meta.generateName : "";
    if (!name && !generateName) {
      throw invalid("metadata.name", "Required value: name or generateName is required");
    }
    if (!name) name = `${generateName.slice(0, 58)}${randomSuffix()}`;
    const involved = isObject(ev.involvedObject) ? ev.involvedObject : {};
    if (involved.namespace !== undefined && involved.namespace !== ns) {
      throw invalid(
        "involvedObject.namespace",
        `Invalid value: "${String(involved.namespace)}": does not match event.namespace`,
        name,
      );
    }
    if (
      this.events.some((e) =>
        (e.metadata as Json).name === name && (e.metadata as Json).namespace === ns
      )
    ) {
      throw new HttpError(
        409,
        statusBody(409, "AlreadyExists", `events "${name}" already exists`, {
          name,
          kind: "events",
        }),
      );
    }
    const metadata: Json = { name };
    if (generateName) metadata.generateName = generateName;
    Object.assign(metadata, {
      namespace: ns,
      uid: crypto.randomUUID(),
      resourceVersion: String(++this.#rv),
      creationTimestamp: now(),
    });
    const stored: Json = {
      kind: "Event",
      apiVersion: "v1",
      metadata,
      involvedObject: involved,
      reason: ev.reason ?? "",
      message: ev.message ?? "",
      source: ev.source ?? {},
      firstTimestamp: ev.firstTimestamp ?? null,
      lastTimestamp: ev.lastTimestamp ?? null,
    };
    if (ev.count !== undefined) stored.count = ev.count;
    Object.assign(stored, {
      type: ev.type ?? "",
      eventTime: ev.eventTime ?? null,
      reportingComponent: ev.reportingComponent ?? "",
      reportingInstance: ev.reportingInstance ?? "",
    });
    this.events.push(stored);
    return stored;
  }
}

/** One open NAD or pod watch. */
interface Watcher {
  kind: "nads" | "pods";
  /** Whether an object is in this watch (its namespace, its field selector). */
  match: (o: Json) => boolean;
  res: ServerResponse;
  /** `allowWatchBookmarks=true` was asked. */
  bookmarks: boolean;
  /** Deadline timeout and bookmark interval (cleared with `clearTimeout`). */
  timers: ReturnType<typeof setTimeout>[];
}

/**
 * The type a filtered watch sees for a change (apiserver's cacher): in the filter before and
 * after → the event's own type; only after → ADDED; only before → DELETED; never → none.
 */
function filteredType(
  match: (o: Json) => boolean,
  ev: { type: string; object: Json; prev?: Json },
): string | undefined {
  const now = ev.type !== "DELETED" && match(ev.object);
  const before = ev.type === "DELETED" ? match(ev.prev ?? ev.object) : !!ev.prev && match(ev.prev);
  if (now && before) return ev.type;
  if (now) return "ADDED";
  if (before) return "DELETED";
  return undefined;
}

/** The pod fields kube-apiserver's field selector supports (`pkg/registry/core/pod` `ToSelectableFields`). */
const POD_FIELDS: Record<string, (p: Json) => string> = {
  "metadata.name": (p) => String((p.metadata as Json).name ?? ""),
  "metadata.namespace": (p) => String((p.metadata as Json).namespace ?? ""),
  "spec.nodeName": (p) => String((p.spec as Json | undefined)?.nodeName ?? ""),
  "spec.restartPolicy": (p) => String((p.spec as Json | undefined)?.restartPolicy ?? ""),
  "spec.schedulerName": (p) => String((p.spec as Json | undefined)?.schedulerName ?? ""),
  "spec.serviceAccountName": (p) => String((p.spec as Json | undefined)?.serviceAccountName ?? ""),
  "status.phase": (p) => String((p.status as Json | undefined)?.phase ?? ""),
};

/**
 * Parses a pod `fieldSelector` (`a=b,c!=d`; `=` and `==` alike) into a predicate.
 * @throws {HttpError} 400 `field label not supported: x` for another field, as apiserver does
 */
function podFieldSelector(text: string | null): (p: Json) => boolean {
  if (!text) return () => true;
  const terms = text.split(",").map((t) => {
    const m = /^([^!=]+)(==|=|!=)(.*)$/.exec(t.trim());
    if (!m) {
      throw new HttpError(
        400,
        statusBody(400, "BadRequest", `invalid field selector: ${JSON.stringify(t)}`),
      );
    }
    const field = POD_FIELDS[m[1]];
    if (!field) {
      throw new HttpError(400, statusBody(400, "BadRequest", `field label not supported: ${m[1]}`));
    }
    return { field, not: m[2] === "!=", value: m[3] };
  });
  return (p) => terms.every((t) => (t.field(p) === t.value) !== t.not);
}

/** Go's `strconv.ParseBool` true words, as apiserver parses `watch` and `allowWatchBookmarks`. */
/**
 * A `resource.k8s.io` object in the shape of `version`: ResourceSlice devices
 * (`v1` `{name, attributes, …}` ↔ `v1beta1` `{name, basic: {attributes, …}}`) and ResourceClaim
 * requests (`v1` `{name, exactly: {deviceClassName, …}}` ↔ `v1beta1` `{name, deviceClassName, …}`);
 * `apiVersion` set to match. Other fields are the same in both versions.
 */
function draConvert(obj: Json, version: string): Json {
  const from = String(obj.apiVersion ?? "").split("/")[1];
  obj.apiVersion = `${RESOURCE_GROUP}/${version}`;
  if (from === version) return obj;
  const spec = obj.spec as Json | undefined;
  if (obj.kind === "ResourceSlice" && Array.isArray(spec?.devices)) {
    spec.devices = (spec.devices as Json[]).map((d) => {
      if (version === "v1beta1") {
        const { name, ...basic } = d;
        return { name, basic };
      }
      const { name, basic } = d as { name: unknown; basic?: Json };
      return { name, ...basic };
    });
  }
  const devices = spec?.devices as Json | undefined;
  if (obj.kind === "ResourceClaim" && Array.isArray(devices?.requests)) {
    devices.requests = (devices.requests as Json[]).map((r) => {
      if (version === "v1beta1") {
        const { name, exactly, ...other } = r as { name: unknown; exactly?: Json };
        return { name, ...exactly, ...other };
      }
      const { name, firstAvailable, ...exactly } = r;
      return firstAvailable ? { name, firstAvailable } : { name, exactly };
    });
  }
  return obj;
}

function isTrue(v: string | null): boolean {
  return v !== null && ["1", "t", "T", "true", "TRUE", "True"].includes(v);
}

function methodNotAllowed(): HttpError {
  return new HttpError(
    405,
    statusBody(
      405,
      "MethodNotAllowed",
      "the server does not allow this method on the requested resource",
      {},
    ),
  );
}

/**
 * Starts a stand-in kube-apiserver on `https://127.0.0.1:<ephemeral port>` with a fresh
 * temp dir holding `ca.crt`, `client.crt`, `client.key` (certificates from
 * {@link defaultCertSet}, needs the `openssl` CLI). Stop it with `stop()`.
 *
 * @param opts `clientCertAuth` (default true): request and accept client certificates;
 *   `watchBookmarkIntervalMs`: periodic NAD watch bookmarks (default none).
 * @returns the running stand-in.
 * @throws Error when `openssl` is missing or the port cannot be bound.
 */
export async function startKubeApi(opts: StartKubeApiOptions = {}): Promise<KubeApiStandIn> {
  const s = new StandIn(
    await defaultCertSet(),
    opts.clientCertAuth ?? true,
    opts.watchBookmarkIntervalMs,
    opts.resourceVersions,
  );
  try {
    await s.start();
  } catch (err) {
    await s.stop();
    throw err;
  }
  return s;
}

/** The `labelSelector` of a pod list or watch as a predicate (fields: {@link podFieldSelector}). */
function podLabelSelector(url: URL): (o: Json) => boolean {
  const only = new URL(url.origin + url.pathname);
  const labels = url.searchParams.get("labelSelector");
  if (labels) only.searchParams.set("labelSelector", labels);
  return selectorFilter(only);
}
