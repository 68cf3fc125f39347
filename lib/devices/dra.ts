/**
 * Devices from Dynamic Resource Allocation, Multus's contract (multus-cni PR #1078, #1492): a
 * NAD annotated `k8s.v1.cni.cncf.io/resourceName: R` takes a device that a ResourceClaim of the
 * pod allocated and whose ResourceSlice entry carries the attributes
 * `k8s.cni.cncf.io/resourceName` = R and `k8s.cni.cncf.io/deviceID` (the PCI address, or any
 * ID the delegate understands). The chain:
 *
 * pod `spec.resourceClaims[]` (`resourceClaimName`, or `resourceClaimTemplateName` with the
 * generated name in `status.resourceClaimStatuses[]`) → ResourceClaim
 * `status.allocation.devices.results[]` (driver, pool, device, request) → the device of that
 * name in the driver's ResourceSlices of the pod's node (highest pool generation) → its two
 * attributes.
 *
 * Which path gives a NAD its device (decided once, before any delegate runs):
 * - a pod without `spec.resourceClaims`: the kubelet path only (pod-resources, checkpoint),
 *   unchanged — and this module is never loaded;
 * - a pod with claims: a NAD whose resource R is carried by some allocated device gets those
 *   devices, one per attachment, in the order of `spec.resourceClaims` then of the claim's
 *   results; a NAD whose R no allocated device carries falls back to the kubelet path (a pod may
 *   mix DRA and device plugins); when neither has a device, ADD fails.
 *
 * Errors (all CNI code 7, raised before any delegate runs; each names the pod, the claim, the
 * NAD and the device): a claim that does not exist, is not generated yet or is not allocated;
 * an allocated device carrying R but no `k8s.cni.cncf.io/deviceID`; more attachments of R than
 * devices of R (two NADs competing for one device); no device of R at all. Allocated devices
 * without the resourceName attribute (a GPU in the same claim) and results missing from every
 * slice are skipped, as Multus does.
 *
 * @module
 */

import { z } from "zod";
import { CniError, CniErrorCode, toCniError } from "../cni/errors.ts";
import type { ResourceClaim, ResourceSlice, SliceFilter } from "../k8s/resource.ts";
import { tuneZod } from "../cni/decode.ts";

tuneZod(z);

/** Device attribute naming the NAD resource a device serves (Multus DRA contract). */
export const DRA_RESOURCE_NAME_ATTRIBUTE = "k8s.cni.cncf.io/resourceName";
/** Device attribute carrying the ID handed to the delegate as `deviceID` (Multus DRA contract). */
export const DRA_DEVICE_ID_ATTRIBUTE = "k8s.cni.cncf.io/deviceID";

/** Reads the DRA objects (the Kubernetes API; fakes in tests). */
export interface DraSource {
  /**
   * One ResourceClaim.
   * @returns undefined when it does not exist
   * @throws {CniError} 7/11 as every API read (403 without RBAC, API unreachable)
   */
  claim(namespace: string, name: string): Promise<ResourceClaim | undefined>;
  /**
   * The ResourceSlices of a driver (on a node).
   * @throws {CniError} 7/11 as every API read
   */
  slices(filter: SliceFilter): Promise<ResourceSlice[]>;
}

/** The pod's claims, from its `spec` and `status`. */
export interface PodClaims {
  /** `metadata.namespace`. */
  namespace: string;
  /** `metadata.name`. */
  name: string;
  /** `spec.nodeName`: ResourceSlices are listed for this node. */
  nodeName?: string;
  /** `spec.resourceClaims[]`, in order. */
  claims: { name: string; resourceClaimName?: string; resourceClaimTemplateName?: string }[];
  /** `status.resourceClaimStatuses[]`: entry name → generated claim name (null: none needed). */
  generated: Map<string, string | null>;
}

/** One allocated device as the delegate gets it. */
export interface DraDevice {
  /** The ResourceClaim's name. */
  claim: string;
  /** The claim's request that got the device. */
  request: string;
  /** `driver/pool/device`, the device's identity in messages. */
  device: string;
  /** Attribute `k8s.cni.cncf.io/resourceName`, when set. */
  resourceName?: string;
  /** Attribute `k8s.cni.cncf.io/deviceID`, when set, e.g. `"0000:18:02.3"`. */
  deviceId?: string;
}

