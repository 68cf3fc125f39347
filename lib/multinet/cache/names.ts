/**
 * File names of the attachment cache: a record's key (CNI_CONTAINERID + CNI_IFNAME) to its
 * file name and back (`<containerId>@<ifName>.json`, the interface name percent-encoded
 * outside `[A-Za-z0-9_.-]`; `<containerId>.json` for the legacy per-container layout).
 *
 * @module
 */

import { CniError, CniErrorCode } from "../../cni/errors.ts";
import { interfaceNameProblem } from "../../cni/env.ts";
import { CONTAINER_ID } from "./record_format.ts";

/** The key of a record: the runtime attachment (CNI SPEC "Parameters"). */
export interface CacheKey {
  /** CNI_CONTAINERID. */
  containerId: string;
  /** CNI_IFNAME; `""` only for a damaged legacy record whose interface cannot be read. */
  ifName: string;
}

/** Suffix of every record file. */
export const RECORD_SUFFIX = ".json";
/** Separates the container ID from the interface name in a record's file name. */
export const KEY_SEPARATOR = "@";
/**
 * The file name of a record.
 * @param containerId CNI_CONTAINERID.
 * @param ifName CNI_IFNAME; `""` for the legacy per-container file.
 * @returns `<containerId>@<encoded ifName>.json`, or `<containerId>.json` for `ifName` `""`.
 * @throws {CniError} code 4 (invalid environment) for a bad container ID or interface name.
 * @example
 * ```ts
 * recordName("c1", "eth0"); // "c1@eth0.json"
 * recordName("c1", "net@1"); // "c1@net%401.json"
 * ```
 */
export function recordName(containerId: string, ifName: string): string {
  if (!isValidContainerId(containerId)) {
    throw invalidKey(
      "container ID",
      containerId,
      `must match ${CONTAINER_ID.source} and not contain ".."`,
    );
  }
  if (ifName === "") return `${containerId}${RECORD_SUFFIX}`;
  const problem = interfaceNameProblem(ifName);
  if (problem) throw invalidKey("interface name", ifName, problem);
  return `${containerId}${KEY_SEPARATOR}${encodeIfName(ifName)}${RECORD_SUFFIX}`;
}

/**
 * The key of a record file name (the inverse of {@link recordName}).
 * @param name a file name of the cache directory.
 * @returns the key (`ifName` `""` for a legacy file), or undefined for anything else
 *   (temporary, hidden, not canonically encoded…).
 * @example
 * ```ts
 * parseRecordName("c1@eth0.json"); // { containerId: "c1", ifName: "eth0" }
 * parseRecordName(".c1@eth0.json.tmp-1-a"); // undefined
 * ```
 */
export function parseRecordName(name: string): CacheKey | undefined {
  if (!name.endsWith(RECORD_SUFFIX) || name.startsWith(".")) return undefined;
  const stem = name.slice(0, -RECORD_SUFFIX.length);
  const at = stem.indexOf(KEY_SEPARATOR);
  const containerId = at < 0 ? stem : stem.slice(0, at);
  if (!isValidContainerId(containerId)) return undefined;
  if (at < 0) return { containerId, ifName: "" };
  let ifName: string;
  try {
    ifName = decodeURIComponent(stem.slice(at + 1));
  } catch {
    return undefined;
  }
  if (interfaceNameProblem(ifName) || encodeIfName(ifName) !== stem.slice(at + 1)) {
    return undefined;
  }
  return { containerId, ifName };
}

/** Percent-encodes the UTF-8 bytes of `ifName` outside `[A-Za-z0-9_.-]` (at most 45 chars). */
function encodeIfName(ifName: string): string {
  let out = "";
  for (const byte of new TextEncoder().encode(ifName)) {
    const ch = String.fromCharCode(byte);
    out += /[A-Za-z0-9_.-]/.test(ch) && byte < 0x80
      ? ch
      : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

/**
 * Whether a container ID can key a record (CNI SPEC "Parameters", ≤ 200 bytes, no `..`).
 * @param id CNI_CONTAINERID.
 * @returns true when valid.
 */
export function isValidContainerId(id: string): boolean {
  return CONTAINER_ID.test(id) && !id.includes("..");
}

function invalidKey(what: string, value: string, why: string): CniError {
  return new CniError(
    CniErrorCode.InvalidEnvironment,
    `invalid ${what} for the cache`,
    `${JSON.stringify(value)}: ${why}`,
  );
}
