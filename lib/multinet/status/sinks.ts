/**
 * Where network-status and events go: the Kubernetes API (pods/status merge patch,
 * Events), or — without an API server (standalone mode) — a file per container under
 * `<cniDir>/network-status/` and the log.
 *
 * @module
 */

import { lazyImport } from "../../util/lazy.ts";
import { writeFileAtomic } from "../../fs/atomic.ts";
import { startTimer, type Timer } from "../../util/timer.ts";
import type { KubeClient } from "../../k8s/client.ts";
import { CniError, CniErrorCode } from "../../cni/errors.ts";
import type { Logger } from "../../log/mod.ts";
import type { EventSink, StatusSink } from "../deps.ts";
import type { PodRef } from "../plan/pod.ts";
import { serializeNetworkStatus } from "./network_status_build.ts";
import { recordName } from "../cache/names.ts";
import { NETWORK_STATUS_ANNOTATION, type NetworkStatus } from "../types.ts";

/**
 * Publishes network-status as one JSON merge patch on the pod's `status` subresource
 * (so RBAC needs `pods/status` patch only), NPWG v1.3 §5.
 */
export class ApiStatusSink implements StatusSink {
  /** Where statuses go, for logs. */
  readonly kind = "api";
  #kube: KubeClient;
  /**
   * Creates the sink over a client.
   * @param kube the Kubernetes client (needs `pods/status` patch).
   */
  constructor(kube: KubeClient) {
    this.#kube = kube;
  }
  /**
   * Patches the pod's `k8s.v1.cni.cncf.io/network-status` annotation (NPWG v1.3 §5).
   * The pod's UID (`pod.uid`, when known) is sent as a precondition (`metadata.uid`): a pod
   * deleted and recreated under the same name is never written.
   * @param pod the pod; nothing is sent without one (a non-Kubernetes runtime).
   * @param _containerId unused (the pod is the key).
   * @param entries the statuses, default network first.
   * @param extra other annotations set in the same PATCH (KEP-3698 networks-status).
   * @throws {PodGoneError} (CNI code 3) when the API's pod has another UID (422 on
   *   `metadata.uid`) or is gone (404); {CniError} 11 when the API stays unreachable after the
   *   client's retries.
   */
  async publish(
    pod: PodRef | undefined,
    _containerId: string,
    entries: NetworkStatus[],
    extra: Record<string, string> = {},
  ): Promise<void> {
    if (!pod) return;
    try {
      await this.#kube.patchPodStatusAnnotations(pod.namespace, pod.name, {
        ...extra,
        [NETWORK_STATUS_ANNOTATION]: serializeNetworkStatus(entries),
      }, { uid: pod.uid });
    } catch (e) {
      const { isUidMismatch, isNotFound } = await lazyImport<typeof import("../../k8s/errors.ts")>(
        "../../k8s/errors.ts",
        import.meta.url,
      ); // error path only
      if (isUidMismatch(e) && pod.uid) {
        throw new PodGoneError(pod, "replaced", (e as Error).message);
      }
      if (isNotFound(e)) throw new PodGoneError(pod, "deleted", (e as Error).message);
      // api_errors.ts is loaded with the API sources: no cost here.
      throw (await lazyImport<typeof import("../api_errors.ts")>(
        "../api_errors.ts",
        import.meta.url,
      )).cniErrorFromKube(e);
    }
  }
}

/**
 * The network-status PATCH found no pod to write: none of that name (404), or one with
 * another UID (the `metadata.uid` the PATCH carries does not match: the pod was deleted and
 * recreated under the same name, e.g. by a StatefulSet). Final, never retried; CNI code 3
 * (unknown container), as ADD's own UID check.
 */
export class PodGoneError extends CniError {
  /** `"replaced"`: same name, another UID; `"deleted"`: no pod of that name. */
  readonly gone: "replaced" | "deleted";
  /**
   * Creates the error.
   * @param pod the pod the status was meant for (its UID is the precondition that failed).
   * @param gone replaced or deleted.
   * @param details the API call's error text.
   */
  constructor(pod: PodRef, gone: "replaced" | "deleted", details: string) {
    super(
      CniErrorCode.UnknownContainer,
      `pod ${pod.namespace}/${pod.name} was ${gone}: network-status not written`,
      gone === "replaced" ? `the status was for UID ${pod.uid}; ${details}` : details,
    );
    this.name = "PodGoneError";
    this.gone = gone;
  }
}

/**
 * Standalone mode: writes `<dir>/<containerId>@<ifName>.json` — keyed like the cache
 * (lib/multinet/cache/names.ts), so two CNI_IFNAMEs of one container (two runtimes' networks)
 * keep their own status — (mode 0600, dir 0700) with `writeFileAtomic` — temporary file,
 * fsync, rename, directory fsync, so a crash never leaves a truncated status — and logs the
 * status. The per-container `<containerId>.json` of earlier versions is still read and removed.
 */