/** What {@link assignDraDevices} needs of an attachment. */
export interface DeviceBackedAttachment {
  /** Status name of the network, `"ns/nad"`. */
  statusName: string;
  /** The NAD's `k8s.v1.cni.cncf.io/resourceName`. */
  resourceName: string;
}

function buildPodSchema() {
  const name = z.string().min(1);
  return z.looseObject({
    metadata: z.looseObject({ name, namespace: name }),
    spec: z.looseObject({
      nodeName: z.string().nullish(),
      resourceClaims: z.array(z.looseObject({
        name,
        resourceClaimName: z.string().nullish(),
        resourceClaimTemplateName: z.string().nullish(),
      })).nullish(),
    }),
    status: z.looseObject({
      resourceClaimStatuses: z.array(z.looseObject({
        name,
        resourceClaimName: z.string().nullish(),
      })).nullish(),
    }).nullish(),
  });
}

/**
 * The claims of a Pod object (`GET /api/v1/namespaces/{ns}/pods/{name}`).
 * @param raw the Pod as the API returned it
 * @returns its claims, or undefined when `spec.resourceClaims` is absent or empty
 * @throws {CniError} 6 when those fields have a bad shape (details: the prettified zod error)
 * @example
 * ```ts
 * podClaimsOf({ metadata: { name: "p", namespace: "ns" }, spec: { nodeName: "n1",
 *   resourceClaims: [{ name: "vf", resourceClaimTemplateName: "vf-tmpl" }] },
 *   status: { resourceClaimStatuses: [{ name: "vf", resourceClaimName: "p-vf-x7k2q" }] } });
 * // { namespace: "ns", name: "p", nodeName: "n1", claims: [{ name: "vf", resourceClaimTemplateName: "vf-tmpl" }],
 * //   generated: Map { "vf" => "p-vf-x7k2q" } }
 * ```
 */
export function podClaimsOf(raw: unknown): PodClaims | undefined {
  const r = buildPodSchema().safeParse(raw);
  if (!r.success) {
    throw new CniError(
      CniErrorCode.DecodingFailure,
      "invalid pod resourceClaims",
      z.prettifyError(r.error),
    );
  }
  const { metadata, spec, status } = r.data;
  if (!spec.resourceClaims?.length) return undefined;
  const out: PodClaims = {
    namespace: metadata.namespace,
    name: metadata.name,
    claims: spec.resourceClaims.map((c) => ({
      name: c.name,
      ...(c.resourceClaimName ? { resourceClaimName: c.resourceClaimName } : {}),
      ...(c.resourceClaimTemplateName
        ? { resourceClaimTemplateName: c.resourceClaimTemplateName }
        : {}),
    })),
    generated: new Map(
      (status?.resourceClaimStatuses ?? []).map((s) => [s.name, s.resourceClaimName ?? null]),
    ),
  };
  if (spec.nodeName) out.nodeName = spec.nodeName;
  return out;
}

/** The pod in messages. */
function podName(pod: PodClaims): string {
  return `${pod.namespace}/${pod.name}`;
}

/**
 * The names of the pod's ResourceClaims, in `spec.resourceClaims` order, distinct; entries whose
 * template needed no claim (`resourceClaimName: null` in the status) are left out.
 * @param pod from {@link podClaimsOf}
 * @param nads the device-backed NADs, for the message
 * @returns claim names
 * @throws {CniError} 7 when a template's claim is not generated yet
 */
export function podClaimNames(pod: PodClaims, nads: string[]): string[] {
  const names: string[] = [];
  for (const c of pod.claims) {
    let name = c.resourceClaimName;
    if (!name && c.resourceClaimTemplateName) {
      const generated = pod.generated.get(c.name);
      if (generated === null) continue; // the template needed no claim for this pod
      if (generated === undefined) {
        throw new CniError(
          CniErrorCode.InvalidNetworkConfig,
          `pod ${podName(pod)}: claim "${c.name}" (template ${c.resourceClaimTemplateName}) ` +
            `is not generated yet, so no device can be given to ${nads.join(", ")}`,
          "status.resourceClaimStatuses has no entry for it; the ResourceClaim controller " +
            "creates the claim before the pod can be scheduled",
        );
      }
      name = generated;
    }
    if (name && !names.includes(name)) names.push(name);
  }
  return names;
}

/** Options of {@link readDraDevices}. */
export interface ReadDraDevicesOptions {
  /** The API. */
  source: DraSource;
  /** The device-backed NADs (`"ns/nad"`), named in messages. */
  nads: string[];
}

