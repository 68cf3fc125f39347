/**
 * ADD for the delegating plugin (NPWG v1.3 §6.2, §7.2, §7.3), in steps: read the pod's
 * annotations → plan every attachment (all checks, before any delegate runs) → attach each,
 * default network first, one at a time → apply `default-route` → verify with the kernel →
 * cache → publish network-status → events. On any failure once the pod is read (a plan that
 * fails its checks included), every attachment made is DELeted (reverse order), an
 * `ErrorAddingNetwork` event is sent and the ADD fails. An intent record is cached before
 * each delegate ADD so a DEL after a crash finds everything.
 *
 * @module
 */

import { parseCniArgs } from "../cni/env.ts";
import { CniError, CniErrorCode, toCniError } from "../cni/errors.ts";
import type { DecodedResult } from "../cni/result.ts";
import { CACHE_SCHEMA_VERSION, type CachedAttachment, type CacheRecord } from "./cache.ts";
import type { ManifoldDeps, PodInfo } from "./deps.ts";
import { detachAll } from "./detach.ts";
import {
  collectDevice,
  type DeviceContext,
  deviceContext,
  planDevices,
  prefetchDevices,
  prepareDevice,
} from "./add_devices.ts";
import { buildPodPlan, podPlanInput } from "./pod_plan.ts";
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
import type { AttachmentPlan, NetworkStatus } from "./types.ts";
import type { NetnsSnapshot } from "../netlink/inspect.ts";
import type { Logger } from "../log/mod.ts";
import { mark, timeline } from "../log/trace.ts";
import { crashpoint } from "./crashpoint.ts";
import { sendAddedEvents, warnIgnoredSelection } from "./add_events.ts";

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
  try {
    const plan = await buildPodPlan(podPlanInput(deps, { pod, runtimeArgs, annotations }));
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
    for (const attachment of plan.attachments) await run.attach(attachment);
    const snapshot = await run.applyDefaultRoute();
    statuses = await run.verify(snapshot);
    mark("verified");
    await run.cacheFinal(statuses);
    crashpoint("add:before-patch");
    const kep = plan.attachments.some((a) => a.selection?.podNetwork)
      ? await import("./pod_network_status.ts").then((m) =>
        m.podNetworkStatusAnnotation(plan.attachments, statuses)
      )
      : undefined;
    await deps.status.publish(
      pod,
      env.containerId,
      statuses,
      kep,
    );
    mark("published");
    crashpoint("add:after-patch");
  } catch (e) {
    if (podUnreadable) throw e; // pod gone or recreated, API unusable: nothing to undo
    throw await run.rollback(e);
  }
  await sendAddedEvents(deps, pod, statuses);
  log.info("timeline", timeline());
  return run.results[0]!;
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
  if (!pod || !deps.pods) return {};
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

/** A running pod's record and its attachments' decoded results, for hot-plug to continue. */
export type RunFrom = { record: CacheRecord; results: (DecodedResult | undefined)[] };

/** One ADD in progress (or a hot-plug's, `from` a running pod): record and decoded results. */
export class AddRun {
  /** The cache record, written before each delegate and at the end. */
  readonly record: CacheRecord;
  /** Each attachment's delegate result, decoded once, index-aligned with the record. */
  readonly results: (DecodedResult | undefined)[] = [];
  readonly #deps: ManifoldDeps;
  readonly #pod: PodRef | undefined;
  readonly #log: Logger;
  readonly #device: DeviceContext;

  /**
   * A run for one sandbox: a new cache record, or `from` an existing one (hot-plug continues it).
   * @param deps the request's dependencies
   * @param pod the pod, or undefined without an API
   * @param log the request's log
   * @param from an existing record to continue
   */
  constructor(deps: ManifoldDeps, pod: PodRef | undefined, log: Logger, from?: RunFrom) {
    const { env, conf } = deps;
    this.#deps = deps;
    this.#pod = pod;
    this.#log = log;
    const { namespace, name, uid } = planPodOf(pod, env.containerId);
    this.results.push(...from?.results ?? []);
    this.record = from?.record ?? {
      schemaVersion: CACHE_SCHEMA_VERSION,
      containerId: env.containerId,
      netns: env.netns,
      ifName: env.ifName,
      pod: { namespace, name, uid },
      cniVersion: conf.cniVersion,
      createdAt: new Date().toISOString(),
      attachments: [],
    };
    this.#device = deviceContext(deps, pod, this.record.pod, log);
  }

