/**
 * Dynamic Resource Allocation objects (group `resource.k8s.io`), the two reads Manifold makes:
 * `GET /apis/resource.k8s.io/{v}/namespaces/{ns}/resourceclaims/{name}` and
 * `GET /apis/resource.k8s.io/{v}/resourceslices?fieldSelector=spec.driver=…,spec.nodeName=…`.
 *
 * `{v}` is `v1` (Kubernetes ≥ 1.34) and, when the server does not serve it, `v1beta1`
 * (Kubernetes 1.32/1.33 with the `DynamicResourceAllocation` feature gate and
 * `--runtime-config=resource.k8s.io/v1beta1=true`). The version that answered is remembered for
 * the life of the process (`manifold daemon` asks once). An unserved version is told from a
 * missing object by the `Status` message: kube-apiserver answers an unserved group version with
 * 404 `the server could not find the requested resource` (empty `details`) and a missing claim
 * with 404 `resourceclaims.resource.k8s.io "x" not found`.
 *
 * Shapes read (both versions, validated with zod loose objects):
 * - ResourceClaim `status.allocation.devices.results[]`: `{request, driver, pool, device}`;
 * - ResourceSlice `spec.{driver, pool: {name, generation}, nodeName, devices[]}`, each device's
 *   attributes under `devices[].attributes` (v1) or `devices[].basic.attributes` (v1beta1), an
 *   attribute being one of `{string}`, `{int}`, `{bool}`, `{version}`.
 *
 * Loaded only for pods that have `spec.resourceClaims` and a device-backed NAD.
 *
 * @module
 */

import { z } from "zod";
import type { KubeClient } from "./client.ts";
import { isNotFound, KubeError } from "./errors.ts";
import { tuneZod } from "../cni/decode.ts";

tuneZod(z);

/** The DRA API group. */
export const RESOURCE_GROUP = "resource.k8s.io";
/** Versions tried, in order. */
export const RESOURCE_VERSIONS = ["v1", "v1beta1"] as const;
/** One of {@link RESOURCE_VERSIONS}. */
export type ResourceVersion = typeof RESOURCE_VERSIONS[number];

/** One allocated device of a claim (`DeviceRequestAllocationResult`). */
export interface DeviceAllocation {
  /** The claim's request (`"vf"`, or `"req/sub"` for a `firstAvailable` subrequest). */
  request: string;
  /** The DRA driver, e.g. `"sriov.example.com"`. */
  driver: string;
  /** The pool within the driver, e.g. the node name. */
  pool: string;
  /** The device's name within the pool, e.g. `"vf-0"`. */
  device: string;
}

/** A ResourceClaim as Manifold reads it. */
export interface ResourceClaim {
  /** `metadata.name`. */
  name: string;
  /** `metadata.namespace`. */
  namespace: string;
  /** False while `status.allocation` is absent (not yet allocated). */
  allocated: boolean;
  /** `status.allocation.devices.results`, `[]` when none. */
  results: DeviceAllocation[];
}

/** A device attribute value (`DeviceAttribute`: exactly one of the four is set). */
export type DeviceAttribute =
  | { string: string }
  | { int: number }
  | { bool: boolean }
  | { version: string };

/** One device of a ResourceSlice, attributes flattened from either API version. */
export interface SliceDevice {
  /** The device's name within its pool. */
  name: string;
  /** Attribute name (`"domain/id"` or a bare `"id"` of the driver's domain) → value. */
  attributes: Record<string, DeviceAttribute>;
}

/** A ResourceSlice as Manifold reads it. */
export interface ResourceSlice {
  /** `metadata.name`. */
  name: string;
  /** `spec.driver`. */
  driver: string;
  /** `spec.pool.name`. */
  pool: string;
  /** `spec.pool.generation`: only the highest generation of a pool is current. */
  generation: number;
  /** `spec.nodeName`, when the slice is node-local. */
  nodeName?: string;
  /** `spec.devices`, `[]` when none. */
  devices: SliceDevice[];
}

