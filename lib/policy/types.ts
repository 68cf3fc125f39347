/**
 * The objects MultiNetworkPolicy enforcement reads, validated with zod at the edge:
 * `MultiNetworkPolicy` (`k8s.cni.cncf.io/v1beta1`, spec as `networking.k8s.io/v1`
 * NetworkPolicy), its `k8s.v1.cni.cncf.io/policy-for` annotation, Namespaces (labels) and
 * Pods (labels, node, container ports, `k8s.v1.cni.cncf.io/network-status`).
 *
 * Parsing separates identity from content: an object without a name/namespace is rejected
 * ({@link PolicyParseError}); a policy whose spec or annotation is invalid is kept with the
 * problem recorded, so the engine can fail closed for the pods it selects. The spec itself
 * (what is accepted, with which meaning) is spec.ts.
 *
 * @module
 */

import { z } from "zod";
import { type Isolation, type PolicySpec, policySpecSchema, salvageIsolation } from "./spec.ts";
import { tuneZod } from "../cni/decode.ts";

tuneZod(z);

/** API group of MultiNetworkPolicy (upstream k8snetworkplumbingwg/multi-networkpolicy). */
export const MNP_GROUP = "k8s.cni.cncf.io";
/** Served version of the MultiNetworkPolicy CRD. */
export const MNP_VERSION = "v1beta1";
/** Plural resource name, as in REST paths. */
export const MNP_RESOURCE = "multi-networkpolicies";
/** Annotation binding a policy to networks: comma list of `name` or `ns/name` NADs. */
export const POLICY_FOR_ANNOTATION = "k8s.v1.cni.cncf.io/policy-for";
/** The network-status annotation (NPWG v1.3 §5). */
export const NETWORK_STATUS_ANNOTATION = "k8s.v1.cni.cncf.io/network-status";

/** Thrown when an object cannot even be identified (no name/namespace). */
export class PolicyParseError extends Error {
  /** The prettified zod error (or the JSON error). */
  readonly details: string;

  /**
   * An object that cannot be identified or decoded.
   *
   * @param message what is wrong
   * @param details the prettified zod error
   */
  constructor(message: string, details: string) {
    super(message);
    this.name = "PolicyParseError";
    this.details = details;
  }
}

const labels = z.record(z.string(), z.string());

const meta = z.looseObject({
  name: z.string().min(1),
  namespace: z.string().min(1),
  uid: z.string().optional(),
  labels: labels.nullish(),
  annotations: labels.nullish(),
});

const namespaceMeta = z.looseObject({ name: z.string().min(1), labels: labels.nullish() });

/** A MultiNetworkPolicy as the engine uses it. */
export interface MultiNetworkPolicy {
  /** `metadata.namespace`. */
  namespace: string;
  /** `metadata.name`. */
  name: string;
  /** The spec, or `null` when it is invalid (see `specError`). */
  spec: PolicySpec | null;
  /** Prettified zod error of an invalid spec. */
  specError?: string;
  /** When `spec` is `null`: the pods and directions it still isolates, with no allows. */
  isolation?: Isolation;
  /** The `policy-for` annotation's raw value; `undefined` when absent. */
  policyFor?: string;
}

/** A Namespace: name and labels. */
export interface NamespaceInfo {
  /** `metadata.name`. */
  name: string;
  /** `metadata.labels` (`{}` when none). */
  labels: Record<string, string>;
}

/** One entry of a pod's network-status, reduced to what policy needs. */
export interface PodAttachment {
  /** Status name: `"ns/nad"` for secondary networks (NPWG v1.3 §5.3.1). */
  network: string;
  /** Interface name inside the pod, e.g. `"net1"`. */
  ifName: string;
  /** Addresses without prefix length, canonical text (`"10.1.2.3"`, `"fd00::1"`). */
  ips: string[];
  /** Whether this is the cluster default network. */
  isDefault: boolean;
}

/** A named container port (`spec.containers[].ports[]`) for named-port resolution. */
export interface ContainerPort {
  /** The port's `name`. */
  name: string;
  /** `containerPort`. */
  port: number;
  /** `protocol` (default TCP). */
  protocol: "TCP" | "UDP" | "SCTP";
}

