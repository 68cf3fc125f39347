/**
 * The observer wiring of the policy agent (lib/daemon/policy/agent.ts): a sandbox ADD or DEL
 * served by the daemon schedules a policy sync.
 *
 * @module
 */

import type { DaemonObserver } from "../observer.ts";

/**
 * An observer that also schedules a policy sync when a sandbox ADD or DEL served by the daemon
 * succeeded (the pod's netns just entered or left the cache), so a new pod a policy selects
 * gets its rules right after ADD without waiting for its network-status watch event.
 *
 * @param observer the daemon's observer (still receives everything)
 * @param agent the running agent (anything with `kick()`: the policy agent)
 * @returns the wrapping observer
 */
export function kickingObserver(observer: DaemonObserver, agent: { kick(): void }): DaemonObserver {
  return {
    ...observer,
    cniRequest(command, result, seconds) {
      observer.cniRequest(command, result, seconds);
      if (result === "success" && (command === "ADD" || command === "DEL")) agent.kick();
    },
    delegate: (p, c, s) => observer.delegate(p, c, s),
    apiRequest: (v, c) => observer.apiRequest(v, c),
    attachments: (n) => observer.attachments(n),
    policySync: (s, f) => observer.policySync?.(s, f),
    policyPodChange: (e) => observer.policyPodChange?.(e),
  };
}
