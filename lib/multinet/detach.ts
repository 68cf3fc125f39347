/**
 * Detaching attachments (NPWG v1.3 §7.2): every attachment is attempted, newest
 * first, and one failure does not stop the rest.
 *
 * @module
 */

import { CniError, toCniError } from "../cni/errors.ts";
import { parseNetworkConfig } from "../cni/types.ts";
import type { CachedAttachment } from "./cache.ts";
import type { ManifoldDeps } from "./deps.ts";
import { attachmentContext, type PodRef } from "./pod.ts";
import { crashpoint } from "./crashpoint.ts";

/** One attachment whose DEL failed, with the delegate's error. */
export interface DetachFailure {
  attachment: CachedAttachment;
  error: CniError;
}

/**
 * Runs the delegate DEL of each attachment in reverse order, with the cached
 * config, runtimeConfig candidates, CNI_ARGS and prevResult (CNI SPEC "DEL").
 *
 * An attachment whose ADD never succeeded (state `"adding"`) is DELeted too, but its DEL
 * failure is logged, not returned: a delegate that rejected its ADD (say, a macvlan whose
 * master is missing) rejects its DEL the same way, and the ADD error already reached the
 * runtime; keeping it would make every later DEL fail and wedge the pod's teardown.
 *
 * After an attachment's DEL (or its dropped failure) its CNI device-info file is removed
 * (Device Information Spec v1.1 §4.2.1); a file that cannot be removed is logged, not returned.
 * @param netns CNI_NETNS to pass ("" when the sandbox is gone: delegates must still release IPAM).
 * @returns the failures of attachments that were added (empty when every such DEL succeeded);
 *   never throws for a delegate failure.
 */
export async function detachAll(
  deps: ManifoldDeps,
  attachments: CachedAttachment[],
  opts: { netns: string; pod: PodRef | undefined },
): Promise<DetachFailure[]> {
  const failures: DetachFailure[] = [];
  for (const a of [...attachments].reverse()) {
    try {
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
      const fields = {
        containerId: deps.env.containerId,
        network: a.statusName,
        ifName: a.ifName,
        error: error.message,
      };
      if (a.state === "adding") {
        deps.logger.warn("DEL of an attachment whose ADD failed also failed; dropped", fields);
        await removeDeviceInfo(deps, a);
        continue;
      }
      deps.logger.error("delegate DEL failed", fields);
      failures.unshift({ attachment: a, error });
    }
  }
  return failures;
}

/** Removes the attachment's CNI device-info file, if it has one; failures are logged. */
async function removeDeviceInfo(deps: ManifoldDeps, a: CachedAttachment): Promise<void> {
  if (!a.deviceInfoFile) return;
  try {
    const { removeDeviceInfoFile } = await import("../devices/device_info.ts");
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
