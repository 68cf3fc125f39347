/**
 * Where network-status and events go: the Kubernetes API (pods/status merge patch,
 * Events), or — without an API server (standalone mode) — a file per container under
 * `<cniDir>/network-status/` and the log.
 *
 * @module
 */

import { startTimer, type Timer } from "../util/timer.ts";
import type { KubeClient } from "../k8s/client.ts";
import type { Logger } from "../log/mod.ts";
import type { EventSink, StatusSink } from "./deps.ts";
import type { PodRef } from "./pod.ts";
import { serializeNetworkStatus } from "./status.ts";
import { NETWORK_STATUS_ANNOTATION, type NetworkStatus } from "./types.ts";

/**
 * Publishes network-status as one JSON merge patch on the pod's `status` subresource
 * (so RBAC needs `pods/status` patch only), NPWG v1.3 §5.
 */
export class ApiStatusSink implements StatusSink {
  readonly kind = "api";
  #kube: KubeClient;
  constructor(kube: KubeClient) {
    this.#kube = kube;
  }
  /** @throws {CniError} 11 when the API stays unreachable after the client's retries. */
  async publish(pod: PodRef | undefined, _containerId: string, entries: NetworkStatus[]) {
    if (!pod) return;
    try {
      await this.#kube.patchPodStatusAnnotations(pod.namespace, pod.name, {
        [NETWORK_STATUS_ANNOTATION]: serializeNetworkStatus(entries),
      });
    } catch (e) {
      // api_errors.ts is loaded with the API sources: no cost here.
      throw (await import("./api_errors.ts")).cniErrorFromKube(e);
    }
  }
}

/** Standalone mode: writes `<dir>/<containerId>.json` (atomic rename, 0600) and logs the status. */
export class FileStatusSink implements StatusSink {
  readonly kind: string;
  #dir: string;
  #logger: Logger;
  constructor(dir: string, logger: Logger) {
    this.#dir = dir;
    this.#logger = logger;
    this.kind = `file:${dir}`;
  }
  /** Path of the status file of a container. */
  path(containerId: string): string {
    return `${this.#dir}/${containerId}.json`;
  }
  /** @throws {Deno.errors.PermissionDenied} and other I/O errors of the write. */
  async publish(pod: PodRef | undefined, containerId: string, entries: NetworkStatus[]) {
    const text = serializeNetworkStatus(entries);
    await Deno.mkdir(this.#dir, { recursive: true, mode: 0o700 });
    const tmp = `${this.path(containerId)}.tmp-${Deno.pid}`;
    await Deno.writeTextFile(tmp, text + "\n", { mode: 0o600 });
    await Deno.rename(tmp, this.path(containerId));
    this.#logger.info("network-status", {
      pod: pod ? `${pod.namespace}/${pod.name}` : undefined,
      containerId,
      [NETWORK_STATUS_ANNOTATION]: entries,
    });
  }
  async remove(containerId: string) {
    await Deno.remove(this.path(containerId)).catch(() => {});
  }
}

/** Sends Kubernetes Events concurrently with other work; failures are logged only. */
export class KubeEventSink implements EventSink {
  #kube: KubeClient;
  #logger: Logger;
  #pending: Promise<void>[] = [];
  constructor(kube: KubeClient, logger: Logger) {
    this.#kube = kube;
    this.#logger = logger;
  }
  emit(pod: PodRef, ev: { reason: string; message: string; type: "Normal" | "Warning" }) {
    this.#pending.push(
      this.#kube.createEvent(pod.namespace, {
        involvedObject: {
          kind: "Pod",
          apiVersion: "v1",
          name: pod.name,
          namespace: pod.namespace,
          uid: pod.uid || undefined,
        },
        reason: ev.reason,
        message: ev.message,
        type: ev.type,
        component: "manifold",
      }).catch((e) => this.#logger.warn("event not sent", { reason: ev.reason, error: String(e) })),
    );
  }
  /** Waits for queued events, at most 2 s. */
  async flush() {
    const pending = this.#pending.splice(0);
    if (pending.length === 0) return;
    let timer: Timer | undefined;
    await Promise.race([
      Promise.allSettled(pending),
      new Promise<void>((r) => timer = startTimer(2000, r)),
    ]);
    timer?.cancel();
  }
}

/** Without an API, events are log lines. */
export class LogEventSink implements EventSink {
  #logger: Logger;
  constructor(logger: Logger) {
    this.#logger = logger;
  }
  emit(pod: PodRef, ev: { reason: string; message: string; type: "Normal" | "Warning" }) {
    const fields = { pod: `${pod.namespace}/${pod.name}`, reason: ev.reason, message: ev.message };
    if (ev.type === "Warning") this.#logger.warn("event", fields);
    else this.#logger.info("event", fields);
  }
  flush() {
    return Promise.resolve();
  }
}
