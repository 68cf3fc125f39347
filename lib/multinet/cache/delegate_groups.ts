/**
 * Where a running delegate ADD's process group is noted, so that a DEL finds it after the
 * process that started the delegate was killed (the runtime's timeout kills the plugin's PID
 * only; a SIGKILLed `manifold daemon` leaves its delegates running): otherwise the delegate
 * finishes its ADD after the DEL and its interface and IPAM lease stay for good.
 *
 * One small file per attachment whose ADD delegate runs:
 * `<cniDir>/delegates/<containerId>@<ifName>.group` (mode 0600, dir 0700), the attachment being
 * the delegate's (CNI_CONTAINERID + its CNI_IFNAME, as in the cache record's attachment), its
 * content the JSON of a {@link ProcessGroup}. Written when the delegate starts (its spawn is
 * never delayed) and removed when it exits, without fsync: a process group does not outlive a
 * reboot, and the note names its boot. A note left behind names a killed caller's delegate;
 * DEL of an attachment still `"adding"` stops that group ({@link DelegateGroups.stop}) before
 * the delegate DEL.
 *
 * @module
 */

import type { ExecRequest, GroupTracker } from "../../cni/exec.ts";
import { type ProcessGroup, type StopOptions, stopProcessGroup } from "../../cni/process_group.ts";
import type { StopOutcome } from "../../cni/process_group.ts";
import type { Logger } from "../../log/mod.ts";
import { errorText } from "../../util/text.ts";
import { recordName } from "./names.ts";

/** A noted group that {@link DelegateGroups.stop} acted on. */
export interface StoppedGroup {
  /** The group as noted. */
  group: ProcessGroup;
  /** What stopping it took (`"gone"`: nothing of it ran any more). */
  outcome: StopOutcome;
}

/**
 * The notes of running delegate ADDs under one cache directory.
 *
 * @example
 * ```ts
 * const groups = new DelegateGroups("/var/lib/cni/manifold");
 * const stopped = await groups.stop("abc123", "net1"); // undefined: nothing was noted
 * ```
 */
export class DelegateGroups {
  readonly #dir: string;

  /**
   * Notes under `<cniDir>/delegates`; nothing is touched until the first call.
   * @param cniDir the cache directory (`cniDir`), e.g. `"/var/lib/cni/manifold"`.
   */
  constructor(cniDir: string) {
    this.#dir = `${cniDir.replace(/\/+$/, "")}/delegates`;
  }

  /**
   * The note's path: `<cniDir>/delegates/<containerId>@<ifName>.group`.
   * @throws {CniError} code 4 for an invalid container ID or interface name.
   */
  path(containerId: string, ifName: string): string {
    return `${this.#dir}/${recordName(containerId, ifName).replace(/\.json$/, ".group")}`;
  }

