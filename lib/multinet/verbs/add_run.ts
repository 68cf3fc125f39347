/**
 * One ADD in progress — the sandbox's, or a hot-plug's continuing a running pod's record: its
 * cache record and decoded results, the attachments run one at a time behind one intent
 * record (NPWG §7.3), `default-route`, the kernel check, the final record and the rollback
 * (§7.2). `verbs/add.ts` drives it for ADD; `lib/daemon/hotplug/apply.ts` for hot-plug.
 *
 * @module
 */

import { lazyImport } from "../../util/lazy.ts";
import { type CniError, toCniError } from "../../cni/errors.ts";
import type { DecodedResult } from "../../cni/result.ts";
import { CACHE_SCHEMA_VERSION, type CachedAttachment, type CacheRecord } from "../cache/cache.ts";
import type { ManifoldDeps, PodInfo } from "../deps.ts";
import { detachAll, removeDeviceInfo } from "./detach.ts";
import {
  collectDevice,
  type DeviceContext,
  deviceContext,
  planDevices,
  prefetchDevices,
  prepareDevice,
} from "./add_devices.ts";
import { attachmentContext, planPodOf, type PodRef } from "../plan/pod.ts";
import { applyDefaultRoute, claimsSandboxInterface, reconcileStatus } from "../status/kernel.ts";
import { buildNetworkStatus } from "../status/network_status_build.ts";
import type { AttachmentPlan, NetworkStatus } from "../types.ts";
import type { NetnsSnapshot } from "../../netlink/inspect.ts";
import type { Logger } from "../../log/mod.ts";
import { mark } from "../../log/trace.ts";
import { crashpoint } from "../crashpoint.ts";

/** One attachment ready to run: its plan, cache entry and delegate list (device injected). */
type Prepared = {
  plan: AttachmentPlan;
  entry: CachedAttachment;
  list: AttachmentPlan["delegate"]["list"];
};

/** A running pod's record and its attachments' decoded results, for hot-plug to continue. */
export type RunFrom = { record: CacheRecord; results: (DecodedResult | undefined)[] };

/** One ADD in progress (or a hot-plug's, `from` a running pod): record and decoded results. */
export class AddRun {
  /** The cache record, written before the first delegate (intent) and at the end. */
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

  /**
   * Attaches `plans` one after the other (NPWG §7.3). Every device is prepared first; then one
   * intent record naming all of them (`state: "adding"`) is durable before the first delegate
   * has its config (it is spawned while the record is written, its stdin written once the
   * record is durable) — one durable cache write for the whole pod rather than one per
   * attachment. A crash
   * anywhere after it leaves a record from which DEL undoes every planned attachment: a DEL of
   * one whose ADD never ran finds nothing to remove, which a plugin must accept (CNI SPEC
   * "DEL: Remove container from network": missing resources are not an error). Each result is
   * kept in memory, decoded once, and written with the final record ({@link cacheFinal}).
   * On a failure the record keeps only the attachments attempted (the failing one included) for
   * the caller's rollback; the device-info files prepared for the others are removed.
   * @throws {CniError} a device preparation error (nothing attached), or the failing delegate's
   *   error prefixed with `[ns/pod:net]`.
   */
  async attachAll(plans: readonly AttachmentPlan[]): Promise<void> {
    const prepared: Prepared[] = [];
    try {
      for (const plan of plans) prepared.push(await this.#prepare(plan));
    } catch (e) {
      await this.#dropDeviceInfo(prepared.map((p) => p.entry));
      throw e;
    }
    if (prepared.length === 0) return;
    const base = this.record.attachments.length;
    crashpoint("add:before-intent");
    this.record.attachments.push(...prepared.map((p) => p.entry));
    // The intent record is durable before any delegate has its config: the first delegate is
    // spawned while the record is written, and gets its config (stdin) only once it is durable
    // (ExecRequest.stdinGate: ≈ 1.5 ms of the delegate's start-up off the critical path).
    const intent = this.#deps.cache.write(this.record).then(() => {
      mark("intent");
      crashpoint("add:before-delegate"); // the first delegate's
    });
    intent.catch(() => {}); // awaited below whatever happens
    for (const [i, p] of prepared.entries()) {
      try {
        await this.#add(p, i === 0 ? intent : undefined);
      } catch (e) {
        // A failed intent write is the error (the first delegate never got its config, nothing
        // ran); a written one is settled before the caller's rollback writes the record again.
        if (i === 0) await intent;
        await this.#dropDeviceInfo(this.record.attachments.splice(base + i + 1));
        throw e;
      }
    }
  }

  /** The attachment's cache entry (`"adding"`) and delegate list, its device prepared. */
  async #prepare(plan: AttachmentPlan): Promise<Prepared> {
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
      origin: plan.origin,
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
    return { plan, entry, list };
  }

  /** Runs one delegate ADD (its intent is cached) and keeps its result (and device-info). */
  async #add({ plan, entry, list }: Prepared, stdinGate?: Promise<void>): Promise<void> {
    const { env, runtime } = this.#deps;
    const n = this.results.length + 1;
    if (!stdinGate) crashpoint("add:before-delegate"); // else once the gate opens
    const started = performance.now();
    let decoded: DecodedResult;
    try {
      decoded = await runtime.addNetworkList(list, {
        containerId: env.containerId,
        netns: env.netns,
        ifName: plan.ifName,
        args: plan.cniArgs,
        capabilityArgs: entry.capabilityArgs,
      }, stdinGate ? { stdinGate } : {});
    } catch (e) {
      throw toCniError(e).withContext(attachmentContext(this.#pod, plan.delegate.statusName));
    }
    crashpoint("add:after-delegate");
    entry.result = decoded.raw;
    entry.state = "added";
    if (plan.selection?.podNetwork?.isDefaultGW) {
      const { defaultGatewaysOf } = await lazyImport<typeof import("../plan/pod_networks.ts")>(
        "../plan/pod_networks.ts",
        import.meta.url,
      );
      entry.defaultRoute = defaultGatewaysOf(decoded.result, plan.delegate.statusName);
    }
    this.results.push(decoded);
    mark(`attached${n}`);
    const deviceInfo = await collectDevice(this.#device, entry, decoded.result);
    if (deviceInfo) entry.deviceInfo = deviceInfo;
    this.#log.info("attached", {
      network: plan.delegate.statusName,
      ifName: plan.ifName,
      ms: Math.round(performance.now() - started),
    });
  }

  /** Removes the device-info files prepared for attachments that will not be attached. */
  async #dropDeviceInfo(entries: CachedAttachment[]): Promise<void> {
    await Promise.all(entries.map((a) => removeDeviceInfo(this.#deps, a)));
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
