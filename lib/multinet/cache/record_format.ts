/**
 * The attachment cache's record without zod (the per-call path, issue 30): its types, how file
 * text becomes a record with every failure classified ({@link CacheCorruptError}), and a fast
 * shape check ({@link fastRecordCheck}) that accepts well-formed records as zod's schema
 * (lib/multinet/cache/record.ts, loaded only when the fast check does not accept) would. The
 * files themselves are managed by `cache/cache.ts`.
 *
 * @module
 */

import { CniError, CniErrorCode } from "../../cni/errors.ts";
import type { AttachmentOrigin, DeviceInfo, NetworkStatus } from "../types.ts";
import { isJsonPrefix } from "./json_prefix.ts";
import { errorText } from "../../util/text.ts";

import {
  array,
  bool,
  fastCheck,
  int,
  loose,
  matching,
  num,
  oneOf,
  record,
  type Shape,
  str,
  tuple,
  unknown,
} from "../../util/shape.ts";

/** Version of the record layout; bump on incompatible changes. Readers refuse other versions. */
export const CACHE_SCHEMA_VERSION = 1;

/** One attachment of a container as Manifold performed it (NPWG v1.3 §4.2.1). */
export interface CachedAttachment {
  /** Status name: "ns/nad" or the default network's conf name (NPWG v1.3 §5.3.1). */
  statusName: string;
  /** True for the cluster-wide default network. */
  isDefault: boolean;
  /**
   * Why the pod has it (`AttachmentOrigin`); absent in records written before it was kept
   * (read as unknown: never hot-unplugged). Any string is read, so a newer origin does not make
   * the record unreadable.
   */
  origin?: AttachmentOrigin;
  /** CNI_IFNAME used for this attachment. */
  ifName: string;
  /** The full delegate conflist exactly as executed: all plugin fields, lossless (Multus #1449). */
  conflist: Record<string, unknown>;
  /** runtimeConfig candidates incl. `portMappings`, `bandwidth` (CNI CONVENTIONS.md). */
  capabilityArgs: Record<string, unknown>;
  /** CNI_ARGS pairs passed to the delegate, in order. */
  cniArgs: [string, string][];
  /** "adding": intent recorded before the delegate ADD; "added": the ADD succeeded. */
  state: "adding" | "added";
  /** The delegate's raw result, any version (prevResult for DEL/CHECK, CNI SPEC "DEL"). */
  result?: unknown;
  /**
   * The CNI device-info file of the attachment (`CNIDeviceInfoFile` or the device plugin's file
   * copied there), removed at DEL (Device Information Spec v1.1 §4.2.1).
   */
  deviceInfoFile?: string;
  /** `k8s.v1.cni.cncf.io/resourceName` of the NAD, when device-backed. */
  resourceName?: string;
  /** The device allocated to the attachment (injected as `deviceID`), e.g. `"0000:18:02.5"`. */
  deviceId?: string;
  /** The device-info reported in network-status (NPWG v1.3 §5.3.8), for `manifold inspect`. */
  deviceInfo?: DeviceInfo;
  /** Gateways from the selection's `"default-route"` (NPWG v1.3 §4.1.2.1.9). */
  defaultRoute?: string[];
  /**
   * The delegate DELs of this attachment that failed so far (NPWG v1.3 §7.2): how many,
   * when the first one failed (ISO-8601) and the last error's message. Decides when DEL gives
   * up an attachment whose ADD never completed (`lib/multinet/verbs/teardown.ts`).
   */
  delFailures?: DelFailures;
}

/** The failed delegate DELs of one attachment (see {@link CachedAttachment.delFailures}). */
export interface DelFailures {
  /** Failed DELs so far, ≥ 1. */
  count: number;
  /** When the first DEL failed, ISO-8601. */
  firstAt: string;
  /** The last failure's message, `[ns/pod:network] …`. */
  lastError: string;
}

/**
 * Everything Manifold remembers about one runtime attachment: what one ADD with a
 * (CNI_CONTAINERID, CNI_IFNAME) did — the cluster default network on CNI_IFNAME and the pod's
 * other networks (CNI SPEC "Parameters": a container ID and an interface name identify the
 * attachment).
 */