  /**
   * Notes the process group of the delegate running for an attachment (replacing any note),
   * synchronously (≈ 20 µs, no fsync): see `GroupTracker.started` of lib/cni/exec.ts.
   * @throws {CniError} code 4 for a bad key; Deno's error when the file cannot be written.
   */
  note(containerId: string, ifName: string, group: ProcessGroup): void {
    const path = this.path(containerId, ifName);
    const text = JSON.stringify(group);
    try {
      Deno.writeTextFileSync(path, text, { mode: 0o600 });
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
      Deno.mkdirSync(this.#dir, { recursive: true, mode: 0o700 });
      Deno.writeTextFileSync(path, text, { mode: 0o600 });
    }
  }

  /**
   * Removes an attachment's note; idempotent. Synchronous (≈ 10 µs): an asynchronous removal
   * would hand the call to a worker thread and back, which costs more than the removal.
   * @throws {CniError} code 4 for a bad key; Deno's error when it exists but cannot be removed.
   */
  forget(containerId: string, ifName: string): void {
    try {
      Deno.removeSync(this.path(containerId, ifName));
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    }
  }

  /**
   * The noted group of an attachment; undefined when there is none or it cannot be read
   * (a note cut short by a kill names nothing one could safely signal).
   * @throws {CniError} code 4 for a bad key.
   */
  async read(containerId: string, ifName: string): Promise<ProcessGroup | undefined> {
    let text: string;
    try {
      text = await Deno.readTextFile(this.path(containerId, ifName));
    } catch {
      return undefined;
    }
    return parseGroup(text);
  }

  /**
   * Stops the delegate ADD noted for an attachment, if any (`stopProcessGroup` of
   * lib/cni/process_group.ts: only when the note still names that group; SIGTERM, SIGKILL
   * after the grace, waits until nothing of it runs), then removes the note.
   * @param opts grace and wait bounds (defaults: 500 ms, 5 s).
   * @returns what was done, or undefined when nothing was noted (also for a key that cannot
   *   name a note: nothing was ever noted under it).
   * @throws {CniError} code 11 when the group still runs after SIGKILL (the note stays: the
   *   runtime's next DEL tries again); code 5 when it cannot be signalled.
   */
  async stop(
    containerId: string,
    ifName: string,
    opts: StopOptions = {},
  ): Promise<StoppedGroup | undefined> {
    let text: string;
    try {
      text = await Deno.readTextFile(this.path(containerId, ifName));
    } catch {
      return undefined;
    }
    const group = parseGroup(text);
    const outcome = group ? await stopProcessGroup(group, opts) : "gone";
    this.forget(containerId, ifName);
    return group ? { group, outcome } : undefined;
  }
}

/** A note's JSON as a {@link ProcessGroup}, or undefined for anything else. */
function parseGroup(text: string): ProcessGroup | undefined {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  const g = v as Partial<ProcessGroup> | null;
  if (
    typeof g !== "object" || g === null || !Number.isSafeInteger(g.pgid) || g.pgid! <= 1 ||
    !Number.isSafeInteger(g.startTime) || typeof g.bootId !== "string" ||
    typeof g.pidNs !== "string"
  ) {
    return undefined;
  }
  return { pgid: g.pgid!, startTime: g.startTime!, bootId: g.bootId, pidNs: g.pidNs };
}

/** The attachment of a delegate ADD (CNI_CONTAINERID, CNI_IFNAME), or undefined for others. */
function addAttachment(req: ExecRequest): { containerId: string; ifName: string } | undefined {
  const { CNI_COMMAND, CNI_CONTAINERID, CNI_IFNAME } = req.env;
  if (CNI_COMMAND !== "ADD" || !CNI_CONTAINERID || !CNI_IFNAME) return undefined;
  return { containerId: CNI_CONTAINERID, ifName: CNI_IFNAME };
}

/**
 * The {@link GroupTracker} that notes each delegate ADD's process group in `groups` while it
 * runs (other commands are not noted). Failures are logged, never thrown: a note that cannot
 * be written costs only this protection.
 * @param groups where to note.
 * @param logger where failures go.
 * @returns the tracker for `ProcessPluginExec`'s `groups` option.
 */
export function delegateGroupTracker(groups: DelegateGroups, logger: Logger): GroupTracker {
  const failed = (what: string, req: ExecRequest, e: unknown) =>
    logger.warn(`cannot ${what} a delegate's process group`, {
      containerId: req.env.CNI_CONTAINERID,
      ifName: req.env.CNI_IFNAME,
      error: errorText(e),
    });
  return {
    tracks: (req) => addAttachment(req) !== undefined,
    started(req, group) {
      const at = addAttachment(req);
      if (!at) return;
      try {
        groups.note(at.containerId, at.ifName, group);
      } catch (e) {
        failed("note", req, e);
      }
    },
    ended(req) {
      const at = addAttachment(req);
      if (!at) return;
      try {
        groups.forget(at.containerId, at.ifName);
      } catch (e) {
        failed("forget", req, e);
      }
    },
  };
}
