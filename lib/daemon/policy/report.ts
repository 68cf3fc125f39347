/**
 * The policy agent's reporting (lib/daemon/policy/agent.ts): a `Warning` event
 * `MultiNetworkPolicyFailed` on the pod for each problem of a sync not reported by the previous
 * sync, a log line for a problem without a pod (e.g. an unparsable `policy-for`).
 *
 * @module
 */

import type { Logger } from "../../log/mod.ts";
import type { EventSink } from "../../multinet/deps.ts";
import type { SyncReport } from "../../policy/reconcile.ts";

/** The Warning event's reason on a pod whose policy cannot be (fully) applied. */
export const POLICY_FAILED_REASON = "MultiNetworkPolicyFailed";

/** Options of {@link PolicyProblemReporter}. */
export interface PolicyProblemReporterOptions {
  /** Where Warning events go. */
  events: EventSink;
  /** The daemon's log. */
  logger: Logger;
  /** The uid of a pod (`namespace`, `name`) as last seen, `""` when unknown. */
  uidOf: (namespace: string, name: string) => string;
}

/** Reports each sync's problems once per distinct problem (module doc). */
export class PolicyProblemReporter {
  readonly #opts: PolicyProblemReporterOptions;
  #reported = new Set<string>();

  /** @param opts see {@link PolicyProblemReporterOptions} */
  constructor(opts: PolicyProblemReporterOptions) {
    this.#opts = opts;
  }

  /**
   * Warning events for problems not reported by the previous sync (pod-less ones: a log line).
   *
   * @param report the sync's report (its `problems` are read)
   */
  report(report: SyncReport): void {
    const now = new Set<string>();
    for (const p of report.problems) {
      const id = `${p.pod ?? ""}\0${p.policy ?? ""}\0${p.reason}\0${p.message}`;
      now.add(id);
      if (this.#reported.has(id)) continue;
      if (!p.pod) {
        this.#opts.logger.warn("MultiNetworkPolicy problem", {
          reason: p.reason,
          policy: p.policy,
          message: p.message,
        });
        continue;
      }
      const [namespace, name] = p.pod.split("/");
      this.#opts.logger.warn("MultiNetworkPolicy problem", {
        pod: p.pod,
        reason: p.reason,
        policy: p.policy,
        message: p.message,
      });
      this.#opts.events.emit({
        namespace,
        name,
        uid: this.#opts.uidOf(namespace, name),
        infraContainerId: "",
      }, {
        type: "Warning",
        reason: POLICY_FAILED_REASON,
        message: `${p.reason}${p.policy ? ` (${p.policy})` : ""}: ${p.message}`,
      });
    }
    this.#reported = now;
    void this.#opts.events.flush();
  }
}