function buildSchemas() {
  const meta = z.looseObject({ name: z.string().min(1), namespace: z.string().optional() });
  const result = z.looseObject({
    request: z.string(),
    driver: z.string().min(1),
    pool: z.string().min(1),
    device: z.string().min(1),
  });
  const attribute = z.union([
    z.looseObject({ string: z.string() }),
    z.looseObject({ int: z.number() }),
    z.looseObject({ bool: z.boolean() }),
    z.looseObject({ version: z.string() }),
  ]);
  const attributes = z.record(z.string(), attribute).nullish();
  return {
    claim: z.looseObject({
      metadata: meta,
      status: z.looseObject({
        allocation: z.looseObject({
          devices: z.looseObject({ results: z.array(result).nullish() }).nullish(),
        }).nullish(),
      }).nullish(),
    }),
    slice: z.looseObject({
      metadata: meta,
      spec: z.looseObject({
        driver: z.string().min(1),
        pool: z.looseObject({ name: z.string().min(1), generation: z.number().int() }),
        nodeName: z.string().nullish(),
        devices: z.array(z.looseObject({
          name: z.string().min(1),
          attributes, // v1
          basic: z.looseObject({ attributes }).nullish(), // v1beta1
        })).nullish(),
      }),
    }),
    list: z.looseObject({ items: z.array(z.unknown()).nullish() }),
  };
}

let cached: ReturnType<typeof buildSchemas> | undefined;
function schemas(): ReturnType<typeof buildSchemas> {
  return cached ??= buildSchemas();
}

function decode<T>(schema: z.ZodType<T>, raw: unknown, what: string): T {
  const r = schema.safeParse(raw);
  if (!r.success) {
    throw new KubeError("decoding", `Invalid ${what} object`, {
      details: z.prettifyError(r.error),
    });
  }
  return r.data;
}

/**
 * Validates a ResourceClaim (`resource.k8s.io/v1` or `v1beta1`).
 * @param raw the decoded JSON body
 * @returns name, namespace, whether it is allocated, and the allocated devices
 * @throws {KubeError} `"decoding"` on a bad shape (details: the prettified zod error)
 * @example
 * ```ts
 * parseResourceClaim({ metadata: { name: "c", namespace: "ns" }, status: { allocation: {
 *   devices: { results: [{ request: "vf", driver: "d", pool: "p", device: "vf-0" }] } } } });
 * // { name: "c", namespace: "ns", allocated: true,
 * //   results: [{ request: "vf", driver: "d", pool: "p", device: "vf-0" }] }
 * ```
 */
export function parseResourceClaim(raw: unknown): ResourceClaim {
  const c = decode(schemas().claim, raw, "ResourceClaim");
  const allocation = c.status?.allocation;
  return {
    name: c.metadata.name,
    namespace: c.metadata.namespace ?? "",
    allocated: allocation !== undefined && allocation !== null,
    results: (allocation?.devices?.results ?? []).map((r) => ({
      request: r.request,
      driver: r.driver,
      pool: r.pool,
      device: r.device,
    })),
  };
}

/**
 * Validates a ResourceSlice of either version: attributes are read from `devices[].attributes`
 * (v1) or `devices[].basic.attributes` (v1beta1).
 * @param raw the decoded JSON object
 * @returns the slice with flat device attributes
 * @throws {KubeError} `"decoding"` on a bad shape
 * @example
 * ```ts
 * parseResourceSlice({ metadata: { name: "s" }, spec: { driver: "d", pool: { name: "p", generation: 1 },
 *   devices: [{ name: "vf-0", basic: { attributes: { "k8s.cni.cncf.io/deviceID": { string: "0000:18:02.3" } } } }] } })
 *   .devices[0].attributes; // { "k8s.cni.cncf.io/deviceID": { string: "0000:18:02.3" } }
 * ```
 */
export function parseResourceSlice(raw: unknown): ResourceSlice {
  const s = decode(schemas().slice, raw, "ResourceSlice");
  const slice: ResourceSlice = {
    name: s.metadata.name,
    driver: s.spec.driver,
    pool: s.spec.pool.name,
    generation: s.spec.pool.generation,
    devices: (s.spec.devices ?? []).map((d) => ({
      name: d.name,
      attributes: { ...(d.attributes ?? d.basic?.attributes ?? {}) } as Record<
        string,
        DeviceAttribute
      >,
    })),
  };
  if (s.spec.nodeName) slice.nodeName = s.spec.nodeName;
  return slice;
}

