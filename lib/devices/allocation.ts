/**
 * Which devices kubelet allocated to a pod, and which one each attachment gets.
 *
 * The pod's devices come from the kubelet pod-resources API (`Get`, else `List`); when its
 * socket is absent, the call fails or kubelet does not list the pod, from the device-plugin
 * checkpoint (by pod UID) — every fallback is logged. A NAD annotated
 * `k8s.v1.cni.cncf.io/resourceName` then takes the next unused device of that resource:
 * device IDs are sorted and each is used once per pod, in attachment order (Multus
 * `getKubernetesDelegate`, with the IDs sorted so the order does not depend on kubelet's).
 *
 * @module
 */

import { lazyImport } from "../util/lazy.ts";
import type { Logger } from "../log/mod.ts";
import { readCheckpointDevices } from "./checkpoint.ts";
import type { PodResources } from "./pod_resources_proto.ts";
import { errorText } from "../util/text.ts";

/** The pod whose devices are wanted (from CNI_ARGS K8S_POD_*). */
export interface PodKey {
  /** The pod's namespace (K8S_POD_NAMESPACE). */
  namespace: string;
  /** The pod's name (K8S_POD_NAME). */
  name: string;
  /** K8S_POD_UID; "" when the runtime did not send it (the checkpoint cannot be used then). */
  uid: string;
}

/** A pod's devices: resource name → sorted, distinct device IDs; and where they came from. */
export interface PodDevices {
  /** Resource name (e.g. `"intel.com/sriov"`) → device IDs. */
  devices: Record<string, string[]>;
  /** `"pod-resources"` (kubelet API), `"checkpoint"` (the file) or `"none"` (neither answered). */
  source: "pod-resources" | "checkpoint" | "none";
}

/** Options of {@link readPodDevices}. */
export interface ReadPodDevicesOptions {
  /** kubelet's pod-resources unix socket. */
  podResourcesSocket: string;
  /** kubelet's device-plugin checkpoint file. */
  checkpointFile: string;
  /** Bound on each gRPC call, ms. */
  timeoutMs?: number;
  /** Warnings (a source that did not answer); default none. */
  logger?: Logger;
}

/**
 * Reads the devices kubelet allocated to a pod: the pod-resources API first, the checkpoint
 * file as fallback (see the module text). Never throws: a source that fails is logged and the
 * next is tried; when none answers, `{devices: {}, source: "none"}`.
 *
 * gRPC is loaded only when the socket exists.
 *
 * @param pod namespace, name and UID
 * @param options socket, checkpoint file, timeout, logger
 * @returns the pod's devices by resource name
 */
export async function readPodDevices(
  pod: PodKey,
  options: ReadPodDevicesOptions,
): Promise<PodDevices> {
  const log = options.logger;
  const socket = options.podResourcesSocket;
  let socketPresent = false;
  try {
    socketPresent = (await Deno.stat(socket)).isSocket === true;
  } catch {
    socketPresent = false;
  }
  if (socketPresent) {
    const { PodResourcesClient } = await lazyImport<typeof import("./pod_resources.ts")>(
      "./pod_resources.ts",
      import.meta.url,
    );
    const client = await PodResourcesClient.connect(socket, { timeoutMs: options.timeoutMs });
    try {
      const found = await client.podResources(pod.namespace, pod.name);
      if (found) return { devices: devicesOf(found), source: "pod-resources" };
      log?.warn("kubelet pod-resources does not list the pod; trying the checkpoint", {
        socket,
        pod: `${pod.namespace}/${pod.name}`,
      });
    } catch (e) {
      log?.warn("kubelet pod-resources call failed; trying the checkpoint", {
        socket,
        error: errorText(e),
      });
    } finally {
      client.close();
    }
  } else {
    log?.debug("no kubelet pod-resources socket; reading the device-plugin checkpoint", {
      socket,
    });
  }
  if (!pod.uid) {
    log?.warn("no K8S_POD_UID: the device-plugin checkpoint cannot be matched to the pod", {
      checkpoint: options.checkpointFile,
    });
    return { devices: {}, source: "none" };
  }
  try {
    const devices = await readCheckpointDevices(options.checkpointFile, pod.uid);
    if (devices) return { devices, source: "checkpoint" };
    log?.warn("no device-plugin checkpoint either", { checkpoint: options.checkpointFile });
  } catch (e) {
    log?.warn("cannot use the device-plugin checkpoint", {
      checkpoint: options.checkpointFile,
      error: errorText(e),
    });
  }
  return { devices: {}, source: "none" };
}

/**
 * A pod's devices by resource name over all its containers, each list sorted and distinct.
 * @param pod a `PodResources` reply
 * @returns resource name → device IDs
 * @example
 * ```ts
 * devicesOf({ name: "p", namespace: "ns", containers: [
 *   { name: "a", devices: [{ resourceName: "r", deviceIds: ["b", "a"] }] },
 *   { name: "b", devices: [{ resourceName: "r", deviceIds: ["c"] }] },
 * ] }); // { r: ["a", "b", "c"] }
 * ```
 */
export function devicesOf(pod: PodResources): Record<string, string[]> {
  const byResource = new Map<string, Set<string>>();
  for (const c of pod.containers) {
    for (const d of c.devices) {
      const set = byResource.get(d.resourceName) ?? new Set<string>();
      for (const id of d.deviceIds) set.add(id);
      byResource.set(d.resourceName, set);
    }
  }
  return Object.fromEntries([...byResource].map(([name, set]) => [name, [...set].sort()]));
}

/**
 * Hands out a pod's devices to its attachments: each call to {@link DeviceAllocator.take}
 * returns the next unused device ID of the resource, in sorted order. The devices are loaded
 * once, on the first `take` or `prefetch`.
 *
 * @example
 * ```ts
 * const alloc = new DeviceAllocator(async () => ({ devices: { r: ["0000:18:02.3", "0000:18:02.5"] }, source: "checkpoint" }));
 * await alloc.take("r"); // "0000:18:02.3"
 * await alloc.take("r"); // "0000:18:02.5"
 * await alloc.take("r"); // undefined: the pod has no third device of "r"
 * ```
 */
export class DeviceAllocator {
  readonly #load: () => Promise<PodDevices>;
  #loading: Promise<PodDevices> | undefined;
  readonly #used = new Map<string, number>();

  /**
   * An allocator over the pod's devices.
   *
   * @param load reads the pod's devices (e.g. {@link readPodDevices}); called at most once.
   */
  constructor(load: () => Promise<PodDevices>) {
    this.#load = load;
  }

  /** Starts loading the devices (e.g. while another attachment's delegates run); never throws. */
  prefetch(): void {
    this.#devices().catch(() => {});
  }

  /** Where the devices came from, once loaded. */
  async source(): Promise<PodDevices["source"]> {
    return (await this.#devices()).source;
  }

  /**
   * The next unused device ID of a resource.
   * @param resourceName e.g. `"intel.com/sriov_netdevice"`
   * @returns the device ID, or undefined when the pod has no unused device of that resource
   * @throws whatever the loader throws
   */
  async take(resourceName: string): Promise<string | undefined> {
    const ids = (await this.#devices()).devices[resourceName] ?? [];
    const n = this.#used.get(resourceName) ?? 0;
    if (n >= ids.length) return undefined;
    this.#used.set(resourceName, n + 1);
    return ids[n];
  }

  #devices(): Promise<PodDevices> {
    return this.#loading ??= this.#load();
  }
}
