/**
 * KEP-3698 (Multi-Network) objects as Manifold serves them: `PodNetwork` (cluster-scoped) and
 * `PodNetworkAttachment` (namespaced) in the CRD group `multinetwork.manifold.dev/v1alpha1`
 * (deploy/02-crd-multinetwork.yaml; no Kubernetes release serves these types and groups
 * under `*.k8s.io` need API approval). The shapes, REST paths and zod parsers of the fields
 * Manifold reads; answers are validated once, here, with loose objects (`raw` keeps the
 * original JSON, for a status write or a finalizer patch).
 *
 * Source: KEP-3698 "New Resources" (PodNetwork, PodNetworkAttachment, ParametersRef,
 * status conditions `Ready`/`ParamsReady`, the InUse finalizer).
 *
 * @module
 */

import { z } from "zod";
import { KubeError } from "./errors.ts";
import type { LabelSelector } from "./label_selector.ts";
import { tuneZod } from "../cni/decode.ts";

tuneZod(z);

/** The CRD group of Manifold's KEP-3698 objects. */
export const MULTINETWORK_GROUP = "multinetwork.manifold.dev";
/** The served version of both CRDs. */
export const MULTINETWORK_VERSION = "v1alpha1";
/** Plural resource name of PodNetwork (cluster-scoped). */
export const PODNETWORK_RESOURCE = "podnetworks";
/** Plural resource name of PodNetworkAttachment (namespaced). */
export const PODNETWORKATTACHMENT_RESOURCE = "podnetworkattachments";
/** The InUse finalizer (KEP-3698 "InUse state"): kept while a pod or attachment references the object. */
export const INUSE_FINALIZER = "multinetwork.manifold.dev/in-use";

/** `ParametersRef` (KEP-3698): a pointer to implementation-specific parameters. */
export interface ParametersRef {
  /** API group, e.g. `k8s.cni.cncf.io`. */
  group: string;
  /** Resource, e.g. `network-attachment-definitions`. */
  kind: string;
  /** Object name. */
  name: string;
  /** Object namespace, when the object is namespaced. */
  namespace?: string;
}

/** `metav1.Condition` as the API returns it (RFC 3339 `lastTransitionTime`). */
export interface Condition {
  /** `"Ready"` or `"ParamsReady"` here. */
  type: string;
  /** `"True"`, `"False"` or `"Unknown"`. */
  status: string;
  /** CamelCase reason, e.g. `"AdministrativelyDisabled"`. */
  reason?: string;
  /** Human-readable detail. */
  message?: string;
  /** RFC 3339 time the status last changed. */
  lastTransitionTime?: string;
  /** `metadata.generation` the condition was computed from. */
  observedGeneration?: number;
}

/** The metadata fields of a KEP-3698 object Manifold reads (namespace absent for PodNetwork). */
export interface MultiNetworkMeta {
  /** Object name. */
  name: string;
  /** Namespace (PodNetworkAttachment only). */
  namespace?: string;
  /** Server-assigned UID. */
  uid?: string;
  /** Opaque version, sent back as a precondition of finalizer patches. */
  resourceVersion?: string;
  /** Spec generation (bumped by spec changes). */
  generation?: number;
  /** Finalizers, e.g. {@link INUSE_FINALIZER}. */
  finalizers?: string[];
  /** RFC 3339; set once deletion was requested (finalizers pending). */
  deletionTimestamp?: string;
}

/** A PodNetwork (KEP-3698 `PodNetworkSpec`, `PodNetworkStatus`). */
export interface PodNetwork {
  /** Object metadata (no namespace). */
  metadata: MultiNetworkMeta;
  /** The KEP's `PodNetworkSpec`. */
  spec: {
    /** Administrative switch; the KEP's default is true. */
    enabled: boolean;
    /** Domain-prefixed implementation id, e.g. `manifold.dev/cni`; `""` when unset. */
    provider: string;
    /** Implementation-specific parameters. */
    parametersRefs: ParametersRef[];
    /**
     * Manifold's extension (not in KEP-3698): the namespaces whose pods and attachments may
     * use the network; absent means all.
     */
    allowedNamespaces?: LabelSelector;
  };
  /** The KEP's `PodNetworkStatus`. */
  status: { conditions: Condition[] };
  /** The object exactly as the API returned it. */
  raw: Record<string, unknown>;
}