  /**
   * Starts reading kubelet's devices when the plan has device-backed attachments, and plans
   * DRA devices (pods with claims: code 7 before any delegate, see {@link planDevices}).
   */
  async prepareDevices(attachments: AttachmentPlan[], podInfo: PodInfo | undefined) {
    prefetchDevices(this.#device, attachments);
    await planDevices(this.#device, attachments, podInfo);
  }

  /** Records the intent, runs the delegate ADD, records the result (and device-info). */
  async attach(plan: AttachmentPlan): Promise<void> {
    const { env, cache, runtime } = this.#deps;
    const prepared = await prepareDevice(this.#device, plan);
    const list = prepared.conflist
      ? {
        ...plan.delegate.list,
        raw: prepared.conflist,
        plugins: prepared.conflist.plugins as Record<string, unknown>[],
      }
      : plan.delegate.list;
    const entry: CachedAttachment = {
      statusName: plan.delegate.statusName,
      isDefault: plan.delegate.isDefault,
      ifName: plan.ifName,
      conflist: list.raw,
      capabilityArgs: prepared.capabilityArgs ?? plan.capabilityArgs,
      cniArgs: plan.cniArgs,
      state: "adding",
    };
    if (prepared.resourceName) entry.resourceName = prepared.resourceName;
    if (prepared.deviceId) entry.deviceId = prepared.deviceId;
    if (prepared.deviceInfoFile) entry.deviceInfoFile = prepared.deviceInfoFile;
    const defaultRoute = plan.selection?.["default-route"];
    if (defaultRoute) entry.defaultRoute = defaultRoute;
    crashpoint("add:before-intent");
    this.record.attachments.push(entry);
    await cache.write(this.record); // intent record before the delegate runs
    mark(`intent${this.record.attachments.length}`);
    crashpoint("add:before-delegate");
    const started = performance.now();
    let decoded: DecodedResult;
    try {
      decoded = await runtime.addNetworkList(list, {
        containerId: env.containerId,
        netns: env.netns,
        ifName: plan.ifName,
        args: plan.cniArgs,
        capabilityArgs: entry.capabilityArgs,
      });
    } catch (e) {
      throw toCniError(e).withContext(attachmentContext(this.#pod, plan.delegate.statusName));
    }
    crashpoint("add:after-delegate");
    entry.result = decoded.raw;
    entry.state = "added";
    if (plan.selection?.podNetwork?.isDefaultGW) {
      const { defaultGatewaysOf } = await import("./pod_networks.ts");
      entry.defaultRoute = defaultGatewaysOf(decoded.result, plan.delegate.statusName);
    }
    this.results.push(decoded);
    mark(`attached${this.record.attachments.length}`);
    const deviceInfo = await collectDevice(this.#device, entry, decoded.result);
    if (deviceInfo) entry.deviceInfo = deviceInfo;
    this.#log.info("attached", {
      network: plan.delegate.statusName,
      ifName: plan.ifName,
      ms: Math.round(performance.now() - started),
    });
  }

  /**
   * Applies the plan's `default-route` (§4.1.2.1.9) with netlink.
   * @returns the sandbox after the change, or undefined when no attachment asked for one.
   */
  async applyDefaultRoute(): Promise<NetnsSnapshot | undefined> {
    if (!this.record.attachments.some((a) => a.defaultRoute !== undefined)) return undefined;
    return await applyDefaultRoute(
      this.#deps.kernel!,
      this.#deps.env.netns,
      this.record,
      this.results,
    );
  }

  /**
   * The network-status entries, from the decoded results, checked against the sandbox (one
   * netlink snapshot for all attachments: `taken` after a default-route change, else a fresh
   * one). Every disagreement is logged and becomes a Warning event naming the attachment; a
   * sandbox that cannot be read leaves the statuses as built from the results (logged):
   * verification must never cost a pod its network.
   */
  async verify(taken: NetnsSnapshot | undefined): Promise<NetworkStatus[]> {
    const { kernel, env, logger, events } = this.#deps;
    const statuses = this.record.attachments.map((a, i) =>
      buildNetworkStatus({
        statusName: a.statusName,
        ifName: a.ifName,
        isDefault: a.isDefault,
        result: this.results[i]?.result,
        deviceInfo: a.deviceInfo,
        defaultRoute: a.defaultRoute,
      })
    );
    if (!kernel || !env.netns) return statuses;
    let snapshot: NetnsSnapshot;
    try {
      snapshot = taken ?? await kernel.inspect(env.netns);
    } catch (e) {
      logger.warn("cannot read the sandbox over netlink; status taken from delegate results", {
        containerId: env.containerId,
        error: toCniError(e).message,
      });
      return statuses;
    }
    return statuses.map((status, i) => {
      const a = this.record.attachments[i];
      const { entry, problems } = reconcileStatus(
        status,
        snapshot,
        claimsSandboxInterface(this.results[i]?.result, a.ifName),
      );
      for (const problem of problems) {
        const message = `${attachmentContext(this.#pod, a.statusName)} ${problem}`;
        logger.warn("delegate result disagrees with the kernel", {
          containerId: env.containerId,
          problem: message,
        });
        if (this.#pod) {
          events.emit(this.#pod, { reason: "InterfaceMismatch", message, type: "Warning" });
        }
      }
      return entry;
    });
  }

  /** Writes the final record with the published network-status. */
  async cacheFinal(statuses: NetworkStatus[]): Promise<void> {
    this.record.networkStatus = statuses;
    crashpoint("add:before-final-cache");
    await this.#deps.cache.write(this.record);
    mark("cached");
  }

  /**
   * Undoes a failed ADD: DEL of every attachment made or attempted, newest first (§7.2);
   * attachments whose DEL also fails stay cached so the runtime's following DEL retries them,
   * else a tombstone makes that DEL a no-op (also when the plan failed and nothing ran).
   * Then the `ErrorAddingNetwork` Warning event is sent.
   * @returns the ADD's error, to throw.
   */
  async rollback(e: unknown): Promise<CniError> {
    const deps = this.#deps;
    const err = toCniError(e);
    this.#log.error("ADD failed, rolling back", {
      error: err.message,
      attached: this.record.attachments.length,
    });
    const { record } = this;
    const failed = record.attachments.length === 0
      ? []
      : await detachAll(deps, record.attachments, { netns: deps.env.netns, pod: this.#pod });
    if (failed.length === 0) {
      await deps.cache.writeTombstone(record);
    } else {
      await deps.cache.write({ ...record, attachments: failed.map((f) => f.attachment) });
    }
    if (this.#pod) {
      deps.events.emit(this.#pod, {
        reason: "ErrorAddingNetwork",
        message: err.message,
        type: "Warning",
      });
      await deps.events.flush();
    }
    return err;
  }
}
