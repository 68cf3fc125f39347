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
  /** Number of live attachments in the cache, after the start-up count and each ADD, DEL or GC. */
  attachments(count: number): void;
  /**
   * One MultiNetworkPolicy sync (`"multiNetworkPolicy": true`): seconds = wall time (cache
   * scan, engine, every batch); failures = pods whose rules could not be applied as computed.
   */
  policySync?(seconds: number, failures: number): void;
  /**
   * A pod change of the policy agent's cluster-wide pod watch: `"sync"` when it scheduled a
   * MultiNetworkPolicy sync (the pod is on this node, or a policy's peer names it), `"ignored"`
   * when it cannot change this node's rules (lib/daemon/policy_peers.ts).
   */
  policyPodChange?(effect: "sync" | "ignored"): void;
  /**
   * Hot-plug (`"hotPlug": true`): one selection element of a running pod added or removed
   * (result `"success"` or `"error"`), or a change refused (`"refused"`: op `"add"` for a new
   * element, `"change"` for keys of an attached element or a selection that cannot be
   * planned; once per annotation value).
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
}
/** An observer that records nothing. */
export const NO_OBSERVER: DaemonObserver = {
  cniRequest() {},
  delegate() {},
  apiRequest() {},
  attachments() {},
};