/** A Pod as the engine uses it. */
export interface PodInfo {
  /** `metadata.namespace`. */
  namespace: string;
  /** `metadata.name`. */
  name: string;
  /** `metadata.uid`. */
  uid?: string;
  /** `spec.nodeName`: the node it runs on. */
  nodeName?: string;
  /** `metadata.labels` (`{}` when none). */
  labels: Record<string, string>;
  /** Named container ports. */
  ports: ContainerPort[];
  /** Its attachments from network-status, or `null` when the annotation is unreadable. */
  attachments: PodAttachment[] | null;
  /** Why `attachments` is `null` (zod or JSON error text). */
  statusError?: string;
  /** `Succeeded`/`Failed` pods hold no addresses any more. */
  finished: boolean;
}

const statusEntry = z.looseObject({
  name: z.string(),
  interface: z.string().optional(),
  ips: z.array(z.string()).nullish(),
  default: z.boolean().nullish(),
});
/** Built once: a schema built per call cost more than the rest of a pod's decoding. */
const statusList = z.array(statusEntry);

const podSchema = z.looseObject({
  metadata: meta,
  spec: z.looseObject({
    nodeName: z.string().nullish(),
    containers: z.array(z.looseObject({
      ports: z.array(z.looseObject({
        name: z.string().nullish(),
        containerPort: z.number().int(),
        protocol: z.enum(["TCP", "UDP", "SCTP"]).nullish(),
      })).nullish(),
    })).nullish(),
  }).nullish(),
  status: z.looseObject({ phase: z.string().nullish() }).nullish(),
});

function fail(what: string, error: z.ZodError): never {
  throw new PolicyParseError(`Invalid ${what} object`, z.prettifyError(error));
}

/**
 * Validates a MultiNetworkPolicy object from the API (`k8s.cni.cncf.io/v1beta1`).
 *
 * @param raw the decoded JSON object
 * @returns the policy; an invalid `spec` gives `spec: null`, `specError` and `isolation`
 *   (never thrown: the engine isolates what it selects, with no allows)
 * @throws {PolicyParseError} when `metadata.name`/`namespace` are missing
 * @example
 * ```ts
 * parseMultiNetworkPolicy({
 *   metadata: { name: "p", namespace: "a", annotations: { "k8s.v1.cni.cncf.io/policy-for": "net1" } },
 *   spec: { podSelector: {} },
 * }).policyFor // "net1"
 * ```
 */
export function parseMultiNetworkPolicy(raw: unknown): MultiNetworkPolicy {
  const m = z.looseObject({ metadata: meta, spec: z.unknown() }).safeParse(raw);
  if (!m.success) fail("MultiNetworkPolicy", m.error);
  const { name, namespace, annotations } = m.data.metadata;
  const out: MultiNetworkPolicy = { namespace, name, spec: null };
  const policyFor = annotations?.[POLICY_FOR_ANNOTATION];
  if (policyFor !== undefined) out.policyFor = policyFor;
  const s = policySpecSchema.safeParse(m.data.spec);
  if (s.success) out.spec = s.data;
  else {
    out.specError = z.prettifyError(s.error);
    out.isolation = salvageIsolation(m.data.spec);
  }
  return out;
}

/**
 * Parses the `k8s.v1.cni.cncf.io/policy-for` annotation: a comma list of NAD references,
 * `name` (in the policy's namespace) or `ns/name`, spaces around items ignored.
 *
 * @param value the annotation value
 * @param policyNamespace namespace for bare names
 * @returns network status names `"ns/name"`, sorted and de-duplicated; `null` when an item
 *   is malformed (empty, more than one `/`, not a DNS-1123 name)
 * @example parsePolicyFor("net1, other/net2", "a") // ["a/net1", "other/net2"]
 */
export function parsePolicyFor(value: string, policyNamespace: string): string[] | null {
  const dns = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;
  const out = new Set<string>();
  for (const item of value.split(",").map((s) => s.trim())) {
    const parts = item.split("/");
    if (parts.length > 2 || !parts.every((p) => dns.test(p))) return null;
    out.add(parts.length === 2 ? item : `${policyNamespace}/${item}`);
  }
  return out.size ? [...out].sort() : null;
}

/**
 * Validates a Namespace object (`GET /api/v1/namespaces/{name}`).
 *
 * @param raw the decoded JSON object
 * @returns name and labels (`{}` when none)
 * @throws {PolicyParseError} when `metadata.name` is missing or a label is not a string
 * @example parseNamespace({ metadata: { name: "a", labels: { team: "x" } } }) // {name:"a",labels:{team:"x"}}
 */
