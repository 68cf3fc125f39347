/**
 * What the multi-network commands need from the outside world, as injected
 * interfaces: delegates (CNI runtime), the cache, NADs, pods, status and events.
 * `wiring.ts` builds the real ones; tests pass fakes or real ones pointed at temp dirs.
 *
 * @module
 */

import type { CniEnv } from "../cni/env.ts";
import type { CniRuntime } from "../cni/runtime.ts";
import type { PodDevices, PodKey } from "../devices/allocation.ts";
import type { DraSource } from "../devices/dra.ts";
import type { KernelAccess } from "./status/kernel.ts";
import type { Logger } from "../log/mod.ts";
import type { AttachmentCache } from "./cache/cache.ts";
import type { ManifoldConf } from "./config.ts";
import type { NadSource } from "./nad/source.ts";
import type { PodRef } from "./plan/pod.ts";
import type { PodNetworkSource } from "./plan/pod_networks.ts";
import type { NetworkStatus } from "./types.ts";

/** The pod fields Manifold reads from the API. */
export interface PodInfo {
  /** The pod's `metadata.uid`. */
  uid: string;
  /** The pod's `metadata.annotations` (`{}` when none). */
  annotations: Record<string, string>;
  /**
   * The Pod object as the API returned it, kept only when `spec.resourceClaims` is non-empty
   * (Dynamic Resource Allocation; read by lib/devices/dra.ts for device-backed NADs).
   */
  withResourceClaims?: Record<string, unknown>;
}

/** Reads pods (the Kubernetes API). */
export interface PodSource {
  /**
   * Reads one pod.
   * @param namespace the pod's namespace.
   * @param name the pod's name.
   * @param uid the UID the caller expects (K8S_POD_UID), when known: a source answering from
   *   a cache (the daemon's pod informer) asks the API when its copy has another UID.
   * @returns the pod, or undefined when it does not exist (HTTP 404).
   * @throws {CniError} code 11 when the API stays unreachable after retries.
   */
  get(namespace: string, name: string, uid?: string): Promise<PodInfo | undefined>;
}

/** Publishes a pod's network-status (NPWG v1.3 §5): API patch or a file. */
export interface StatusSink {
  /** Where statuses go, for logs: "api" or "file:<dir>". */
  readonly kind: string;
  /**
   * Writes the status list for the pod (once per ADD); `extra` annotations (the KEP-3698
   * `multinetwork.manifold.dev/networks-status`) go in the same write where the sink has one.
   * @throws {CniError} code 11 when the API stays unreachable after retries.
   */
  publish(
    pod: PodRef | undefined,
    containerId: string,
    entries: NetworkStatus[],
    extra?: Record<string, string>,
  ): Promise<void>;
  /** Forgets what `publish` stored for the container (file sinks; DEL). Never throws. */
  remove?(containerId: string): Promise<void>;
}

/** One sandbox's network-status to publish after ADD returned (see {@link StatusQueue}). */
export interface QueuedStatus {
  /** The pod; `uid` is the precondition of the PATCH (`""`: none, e.g. a static pod). */
  pod: PodRef;
  /** CNI_CONTAINERID: with `ifName` the key of the cache record the status comes from. */
  containerId: string;
  /** CNI_IFNAME of the sandbox ADD. */
  ifName: string;
  /** The statuses (NPWG v1.3 §5), as in the final cache record. */
  entries: NetworkStatus[];
  /** Annotations written in the same PATCH (KEP-3698 networks-status). */
  extra?: Record<string, string>;
  /** Events sent once the status is written (dropped with it when the pod was replaced). */
  events: { reason: string; message: string; type: "Normal" | "Warning" }[];
}

/**
 * Publishes network-status in the background (`manifold daemon` with `"statusPublish":
 * "async"`): ADD queues the status once its final record is durable and returns.
 */
export interface StatusQueue {
  /**
   * Queues the status of one sandbox; returns at once. A newer status of the same pod
   * replaces one not yet written (coalescing); the write is retried with back-off.
   */
  enqueue(item: QueuedStatus): void;
}

/** Kubernetes Events (best effort: failures are logged, never fail a pod). */
export interface EventSink {
  /** Queues an event for the pod; returns at once. */
  emit(pod: PodRef, ev: { reason: string; message: string; type: "Normal" | "Warning" }): void;
  /** Waits (bounded) for queued events to be sent. */
  flush(): Promise<void>;
}

/** The devices kubelet allocated to pods (device plugins), for NADs with a `resourceName`. */
export interface PodDeviceSource {
  /**
   * The pod's devices by resource name (sorted, distinct IDs) and where they came from.
   * Never throws: a pod whose devices cannot be read has `{devices: {}, source: "none"}`.
   */
  podDevices(pod: PodKey): Promise<PodDevices>;
}

/** Everything a command needs. */
export interface ManifoldDeps {
  /** Manifold's parsed configuration. */
  conf: ManifoldConf;
  /** The validated CNI environment of the call. */
  env: CniEnv;
  /** Runs delegate conflists (libcni role). */
  runtime: CniRuntime;
  /** The attachment cache (DEL/CHECK/GC). */
  cache: AttachmentCache;
  /** NADs by reference; undefined when there is neither an API nor a `nadDir`. */
  nads?: NadSource;
  /** Pods; undefined without an API (standalone). */
  pods?: PodSource;
  /** KEP-3698 PodNetworks and PodNetworkAttachments; undefined without an API. */
  podNetworks?: PodNetworkSource;
  /** Where network-status goes (API patch or a file). */
  status: StatusSink;
  /** Kubernetes Events (best effort). */
  events: EventSink;
  /**
   * `manifold daemon` with `"statusPublish": "async"`: ADD queues network-status here instead
   * of writing it (pods without a device-backed attachment); undefined: ADD writes it.
   */
  statusQueue?: StatusQueue;
  /** The call's logger. */
  logger: Logger;
  /** The sandbox as the kernel sees it (netlink); undefined disables verification. */
  kernel?: KernelAccess;
  /** Allocated devices (kubelet); undefined: NADs with a `resourceName` get no `deviceID`. */
  devices?: PodDeviceSource;
  /** DRA ResourceClaims and ResourceSlices (the API); undefined without an API. */
  dra?: DraSource;
  /**
   * ADD with an API: resolves once the API connection is set up (kubeconfig read, client
   * loaded), rejects with code 7 for an unreadable or invalid kubeconfig. ADD waits for it
   * before its first delegate; undefined: nothing to wait for.
   */
  ready?: Promise<void>;
  /**
   * Resolves once the first delegate process of this call has been spawned and given its
   * config (ADD starts its NAD requests then, so they never delay that spawn); undefined: do
   * not wait.
   */
  delegateSpawned?: Promise<void>;
}
