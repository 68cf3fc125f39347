/**
 * The bound on retrying a failed DEL (NPWG v1.3 §7.2 "a final error shall be delivered",
 * without wedging teardown).
 *
 * Every failed delegate DEL is reported to the runtime and the attachment stays cached, so
 * the runtime's retry converges once the cause goes away. An attachment whose ADD never
 * completed (state `"adding"`: the ADD failed or was killed) is given up once its DEL has
 * failed {@link GIVE_UP_AFTER_FAILED_DELS} times, or {@link GIVE_UP_AFTER_MS} after its
 * first failed DEL, whichever comes first: some reference plugins (macvlan with its master
 * gone) fail DEL exactly as they failed ADD, and a DEL that fails forever keeps the pod
 * Terminating. Giving up logs an error line naming what may have leaked, posts a Warning
 * event `TeardownAbandoned`, and moves the attachment to the record's `abandoned` list (kept
 * on the tombstone) so that GC retries its DEL and runs its delegates' GC later. Attachments
 * whose ADD completed are never given up.
 *
 * One case is given up at the first failed DEL ({@link neverRan}): an unfinished attachment
 * whose DEL failed because the binary of its first plugin is not installed (libcni's `failed
 * to find plugin`). DEL runs the plugins newest first and stops at the first failure, so the
 * later plugins' DELs succeeded; the first plugin cannot have run at ADD (ADD stopped there),
 * so no delegate holds anything: retrying would only keep the pod Terminating.
 *
 * @module
 */

import { missingPluginType } from "../../cni/invoke.ts";
import type { CachedAttachment } from "../cache/cache.ts";
import type { ManifoldDeps } from "../deps.ts";
import { type DetachFailure, removeDeviceInfo } from "./detach.ts";
import { attachmentContext, type PodRef } from "../plan/pod.ts";

/** Failed DELs after which an attachment whose ADD never completed is given up. */
export const GIVE_UP_AFTER_FAILED_DELS = 3;

/** Time after the first failed DEL after which such an attachment is given up, ms (10 min). */
export const GIVE_UP_AFTER_MS = 10 * 60_000;

/** The event reason posted when an attachment is given up. */
export const TEARDOWN_ABANDONED_REASON = "TeardownAbandoned";

/**
 * Whether DEL gives up an attachment now (see the module doc).
 * @param a the attachment, its `delFailures` including the latest failure.
 * @param now the current time.
 * @returns true for an `"adding"` attachment past either bound.
 * @example
 * ```ts
 * const a = { state: "adding", delFailures: { count: 3, firstAt: "2026-01-01T00:00:00Z", lastError: "x" } };
 * shouldGiveUp(a as CachedAttachment, new Date("2026-01-01T00:01:00Z")); // true
 * ```
 */
export function shouldGiveUp(a: CachedAttachment, now: Date): boolean {
  if (a.state !== "adding" || !a.delFailures) return false;
  const since = now.getTime() - Date.parse(a.delFailures.firstAt);
  return a.delFailures.count >= GIVE_UP_AFTER_FAILED_DELS || since >= GIVE_UP_AFTER_MS;
}

/**
 * What may have leaked when an attachment is given up: its delegates' plugin and IPAM types
 * and its device, e.g. `"plugins macvlan, ipam static, device 0000:18:02.5"`.
 * @param a the attachment.
 * @returns a short human-readable text.
 */
export function leakHint(a: CachedAttachment): string {
  const types: string[] = [];
  const ipams: string[] = [];
  for (const p of pluginsOf(a)) {
    if (typeof p?.type === "string") types.push(p.type);
    const ipam = p?.ipam as { type?: unknown } | undefined;
    if (typeof ipam?.type === "string") ipams.push(ipam.type);
  }
  const parts = [`plugins ${types.join(", ") || "?"}`];
  if (ipams.length > 0) parts.push(`ipam ${ipams.join(", ")}`);
  if (a.deviceId) parts.push(`device ${a.deviceId}`);
  return parts.join(", ");
}

/** The attachment's plugin configs in ADD order (a conflist's `plugins`, or the one conf). */
function pluginsOf(a: CachedAttachment): Record<string, unknown>[] {
  const plugins = Array.isArray(a.conflist.plugins) ? a.conflist.plugins : [a.conflist];
  return plugins as Record<string, unknown>[];
}

/**
 * Whether a failed DEL shows that none of the attachment's delegates ever ran (see the module
 * doc): its ADD never completed and the DEL failed because the binary of its first plugin,
 * of a type no later plugin has, is not installed.
 * @param f a DEL failure from `detachAll`.
 * @returns true when giving up at once cannot leak anything.
 * @example
 * ```ts
 * neverRan({ attachment: { state: "adding", conflist: { type: "x" } },
 *   error: new CniError(7, '[a/b:n] failed to find plugin "x" in path [/opt/cni/bin]') }); // true
 * ```
 */
export function neverRan(f: DetachFailure): boolean {
  if (f.attachment.state !== "adding") return false;
  const types = pluginsOf(f.attachment).map((p) => p?.type);
  const first = types[0];
  return typeof first === "string" && types.lastIndexOf(first) === 0 &&
    missingPluginType(f.error) === first;
}

/**
 * Splits DEL failures into those the runtime must retry and those given up now
 * ({@link shouldGiveUp}, or at once when {@link neverRan}). For each given-up attachment: an
 * error log line naming what may have leaked, a Warning event {@link TEARDOWN_ABANDONED_REASON} for the pod (when known;
 * flushed before returning) and removal of its CNI device-info file.
 * @param deps the dependencies (`env.containerId`, logger, events).
 * @param failures what `detachAll` returned.
 * @param opts `pod` for the event and contexts; `now` the current time (tests).
 * @returns `retry` (stay cached, reported as the final error) and `abandoned` (the
 *   attachments to keep in the record's `abandoned` list).
 */
export async function giveUpExhausted(
  deps: ManifoldDeps,
  failures: DetachFailure[],
  opts: { pod: PodRef | undefined; now?: Date },
): Promise<{ retry: DetachFailure[]; abandoned: CachedAttachment[] }> {
  const now = opts.now ?? new Date();
  const retry: DetachFailure[] = [];
  const abandoned: CachedAttachment[] = [];
  for (const f of failures) {
    const notInstalled = neverRan(f);
    if (!notInstalled && !shouldGiveUp(f.attachment, now)) {
      retry.push(f);
      continue;
    }
    const a = f.attachment;
    const failed = a.delFailures!; // detachAll counts every failure it returns
    const leaked = notInstalled ? "nothing (its first plugin is not installed)" : leakHint(a);
    deps.logger.error("giving up the teardown of an attachment whose ADD never completed", {
      containerId: deps.env.containerId,
      network: a.statusName,
      ifName: a.ifName,
      failedDels: failed.count,
      firstFailedAt: failed.firstAt,
      mayHaveLeaked: leaked,
      error: failed.lastError,
    });
    if (opts.pod) {
      const after = notInstalled
        ? "at once: no delegate of it ever ran"
        : `after ${failed.count} failed attempts since ${failed.firstAt}`;
      deps.events.emit(opts.pod, {
        reason: TEARDOWN_ABANDONED_REASON,
        type: "Warning",
        message: `${attachmentContext(opts.pod, a.statusName)} gave up DEL of ${a.ifName} ` +
          `(its ADD never completed) ${after}; may have leaked: ${leaked}; ` +
          `last error: ${failed.lastError}`,
      });
    }
    await removeDeviceInfo(deps, a);
    abandoned.push(a);
  }
  if (abandoned.length > 0 && opts.pod) await deps.events.flush();
  return { retry, abandoned };
}
