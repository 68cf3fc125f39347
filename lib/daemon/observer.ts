/**
 * The daemon's observation contract: what `manifold daemon` reports while it serves, implemented by
 * the metrics module (Prometheus) and recorded by tests.
 *
 * Fallbacks happen in the forwarder process, not the daemon: each time the binary falls back to the
 * in-process path it appends one line (`<unix ms> <reason>\n`, O_APPEND, best effort) to the counter
 * file `fallbacks` next to the socket (`<socket dir>/fallbacks`); the metrics side counts its lines
 * for `manifold_fallback_total`.
 *
 * @module
 */

import type { EventSink } from "../multinet/deps.ts";

/**
 * Why a MultiNetworkPolicy sync left a pod's rules other than computed (the `reason` label of
 * `manifold_policy_apply_failures_total`): `apply_failed` (a batch refused: the pod's policed
 * interfaces were closed, or could not be), `remove_failed` (a table no policy needs could not
 * be removed), `sync_failed` (the whole sync failed, e.g. the cache directory unreadable),
 * `no_sandbox` (a selected pod with interfaces on a policy's network has no sandbox in the
 * attachment cache after the grace period: counted once per pod and episode).
 */
export type PolicyFailureReason = "apply_failed" | "remove_failed" | "sync_failed" | "no_sandbox";

/** Failures of one sync by reason (a missing reason counts 0). */
export type PolicyFailures = Partial<Record<PolicyFailureReason, number>>;

/** Every {@link PolicyFailureReason}, in label order. */
export const POLICY_FAILURE_REASONS: readonly PolicyFailureReason[] = [
  "apply_failed",
  "remove_failed",
  "sync_failed",
  "no_sandbox",
];

/** What the daemon reports as it serves; the metrics module implements it, tests may record it. */
export interface DaemonObserver {
  /** One CNI request served by the daemon: command = CNI_COMMAND, result "success" | "error", seconds = wall time. */
  cniRequest(command: string, result: "success" | "error", seconds: number): void;
  /** One delegate plugin execution: plugin = its type, command = CNI_COMMAND, seconds = wall time. */
  delegate(plugin: string, command: string, seconds: number): void;
  /**
   * One Kubernetes API request (every attempt, retries included): verb = HTTP method (GET,
   * PATCH, …; WATCH for a watch stream), code = HTTP status (0 = no answer).
   */
  apiRequest(verb: string, code: number): void;
  /**
   * A list/watch halved its page size after a page over the API body cap (lib/k8s/list.ts):
   * resource = the collection's plural (`pods`, `network-attachment-definitions`, …).
   */
  apiListPageShrunk?(resource: string): void;
  /** Number of live attachments in the cache, after the start-up count and each ADD, DEL or GC. */
  attachments(count: number): void;
  /**
   * One MultiNetworkPolicy sync (`"multiNetworkPolicy": true`): seconds = wall time (cache
   * scan, engine, every batch); failures = pods whose rules could not be applied as computed,
   * by {@link PolicyFailureReason} (reasons absent or 0: none).
   */
  policySync?(seconds: number, failures: PolicyFailures): void;
  /**
   * A pod change of the policy agent's cluster-wide pod watch: `"sync"` when it scheduled a
   * MultiNetworkPolicy sync (the pod is on this node, or a policy's peer names it), `"ignored"`
   * when it cannot change this node's rules (lib/daemon/policy/peers.ts).
   */
  policyPodChange?(effect: "sync" | "ignored"): void;
  /**
   * Hot-plug (`"hotPlug": true`): one selection element of a running pod added or removed
   * (result `"success"` or `"error"`), or a change refused (`"refused"`: op `"add"` for a new
   * element, `"change"` for keys of an attached element or a selection that cannot be
   * planned, `"remove"` for an attachment of unknown origin left in place; once per
   * annotation value).
   */
  hotPlugChange?(
    op: "add" | "remove" | "change",
    result: "success" | "error" | "refused",
  ): void;
  /**
   * One hot-plug change of a pod that ran delegates: seconds = wall time from taking the
   * container's lock to the network-status PATCH; result `"error"` when an ADD failed (and was
   * rolled back) or a DEL failed.
   */
  hotPlugDuration?(seconds: number, result: "success" | "error"): void;
  /**
   * One Kubernetes event handed to the API (after the `events` policy): type `Normal` |
   * `Warning`, reason e.g. `TeardownAbandoned` (NPWG v1.3 §7.2 give-up), `ErrorAddingNetwork`.
   */
  event?(type: "Normal" | "Warning", reason: string): void;
  /** One failed `accept(2)` on the daemon socket (e.g. out of descriptors; server.ts backs off). */
  acceptError?(): void;
  /**
   * `"statusPublish": "async"`: a network-status was written, seconds after ADD queued it (the
   * oldest status of the pod it replaced).
   */
  statusPublished?(lagSeconds: number): void;
  /** `"statusPublish": "async"`: statuses queued and not yet written, after every change. */
  statusPending?(count: number): void;
  /**
   * `"statusPublish": "async"`: a network-status was given up after 5 permanent failures
   * (HTTP 400, 403, or a 422 other than the UID precondition).
   */
  statusGaveUp?(): void;
}

/**
 * An event sink that tells the observer of each event it passes on (`manifold_events_total`).
 *
 * @param sink where the events go (e.g. a `KubeEventSink`)
 * @param observer the daemon's observer
 * @returns a sink with the same behaviour that also counts
 */
export function countingEventSink(sink: EventSink, observer: DaemonObserver): EventSink {
  return {
    emit(pod, ev) {
      observer.event?.(ev.type, ev.reason);
      sink.emit(pod, ev);
    },
    flush: () => sink.flush(),
  };
}

/** An observer that records nothing. */
export const NO_OBSERVER: DaemonObserver = {
  cniRequest() {},
  delegate() {},
  apiRequest() {},
  attachments() {},
};
