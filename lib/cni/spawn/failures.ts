/**
 * Why a plugin did not start, in the words a CNI error gives: the spawn's own failure (code
 * 999, or 11 while the binary stays busy) and the failure of a program it is exec'd through
 * (setsid(1), chroot(8)), told apart from the plugin's own exit.
 *
 * @module
 */

import type { ExecResponse } from "../exec_types.ts";
import { CniError, CniErrorCode } from "../errors.ts";

/**
 * A program the plugin is exec'd through (setsid(1), chroot(8)), and how its own failures are
 * reported: `label` + its message (`"chroot: "` keeps chroot's name; setsid's is dropped).
 */
export interface Wrapper {
  /** The wrapper's path, e.g. `"/usr/sbin/chroot"`. */
  binary: string;
  /** Put before its message in the CNI error's details, e.g. `"chroot: "`. */
  label: string;
}

/**
 * The error for a plugin that could not be started (libcni `RawExec` retries ETXTBSY too).
 * @param path the plugin's path
 * @param message what the spawn said, e.g. `failed to execute /opt/cni/bin/x: No such file or
 *   directory`
 * @param busy the binary was still open for writing (ETXTBSY) after every retry
 * @param attempt the last attempt's index (0-based)
 * @returns CNI code 11 "plugin <name> is busy" when busy, else code 999 "failed to execute plugin
 *   <name>", the message as details
 */
export function spawnError(
  path: string,
  message: string,
  busy: boolean,
  attempt: number,
): CniError {
  if (busy) {
    return new CniError(
      CniErrorCode.TryAgainLater,
      `plugin ${pluginName(path)} is busy`,
      `${message} (after ${attempt + 1} attempts)`,
    );
  }
  return new CniError(
    CniErrorCode.Internal,
    `failed to execute plugin ${pluginName(path)}`,
    message,
  );
}

/**
 * A wrapper's own failure (setsid(1) or chroot(8)), which means the plugin never ran: exit 125
 * (chroot cannot chroot), 126 (cannot execute: permission, ETXTBSY) or 127 (not found),
 * nothing on stdout, and one stderr line starting with the wrapper's name (`setsid: failed to
 * execute …`, `/usr/sbin/chroot: failed to run command …`). Returns that line as
 * `<label><message>` (`failed to execute …`, `chroot: …`), or undefined for the plugin's
 * own exit.
 * @param res what the child process did
 * @param wrappers the programs it was exec'd through, outermost last
 * @returns the wrapper's failure, or undefined
 */
export function wrapperFailure(res: ExecResponse, wrappers: Wrapper[]): string | undefined {
  if (wrappers.length === 0) return undefined;
  if (res.timedOut || res.signal !== null || res.code < 125 || res.code > 127) return undefined;
  if (res.stdout.length > 0) return undefined;
  const text = new TextDecoder().decode(res.stderr).trim();
  if (text.includes("\n")) return undefined;
  for (const { binary, label } of wrappers) {
    for (const name of [`${binary}: `, `${pluginName(binary)}: `]) {
      if (text.startsWith(name)) return `${label}${text.slice(name.length)}`;
    }
  }
  return undefined;
}

/**
 * A plugin's name for messages: the last component of its path.
 *
 * @param path e.g. `"/opt/cni/bin/bridge"`
 * @returns e.g. `"bridge"`
 * @example
 * ```ts
 * pluginName("/usr/lib/cni/macvlan"); // "macvlan"
 * ```
 */
export function pluginName(path: string): string {
  const i = path.lastIndexOf("/");
  return i >= 0 ? path.slice(i + 1) : path;
}
