/**
 * The device steps of ADD (Device Information Spec v1.1; NPWG v1.3 §5.3.8; Multus device
 * plugin semantics): before a delegate ADD, the device kubelet allocated for the NAD's
 * resource is injected and the attachment's device-info file prepared; after it, the
 * attachment's device-info is read for network-status. lib/devices is loaded only for pods
 * that have such an attachment.
 *
 * Pods with `spec.resourceClaims` (Dynamic Resource Allocation) get their devices planned
 * before any delegate runs ({@link planDevices}, lib/devices/dra.ts, loaded only for them): a
 * NAD whose resource an allocated device carries (attribute `k8s.cni.cncf.io/resourceName`)
 * gets that device's `k8s.cni.cncf.io/deviceID`; one whose resource no claim carries falls back
 * to kubelet's devices; when neither has one, or a claim is not allocated, or attachments
 * outnumber the devices, the ADD fails with code 7 before anything is attached.
 *
 * @module
 */

import { lazyImport } from "../../util/lazy.ts";
import { CniErrorCode, toCniError } from "../../cni/errors.ts";
import type { CniResult } from "../../cni/types.ts";
import type { CachedAttachment } from "../cache/cache.ts";
import type { ManifoldDeps, PodInfo } from "../deps.ts";
import { declaresCapability } from "../plan/plan.ts";
import { attachmentContext, type PodRef } from "../plan/pod.ts";
import type { AttachmentPlan, DeviceInfo } from "../types.ts";
import type { DeviceAllocator } from "../../devices/allocation.ts";
import type { DraDevice } from "../../devices/dra.ts";
import { DEVICE_INFO_CAPABILITY } from "../../devices/constants.ts";
import type { Logger } from "../../log/mod.ts";
import { oneLine } from "../../util/text.ts";

type DevicesModule = typeof import("../../devices/mod.ts");
let devicesModule: Promise<DevicesModule> | undefined;
/** lib/devices, loaded on first use (only pods with device-backed or device-info attachments). */
function loadDevices(): Promise<DevicesModule> {
  return devicesModule ??= lazyImport<typeof import("../../devices/mod.ts")>(
    "../../devices/mod.ts",
    import.meta.url,
  );
}

/** What the device steps of one ADD share. */
export interface DeviceContext {
  /** The command's dependencies. */
  deps: ManifoldDeps;
  /** The pod, for events and messages. */
  pod: PodRef | undefined;
  /** The command's logger. */
  log: Logger;
  /** The pod's device allocator, created (and its devices read) on first use. */
  allocator: () => Promise<DeviceAllocator>;
  /** Devices given by {@link planDevices} (pods with DRA claims), by attachment. */
  planned?: Map<AttachmentPlan, PlannedDevice>;
}

/** A device given to an attachment before any delegate runs. */
export interface PlannedDevice {
  /** The ID the delegate gets as `deviceID`, e.g. `"0000:18:02.3"`. */
  deviceId: string;
  /** The DRA device it came from; absent when it came from kubelet's device plugins. */
  dra?: DraDevice;
}

/** What {@link prepareDevice} changes for an attachment; absent keys: nothing to change. */
export interface PreparedDevice {
  /** The delegate's conflist with `deviceID`/`pciBusID` injected into every plugin. */
  conflist?: Record<string, unknown>;
  /** capabilityArgs with `deviceID` and/or `CNIDeviceInfoFile` added. */
  capabilityArgs?: Record<string, unknown>;
  /** The NAD's `k8s.v1.cni.cncf.io/resourceName`. */
  resourceName?: string;
  /** The device allocated to the attachment, e.g. `"0000:18:02.5"`. */
  deviceId?: string;
  /** The attachment's CNI device-info file path. */
  deviceInfoFile?: string;
}

/**
 * The device context of one ADD: the pod's allocator is created (and its devices read) on
 * first use; {@link DeviceContext.prefetch} starts that early for plans that will need it.
 * @param deps the command's dependencies (`devices`, `events`, `conf`, `env`).
 * @param pod the pod, for events and messages.
 * @param podKey the pod as cached (namespace, name, uid), for the device lookup.
 * @param log the command's logger.
 * @returns the context.
 */
