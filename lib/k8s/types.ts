/**
 * The few Kubernetes object shapes Manifold reads: a Pod's metadata (name, namespace,
 * uid, resourceVersion, annotations) and a NetworkAttachmentDefinition's
 * `spec.config` (NPWG v1.3 §3). Answers from the API are validated once, here, with
 * zod loose objects so the original JSON survives untouched in `raw`.
 *
 * @module
 */

import { z } from "zod";
import { KubeError } from "./errors.ts";
import { tuneZod } from "../cni/decode.ts";

tuneZod(z);

/** API group of NetworkAttachmentDefinition (NPWG v1.3 §3.1). */
export const NAD_GROUP = "k8s.cni.cncf.io";
/** Version of the NetworkAttachmentDefinition CRD (NPWG v1.3 §3.1). */
export const NAD_VERSION = "v1";
/** Plural resource name of NetworkAttachmentDefinition, as in REST paths. */
export const NAD_RESOURCE = "network-attachment-definitions";

/**
 * The metadata fields Manifold reads (`k8s.io/apimachinery ObjectMeta`).
 * `resourceVersion` is an opaque string; annotations map string keys to string values.
 */
export interface ObjectMeta {
  /** `metadata.name`. */
  name: string;
  /** `metadata.namespace`. */
  namespace: string;
  /** `metadata.uid`, e.g. `"9b1c0a3e-…"`. */
  uid?: string;
  /** `metadata.resourceVersion`, opaque. */
  resourceVersion?: string;
  /** `metadata.annotations`. */
  annotations?: Record<string, string>;
}

/** A Pod: the validated metadata plus the complete original JSON object in `raw`. */
export interface Pod {
  /** The validated metadata. */
  metadata: ObjectMeta;
  /** The Pod exactly as the API returned it (kind, spec, status… unknown keys kept). */
  raw: Record<string, unknown>;
}

/**
 * A NetworkAttachmentDefinition (NPWG v1.3 §3): `spec.config` is the delegate's CNI
 * configuration as a JSON string, absent when the delegate config comes from a file
 * named after the NAD (§3.2.1).
 */
export interface NetworkAttachmentDefinition {
  /** The validated metadata. */
  metadata: ObjectMeta;
  /** `spec.config`: the delegate's CNI configuration as JSON text, when set. */
  spec: { config?: string };
  /** The object exactly as the API returned it (unknown keys kept). */
  raw?: Record<string, unknown>;
}

/**
 * The schemas, built on first use: constructing zod schemas costs a few ms, which a
 * CNI invocation that never talks to Kubernetes (VERSION, STATUS) should not pay.
 */
function buildSchemas() {
  const objectMeta = z.looseObject({
    name: z.string().min(1),
    namespace: z.string().min(1),
    uid: z.string().optional(),
    resourceVersion: z.string().optional(),
    annotations: z.record(z.string(), z.string()).nullish(),
  });
  return {
    objectMeta,
    pod: z.looseObject({ metadata: objectMeta }),
    nad: z.looseObject({
      metadata: objectMeta,
      spec: z.looseObject({ config: z.string().optional() }).nullish(),
    }),
    list: z.looseObject({ items: z.array(z.unknown()).nullish() }),
  };
}

let cachedSchemas: ReturnType<typeof buildSchemas> | undefined;
function schemas(): ReturnType<typeof buildSchemas> {
  return cachedSchemas ??= buildSchemas();
}

function toMeta(m: z.infer<ReturnType<typeof buildSchemas>["objectMeta"]>): ObjectMeta {
  const meta: ObjectMeta = { name: m.name, namespace: m.namespace };
  if (m.uid !== undefined) meta.uid = m.uid;
  if (m.resourceVersion !== undefined) meta.resourceVersion = m.resourceVersion;
  if (m.annotations) meta.annotations = { ...m.annotations };
  return meta;
}

/**
 * Validates a Pod object as returned by `GET /api/v1/namespaces/{ns}/pods/{name}`.
 *
 * @param raw the decoded JSON body.
 * @returns the Pod with validated metadata; `raw` is the same object, unmodified.
 * @throws {KubeError} `"decoding"` when metadata.name/namespace are missing
 *   or an annotation value is not a string; `details` is the prettified zod error.
 * @example
 * ```ts
 * parsePod({ metadata: { name: "p", namespace: "default", annotations: { a: "b" } } }).metadata.annotations
 * // { a: "b" }
 * ```
 */
export function parsePod(raw: unknown): Pod {
  const r = schemas().pod.safeParse(raw);
  if (!r.success) {
    throw new KubeError("decoding", "Invalid Pod object", { details: z.prettifyError(r.error) });
  }
  return { metadata: toMeta(r.data.metadata), raw: raw as Record<string, unknown> };
}

/**
 * Validates a NetworkAttachmentDefinition object (NPWG v1.3 §3); a missing `spec`
 * becomes `{}`.
 *
 * @param raw the decoded JSON body.
 * @returns the NetworkAttachmentDefinition; `spec.config` is left as the JSON string
 *   it is on the wire (it is parsed later, where its CNI version is known).
 * @throws {KubeError} `"decoding"` on a bad shape (e.g. `spec.config` not a
 *   string); `details` is the prettified zod error.
 * @example
 * ```ts
 * parseNetworkAttachmentDefinition({
 *   metadata: { name: "macvlan-conf", namespace: "default" },
 *   spec: { config: '{"cniVersion":"1.0.0","type":"macvlan"}' },
 * }).spec.config // '{"cniVersion":"1.0.0","type":"macvlan"}'
 * ```
 */
export function parseNetworkAttachmentDefinition(raw: unknown): NetworkAttachmentDefinition {
  const r = schemas().nad.safeParse(raw);
  if (!r.success) {
    throw new KubeError("decoding", "Invalid NetworkAttachmentDefinition object", {
      details: z.prettifyError(r.error),
    });
  }
  const spec: { config?: string } = {};
  if (r.data.spec?.config !== undefined) spec.config = r.data.spec.config;
  return { metadata: toMeta(r.data.metadata), spec, raw: raw as Record<string, unknown> };
}

/**
 * Validates a `…List` answer (`{"items": [...]}`) and parses each item.
 *
 * @param raw the decoded JSON body of a list request.
 * @param parseItem the per-item parser, e.g. {@link parseNetworkAttachmentDefinition}.
 * @returns the parsed items in API order; `items: null` gives `[]`.
 * @throws {KubeError} `"decoding"` when the body is not a list or an item is invalid
 *   (`msg` names the item index).
 */
export function parseList<T>(raw: unknown, parseItem: (item: unknown) => T): T[] {
  const r = schemas().list.safeParse(raw);
  if (!r.success) {
    throw new KubeError("decoding", "Invalid list object", { details: z.prettifyError(r.error) });
  }
  return (r.data.items ?? []).map((item, i) => {
    try {
      return parseItem(item);
    } catch (err) {
      throw err instanceof KubeError ? err.withSuffix(` at items[${i}]`) : err;
    }
  });
}