export interface CacheRecord {
  /** {@link CACHE_SCHEMA_VERSION} at write time. */
  schemaVersion: number;
  /** CNI_CONTAINERID (CNI SPEC "Parameters": alphanumeric start, then `[A-Za-z0-9_.-]`). */
  containerId: string;
  /** CNI_NETNS at ADD, e.g. "/var/run/netns/cni-…"; "" when unknown. */
  netns: string;
  /** The runtime's CNI_IFNAME (the default network's interface); with `containerId` the key. */
  ifName: string;
  /** The pod, from CNI_ARGS K8S_POD_*; `uid` may be "" (no K8S_POD_UID). */
  pod: { namespace: string; name: string; uid: string };
  /** cniVersion of Manifold's own config. */
  cniVersion: string;
  /** When the record was first written, ISO-8601 (`Date.prototype.toISOString`). */
  createdAt: string;
  /** The attachments, in ADD order (DEL runs them in reverse). */
  attachments: CachedAttachment[];
  /** The network-status last published for the pod (NPWG v1.3 §5). */
  networkStatus?: NetworkStatus[];
  /**
   * Other annotations written with network-status in one PATCH (KEP-3698 networks-status),
   * so the daemon can publish them again from the record (`"statusPublish": "async"`).
   */
  statusAnnotations?: Record<string, string>;
  /**
   * Set on a tombstone (see {@link AttachmentCache.writeTombstone}): when DEL (or the rollback
   * of a failed ADD) finished, ISO-8601. A repeated DEL is then a no-op, CHECK reports an
   * unknown container, and GC removes the file once the runtime no longer lists the container.
   */
  deletedAt?: string;
  /**
   * Attachments whose ADD never completed and whose DEL kept failing, given up so the pod's
   * teardown could finish (Warning event `TeardownAbandoned`); kept on the tombstone so GC can
   * retry their DEL and run their delegates' GC (CNI SPEC 1.1 "GC").
   */
  abandoned?: CachedAttachment[];
  /**
   * The `default-route` change Manifold made in the sandbox (NPWG v1.3 §4.1.2.1.9), so CHECK
   * and `manifold inspect` understand why other attachments lack their default routes.
   */
  defaultRouteChange?: {
    ifName: string;
    added: { dst: string; gateway?: string; metric: number }[];
    removed: { dst: string; gateway?: string; ifName: string }[];
  };
}

/** Why a cache file could not be used. */
export type CacheCorruptReason = "unparsable" | "schema" | "version" | "truncated";

/**
 * A cache file exists but cannot be used. `reason`: "truncated" (empty, or a cut-off JSON
 * document), "unparsable" (not JSON), "version" (a `schemaVersion` this build does not know),
 * "schema" (JSON of the wrong shape). A {@link CniError} with code 6 (decoding failure) so it
 * reaches the runtime with a meaningful code if nobody handles it; DEL should fall back to a
 * best-effort cleanup.
 */
export class CacheCorruptError extends CniError {
  /** The file that is damaged. */
  readonly path: string;
  /** What is wrong with it. */
  readonly reason: CacheCorruptReason;

  /**
   * Creates the error for one damaged file.
   * @param path the cache file.
   * @param reason see {@link CacheCorruptReason}.
   * @param details parser message or prettified zod error.
   */
  constructor(path: string, reason: CacheCorruptReason, details = "") {
    super(CniErrorCode.DecodingFailure, `cache record ${path} is ${REASON_TEXT[reason]}`, details);
    this.name = "CacheCorruptError";
    this.path = path;
    this.reason = reason;
  }
}

const REASON_TEXT: Record<CacheCorruptReason, string> = {
  truncated: "truncated",
  unparsable: "not valid JSON",
  version: "of an unknown schema version",
  schema: "malformed",
};

/**
 * CNI SPEC 1.1 "Parameters" CNI_CONTAINERID; length bounded so file names fit NAME_MAX.
 * Never contains `@`, which separates it from the interface name in file names.
 */
export const CONTAINER_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,199}$/;
/** An RFC 3339 timestamp as `Date.prototype.toISOString` writes it (offset allowed). */
export const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

/**
 * What {@link decodeRecordWith} runs on the decoded JSON: the record as zod returns it, the
 * issues as zod words them, or `undefined` for "not accepted by the fast check: ask zod".
 */
