/**
 * ADD for the delegating plugin (NPWG v1.3 §6.2, §7.2, §7.3), in steps: read the pod's
 * annotations → plan every attachment (all checks, before any delegate runs) → attach each,
 * default network first, one at a time → apply `default-route` → verify with the kernel →
 * cache the final record and publish network-status (at once; with the daemon's `"statusPublish":
 * "async"` the status is queued once the record is durable, unless an attachment is
 * device-backed) → events. On any failure once the pod is read (a plan that
 * fails its checks included), every attachment made is DELeted (reverse order), an
 * `ErrorAddingNetwork` event is sent and the ADD fails. One intent record naming every planned
 * attachment is cached before the first delegate ADD so a DEL after a crash finds everything.
 *
 * @module
 */

import { lazyImport } from "../../util/lazy.ts";
import { parseCniArgs } from "../../cni/env.ts";
import { prefetchSpawn } from "../../cni/exec.ts";
import { CniError, CniErrorCode } from "../../cni/errors.ts";
import type { DecodedResult } from "../../cni/result.ts";
import type { ManifoldDeps, PodInfo } from "../deps.ts";
import { buildPodPlan, podPlanInput } from "../plan/pod_plan.ts";
import { isStaticPod, type PodRef, podRefFromArgs, runtimePodAnnotations } from "../plan/pod.ts";
import { waitForReadiness } from "./readiness.ts";
import type { AttachmentPlan, NetworkStatus } from "../types.ts";
import { AddRun } from "./add_run.ts";
import type { Logger } from "../../log/mod.ts";
import { mark, timeline } from "../../log/trace.ts";
import { crashpoint } from "../crashpoint.ts";
import {
  addedInterfaceEvent,
  sendAddedEvents,
  warnErrorEvent,
  warnIgnoredSelection,
} from "../status/add_events.ts";

/**
 * Runs ADD for one sandbox.
 * @param deps the command's dependencies.
 * @returns the cluster default network's result, decoded once (the dispatcher converts it to
 *   the config's cniVersion), as Multus does.
 * @throws {CniError} 3 pod gone or UID mismatch; 7 invalid annotation/NAD/config/capability,
 *   duplicate interface, isolation, more than one `default-route` (all before any delegate
 *   runs); 11 API unreachable or readiness not reached; a delegate's own code, prefixed with
 *   `[ns/pod:net]`.
 */
export async function cmdAdd(deps: ManifoldDeps): Promise<DecodedResult> {
  const { conf, env } = deps;
  const runtimeArgs = env.argPairs ?? parseCniArgs(env.args);
  const pod = podRefFromArgs(runtimeArgs, env.containerId);
  const log = deps.logger.with({
    cmd: "ADD",
    containerId: env.containerId,
    pod: pod ? `${pod.namespace}/${pod.name}` : undefined,
  });

  await waitForReadiness(conf.readinessindicatorfile, conf.readinessTimeoutMs);
  // Load netlink (module + libraries) while the first delegate runs: verification needs it.
  deps.delegateSpawned?.then(() => {
    mark("spawned");
    deps.kernel?.prefetch?.();
  });

  // The pod GET (when needed) overlaps the cluster default network's resolution, and the API
  // connection (when the pod is not read from it) the plan.
  let podUnreadable = false;
  const unreadable = (e: unknown): never => {
    podUnreadable = true;
    throw e;
  };
  let podInfo: PodInfo | undefined; // the pod as read from the API, when it was
  const annotations = readPodAnnotations(deps, pod, log, (info) => podInfo = info)
    .catch(unreadable);
  const ready = deps.ready?.catch(unreadable);
  ready?.catch(() => {}); // awaited before the first delegate
  const run = new AddRun(deps, pod, log);
  let statuses: NetworkStatus[];
  let queued = false;
  try {
    const planning = buildPodPlan(podPlanInput(deps, { pod, runtimeArgs, annotations }));
    // While the plan waits for the API (A/B p50 −4 ms in runtime mode); with the pod read from
    // the API, while its answer (and the NADs') is awaited, not before its request is sent.
    prefetchSpawn({ idle: podFromApi(deps, pod) });
    const plan = await planning;
    await ready;
    mark("planned");
    if (plan.ignoredSelection) warnIgnoredSelection(deps, pod, log, plan.ignoredSelection);
    const routes = (a: AttachmentPlan) =>
      a.selection?.["default-route"] ?? a.selection?.podNetwork?.isDefaultGW;
    if (plan.attachments.some(routes) && !deps.kernel) {
      throw new CniError(
        CniErrorCode.Internal,
        "default-route needs netlink access to the sandbox",
      );
    }
    await run.prepareDevices(plan.attachments, podInfo);
    await run.attachAll(plan.attachments);
    const snapshot = await run.applyDefaultRoute();
    statuses = await run.verify(snapshot);
    mark("verified");
    const kep = plan.podNetworks
      ? await lazyImport<typeof import("../status/pod_network_status.ts")>(
        "../status/pod_network_status.ts",
        import.meta.url,
      ).then((m) =>
        m.podNetworkStatusAnnotation(plan.attachments, statuses, plan.podNetworkDefaultIndex)
      )
      : undefined;
    if (kep) run.record.statusAnnotations = kep;
    // The pod the status is written to, with the UID the API knows as the PATCH's precondition.
    const target = pod && statusTarget(pod, podInfo, await annotations);
    // Device-backed pods are always published synchronously: their apps read device-info
    // through the downward API when their containers start.
    const queue = target && !isDeviceBacked(plan.attachments, statuses)
      ? deps.statusQueue
      : undefined;
    // The final record and the network-status PATCH at once: neither needs the other, and a
    // crash between them leaves the intent record, from which DEL undoes everything.
    // Queued ("statusPublish": "async"): the status is published from the durable record.
    const cached = run.cacheFinal(statuses);
    cached.catch(() => {}); // settled below
    crashpoint("add:before-patch");
    const [write, patch] = await Promise.allSettled([
      cached,
      queue ? undefined : deps.status.publish(target ?? pod, env.containerId, statuses, kep),
    ]);
    if (write.status === "rejected") throw write.reason;
    if (patch.status === "rejected") throw patch.reason;
    if (queue && target) {
      queued = true;
      queue.enqueue({
        pod: target,
        containerId: env.containerId,
        ifName: env.ifName,
        entries: statuses,
        extra: kep,
        events: statuses.map(addedInterfaceEvent),
      });
    }
    mark("published");
    crashpoint("add:after-patch");
  } catch (e) {
    if (podUnreadable) throw e; // pod gone or recreated, API unusable: nothing to undo
    await warnErrorEvent(deps, pod, log, e);
    throw await run.rollback(e);
  }
  // Queued: the AddedInterface events follow the status; other events (warnings) are sent but
  // not waited for (the flush still releases the sink's record of them).
  if (!queued) await sendAddedEvents(deps, pod, statuses);
  else void deps.events.flush();
  log.info("timeline", timeline());
  return run.results[0]!;
}

