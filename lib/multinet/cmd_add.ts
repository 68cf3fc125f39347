/**
 * ADD for the delegating plugin (NPWG v1.3 §6.2, §7.2, §7.3): attach the cluster
 * default network first, then every selected network in order, one at a time; on any
 * failure DEL every attachment already made (reverse order) and fail. An intent record
 * is cached before each delegate ADD so a DEL after a crash finds everything.
 *
 * @module
 */

import { parseCniArgs } from "../cni/env.ts";
import { CniError, CniErrorCode, toCniError } from "../cni/errors.ts";
import { parseNetworkConfig } from "../cni/types.ts";
import { CACHE_SCHEMA_VERSION, type CachedAttachment, type CacheRecord } from "./cache.ts";
import type { ManifoldDeps } from "./deps.ts";
import { detachAll } from "./detach.ts";
import {
  memoNadSource,
  podSelections,
  resolveDefaultNetwork,
  resolveExtraDefaults,
  resolveSelections,
} from "./networks.ts";
import { declaresCapability, planAttachments } from "./plan.ts";
import {
  attachmentContext,
  isStaticPod,
  planPodOf,
  type PodRef,
  podRefFromArgs,
  runtimePodAnnotations,
} from "./pod.ts";
import { waitForReadiness } from "./readiness.ts";
import { applyDefaultRoute, claimsSandboxInterface, reconcileStatus } from "./kernel.ts";
import { buildNetworkStatus } from "./status.ts";
import type { AttachmentPlan, DeviceInfo, NetworkStatus } from "./types.ts";
import type { NetnsSnapshot } from "../netlink/inspect.ts";
import type { DeviceAllocator } from "../devices/allocation.ts";
import { DEVICE_ID_CAPABILITY, DEVICE_INFO_CAPABILITY } from "../devices/constants.ts";
import type { Logger } from "../log/mod.ts";
import { mark, timeline } from "../log/trace.ts";
import { crashpoint } from "./crashpoint.ts";
import { oneLine } from "../util/text.ts";

/**
 * Runs ADD for one sandbox.
 * @returns the cluster default network's raw result (the dispatcher converts it to the
 *   config's cniVersion), as Multus does.
 * @throws {CniError} 3 pod gone or UID mismatch; 7 invalid annotation/NAD/config/capability;
 *   11 API unreachable or readiness not reached; a delegate's own code, prefixed with `[ns/pod:net]`.
 */