/**
 * Reads the devices the pod's claims allocated, with their Multus attributes (see the module
 * text), in claim then result order.
 * @param pod from {@link podClaimsOf}
 * @param opts the API and the NADs to name in messages
 * @returns the allocated devices, those missing from every slice left out
 * @throws {CniError} 7 for a claim that is missing, not generated or not allocated; the
 *   source's own errors (7/11) with the claim or driver named
 */
export async function readDraDevices(
  pod: PodClaims,
  opts: ReadDraDevicesOptions,
): Promise<DraDevice[]> {
  const { source, nads } = opts;
  const names = podClaimNames(pod, nads);
  const claims = await Promise.all(names.map(async (name) => {
    let claim: ResourceClaim | undefined;
    try {
      claim = await source.claim(pod.namespace, name);
    } catch (e) {
      throw withPrefix(e, `pod ${podName(pod)}: cannot read ResourceClaim ${name}: `);
    }
    const missing = !claim ? "does not exist" : !claim.allocated ? "is not allocated yet" : "";
    if (missing) {
      throw new CniError(
        CniErrorCode.InvalidNetworkConfig,
        `pod ${podName(pod)}: ResourceClaim ${pod.namespace}/${name} ${missing}, ` +
          `so no device can be given to ${nads.join(", ")}`,
        "the claim must be allocated (status.allocation) before the pod's sandbox is created",
      );
    }
    return claim!;
  }));
  const drivers = [...new Set(claims.flatMap((c) => c.results.map((r) => r.driver)))];
  const slices = await Promise.all(drivers.map(async (driver) => {
    try {
      return await source.slices({ driver, nodeName: pod.nodeName });
    } catch (e) {
      throw withPrefix(e, `pod ${podName(pod)}: cannot list ResourceSlices of ${driver}: `);
    }
  }));
  const attributes = sliceDevices(slices.flat());
  const out: DraDevice[] = [];
  for (const claim of claims) {
    for (const r of claim.results) {
      const key = `${r.driver}/${r.pool}/${r.device}`;
      const attrs = attributes.get(key);
      if (!attrs) continue; // not published in any slice (Multus skips it)
      const d: DraDevice = { claim: claim.name, request: r.request, device: key };
      const resourceName = stringAttribute(attrs, r.driver, DRA_RESOURCE_NAME_ATTRIBUTE);
      const deviceId = stringAttribute(attrs, r.driver, DRA_DEVICE_ID_ATTRIBUTE);
      if (resourceName) d.resourceName = resourceName;
      if (deviceId) d.deviceId = deviceId;
      if (!out.some((o) => o.device === key)) out.push(d);
    }
  }
  return out;
}

/** `driver/pool/device` → attributes, from the highest generation of each pool. */
function sliceDevices(slices: ResourceSlice[]): Map<string, Record<string, unknown>> {
  const newest = new Map<string, number>();
  for (const s of slices) {
    const pool = `${s.driver}/${s.pool}`;
    newest.set(pool, Math.max(newest.get(pool) ?? s.generation, s.generation));
  }
  const out = new Map<string, Record<string, unknown>>();
  for (const s of slices) {
    if (s.generation !== newest.get(`${s.driver}/${s.pool}`)) continue;
    for (const d of s.devices) out.set(`${s.driver}/${s.pool}/${d.name}`, d.attributes);
  }
  return out;
}

/** A string attribute by its qualified name; a bare name counts in the driver's own domain. */
function stringAttribute(
  attrs: Record<string, unknown>,
  driver: string,
  qualified: string,
): string | undefined {
  const slash = qualified.indexOf("/");
  const value = attrs[qualified] ??
    (driver === qualified.slice(0, slash) ? attrs[qualified.slice(slash + 1)] : undefined);
  const s = (value as { string?: unknown } | undefined)?.string;
  return typeof s === "string" && s !== "" ? s : undefined;
}

