/**
 * Detaching attachments (NPWG v1.3 §7.2): every attachment is attempted, newest
 * first, one failure does not stop the rest, and every failure is returned (with the
 * attachment's failed-DEL count updated) so that it becomes the final error and stays cached
 * for the runtime's retry. When to give an attachment up: `verbs/teardown.ts`.
 *
 * @module
 */

import { lazyImport } from "../../util/lazy.ts";
import { CniError, toCniError } from "../../cni/errors.ts";
import { parseNetworkConfig } from "../../cni/netconf.ts";
import type { CachedAttachment } from "../cache/cache.ts";
import type { ManifoldDeps } from "../deps.ts";
import { attachmentContext, type PodRef } from "../plan/pod.ts";
import { crashpoint } from "../crashpoint.ts";

/** One attachment whose DEL failed, with the delegate's error. */
export interface DetachFailure {
  /** The attachment, its `delFailures` counting this failure. */
  attachment: CachedAttachment;
  /** The delegate's error, `msg` prefixed with `[ns/pod:network]`. */
  error: CniError;
}

/**
 * Runs the delegate DEL of each attachment in reverse order, with the cached
 * config, runtimeConfig candidates, CNI_ARGS and prevResult (CNI SPEC "DEL").
 *
 * An attachment whose ADD never completed (state `"adding"`) may still have its delegate ADD
 * running, left by a caller that was killed (the runtime's timeout kills the plugin's PID only;
 * a SIGKILLed daemon leaves its delegates): that delegate's process group, noted when it
 * started (`cache/delegate_groups.ts`), is stopped first — else it would finish its ADD after
 * this DEL and leave its interface and IPAM lease for good. A group that cannot be stopped
 * fails the attachment's DEL (code 11), which is kept for the runtime's retry.
 *
 * Every failure is returned, also for an attachment whose ADD never completed (state
 * `"adding"`): whatever that delegate allocated (an IPAM lease, a VF) leaks unless a later DEL
 * succeeds. The returned attachment counts the failure in `delFailures` (count, time of the
 * first failure, last error), which `verbs/teardown.ts` uses to give up such attachments instead of
 * wedging the pod's teardown forever.
 *
 * After an attachment's successful DEL its CNI device-info file is removed (Device Information
 * Spec v1.1 §4.2.1); a file that cannot be removed is logged, not returned.
 * @param deps the dependencies (`env.containerId` names the container).
 * @param attachments the cached attachments, in ADD order.
 * @param opts `netns`: CNI_NETNS to pass ("" when the sandbox is gone: delegates must still
 *   release IPAM); `pod`: for error contexts; `now`: the time of this attempt (tests).
 * @returns the failures in ADD order (empty when every DEL succeeded); never throws for a
 *   delegate failure.
 */
export async function detachAll(
  deps: ManifoldDeps,
  attachments: CachedAttachment[],
  opts: { netns: string; pod: PodRef | undefined; now?: Date },
): Promise<DetachFailure[]> {
  const now = opts.now ?? new Date();
  const failures: DetachFailure[] = [];
  for (const a of [...attachments].reverse()) {
    try {
      if (a.state === "adding") await stopLeftAdd(deps, a);
      const list = parseNetworkConfig(a.conflist, { source: `cache:${a.statusName}` });
      crashpoint("del:before-delegate");
      await deps.runtime.delNetworkList(list, {
        containerId: deps.env.containerId,
        netns: opts.netns,
        ifName: a.ifName,
        args: a.cniArgs,
        capabilityArgs: a.capabilityArgs,
      }, a.result);
      crashpoint("del:after-delegate");
      await removeDeviceInfo(deps, a);
    } catch (e) {
      const error = toCniError(e).withContext(attachmentContext(opts.pod, a.statusName));
      const delFailures = {
        count: (a.delFailures?.count ?? 0) + 1,
        firstAt: a.delFailures?.firstAt ?? now.toISOString(),
        lastError: error.message,
      };
      deps.logger.error("delegate DEL failed", {
        containerId: deps.env.containerId,
        network: a.statusName,
        ifName: a.ifName,
        state: a.state,
        failedDels: delFailures.count,
        error: error.message,
      });
      failures.unshift({ attachment: { ...a, delFailures }, error });
    }
  }
  return failures;
}

/** Stops the delegate ADD a killed caller left running for `a`, if its group is noted. */
async function stopLeftAdd(deps: ManifoldDeps, a: CachedAttachment): Promise<void> {
  const stopped = await deps.cache.delegates.stop(deps.env.containerId, a.ifName);
  if (stopped && stopped.outcome !== "gone") {
    deps.logger.warn("stopped a delegate ADD its caller left running", {
      containerId: deps.env.containerId,
      network: a.statusName,
      ifName: a.ifName,
      pgid: stopped.group.pgid,
      outcome: stopped.outcome,
    });
  }
}

/**
 * Removes the attachment's CNI device-info file, if it has one (Device Information Spec v1.1
 * §4.2.1); failures are logged, never thrown.
 * @param deps the dependencies (logger, `env.containerId`).
 * @param a the attachment.
 */
export async function removeDeviceInfo(deps: ManifoldDeps, a: CachedAttachment): Promise<void> {
  if (!a.deviceInfoFile) return;
  try {
    const { removeDeviceInfoFile } = await lazyImport<
      typeof import("../../devices/device_info.ts")
    >("../../devices/device_info.ts", import.meta.url);
    await removeDeviceInfoFile(a.deviceInfoFile);
  } catch (e) {
    deps.logger.warn("cannot remove the device-info file", {
      containerId: deps.env.containerId,
      network: a.statusName,
      path: a.deviceInfoFile,
      error: toCniError(e).message,
    });
  }
}

/**
 * One error for the runtime summarising failed DELs (§7.2: "a final error shall be delivered").
 * Keeps the first failure's code; details list every failure.
 * @param failures at least one failure.
 * @param total how many attachments were attempted.
 * @returns e.g. code 999, msg "1 of 3 attachments failed to detach: [ns/pod:net] …".
 */
export function aggregateDetachError(failures: DetachFailure[], total: number): CniError {
  const first = failures[0].error;
  return new CniError(
    first.code,
    `${failures.length} of ${total} attachments failed to detach: ${first.msg}`,
    failures.map((f) => `${f.attachment.statusName} (${f.attachment.ifName}): ${f.error.message}`)
      .join("\n"),
  );
}
