/**
 * The few Kubernetes object shapes Manifold reads: a Pod's metadata (name, namespace,
 * uid, resourceVersion, annotations) and a NetworkAttachmentDefinition's
 * `spec.config` (NPWG v1.3 §3). Answers from the API are validated once, here, as zod loose
 * objects would be — written out by hand, with zod's issue text, so a call that reads a pod
 * or a NAD never loads zod (issue 30); the original JSON survives untouched in `raw`. The zod
 * schemas they replace are the reference of the fuzz target `k8sobjects`
 * (tests/fuzz/fast_checks_api.ts), which keeps both agreeing (acceptance, value, error text).
 *
 * @module
 */

import { KubeError } from "./errors.ts";
import { type ShapeIssue, zodDetails, zodReceived } from "../cni/decode.ts";
import { isPlainObject as isObject } from "../cni/netconf_checks.ts";

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

/** What zod's record schemas accept (its `isPlainObject`, for JSON values). */
function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (!isObject(v)) return false;
  const ctor = (v as { constructor?: unknown }).constructor;
  if (ctor === undefined || typeof ctor !== "function") return true;
  const prot = (ctor as { prototype?: unknown }).prototype;
  return isObject(prot) && Object.hasOwn(prot, "isPrototypeOf");
}

function typeIssue(expected: string, v: unknown, path: (string | number)[]): ShapeIssue {
  return { message: `Invalid input: expected ${expected}, received ${zodReceived(v)}`, path };
}

/** `z.string().min(1)`: zod runs the length check on anything with a `length`, typed or not. */
function nonEmptyString(v: unknown, path: (string | number)[], issues: ShapeIssue[]): void {
  if (typeof v !== "string") issues.push(typeIssue("string", v, path));
  const length = v === null || v === undefined ? undefined : (v as { length?: unknown }).length;
  if (length !== undefined && !((length as number) >= 1)) {
    const origin = Array.isArray(v) ? "array" : typeof v === "string" ? "string" : "unknown";
    const sized = origin === "string" ? " characters" : origin === "array" ? " items" : "";
    const verb = sized ? "to have" : "to be";
    issues.push({ message: `Too small: expected ${origin} ${verb} >=1${sized}`, path });
  }
}

/**
 * Checks `metadata` as the ObjectMeta schema does (name and namespace non-empty strings, uid
 * and resourceVersion strings, annotations an object of strings or null) and returns it as
 * {@link ObjectMeta}; pushes zod's issues otherwise.
 */
function checkMeta(m: unknown, issues: ShapeIssue[]): ObjectMeta | undefined {
  if (!isObject(m)) {
    issues.push(typeIssue("object", m, ["metadata"]));
    return undefined;
  }
  const before = issues.length;
  nonEmptyString(m.name, ["metadata", "name"], issues);
  nonEmptyString(m.namespace, ["metadata", "namespace"], issues);
  for (const key of ["uid", "resourceVersion"]) {
    if (m[key] !== undefined && typeof m[key] !== "string") {
      issues.push(typeIssue("string", m[key], ["metadata", key]));
    }
  }
  const a = m.annotations;
  let annotations: Record<string, string> | undefined;
  if (a !== undefined && a !== null) {
    if (!isPlainObject(a)) issues.push(typeIssue("record", a, ["metadata", "annotations"]));
    else {
      annotations = {};
      for (const key of Reflect.ownKeys(a) as string[]) {
        if (key === "__proto__") continue; // zod's record leaves it out
        const v = a[key];
        if (typeof v === "string") annotations[key] = v;
        else issues.push(typeIssue("string", v, ["metadata", "annotations", key]));
      }
    }
  }
  if (issues.length > before) return undefined;
  const meta: ObjectMeta = { name: m.name as string, namespace: m.namespace as string };
  if (m.uid !== undefined) meta.uid = m.uid as string;
  if (m.resourceVersion !== undefined) meta.resourceVersion = m.resourceVersion as string;
  if (annotations) meta.annotations = annotations;
  return meta;
}

/** The decoding error of a bad shape, details in zod's words (`zodDetails`). */
function shapeError(what: string, issues: ShapeIssue[]): KubeError {
  return new KubeError("decoding", what, { details: zodDetails({ issues }) });
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
  if (!isObject(raw)) throw shapeError("Invalid Pod object", [typeIssue("object", raw, [])]);
  const issues: ShapeIssue[] = [];
  const metadata = checkMeta(raw.metadata, issues);
  if (!metadata) throw shapeError("Invalid Pod object", issues);
  return { metadata, raw };
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
  const what = "Invalid NetworkAttachmentDefinition object";
  if (!isObject(raw)) throw shapeError(what, [typeIssue("object", raw, [])]);
  const issues: ShapeIssue[] = [];
  const metadata = checkMeta(raw.metadata, issues);
  const s = raw.spec;
  const spec: { config?: string } = {};
  if (s !== undefined && s !== null) {
    if (!isObject(s)) issues.push(typeIssue("object", s, ["spec"]));
    else if (s.config !== undefined && typeof s.config !== "string") {
      issues.push(typeIssue("string", s.config, ["spec", "config"]));
    } else if (s.config !== undefined) spec.config = s.config as string;
  }
  if (!metadata || issues.length > 0) throw shapeError(what, issues);
  return { metadata, spec, raw };
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
  if (!isObject(raw)) throw shapeError("Invalid list object", [typeIssue("object", raw, [])]);
  const items = raw.items;
  if (items !== undefined && items !== null && !Array.isArray(items)) {
    throw shapeError("Invalid list object", [typeIssue("array", items, ["items"])]);
  }
  return ((items ?? []) as unknown[]).map((item, i) => {
    try {
      return parseItem(item);
    } catch (err) {
      throw err instanceof KubeError ? err.withSuffix(` at items[${i}]`) : err;
    }
  });
}