export async function cmdAdd(deps: ManifoldDeps): Promise<Record<string, unknown>> {
  const { conf, env, runtime, cache } = deps;
  const runtimeArgs = parseCniArgs(env.args);
  const pod = podRefFromArgs(runtimeArgs, env.containerId);
  const log = deps.logger.with({
    cmd: "ADD",
    containerId: env.containerId,
    pod: pod ? `${pod.namespace}/${pod.name}` : undefined,
  });

  await waitForReadiness(conf.readinessindicatorfile, conf.readinessTimeoutMs);

  // Pod annotations: from the runtime when it passes them (no API read), else from the API.
  let annotations = runtimePodAnnotations(conf.capabilities, conf.runtimeConfig);
  const spawned = deps.delegateSpawned ?? Promise.resolve();
  // Load netlink (module + libraries) while the first delegate runs: verification needs it.
  spawned.then(() => {
    mark("spawned");
    deps.kernel?.prefetch?.();
  });
  if (annotations) {
    log.debug("pod annotations from runtimeConfig");
  } else if (pod && deps.pods) {
    const info = await deps.pods.get(pod.namespace, pod.name);
    if (!info) {
      throw new CniError(
        CniErrorCode.UnknownContainer,
        `pod ${pod.namespace}/${pod.name} not found`,
        "the pod was deleted before its network was set up",
      );
    }
    if (pod.uid && info.uid && pod.uid !== info.uid && !isStaticPod(info.annotations)) {
      throw new CniError(
        CniErrorCode.UnknownContainer,
        `pod ${pod.namespace}/${pod.name} UID mismatch`,
        `the runtime sent K8S_POD_UID=${pod.uid} but the API has ${info.uid}; the pod was recreated`,
      );
    }
    annotations = info.annotations;
    mark("podRead");
  } else {
    annotations = {};
  }

  // Validate the selection before anything is attached.
  const elements = podSelections(pod, annotations);
  const nads = deps.nads ? memoNadSource(deps.nads) : undefined;
  const defaultNetwork = await resolveDefaultNetwork(conf, nads, pod, annotations);
  mark("defaultResolved");

  // Fetching is not attaching (§7.3): resolve the other networks while the default one
  // attaches — once its process is spawned, so that this work never delays the spawn.
  const restP = spawned.then(() =>
    Promise.all([
      resolveExtraDefaults(conf, nads, pod),
      resolveSelections(conf, nads, pod, elements),
    ])
  );
  restP.catch(() => {}); // awaited below; avoid an unhandled rejection while the default ADD runs

  const planPod = planPodOf(pod, env.containerId);
  const planInput = {
    pod: planPod,
    runtimeIfName: env.ifName,
    runtimeArgs,
    runtimeCapabilityArgs: conf.runtimeConfig,
    defaultNetwork,
  };

  const record: CacheRecord = {
    schemaVersion: CACHE_SCHEMA_VERSION,
    containerId: env.containerId,
    netns: env.netns,
    ifName: env.ifName,
    pod: { namespace: planPod.namespace, name: planPod.name, uid: planPod.uid },
    cniVersion: conf.cniVersion,
    createdAt: new Date().toISOString(),
    attachments: [],
  };

  // Devices (NADs with a resourceName, plugins declaring CNIDeviceInfoFile): lib/devices is
  // loaded only for pods that have such an attachment.
  let allocator: Promise<DeviceAllocator> | undefined;
  const device: DeviceContext = {
    deps,
    pod,
    log,
    allocator: () =>
      allocator ??= loadDevices().then((m) =>
        new m.DeviceAllocator(() =>
          deps.devices
            ? deps.devices.podDevices(record.pod)
            : Promise.resolve({ devices: {}, source: "none" as const })
        )
      ),
  };
  // Read the pod's devices while the default network attaches, once the NADs say they are needed.
  restP.then(([extra, sels]) => {
    if ([...extra, ...sels.map((x) => x.delegate)].some((d) => d.resourceName)) {
      device.allocator().then((a) => a.prefetch(), () => {});
    }
  }, () => {});

  const attach = async (plan: AttachmentPlan): Promise<void> => {
    const prepared = await prepareDevice(device, plan);
    const entry: CachedAttachment = {
      statusName: plan.delegate.statusName,
      isDefault: plan.delegate.isDefault,
      ifName: plan.ifName,
      conflist: prepared.conflist ?? plan.delegate.conflist,
      capabilityArgs: prepared.capabilityArgs ?? plan.capabilityArgs,
      cniArgs: plan.cniArgs,
      state: "adding",
    };
    if (prepared.resourceName) entry.resourceName = prepared.resourceName;
    if (prepared.deviceId) entry.deviceId = prepared.deviceId;
    if (prepared.deviceInfoFile) entry.deviceInfoFile = prepared.deviceInfoFile;
    if (plan.selection?.["default-route"]) entry.defaultRoute = plan.selection["default-route"];
    crashpoint("add:before-intent");
    record.attachments.push(entry);
    await cache.write(record); // intent record before the delegate runs
    mark(`intent${record.attachments.length}`);
    crashpoint("add:before-delegate");
    const list = parseNetworkConfig(entry.conflist, { source: plan.delegate.source });
    const started = performance.now();
    try {
      entry.result = await runtime.addNetworkList(list, {
        containerId: env.containerId,
        netns: env.netns,
        ifName: plan.ifName,
        args: plan.cniArgs,
        capabilityArgs: entry.capabilityArgs,
      });
    } catch (e) {
      throw toCniError(e).withContext(attachmentContext(pod, plan.delegate.statusName));
    }
    crashpoint("add:after-delegate");
    entry.state = "added";
    mark(`attached${record.attachments.length}`);
    const deviceInfo = await collectDevice(device, entry);
    if (deviceInfo) entry.deviceInfo = deviceInfo;
    log.info("attached", {
      network: plan.delegate.statusName,
      ifName: plan.ifName,
      ms: Math.round(performance.now() - started),
    });
  };

  let statuses: NetworkStatus[];
  try {
    const [defaultPlan] = planAttachments({
      ...planInput,
      defaultNetworks: [],
      selections: [],
    });
    await attach(defaultPlan);
    const [extraDefaults, selections] = await restP;
    mark("networksResolved");
    const plans = planAttachments({ ...planInput, defaultNetworks: extraDefaults, selections });
    for (const plan of plans.slice(1)) await attach(plan);

    let snapshot: NetnsSnapshot | undefined;
    if (record.attachments.some((a) => a.defaultRoute !== undefined)) {
      if (!deps.kernel) {
        throw new CniError(
          CniErrorCode.Internal,
          "default-route needs netlink access to the sandbox",
        );
      }
      snapshot = await applyDefaultRoute(deps.kernel, env.netns, record);
    }
    statuses = record.attachments.map((a) =>
      buildNetworkStatus({
        statusName: a.statusName,
        ifName: a.ifName,
        isDefault: a.isDefault,
        result: a.result,
        deviceInfo: a.deviceInfo,
        defaultRoute: a.defaultRoute,
      })
    );
    statuses = await verifyWithKernel(deps, record, statuses, pod, snapshot);
    mark("verified");
    record.networkStatus = statuses;
    crashpoint("add:before-final-cache");
    await cache.write(record);
    mark("cached");
    crashpoint("add:before-patch");
    await deps.status.publish(pod, env.containerId, statuses);
    mark("published");
    crashpoint("add:after-patch");
  } catch (e) {
    const err = toCniError(e);
    log.error("ADD failed, rolling back", {
      error: err.message,
      attached: record.attachments.length,
    });
    await rollback(deps, record, pod);
    if (pod) {
      deps.events.emit(pod, {
        reason: "ErrorAddingNetwork",
        message: err.message,
        type: "Warning",
      });
      await deps.events.flush();
    }
    throw err;
  }

  if (pod) {
    for (const s of statuses) {
      deps.events.emit(pod, {
        reason: "AddedInterface",
        message: `Add ${s.interface ?? ""} [${(s.ips ?? []).join(",")}] from ${s.name}`,
        type: "Normal",
      });
    }
    await deps.events.flush();
    mark("eventsSent");
  }
  log.info("timeline", timeline());
  return (record.attachments[0].result ?? {}) as Record<string, unknown>;
}

