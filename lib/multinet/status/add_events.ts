/**
 * ADD's events (verbs/add.ts): the Warning for an ignored invalid selection and the
 * `AddedInterface` events of `"events": "all"` (Multus's reasons and message format).
 *
 * @module
 */

import type { CniError } from "../../cni/errors.ts";
import type { ManifoldDeps } from "../deps.ts";
import type { PodRef } from "../plan/pod.ts";
import { NETWORKS_ANNOTATION, type NetworkStatus } from "../types.ts";
import type { Logger } from "../../log/mod.ts";
import { mark } from "../../log/trace.ts";
import { oneLine } from "../../util/text.ts";

/**
 * The `AddedInterface` event of one attachment (Multus's wording): sandbox ADD (`"events":
 * "all"`) and hot-plug send the same.
 * @param s the attachment's network-status entry (NPWG v1.3 §4.1.2.2)
 * @returns `{reason, message: "Add <if> [<ips>] from <network>", type: "Normal"}`
 */
export function addedInterfaceEvent(
  s: NetworkStatus,
): { reason: "AddedInterface"; message: string; type: "Normal" } {
  return {
    reason: "AddedInterface",
    message: `Add ${s.interface ?? ""} [${(s.ips ?? []).join(",")}] from ${s.name}`,
    type: "Normal",
  };
}

/**
 * `invalidNetworkSelection: "ignore"`: logs the reason and queues a Warning event
 * `InvalidNetworkSelection` (NPWG v1.3 §4.1.2.1 "invalid and ignored").
 * @param deps the request's dependencies (events)
 * @param pod the pod, or undefined without an API (log only)
 * @param log the request's log
 * @param err the selection's error (its message is quoted)
 */
export function warnIgnoredSelection(
  deps: ManifoldDeps,
  pod: PodRef | undefined,
  log: Logger,
  err: CniError,
): void {
  const message = `${NETWORKS_ANNOTATION} is invalid and was ignored (NPWG v1.3 §4.1.2.1): ` +
    `${oneLine(err.message)}; the pod gets the cluster default network only`;
  log.warn(message, { reason: "InvalidNetworkSelection" });
  if (pod) deps.events.emit(pod, { reason: "InvalidNetworkSelection", message, type: "Warning" });
}

/**
 * Posts the Warning event a failed ADD's error asks for (`podEvent` on the error: the KEP-3698
 * list's static checks, naming the field), and logs it. Never throws.
 * @param deps the request's dependencies (events)
 * @param pod the pod, or undefined without an API (log only)
 * @param log the request's log
 * @param err the ADD's error
 */
export async function warnErrorEvent(
  deps: ManifoldDeps,
  pod: PodRef | undefined,
  log: Logger,
  err: unknown,
): Promise<void> {
  const ev = (err as { podEvent?: { reason: string; message: string } } | null)?.podEvent;
  if (!ev) return;
  log.warn(ev.message, { reason: ev.reason });
  if (!pod) return;
  try {
    deps.events.emit(pod, { reason: ev.reason, message: oneLine(ev.message), type: "Warning" });
    await deps.events.flush();
  } catch { /* events are best effort */ }
}

/**
 * `AddedInterface` per attachment (sent under `events: "all"`, Multus's message format), then
 * waits for the event queue.
 * @param deps the request's dependencies (events)
 * @param pod the pod, or undefined without an API (nothing sent)
 * @param statuses the network-status entries of the ADD
 */
export async function sendAddedEvents(
  deps: ManifoldDeps,
  pod: PodRef | undefined,
  statuses: NetworkStatus[],
): Promise<void> {
  if (!pod) return;
  for (const s of statuses) {
    deps.events.emit(pod, addedInterfaceEvent(s));
  }
  await deps.events.flush();
  mark("eventsSent");
}