export function deviceContext(
  deps: ManifoldDeps,
  pod: PodRef | undefined,
  podKey: { namespace: string; name: string; uid: string },
  log: Logger,
): DeviceContext {
  let allocator: Promise<DeviceAllocator> | undefined;
  return {
    deps,
    pod,
    log,
    allocator: () =>
      allocator ??= loadDevices().then((m) =>
        new m.DeviceAllocator(() =>
          deps.devices
            ? deps.devices.podDevices(podKey)
            : Promise.resolve({ devices: {}, source: "none" as const })
        )
      ),
  };
}

/**
 * Starts reading the pod's devices when some attachment of the plan is device-backed (a NAD
 * with a `resourceName`), so the lookup overlaps the first delegate. Never throws.
 * @param ctx from {@link deviceContext}.
 * @param attachments the pod's plan.
 */
export function prefetchDevices(ctx: DeviceContext, attachments: AttachmentPlan[]): void {
  if (attachments.some((a) => a.delegate.resourceName)) {
    ctx.allocator().then((a) => a.prefetch(), () => {});
  }
}

/**
 * For a pod with DRA claims (`spec.resourceClaims`) and device-backed attachments: reads its
 * claims and their devices and gives every device-backed attachment its device now, before any
 * delegate runs (lib/devices/dra.ts); a resource no claim carries is taken from kubelet's
 * devices. Pods without claims or without device-backed attachments: nothing happens (no
 * module loaded; the pod is read only when the runtime passed the annotations and some NAD is
 * device-backed).
 * @param ctx from {@link deviceContext}; `ctx.planned` is filled.
 * @param attachments the pod's plan.
 * @param podInfo the pod as read for its annotations, when it was.
 * @throws {CniError} 7 when a claim is missing, not generated or not allocated, a device lacks
 *   `k8s.cni.cncf.io/deviceID`, attachments outnumber the devices of their resource, or no
 *   device of a resource exists; 7/11 when the API cannot be read.
 */
export async function planDevices(
  ctx: DeviceContext,
  attachments: AttachmentPlan[],
  podInfo: PodInfo | undefined,
): Promise<void> {
  const backed = attachments.filter((a) => a.delegate.resourceName);
  const { deps, pod } = ctx;
  if (backed.length === 0 || !deps.dra || !pod?.name) return;
  // With the UID: the daemon's informer may still hold an older pod of the same name.
  const info = podInfo ?? await deps.pods?.get(pod.namespace, pod.name, pod.uid || undefined);
  if (!info?.withResourceClaims) return;
  const dra = await lazyImport<typeof import("../../devices/dra.ts")>(
    "../../devices/dra.ts",
    import.meta.url,
  );
  const claims = dra.podClaimsOf(info.withResourceClaims);
  if (!claims) return;
  const wanted = backed.map((a) => ({
    statusName: a.delegate.statusName,
    resourceName: a.delegate.resourceName!,
  }));
  const nads = [...new Set(wanted.map((w) => w.statusName))];
  const devices = await dra.readDraDevices(claims, { source: deps.dra, nads });
  const given = dra.assignDraDevices(claims, { attachments: wanted, devices });
  const planned = new Map<AttachmentPlan, PlannedDevice>();
  for (const [i, a] of backed.entries()) {
    const device = given[i];
    if (device) {
      planned.set(a, { deviceId: device.deviceId!, dra: device });
      ctx.log.info("device from DRA", {
        network: a.delegate.statusName,
        ifName: a.ifName,
        claim: device.claim,
        device: device.device,
        deviceID: device.deviceId,
      });
      continue;
    }
    const fromKubelet = await (await ctx.allocator()).take(wanted[i].resourceName);
    if (!fromKubelet) {
      const names = dra.podClaimNames(claims, nads);
      throw dra.noDeviceError(claims, { attachment: wanted[i], devices, claims: names });
    }
    planned.set(a, { deviceId: fromKubelet });
  }
  ctx.planned = planned;
}

/**
 * Before a delegate ADD: the next device of the NAD's resource (Multus semantics: sorted IDs,
 * each once per pod) is injected as `deviceID`/`pciBusID` into every plugin and as runtimeConfig
 * `deviceID`; the device plugin's device-info file is copied to the attachment's CNI file, whose
 * path goes to runtimeConfig `CNIDeviceInfoFile` (reaching only plugins declaring it, with or
 * without a device plugin). A pod without an allocated device, or a file that cannot be copied,
 * gives a Warning and the delegate still runs (it reports what it misses, as under Multus).
 */
