/**
 * DEL without a usable cache (NPWG v1.3 §7.2): the attachments ADD made are rebuilt from the
 * pod's annotations (runtime-passed or from the API) and the NADs through the same plan ADD
 * executes ({@link buildPodPlan}, mode `"rebuild"`), as cache entries DEL can tear down. A
 * device-backed attachment gets back the device ADD gave it: from its CNI device-info file, else
 * from kubelet's allocation to the pod taken in ADD's order.
 *
 * @module
 */

import { lazyImport } from "../../util/lazy.ts";
import { CniErrorCode, toCniError } from "../../cni/errors.ts";
import type { CachedAttachment } from "../cache/cache.ts";
import type { ManifoldDeps } from "../deps.ts";
import { declaresCapability } from "../plan/plan.ts";
import { buildPodPlan, podPlanInput } from "../plan/pod_plan.ts";
import { planPodOf, type PodRef, runtimePodAnnotations } from "../plan/pod.ts";
import { deviceContext } from "./add_devices.ts";
import type { AttachmentPlan } from "../types.ts";
import { DEVICE_INFO_CAPABILITY } from "../../devices/constants.ts";

/** What could be rebuilt without a cache, and what could not (with why). */
export interface Rebuilt {
  /** The attachments, in ADD order, each `state: "added"`. */
  attachments: CachedAttachment[];
  /** What could not be rebuilt, `"<what>: <error>"` each. */
  missing: string[];
  /** True when something is missing because the API was unreachable (worth retrying). */
  transient: boolean;
}

/**
 * Rebuilds the attachments of a sandbox as ADD planned them. Per-network failures are
 * collected, not thrown: DEL tears down what it can and decides whether to fail.
 *
 * @param deps the command's dependencies (`conf`, `env`, `pods`, `nads`).
 * @param pod the pod from CNI_ARGS; undefined for a non-Kubernetes runtime.
 * @param runtimeArgs the runtime's CNI_ARGS, parsed once.
 * @returns the attachments and what is missing.
 * @throws {CniError} when the default network itself cannot be resolved (code 7, 11).
 */
export async function rebuildAttachments(
  deps: ManifoldDeps,
  pod: PodRef | undefined,
  runtimeArgs: [string, string][],
): Promise<Rebuilt> {
  const { conf, env } = deps;
  const missing: string[] = [];
  let transient = false;

  let annotations = runtimePodAnnotations(conf.capabilities, conf.runtimeConfig);
  if (!annotations && pod && deps.pods) {
    try {
      const info = await deps.pods.get(pod.namespace, pod.name);
      if (info) annotations = info.annotations;
      else missing.push(`pod ${pod.namespace}/${pod.name}: not found`);
    } catch (e) {
      const err = toCniError(e);
      if (err.code === CniErrorCode.TryAgainLater) transient = true;
      missing.push(`pod ${pod.namespace}/${pod.name}: ${err.message}`);
    }
  }

  const plan = await buildPodPlan({
    ...podPlanInput(deps, { pod, runtimeArgs, annotations: annotations ?? {} }),
    mode: "rebuild",
  });
  // The CNI device-info file ADD would have created (Device Information Spec v1.1 §4.2.1).
  const withDeviceInfo = (p: AttachmentPlan) =>
    p.delegate.resourceName !== undefined ||
    declaresCapability(p.delegate.conflist, DEVICE_INFO_CAPABILITY);
  const devices = plan.attachments.some(withDeviceInfo)
    ? await lazyImport<typeof import("../../devices/mod.ts")>(
      "../../devices/mod.ts",
      import.meta.url,
    )
    : undefined;
  // Kubelet's allocation, taken in attachment order as ADD took it (loaded on first use).
  const device = deviceContext(deps, pod, planPodOf(pod, env.containerId), deps.logger);
  const attachments: CachedAttachment[] = [];
  for (const p of plan.attachments) {
    const a: CachedAttachment = {
      statusName: p.delegate.statusName,
      isDefault: p.delegate.isDefault,
      origin: p.origin,
      ifName: p.ifName,
      conflist: p.delegate.conflist,
      capabilityArgs: p.capabilityArgs,
      cniArgs: p.cniArgs,
      state: "added" as const,
    };
    attachments.push(a);
    if (!devices || !withDeviceInfo(p)) continue;
    a.deviceInfoFile = devices.cniDeviceInfoPath(conf.deviceInfoDir, {
      network: p.delegate.statusName,
      containerId: env.containerId,
      ifName: p.ifName,
    });
    a.capabilityArgs = { ...a.capabilityArgs, [DEVICE_INFO_CAPABILITY]: a.deviceInfoFile };
    const { resourceName } = p.delegate;
    if (!resourceName) continue;
    a.resourceName = resourceName;
    // What the attachment really got (its device-info file), else kubelet's allocation in ADD's
    // order — taken in any case, to keep the positions.
    const fromFile = await deviceIdFromInfo(devices, a.deviceInfoFile, deps);
    const fromKubelet = await device.allocator().then((al) => al.take(resourceName))
      .catch(() => undefined);
    const deviceId = fromFile ?? fromKubelet;
    if (deviceId) {
      a.deviceId = deviceId;
      ({ conflist: a.conflist, capabilityArgs: a.capabilityArgs } = devices.withDevice(
        a.conflist,
        a.capabilityArgs,
        deviceId,
      ));
    }
  }
  return {
    attachments,
    missing: [...missing, ...plan.missing],
    transient: transient || plan.transient,
  };
}

/**
 * The device a device-backed attachment was given at ADD, read back from its CNI device-info
 * file (Device Information Spec v1.1 §4.2.1: written at ADD, removed at DEL): the PCI address
 * of a `pci` or `vdpa` device. Without a cache record this file is DEL's only memory of the
 * device; kubelet no longer lists a deleted pod's devices.
 * @returns the address, or undefined when the file is gone, unreadable (logged) or names none
 */
async function deviceIdFromInfo(
  devices: typeof import("../../devices/mod.ts"),
  path: string,
  deps: ManifoldDeps,
): Promise<string | undefined> {
  try {
    const info = await devices.readDeviceInfoFile(path);
    const address = info?.pci?.["pci-address"] ?? info?.vdpa?.["pci-address"];
    return typeof address === "string" && address !== "" ? address : undefined;
  } catch (e) {
    deps.logger.warn("cannot read the device-info file; DEL runs without deviceID", {
      containerId: deps.env.containerId,
      path,
      error: toCniError(e).message,
    });
    return undefined;
  }
}