/**
 * Replaces delegate claims in the statuses with what the sandbox really holds (one netlink
 * snapshot for all attachments — the one taken after a default-route change when there was one,
 * else a fresh one); every disagreement is logged and becomes a Warning event
 * naming the attachment. A sandbox that cannot be read leaves the statuses as built from the
 * results (logged): verification must never cost a pod its network.
 */
async function verifyWithKernel(
  deps: ManifoldDeps,
  record: CacheRecord,
  statuses: NetworkStatus[],
  pod: PodRef | undefined,
  taken?: NetnsSnapshot,
): Promise<NetworkStatus[]> {
  if (!deps.kernel || !deps.env.netns) return statuses;
  let snapshot: NetnsSnapshot;
  try {
    snapshot = taken ?? await deps.kernel.inspect(deps.env.netns);
  } catch (e) {
    deps.logger.warn("cannot read the sandbox over netlink; status taken from delegate results", {
      containerId: deps.env.containerId,
      error: toCniError(e).message,
    });
    return statuses;
  }
  return statuses.map((status, i) => {
    const a = record.attachments[i];
    const { entry, problems } = reconcileStatus(
      status,
      snapshot,
      claimsSandboxInterface(a.result, a.ifName),
    );
    for (const problem of problems) {
      const message = `${attachmentContext(pod, a.statusName)} ${problem}`;
      deps.logger.warn("delegate result disagrees with the kernel", {
        containerId: deps.env.containerId,
        problem: message,
      });
      if (pod) deps.events.emit(pod, { reason: "InterfaceMismatch", message, type: "Warning" });
    }
    return entry;
  });
}

