/**
 * The zod schema of the attachment cache's record (built on first use), and the checks that
 * use it: {@link checkRecord} before a write and {@link decodeRecord} for a file. The types,
 * the error classes and the zod-free fast path are lib/multinet/cache/record_format.ts
 * (re-exported here); the per-call path loads this module only when the fast check does not
 * accept a record (issue 30).
 *
 * @module
 */

import { z } from "zod";
import { tuneZod } from "../../cni/decode.ts";
import {
  CACHE_SCHEMA_VERSION,
  type CacheRecord,
  CONTAINER_ID,
  decodeRecordWith,
  TIMESTAMP,
} from "./record_format.ts";
import type { AttachmentOrigin } from "../types.ts";

export {
  CACHE_SCHEMA_VERSION,
  CacheCorruptError,
  type CacheCorruptReason,
  type CachedAttachment,
  type CacheRecord,
  CONTAINER_ID,
  decodeRecordWith,
  type DelFailures,
  fastRecordCheck,
  type RecordShapeCheck,
} from "./record_format.ts";

tuneZod(z);

/**
 * The zod schema of a {@link CacheRecord}, built on first use (`recordSchema`), never at
 * module load: building zod schemas costs milliseconds, and only the
 * commands that read or write the cache should pay for it.
 */
export function buildRecordSchema() {
  // Structure only: a conf without "name" gives an empty statusName (Multus #656), and a
  // record must still be writable then.
  const attachmentSchema = z.looseObject({
    statusName: z.string(),
    isDefault: z.boolean(),
    // Any string: a value a newer build writes must not make the record unreadable (readers
    // check it against ATTACHMENT_ORIGINS).
    origin: z.custom<AttachmentOrigin>((v) => typeof v === "string").optional(),
    ifName: z.string(),
    conflist: z.record(z.string(), z.unknown()),
    capabilityArgs: z.record(z.string(), z.unknown()),
    cniArgs: z.array(z.tuple([z.string(), z.string()])),
    state: z.enum(["adding", "added"]),
    result: z.unknown().optional(),
    deviceInfoFile: z.string().optional(),
    resourceName: z.string().optional(),
    deviceId: z.string().optional(),
    deviceInfo: z.looseObject({ type: z.string(), version: z.string() }).optional(),
    defaultRoute: z.array(z.string()).optional(),
    delFailures: z.looseObject({
      count: z.number().int().min(1),
      firstAt: z.string().regex(TIMESTAMP),
      lastError: z.string(),
    }).optional(),
  });

  return z.looseObject({
    schemaVersion: z.literal(CACHE_SCHEMA_VERSION),
    containerId: z.string().regex(CONTAINER_ID),
    netns: z.string(),
    ifName: z.string(),
    pod: z.looseObject({ namespace: z.string(), name: z.string(), uid: z.string() }),
    cniVersion: z.string(),
    createdAt: z.string().regex(TIMESTAMP),
    attachments: z.array(attachmentSchema),
    // Structure only (DEL never reads it; CHECK and inspect read single fields): the full
    // network-status schema costs DEL milliseconds to build.
    networkStatus: z.array(z.looseObject({ name: z.string(), default: z.boolean() })).optional(),
    statusAnnotations: z.record(z.string(), z.string()).optional(),
    deletedAt: z.string().regex(TIMESTAMP).optional(),
    abandoned: z.array(attachmentSchema).optional(),
    defaultRouteChange: z.looseObject({
      ifName: z.string(),
      added: z.array(
        z.looseObject({ dst: z.string(), gateway: z.string().optional(), metric: z.number() }),
      ),
      removed: z.array(
        z.looseObject({ dst: z.string(), gateway: z.string().optional(), ifName: z.string() }),
      ),
    }).optional(),
  });
}

let builtRecordSchema: ReturnType<typeof buildRecordSchema> | undefined;
function recordSchema(): ReturnType<typeof buildRecordSchema> {
  return builtRecordSchema ??= buildRecordSchema();
}

/**
 * Checks a record before it is written, so that nothing unreadable is ever stored.
 * @param record the record to write.
 * @throws {TypeError} when it does not match the schema (a programming error), with the
 *   prettified zod error.
 */
export function checkRecord(record: CacheRecord): void {
  const checked = recordSchema().safeParse(record);
  if (!checked.success) {
    throw new TypeError(
      `cache record does not match its schema: ${z.prettifyError(checked.error)}`,
    );
  }
}

/**
 * Turns a cache file's text into a record, classifying every failure (zod checks the shape).
 * @param path the file (named in the error).
 * @param text its content.
 * @returns the validated record (unknown keys kept).
 * @throws {CacheCorruptError} (CNI code 6) with `reason` "truncated", "unparsable", "version"
 *   or "schema" (details: zod's issues).
 */
export function decodeRecord(path: string, text: string): CacheRecord {
  return decodeRecordWith(path, text, (raw) => {
    const parsed = recordSchema().safeParse(raw);
    return parsed.success
      ? { success: true, data: parsed.data as CacheRecord }
      : { success: false, details: z.prettifyError(parsed.error) };
  })!;
}