/**
 * Gives each device-backed attachment its DRA device: the devices carrying its resource, in
 * order, one per attachment.
 * @param pod the pod, for messages
 * @param want `attachments`: the device-backed attachments, in attachment order; `devices`:
 *   from {@link readDraDevices}
 * @returns per attachment (same index) its device, or undefined when no allocated device
 *   carries its resource (the caller falls back to the kubelet path)
 * @throws {CniError} 7 when a device of a needed resource has no `k8s.cni.cncf.io/deviceID`,
 *   or more attachments need a resource than devices carry it
 * @example
 * ```ts
 * assignDraDevices({ namespace: "ns", name: "p" }, {
 *   attachments: [{ statusName: "ns/vf", resourceName: "r" }],
 *   devices: [{ claim: "c", request: "vf", device: "d/p/vf-0", resourceName: "r", deviceId: "0000:18:02.3" }],
 * });
 * // [{ claim: "c", request: "vf", device: "d/p/vf-0", resourceName: "r", deviceId: "0000:18:02.3" }]
 * ```
 */
export function assignDraDevices(
  pod: { namespace: string; name: string },
  want: { attachments: DeviceBackedAttachment[]; devices: DraDevice[] },
): (DraDevice | undefined)[] {
  const { attachments, devices } = want;
  const who = `pod ${pod.namespace}/${pod.name}`;
  const out: (DraDevice | undefined)[] = [];
  const byResource = new Map<string, DeviceBackedAttachment[]>();
  for (const a of attachments) {
    byResource.set(a.resourceName, [...byResource.get(a.resourceName) ?? [], a]);
  }
  for (const [resource, users] of byResource) {
    const mine = devices.filter((d) => d.resourceName === resource);
    const bad = mine.find((d) => !d.deviceId);
    if (bad) {
      throw new CniError(
        CniErrorCode.InvalidNetworkConfig,
        `${who}: device ${bad.device} of ResourceClaim ${bad.claim} (request ${bad.request}) ` +
          `serves resource "${resource}" of ${names(users)} but has no ` +
          `${DRA_DEVICE_ID_ATTRIBUTE} attribute`,
        "the DRA driver must publish the device's PCI address (or ID) in its ResourceSlice",
      );
    }
    if (mine.length > 0 && users.length > mine.length) {
      throw new CniError(
        CniErrorCode.InvalidNetworkConfig,
        `${who}: ${users.length} attachments (${names(users)}) compete for ${mine.length} ` +
          `device${mine.length === 1 ? "" : "s"} of resource "${resource}" ` +
          `(${mine.map((d) => `${d.device} of ResourceClaim ${d.claim}`).join(", ")})`,
        "each attachment needs its own device: allocate one device per NAD attachment",
      );
    }
  }
  const used = new Map<string, number>();
  for (const a of attachments) {
    const mine = devices.filter((d) => d.resourceName === a.resourceName);
    const n = used.get(a.resourceName) ?? 0;
    used.set(a.resourceName, n + 1);
    out.push(mine[n]);
  }
  return out;
}

/**
 * The error for an attachment whose resource neither the pod's claims nor kubelet's device
 * plugins provide.
 * @param pod the pod, for the message
 * @param found `attachment`: the attachment; `devices`: what the claims allocated (listed in
 *   the message); `claims`: the pod's claim names
 * @returns the CniError (code 7) to throw
 */
export function noDeviceError(
  pod: { namespace: string; name: string },
  found: { attachment: DeviceBackedAttachment; devices: DraDevice[]; claims: string[] },
): CniError {
  const { attachment, devices, claims } = found;
  const seen = devices.map((d) =>
    `${d.device} of ResourceClaim ${d.claim}` +
    (d.resourceName ? ` (resource "${d.resourceName}")` : ` (no ${DRA_RESOURCE_NAME_ATTRIBUTE})`)
  );
  return new CniError(
    CniErrorCode.InvalidNetworkConfig,
    `pod ${pod.namespace}/${pod.name}: no allocated device matches resource ` +
      `"${attachment.resourceName}" of ${attachment.statusName} ` +
      `(ResourceClaims: ${claims.join(", ") || "none"}; kubelet device plugins: none)`,
    `allocated devices: ${seen.join(", ") || "none"}; a device serves a NAD when its ` +
      `${DRA_RESOURCE_NAME_ATTRIBUTE} attribute equals the NAD's k8s.v1.cni.cncf.io/resourceName`,
  );
}

function names(attachments: DeviceBackedAttachment[]): string {
  return attachments.map((a) => a.statusName).join(", ");
}

/** `e` as a CniError whose message starts with `prefix`, code and details kept. */
function withPrefix(e: unknown, prefix: string): CniError {
  const err = toCniError(e);
  return new CniError(err.code, `${prefix}${err.msg}`, err.details);
}