export type RecordShapeCheck = (
  raw: unknown,
) => { success: true; data: CacheRecord } | { success: false; details: string } | undefined;

/**
 * Turns a cache file's text into a record, classifying every failure; the shape is checked
 * by `check` (zod's schema in lib/multinet/cache/record.ts, or {@link fastRecordCheck}).
 * @param path the file (named in the error).
 * @param text its content.
 * @param check the shape check.
 * @returns the validated record (unknown keys kept); `undefined` when `check` did.
 * @throws {CacheCorruptError} (CNI code 6) with `reason` "truncated", "unparsable", "version"
 *   or "schema".
 */
export function decodeRecordWith(
  path: string,
  text: string,
  check: RecordShapeCheck,
): CacheRecord | undefined {
  // A crash before the data blocks reached the disk leaves an empty or NUL-padded file.
  const written = text.replace(/\0+$/, "");
  if (written.trim() === "") throw new CacheCorruptError(path, "truncated", "empty file");
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    const message = errorText(err);
    const reason = isJsonPrefix(written) ? "truncated" : "unparsable";
    throw new CacheCorruptError(path, reason, message);
  }
  const version = (raw as { schemaVersion?: unknown } | null)?.schemaVersion;
  if (typeof version === "number" && version !== CACHE_SCHEMA_VERSION) {
    throw new CacheCorruptError(
      path,
      "version",
      `schemaVersion ${version}, this build reads ${CACHE_SCHEMA_VERSION}`,
    );
  }
  const parsed = check(raw);
  if (parsed === undefined) return undefined;
  if (!parsed.success) throw new CacheCorruptError(path, "schema", parsed.details);
  return parsed.data;
}

/** The fast twin of record.ts's attachment schema (a conservative subset; see lib/util/shape.ts). */
const ATTACHMENT: Shape<unknown> = loose({
  statusName: str,
  isDefault: bool,
  origin: { optional: str },
  ifName: str,
  conflist: record(unknown),
  capabilityArgs: record(unknown),
  cniArgs: array(tuple<[string, string]>(str, str)),
  state: oneOf("adding", "added"),
  result: { optional: unknown },
  deviceInfoFile: { optional: str },
  resourceName: { optional: str },
  deviceId: { optional: str },
  deviceInfo: { optional: loose({ type: str, version: str }) },
  defaultRoute: { optional: array(str) },
  delFailures: {
    optional: loose({ count: int(1), firstAt: matching(TIMESTAMP), lastError: str }),
  },
});

/** The fast twin of record.ts's record schema. */
const RECORD: Shape<unknown> = loose({
  schemaVersion: oneOf(CACHE_SCHEMA_VERSION),
  containerId: matching(CONTAINER_ID),
  netns: str,
  ifName: str,
  pod: loose({ namespace: str, name: str, uid: str }),
  cniVersion: str,
  createdAt: matching(TIMESTAMP),
  attachments: array(ATTACHMENT),
  networkStatus: { optional: array(loose({ name: str, default: bool })) },
  statusAnnotations: { optional: record(str) },
  deletedAt: { optional: matching(TIMESTAMP) },
  abandoned: { optional: array(ATTACHMENT) },
  defaultRouteChange: {
    optional: loose({
      ifName: str,
      added: array(loose({ dst: str, gateway: { optional: str }, metric: num })),
      removed: array(loose({ dst: str, gateway: { optional: str }, ifName: str })),
    }),
  },
});

/**
 * The fast record check: a well-formed record as zod's schema (lib/multinet/cache/record.ts)
 * returns it, or `undefined` (ask zod) — never a rejection of its own. The fuzz target
 * `record` asserts that zod accepts, with a deep-equal value, whatever this accepts.
 * @param raw the decoded JSON.
 * @returns `{success: true, data}` or `undefined`.
 * @example
 * ```ts
 * fastRecordCheck({ schemaVersion: 2 }); // undefined
 * ```
 */
export const fastRecordCheck: RecordShapeCheck = (raw) => {
  const data = fastCheck(RECORD, raw);
  return data === undefined ? undefined : { success: true, data: data as CacheRecord };
};