/** A PodNetworkAttachment (KEP-3698 `PodNetworkAttachmentSpec`, `…Status`). */
export interface PodNetworkAttachment {
  /** Object metadata, with its namespace. */
  metadata: MultiNetworkMeta & { namespace: string };
  /** The KEP's `PodNetworkAttachmentSpec`. */
  spec: { podNetworkName: string; parametersRefs: ParametersRef[] };
  /** The KEP's `PodNetworkAttachmentStatus`. */
  status: { conditions: Condition[] };
  /** The object exactly as the API returned it. */
  raw: Record<string, unknown>;
}

function buildSchemas() {
  const meta = z.looseObject({
    name: z.string().min(1),
    namespace: z.string().optional(),
    uid: z.string().optional(),
    resourceVersion: z.string().optional(),
    generation: z.number().int().optional(),
    finalizers: z.array(z.string()).nullish(),
    deletionTimestamp: z.string().nullish(),
  });
  const ref = z.looseObject({
    group: z.string(),
    kind: z.string(),
    name: z.string().min(1),
    namespace: z.string().optional(),
  });
  const condition = z.looseObject({
    type: z.string(),
    status: z.string(),
    reason: z.string().optional(),
    message: z.string().optional(),
    lastTransitionTime: z.string().optional(),
    observedGeneration: z.number().int().optional(),
  });
  const status = z.looseObject({ conditions: z.array(condition).nullish() }).nullish();
  const selector = z.looseObject({
    matchLabels: z.record(z.string(), z.string()).nullish(),
    matchExpressions: z.array(z.looseObject({
      key: z.string(),
      operator: z.enum(["In", "NotIn", "Exists", "DoesNotExist"]),
      values: z.array(z.string()).nullish(),
    })).nullish(),
  });
  return {
    podNetwork: z.looseObject({
      metadata: meta,
      spec: z.looseObject({
        enabled: z.boolean().nullish(),
        provider: z.string().nullish(),
        parametersRefs: z.array(ref).nullish(),
        allowedNamespaces: selector.nullish(),
      }).nullish(),
      status,
    }),
    attachment: z.looseObject({
      metadata: meta.extend({ namespace: z.string().min(1) }),
      spec: z.looseObject({
        podNetworkName: z.string().min(1),
        parametersRefs: z.array(ref).nullish(),
      }),
      status,
    }),
  };
}

let cached: ReturnType<typeof buildSchemas> | undefined;
function schemas(): ReturnType<typeof buildSchemas> {
  return cached ??= buildSchemas();
}

function metaOf(m: z.infer<ReturnType<typeof buildSchemas>["podNetwork"]>["metadata"]) {
  const out: MultiNetworkMeta = { name: m.name };
  if (m.namespace) out.namespace = m.namespace;
  if (m.uid !== undefined) out.uid = m.uid;
  if (m.resourceVersion !== undefined) out.resourceVersion = m.resourceVersion;
  if (m.generation !== undefined) out.generation = m.generation;
  if (m.finalizers) out.finalizers = [...m.finalizers];
  if (m.deletionTimestamp) out.deletionTimestamp = m.deletionTimestamp;
  return out;
}

function refsOf(refs: ParametersRef[] | null | undefined): ParametersRef[] {
  return (refs ?? []).map((r) => {
    const out: ParametersRef = { group: r.group, kind: r.kind, name: r.name };
    if (r.namespace) out.namespace = r.namespace;
    return out;
  });
}

function decodingError(what: string, error: z.ZodError): KubeError {
  return new KubeError("decoding", `Invalid ${what} object`, { details: z.prettifyError(error) });
}

/**
 * Validates a PodNetwork as returned by `GET /apis/multinetwork.manifold.dev/v1alpha1/podnetworks/{name}`.
 * An absent `enabled` is true (the KEP's `+kubebuilder:default=true`); `allowedNamespaces`
 * (Manifold's extension) is kept when present.
 * @param raw the decoded JSON body.
 * @returns the PodNetwork; `raw` is the same object.
 * @throws {KubeError} `"decoding"` on a bad shape; `details` is the prettified zod error.
 * @example
 * ```ts
 * parsePodNetwork({ metadata: { name: "dataplane" }, spec: { provider: "manifold.dev/cni" } }).spec.enabled; // true
 * ```
 */