export async function prepareDevice(
  ctx: DeviceContext,
  plan: AttachmentPlan,
): Promise<PreparedDevice> {
  const { resourceName, conflist, statusName } = plan.delegate;
  const declares = declaresCapability(conflist, DEVICE_INFO_CAPABILITY);
  if (!resourceName && !declares) return {};
  const dev = await loadDevices();
  const { env, conf } = ctx.deps;
  const out: PreparedDevice = {};
  let capabilityArgs = plan.capabilityArgs;
  if (resourceName) {
    out.resourceName = resourceName;
    const planned = ctx.planned?.get(plan);
    const allocator = planned ? undefined : await ctx.allocator();
    const deviceId = planned ? planned.deviceId : await allocator!.take(resourceName);
    if (deviceId) {
      out.deviceId = deviceId;
      ({ conflist: out.conflist, capabilityArgs } = dev.withDevice(
        conflist,
        capabilityArgs,
        deviceId,
      ));
    } else {
      warnDevice(
        ctx,
        "DeviceNotAllocated",
        `${attachmentContext(ctx.pod, statusName)} the NAD asks for a device of resource ` +
          `"${resourceName}" but kubelet allocated no unused one to the pod ` +
          `(devices read from: ${await allocator!.source()}); the delegate runs without deviceID`,
      );
    }
  }
  const attachment = { network: statusName, containerId: env.containerId, ifName: plan.ifName };
  try {
    out.deviceInfoFile = await dev.prepareDeviceInfoFile({
      ...attachment,
      resourceName,
      deviceId: out.deviceId,
      declaresCapability: declares,
      deviceInfoDir: conf.deviceInfoDir,
    });
  } catch (e) {
    const err = toCniError(e);
    warnDevice(
      ctx,
      "DeviceInfoUnreadable",
      `${attachmentContext(ctx.pod, statusName)} ${oneLine(err.message)}`,
    );
    if (declares) out.deviceInfoFile = dev.cniDeviceInfoPath(conf.deviceInfoDir, attachment);
  }
  if (out.deviceInfoFile) {
    capabilityArgs = { ...capabilityArgs, [DEVICE_INFO_CAPABILITY]: out.deviceInfoFile };
  }
  if (capabilityArgs !== plan.capabilityArgs) out.capabilityArgs = capabilityArgs;
  return out;
}

/**
 * After a delegate ADD: the attachment's device-info for network-status (NPWG v1.3 §5.3.8) from
 * its CNI file, else from sysfs for the PCI/vDPA device the delegate gave. A malformed or
 * unreadable file is a Warning (log + event) and no device-info — never a failed pod.
 */
export async function collectDevice(
  ctx: DeviceContext,
  entry: CachedAttachment,
  result: CniResult | undefined,
): Promise<DeviceInfo | undefined> {
  if (!entry.deviceInfoFile && !entry.deviceId && !hasPciId(result)) return undefined;
  const dev = await loadDevices();
  try {
    return await dev.collectDeviceInfo({
      deviceInfoFile: entry.deviceInfoFile,
      deviceId: entry.deviceId,
      result,
      ifName: entry.ifName,
      sysfsRoot: ctx.deps.conf.sysfsRoot,
    });
  } catch (e) {
    const err = toCniError(e);
    const invalid = err.code === CniErrorCode.DecodingFailure;
    warnDevice(
      ctx,
      invalid ? "DeviceInfoInvalid" : "DeviceInfoUnreadable",
      `${attachmentContext(ctx.pod, entry.statusName)} device-info file ` +
        `${entry.deviceInfoFile} ${invalid ? "is invalid" : "cannot be read"} ` +
        `(${oneLine(err.message)}); ` +
        `network-status of ${entry.ifName} has no device-info`,
    );
    return undefined;
  }
}

/** Logs a device problem and queues it as a Warning event of the pod. */
function warnDevice(ctx: DeviceContext, reason: string, message: string): void {
  ctx.log.warn(message, { reason });
  if (ctx.pod) ctx.deps.events.emit(ctx.pod, { reason, message, type: "Warning" });
}

/** True when some interface of a result carries a `pciID` (CNI SPEC 1.1 "Result"). */
function hasPciId(result: CniResult | undefined): boolean {
  return (result?.interfaces ?? []).some((i) => typeof i.pciID === "string");
}