export function parseNamespace(raw: unknown): NamespaceInfo {
  const r = z.looseObject({ metadata: namespaceMeta }).safeParse(raw);
  if (!r.success) fail("Namespace", r.error);
  return { name: r.data.metadata.name, labels: { ...r.data.metadata.labels } };
}

/** Strips a prefix length and canonicalises IPv6 case: `"10.1.2.3/24"` → `"10.1.2.3"`. */
function bareIp(ip: string): string {
  const slash = ip.indexOf("/");
  return (slash < 0 ? ip : ip.slice(0, slash)).toLowerCase();
}

/**
 * Parses a network-status annotation value into attachments (NPWG v1.3 §5.3): entries
 * without `interface` are skipped (nothing to filter on), addresses lose their prefix.
 *
 * @param value the annotation's JSON text
 * @returns attachments in annotation order
 * @throws {PolicyParseError} when the text is not a JSON array of entries with a `name`
 * @example
 * ```ts
 * parseAttachments('[{"name":"a/net1","interface":"net1","ips":["10.1.0.2/24"]}]')
 * // [{ network: "a/net1", ifName: "net1", ips: ["10.1.0.2"], isDefault: false }]
 * ```
 */
export function parseAttachments(value: string): PodAttachment[] {
  let json: unknown;
  try {
    json = JSON.parse(value);
  } catch (e) {
    throw new PolicyParseError("Invalid network-status annotation", String(e));
  }
  const r = statusList.safeParse(json);
  if (!r.success) fail("network-status", r.error);
  return statusAttachments(r.data);
}

/**
 * Network-status entries (NPWG v1.3 §5.3) already decoded — the annotation's, or the ones
 * Manifold keeps in its attachment cache — as attachments: entries without `interface` are
 * skipped, addresses lose their prefix.
 *
 * @param entries the entries, in order
 * @returns attachments in entry order
 * @example
 * ```ts
 * statusAttachments([{ name: "a/net1", interface: "net1", ips: ["10.1.0.2/24"] }])
 * // [{ network: "a/net1", ifName: "net1", ips: ["10.1.0.2"], isDefault: false }]
 * ```
 */
export function statusAttachments(
  entries: readonly {
    name: string;
    interface?: string;
    ips?: string[] | null;
    default?: boolean | null;
  }[],
): PodAttachment[] {
  return entries.filter((e) => e.interface).map((e) => ({
    network: e.name,
    ifName: e.interface!,
    ips: (e.ips ?? []).map(bareIp),
    isDefault: e.default === true,
  }));
}

/**
 * Validates a Pod object: identity, labels, node, named container ports, phase and its
 * network-status. An unreadable network-status does not throw: `attachments` is `null` and
 * the engine fails closed for the pod when a policy selects it.
 *
 * @param raw the decoded JSON object
 * @returns the pod; no network-status annotation gives `attachments: []`
 * @throws {PolicyParseError} when `metadata.name`/`namespace` are missing or labels are not strings
 * @example parsePod({ metadata: { name: "p", namespace: "a" } }).attachments // []
 */
export function parsePod(raw: unknown): PodInfo {
  const r = podSchema.safeParse(raw);
  if (!r.success) fail("Pod", r.error);
  const { metadata, spec, status } = r.data;
  const pod: PodInfo = {
    namespace: metadata.namespace,
    name: metadata.name,
    labels: { ...metadata.labels },
    ports: (spec?.containers ?? []).flatMap((c) => c.ports ?? []).filter((p) => p.name).map(
      (p) => ({ name: p.name!, port: p.containerPort, protocol: p.protocol ?? "TCP" }),
    ),
    attachments: [],
    finished: status?.phase === "Succeeded" || status?.phase === "Failed",
  };
  if (metadata.uid !== undefined) pod.uid = metadata.uid;
  if (spec?.nodeName) pod.nodeName = spec.nodeName;
  const ns = metadata.annotations?.[NETWORK_STATUS_ANNOTATION];
  if (ns !== undefined) {
    try {
      pod.attachments = parseAttachments(ns);
    } catch (e) {
      pod.attachments = null;
      pod.statusError = e instanceof PolicyParseError ? `${e.message}: ${e.details}` : String(e);
    }
  }
  return pod;
}