export function parsePodNetwork(raw: unknown): PodNetwork {
  const r = schemas().podNetwork.safeParse(raw);
  if (!r.success) throw decodingError("PodNetwork", r.error);
  const spec: PodNetwork["spec"] = {
    enabled: r.data.spec?.enabled ?? true,
    provider: r.data.spec?.provider ?? "",
    parametersRefs: refsOf(r.data.spec?.parametersRefs),
  };
  const sel = r.data.spec?.allowedNamespaces;
  if (sel) {
    spec.allowedNamespaces = {};
    if (sel.matchLabels) spec.allowedNamespaces.matchLabels = { ...sel.matchLabels };
    if (sel.matchExpressions) {
      spec.allowedNamespaces.matchExpressions = sel.matchExpressions.map((e) => ({
        key: e.key,
        operator: e.operator,
        ...(e.values ? { values: [...e.values] } : {}),
      }));
    }
  }
  return {
    metadata: metaOf(r.data.metadata),
    spec,
    status: { conditions: [...(r.data.status?.conditions ?? [])] },
    raw: raw as Record<string, unknown>,
  };
}

/**
 * Validates a PodNetworkAttachment as returned by
 * `GET /apis/multinetwork.manifold.dev/v1alpha1/namespaces/{ns}/podnetworkattachments/{name}`.
 * @param raw the decoded JSON body.
 * @returns the PodNetworkAttachment; `raw` is the same object.
 * @throws {KubeError} `"decoding"` on a bad shape (e.g. no `spec.podNetworkName`).
 * @example
 * ```ts
 * parsePodNetworkAttachment({
 *   metadata: { name: "fast", namespace: "default" }, spec: { podNetworkName: "dataplane" },
 * }).spec.podNetworkName; // "dataplane"
 * ```
 */
export function parsePodNetworkAttachment(raw: unknown): PodNetworkAttachment {
  const r = schemas().attachment.safeParse(raw);
  if (!r.success) throw decodingError("PodNetworkAttachment", r.error);
  return {
    metadata: { ...metaOf(r.data.metadata), namespace: r.data.metadata.namespace },
    spec: {
      podNetworkName: r.data.spec.podNetworkName,
      parametersRefs: refsOf(r.data.spec.parametersRefs),
    },
    status: { conditions: [...(r.data.status?.conditions ?? [])] },
    raw: raw as Record<string, unknown>,
  };
}

/**
 * REST path of PodNetworks, or of one with `name`.
 * @example
 * ```ts
 * podNetworkPath("dataplane"); // "/apis/multinetwork.manifold.dev/v1alpha1/podnetworks/dataplane"
 * ```
 */
export function podNetworkPath(name?: string): string {
  const base = `/apis/${MULTINETWORK_GROUP}/${MULTINETWORK_VERSION}/${PODNETWORK_RESOURCE}`;
  return name === undefined ? base : `${base}/${encodeURIComponent(name)}`;
}

/**
 * REST path of PodNetworkAttachments: all namespaces (no `namespace`), one namespace, or one
 * object.
 * @example
 * ```ts
 * podNetworkAttachmentPath("default", "fast");
 * // "/apis/multinetwork.manifold.dev/v1alpha1/namespaces/default/podnetworkattachments/fast"
 * ```
 */
export function podNetworkAttachmentPath(namespace?: string, name?: string): string {
  const root = `/apis/${MULTINETWORK_GROUP}/${MULTINETWORK_VERSION}`;
  if (namespace === undefined) return `${root}/${PODNETWORKATTACHMENT_RESOURCE}`;
  const base = `${root}/namespaces/${
    encodeURIComponent(namespace)
  }/${PODNETWORKATTACHMENT_RESOURCE}`;
  return name === undefined ? base : `${base}/${encodeURIComponent(name)}`;
}

/**
 * The condition of `type`, if present.
 * @example
 * ```ts
 * findCondition([{ type: "Ready", status: "True" }], "Ready")?.status; // "True"
 * ```
 */
export function findCondition(conditions: Condition[], type: string): Condition | undefined {
  return conditions.find((c) => c.type === type);
}