export class FileStatusSink implements StatusSink {
  /** `"file:<dir>"`, for logs. */
  readonly kind: string;
  #dir: string;
  #logger: Logger;
  #ifName: string;
  /**
   * Creates the sink over a directory (created with mode 0700 on the first write).
   * @param dir e.g. `<cniDir>/network-status`.
   * @param logger receives each published status.
   * @param opts `ifName`: the call's CNI_IFNAME, the second half of the file's key (`""`:
   *   the legacy per-container name).
   */
  constructor(dir: string, logger: Logger, opts: { ifName?: string } = {}) {
    this.#dir = dir;
    this.#logger = logger;
    this.#ifName = opts.ifName ?? "";
    this.kind = `file:${dir}`;
  }
  /**
   * Path of the status file of a container's attachment set.
   * @param containerId CNI_CONTAINERID.
   * @param ifName CNI_IFNAME; default the sink's; `""` for the legacy per-container file.
   * @returns `<dir>/<containerId>@<ifName>.json` (ifName encoded as in the cache), or
   *   `<dir>/<containerId>.json`.
   * @throws {CniError} code 4 for an invalid container ID or interface name.
   */
  path(containerId: string, ifName = this.#ifName): string {
    return `${this.#dir}/${recordName(containerId, ifName)}`;
  }
  /**
   * Writes the status file atomically and durably and logs the statuses.
   * @param pod the pod, for the log line (may be undefined).
   * @param containerId CNI_CONTAINERID, names the file (with the sink's ifName).
   * @param entries the statuses (NPWG v1.3 §5), written as the annotation's JSON text.
   * @throws {Deno.errors.PermissionDenied} and other I/O errors of the write.
   */
  async publish(
    pod: PodRef | undefined,
    containerId: string,
    entries: NetworkStatus[],
  ): Promise<void> {
    const text = serializeNetworkStatus(entries);
    await Deno.mkdir(this.#dir, { recursive: true, mode: 0o700 });
    await writeFileAtomic(this.path(containerId), text + "\n", { mode: 0o600 });
    this.#logger.info("network-status", {
      pod: pod ? `${pod.namespace}/${pod.name}` : undefined,
      containerId,
      [NETWORK_STATUS_ANNOTATION]: entries,
    });
  }
  /**
   * Reads a status file: this sink's name, else the legacy per-container one.
   * @param containerId CNI_CONTAINERID.
   * @returns the statuses, or undefined when neither file exists.
   * @throws {CniError} code 6 when the file is not a valid network-status list; I/O errors.
   */
  async read(containerId: string): Promise<NetworkStatus[] | undefined> {
    for (const path of new Set([this.path(containerId), this.path(containerId, "")])) {
      try {
        const text = await Deno.readTextFile(path);
        return (await lazyImport<typeof import("./network_status.ts")>(
          "./network_status.ts",
          import.meta.url,
        )).parseNetworkStatus(text); // zod: only here
      } catch (e) {
        if (!(e instanceof Deno.errors.NotFound)) throw e;
      }
    }
    return undefined;
  }
  /**
   * Removes the status file, and a legacy per-container one; never throws (a missing file
   * is fine).
   * @param containerId CNI_CONTAINERID.
   */
  async remove(containerId: string): Promise<void> {
    const paths = [() => this.path(containerId), () => this.path(containerId, "")];
    for (const path of paths) {
      try {
        await Deno.remove(path());
      } catch { /* missing, or an invalid key */ }
    }
  }
}

/** Sends Kubernetes Events concurrently with other work; failures are logged only. */
export class KubeEventSink implements EventSink {
  #kube: KubeClient;
  #logger: Logger;
  #pending: Promise<void>[] = [];
  /**
   * Creates the sink.
   * @param kube the Kubernetes client (needs `events` create).
   * @param logger receives events that could not be sent.
   */
  constructor(kube: KubeClient, logger: Logger) {
    this.#kube = kube;
    this.#logger = logger;
  }
  /**
   * Queues a core/v1 Event about the pod (component `manifold`); returns at once.
   * @param pod the pod the event is about.
   * @param ev reason (e.g. `AddedInterface`), message and type.
   */
  emit(pod: PodRef, ev: { reason: string; message: string; type: "Normal" | "Warning" }): void {
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
  /** Waits for queued events, at most 2 s; never throws. */
  async flush(): Promise<void> {
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
  /**
   * Creates the sink.
   * @param logger receives the events (Warning → warn, Normal → info).
   */
  constructor(logger: Logger) {
    this.#logger = logger;
  }
  /**
   * Logs the event.
   * @param pod the pod the event is about.
   * @param ev reason, message and type.
   */
  emit(pod: PodRef, ev: { reason: string; message: string; type: "Normal" | "Warning" }): void {
    const fields = { pod: `${pod.namespace}/${pod.name}`, reason: ev.reason, message: ev.message };
    if (ev.type === "Warning") this.#logger.warn("event", fields);
    else this.#logger.info("event", fields);
  }
  /** Nothing is queued: resolves at once. */
  flush(): Promise<void> {
    return Promise.resolve();
  }
}