/**
 * Whether {@link readPodAnnotations} reads the pod from the API (no runtime annotations).
 * Never throws: malformed runtime annotations are {@link readPodAnnotations}' error to report
 * (it marks the pod unreadable); thrown here, in cmdAdd's `try`, the error would skip that mark
 * and leave the plan's rejection unhandled (the process died without a CNI error).
 */
function podFromApi(deps: ManifoldDeps, pod: PodRef | undefined): boolean {
  if (!pod || !deps.pods) return false;
  try {
    return !runtimePodAnnotations(deps.conf.capabilities, deps.conf.runtimeConfig);
  } catch {
    return false;
  }
}

/**
 * The pod's annotations: from the runtime when it passes them (`io.kubernetes.cri.pod-annotations`,
 * no API read), else from the API (with the UID check), else none.
 * @throws {CniError} 3 when the pod is gone or was recreated (UID mismatch); 11 API unreachable.
 */
async function readPodAnnotations(
  deps: ManifoldDeps,
  pod: PodRef | undefined,
  log: Logger,
  seen: (info: PodInfo) => void,
): Promise<Record<string, string>> {
  const fromRuntime = runtimePodAnnotations(deps.conf.capabilities, deps.conf.runtimeConfig);
  if (fromRuntime) {
    log.debug("pod annotations from runtimeConfig");
    return fromRuntime;
  }
  if (!pod || !deps.pods || !podFromApi(deps, pod)) return {};
  const info = await deps.pods.get(pod.namespace, pod.name, pod.uid || undefined);
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
  mark("podRead");
  seen(info);
  return info.annotations;
}

/**
 * The pod a network-status PATCH goes to, its `uid` the precondition: the UID the API gave
 * when the pod was read (a static pod's mirror has another UID than the runtime's), else
 * K8S_POD_UID — none for a static pod known only from the runtime's annotations.
 */
function statusTarget(
  pod: PodRef,
  read: PodInfo | undefined,
  annotations: Record<string, string>,
): PodRef {
  if (read?.uid) return { ...pod, uid: read.uid };
  if (isStaticPod(annotations)) return { ...pod, uid: "" };
  return pod;
}

/**
 * Whether a pod has a device-backed attachment: a NAD with a `resourceName` (device plugin or
 * DRA), or an attachment with device-info (Device Information Spec v1.1).
 */
function isDeviceBacked(attachments: AttachmentPlan[], statuses: NetworkStatus[]): boolean {
  return attachments.some((a) => a.delegate.resourceName) ||
    statuses.some((s) => s["device-info"] !== undefined);
}