/**
 * Undoes a failed ADD: DEL of every attachment made or attempted, newest first (§7.2).
 * Attachments whose DEL also fails stay cached so the runtime's following DEL retries them.
 */
async function rollback(deps: ManifoldDeps, record: CacheRecord, pod: PodRef | undefined) {
  if (record.attachments.length === 0) {
    await deps.cache.writeTombstone(record);
    return;
  }
  const failed = await detachAll(deps, record.attachments, { netns: deps.env.netns, pod });
  if (failed.length === 0) {
    await deps.cache.writeTombstone(record);
  } else {
    await deps.cache.write({ ...record, attachments: failed.map((f) => f.attachment) });
  }
}

type DevicesModule = typeof import("../devices/mod.ts");
let devicesModule: Promise<DevicesModule> | undefined;
/** lib/devices, loaded on first use (only pods with device-backed or device-info attachments). */
function loadDevices(): Promise<DevicesModule> {
  return devicesModule ??= import("../devices/mod.ts");
}

/** What the device steps of one ADD share. */
interface DeviceContext {
  deps: ManifoldDeps;
  pod: PodRef | undefined;
  log: Logger;
  /** The pod's device allocator, created (and its devices read) on first use. */
  allocator: () => Promise<DeviceAllocator>;
}

/** What {@link prepareDevice} changes for an attachment; absent keys: nothing to change. */
interface PreparedDevice {
  conflist?: Record<string, unknown>;
  capabilityArgs?: Record<string, unknown>;
  resourceName?: string;
  deviceId?: string;
  deviceInfoFile?: string;
}

/**
 * Before a delegate ADD: the next device of the NAD's resource (Multus semantics: sorted IDs,
 * each once per pod) is injected as `deviceID`/`pciBusID` into every plugin and as runtimeConfig
 * `deviceID`; the device plugin's device-info file is copied to the attachment's CNI file, whose
 * path goes to runtimeConfig `CNIDeviceInfoFile` (reaching only plugins declaring it, with or
 * without a device plugin). A pod without an allocated device, or a file that cannot be copied,
 * gives a Warning and the delegate still runs (it reports what it misses, as under Multus).
 */
async function prepareDevice(ctx: DeviceContext, plan: AttachmentPlan): Promise<PreparedDevice> {
  const { resourceName, conflist, statusName } = plan.delegate;
  const declares = declaresCapability(conflist, DEVICE_INFO_CAPABILITY);
  if (!resourceName && !declares) return {};
  const dev = await loadDevices();
  const { env, conf } = ctx.deps;
  const out: PreparedDevice = {};
  let capabilityArgs = plan.capabilityArgs;
  if (resourceName) {
    out.resourceName = resourceName;
    const allocator = await ctx.allocator();
    const deviceId = await allocator.take(resourceName);
    if (deviceId) {
      out.deviceId = deviceId;
      out.conflist = dev.injectDeviceId(conflist, deviceId);
      capabilityArgs = { ...capabilityArgs, [DEVICE_ID_CAPABILITY]: deviceId };
    } else {
      warnDevice(
        ctx,
        "DeviceNotAllocated",
        `${attachmentContext(ctx.pod, statusName)} the NAD asks for a device of resource ` +
          `"${resourceName}" but kubelet allocated no unused one to the pod ` +
          `(devices read from: ${await allocator.source()}); the delegate runs without deviceID`,
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
async function collectDevice(
  ctx: DeviceContext,
  entry: CachedAttachment,
): Promise<DeviceInfo | undefined> {
  if (!entry.deviceInfoFile && !entry.deviceId && !hasPciId(entry.result)) return undefined;
  const dev = await loadDevices();
  try {
    return await dev.collectDeviceInfo({
      deviceInfoFile: entry.deviceInfoFile,
      deviceId: entry.deviceId,
      result: entry.result,
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

/** True when some interface of a raw result carries a `pciID` (CNI SPEC 1.1 "Result"). */
function hasPciId(result: unknown): boolean {
  const interfaces = (result as { interfaces?: unknown } | undefined)?.interfaces;
  return Array.isArray(interfaces) &&
    interfaces.some((i) => typeof (i as { pciID?: unknown } | null)?.pciID === "string");
}
