/**
 * What a hot-plug pass (lib/daemon/hotplug/hotplug.ts) tells the outside: its events (`AddedInterface`,
 * `RemovedInterface`, Warnings once per annotation value) and its metrics (`hotPlugChange`,
 * `hotPlugDuration` of the daemon's observer).
 *
 * @module
 */

import type { Logger } from "../../log/mod.ts";
import type { ManifoldConf } from "../../multinet/config.ts";
import type { EventSink } from "../../multinet/deps.ts";
import type { HotPlugOutcome } from "./apply.ts";
import type { DaemonObserver } from "../observer.ts";

/** The pod a pass's events are about. */
export interface HotPlugEventPod {
  /** `metadata.namespace`. */
  namespace: string;
  /** `metadata.name`. */
  name: string;
  /** `metadata.uid` (`""` when unknown). */
  uid: string;
}

/** Options of {@link sendHotPlugEvents}. */
export interface HotPlugEventsOptions {
  /** The pod. */
  pod: HotPlugEventPod;
  /** The Warnings (`reason\0message`) already sent for this annotation value; added to. */
  warned: Set<string>;
  /** Hot-plug's log (each Warning is logged). */
  log: Logger;
  /** Counts refusals (`hotPlugChange(op, "refused")`); default none. */
  observer?: DaemonObserver;
  /** Where events go, unfiltered. */
  events: EventSink;
  /** The plugin configuration's `events` setting (`"none"`: no event is sent). */
  setting: ManifoldConf["events"];
}

/**
 * Tells the observer what the pass did (refusals: in {@link sendHotPlugEvents}).
 *
 * @param observer the daemon's observer; nothing without one
 * @param outcome the pass's outcome
 * @param seconds the pass's duration, s
 */
export function measureHotPlug(
  observer: DaemonObserver | undefined,
  outcome: HotPlugOutcome,
  seconds: number,
): void {
  if (!observer) return;
  for (const c of outcome.changes) observer.hotPlugChange?.(c.op, c.result);
  if (outcome.changes.length === 0) return; // refusals only, or nothing to do
  const failed = outcome.kind === "failed" || outcome.changes.some((c) => c.result === "error");
  observer.hotPlugDuration?.(seconds, failed ? "error" : "success");
}

/**
 * Sends the pass's events (none with `"events": "none"`); a Warning already sent for this
 * annotation value is not repeated, nor counted again when it is a refusal.
 *
 * @param outcome the pass's outcome (its `events` are read)
 * @param opts see {@link HotPlugEventsOptions}
 * @returns when the events are flushed
 */
export async function sendHotPlugEvents(
  outcome: HotPlugOutcome,
  opts: HotPlugEventsOptions,
): Promise<void> {
  const { namespace, name, uid } = opts.pod;
  const warned = opts.warned;
  const fresh = outcome.events.filter((ev) => {
    if (ev.type !== "Warning") return true;
    opts.log.warn(ev.message, { reason: ev.reason, pod: `${namespace}/${name}` });
    const id = `${ev.reason}\0${ev.message}`;
    if (warned.has(id)) return false;
    warned.add(id);
    if (ev.refused) opts.observer?.hotPlugChange?.(ev.refused, "refused");
    return true;
  });
  if (fresh.length === 0 || opts.setting === "none") return;
  const { events } = opts;
  const ref = { namespace, name, uid, infraContainerId: "" };
  for (const { reason, message, type } of fresh) events.emit(ref, { reason, message, type });
  await events.flush();
}