/** The version that answered in this process; tried first (alone) from then on. */
let served: ResourceVersion | undefined;

/**
 * The version of `resource.k8s.io` this process found served, if any yet.
 * @returns `"v1"`, `"v1beta1"` or undefined before the first answer
 */
export function servedResourceVersion(): ResourceVersion | undefined {
  return served;
}

/** Forgets the remembered version (tests that switch servers in one process). */
export function resetResourceVersion(): void {
  served = undefined;
}

/** The `Status.message` of a 404 for a missing object of this group (not an unserved version). */
const OBJECT_NOT_FOUND = /^[a-z]+\.resource\.k8s\.io ".*" not found$/;

/**
 * A 404 meaning "this group version is not served" (kube-apiserver: `the server could not find
 * the requested resource`; a proxy's plain `404 page not found` counts too), not "this object
 * does not exist".
 */
function unserved(e: unknown): boolean {
  return isNotFound(e) && !OBJECT_NOT_FOUND.test((e as KubeError).details);
}

async function eachVersion<T>(call: (v: ResourceVersion) => Promise<T>): Promise<T> {
  const versions = served ? [served] : RESOURCE_VERSIONS;
  let last: unknown;
  for (const v of versions) {
    try {
      const out = await call(v);
      served = v;
      return out;
    } catch (e) {
      if (!unserved(e)) {
        if (isNotFound(e)) served = v; // served, the object is missing
        throw e;
      }
      last = e;
    }
  }
  throw last;
}

function segment(what: string, value: string): string {
  if (!value || value === "." || value === ".." || /[/%]/.test(value)) {
    throw new KubeError("config", `Invalid ${what} name ${JSON.stringify(value)}`);
  }
  return encodeURIComponent(value);
}

/**
 * Reads a ResourceClaim, `v1` first, `v1beta1` when `v1` is not served (see the module text).
 * @param kube the client
 * @param namespace the pod's namespace
 * @param name the claim's name (`spec.resourceClaims[].resourceClaimName`, or the generated
 *   name from `status.resourceClaimStatuses[].resourceClaimName`)
 * @returns the claim, or undefined when it does not exist
 * @throws {KubeError} as every call (403 without `get` on resourceclaims; a 404 when no version
 *   of the group is served), `"decoding"` on a bad shape
 */
export async function getResourceClaim(
  kube: KubeClient,
  namespace: string,
  name: string,
): Promise<ResourceClaim | undefined> {
  const path = (v: ResourceVersion) =>
    `/apis/${RESOURCE_GROUP}/${v}/namespaces/${segment("namespace", namespace)}/resourceclaims/${
      segment("resourceclaim", name)
    }`;
  try {
    return await eachVersion(async (v) => parseResourceClaim(await kube.send("GET", path(v))));
  } catch (e) {
    if (isNotFound(e) && !unserved(e)) return undefined;
    throw e;
  }
}

/** Filter of {@link listResourceSlices} (server-side field selectors). */
export interface SliceFilter {
  /** `spec.driver`. */
  driver: string;
  /** `spec.nodeName`; absent: every node's slices of the driver. */
  nodeName?: string;
}

/**
 * Lists the ResourceSlices of one driver (and node), `v1` first, `v1beta1` when `v1` is not
 * served; one request (slices of one node and driver are few).
 * @param kube the client
 * @param filter driver and node
 * @returns the slices in API order
 * @throws {KubeError} as every call (403 without `list` on resourceslices), `"decoding"`
 */
export async function listResourceSlices(
  kube: KubeClient,
  filter: SliceFilter,
): Promise<ResourceSlice[]> {
  const selector = [`spec.driver=${filter.driver}`];
  if (filter.nodeName) selector.push(`spec.nodeName=${filter.nodeName}`);
  return await eachVersion(async (v) => {
    const raw = await kube.list(`/apis/${RESOURCE_GROUP}/${v}/resourceslices`, {
      fieldSelector: selector.join(","),
    });
    const list = decode(schemas().list, raw, "ResourceSliceList");
    return (list.items ?? []).map((item, i) => {
      try {
        return parseResourceSlice(item);
      } catch (e) {
        throw e instanceof KubeError ? e.withSuffix(` at items[${i}]`) : e;
      }
    });
  });
}
