/**
 * The per-container attachment cache: what DEL, CHECK and GC need to undo or verify what ADD
 * did, even when the NetworkAttachmentDefinitions or the API server are gone.
 * One JSON file per container at `<dir>/<containerId>.json` (mode 0600, dir 0700).
 *
 * Avoids Multus's cache bugs:
 * - #948/#1087 (truncated cache after a reboot): every write goes to a temporary file that is
 *   fsynced and then renamed over the record, and the directory is fsynced; a damaged file is
 *   reported as {@link CacheCorruptError} with the reason instead of being half-read.
 * - #1449 (conflist plugin fields lost, calico DEL failed): the full delegate conflist is kept
 *   as executed, together with its capability arguments (portMappings, bandwidth…).
 * - Multus assumed `delegates[0]` was the default network on load: here each attachment says so.
 * - The ADD intent is recorded before the delegate runs (`state: "adding"`), so DEL can clean
 *   up an attachment whose ADD crashed half-way.
 *
 * @module
 */

import { z } from "zod";
import { CniError, CniErrorCode } from "../cni/errors.ts";
import type { DeviceInfo, NetworkStatus } from "./types.ts";
import { crashpoint } from "./crashpoint.ts";

/** Version of the record layout; bump on incompatible changes. Readers refuse other versions. */
export const CACHE_SCHEMA_VERSION = 1;

/** One attachment of a container as Manifold performed it (NPWG v1.3 §4.2.1). */
export interface CachedAttachment {
  /** Status name: "ns/nad" or the default network's conf name (NPWG v1.3 §5.3.1). */
  statusName: string;
  /** True for the cluster-wide default network. */
  isDefault: boolean;
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
}

/** Everything Manifold remembers about one container. */
export interface CacheRecord {
  /** {@link CACHE_SCHEMA_VERSION} at write time. */
  schemaVersion: number;
  /** CNI_CONTAINERID (CNI SPEC "Parameters": alphanumeric start, then `[A-Za-z0-9_.-]`). */
  containerId: string;
  /** CNI_NETNS at ADD, e.g. "/var/run/netns/cni-…"; "" when unknown. */
  netns: string;
  /** The runtime's CNI_IFNAME (the default network's interface). */
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
   * Set on a tombstone (see {@link AttachmentCache.writeTombstone}): when DEL (or the rollback
   * of a failed ADD) finished, ISO-8601. A repeated DEL is then a no-op, CHECK reports an
   * unknown container, and GC removes the file once the runtime no longer lists the container.
   */
  deletedAt?: string;
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

/** CNI SPEC 1.1 "Parameters" CNI_CONTAINERID; length bounded so file names fit NAME_MAX. */
const CONTAINER_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,199}$/;
const RECORD_SUFFIX = ".json";
/** An RFC 3339 timestamp as `Date.prototype.toISOString` writes it (offset allowed). */
const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
const TEMP_MARK = ".json.tmp-";

/**
 * The zod schema of a {@link CacheRecord}, built on first use (`recordSchema`), never at
 * module load: building zod schemas costs milliseconds, and only the
 * commands that read or write the cache should pay for it.
 */
function buildRecordSchema() {
  // Structure only: a conf without "name" gives an empty statusName (Multus #656), and a
  // record must still be writable then.
  const attachmentSchema = z.looseObject({
    statusName: z.string(),
    isDefault: z.boolean(),
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
    deletedAt: z.string().regex(TIMESTAMP).optional(),
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
 * Reads and writes {@link CacheRecord}s under one directory, e.g. "/var/lib/cni/manifold".
 * Writes are atomic and durable; readers never see a partial record.
 *
 * @example
 * ```ts
 * const cache = new AttachmentCache("/var/lib/cni/manifold");
 * await cache.write(record);                 // <dir>/<containerId>.json, mode 0600
 * const again = await cache.read(record.containerId);
 * await cache.remove(record.containerId);    // idempotent
 * ```
 */
export class AttachmentCache {
  readonly #dir: string;

  /**
   * Creates a cache over a directory; nothing is touched until the first call.
   * @param dir the cache directory (Manifold's `cniDir`); created with mode 0700 on first write.
   * @throws {CniError} code 7 (invalid network config) when `dir` is empty.
   */
  constructor(dir: string) {
    if (dir === "") {
      throw new CniError(CniErrorCode.InvalidNetworkConfig, "cache directory must not be empty");
    }
    this.#dir = dir.replace(/\/+$/, "") || "/";
  }

  /**
   * The record file of a container: `<dir>/<containerId>.json`.
   * @param containerId CNI_CONTAINERID.
   * @returns the absolute or relative path, as `dir` was given.
   * @throws {CniError} code 4 (invalid environment) when `containerId` is empty, contains "/"
   *   or "..", does not start with an alphanumeric character, or is longer than 200 bytes.
   */
  path(containerId: string): string {
    checkContainerId(containerId);
    return `${this.#dir}/${containerId}${RECORD_SUFFIX}`;
  }

  /**
   * Reads a container's record.
   * @param containerId CNI_CONTAINERID.
   * @returns the record, or undefined when there is none.
   * @throws {CacheCorruptError} (CNI code 6) when the file is empty, truncated, not JSON, of an
   *   unknown `schemaVersion` or of the wrong shape; `reason` says which.
   * @throws {CniError} code 4 for a bad `containerId`; code 5 (I/O failure) when the file
   *   cannot be read.
   */
  async read(containerId: string): Promise<CacheRecord | undefined> {
    const path = this.path(containerId);
    let text: string;
    try {
      text = await Deno.readTextFile(path);
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) return undefined;
      throw ioError("cannot read cache record", path, err);
    }
    return decodeRecord(path, text);
  }

  /**
   * Writes a container's record atomically and durably: `<path>.tmp-<pid>-<random>` is created
   * (mode 0600), written, fsynced, renamed over `<path>`, then the directory is fsynced. The
   * directory is created with mode 0700 when missing. `<path>` always holds either the old or
   * the new complete record; concurrent writers never share a temporary file.
   * @param record the record; validated first so that nothing unreadable is ever written.
   * @throws {CniError} code 4 for a bad `containerId`; code 5 (I/O failure) when a file
   *   operation fails (the temporary file is removed).
   * @throws {TypeError} when `record` does not match the schema (a programming error).
   */
  async write(record: CacheRecord): Promise<void> {
    const path = this.path(record.containerId);
    const checked = recordSchema().safeParse(record);
    if (!checked.success) {
      throw new TypeError(
        `cache record does not match its schema: ${z.prettifyError(checked.error)}`,
      );
    }
    const data = new TextEncoder().encode(`${JSON.stringify(record, null, 2)}\n`);
    const temp = `${path.slice(0, -RECORD_SUFFIX.length)}${TEMP_MARK}${Deno.pid}-${randomHex()}`;
    try {
      await Deno.mkdir(this.#dir, { recursive: true, mode: 0o700 });
    } catch (err) {
      throw ioError("cannot create cache directory", this.#dir, err);
    }
    try {
      const file = await Deno.open(temp, { write: true, createNew: true, mode: 0o600 });
      try {
        for (let off = 0; off < data.length;) off += await file.write(data.subarray(off));
        await file.sync();
      } finally {
        file.close();
      }
      crashpoint("cache:after-temp-write");
      await Deno.rename(temp, path);
    } catch (err) {
      await Deno.remove(temp).catch(() => {});
      throw ioError("cannot write cache record", path, err);
    }
    await this.#syncDir();
  }

  /**
   * Replaces a container's record with a tombstone: the same record with no attachments, no
   * network-status and `deletedAt` = now, written like {@link AttachmentCache.write}. Used after
   * a successful DEL (or a fully rolled-back ADD) so that a repeated DEL does not rebuild and
   * re-run delegates from the pod's annotations; GC removes tombstones of containers the runtime
   * no longer lists (CNI SPEC 1.1 "GC").
   * Temporary files a killed writer left for the container (`<id>.json.tmp-*`) are removed
   * too: nothing will ever rename them.
   * @param record the container's record (its `containerId`, `pod`, `netns`… are kept).
   * @param options `now`: the deletion time (tests); default the current time.
   * @throws {CniError} code 4 for a bad `containerId`; code 5 (I/O failure) as for `write`.
   * @throws {TypeError} when `record` does not match the schema.
   */
  async writeTombstone(record: CacheRecord, options: { now?: Date } = {}): Promise<void> {
    const { networkStatus: _dropped, ...rest } = record;
    await this.write({
      ...rest,
      attachments: [],
      deletedAt: (options.now ?? new Date()).toISOString(),
    });
    // A writer killed between its temp write and the rename left `<id>.json.tmp-*`: the
    // container is gone now, so nothing will ever rename it.
    if (await this.#removeTemps(record.containerId) > 0) await this.#syncDir();
  }

  /**
   * Deletes a container's record and any temporary files a crashed writer left for it.
   * Idempotent: a missing record or directory is fine.
   * @param containerId CNI_CONTAINERID.
   * @throws {CniError} code 4 for a bad `containerId`; code 5 (I/O failure) when a file
   *   exists but cannot be removed.
   */
  async remove(containerId: string): Promise<void> {
    const path = this.path(containerId);
    await removeIfPresent(path);
    await this.#removeTemps(containerId);
    await this.#syncDir();
  }

  /** Removes the temporary files crashed writers left for a container; returns how many. */
  async #removeTemps(containerId: string): Promise<number> {
    const stray = new RegExp(`^${escapeRegExp(containerId)}\\.json\\.tmp-\\d+-[0-9a-f]+$`);
    let removed = 0;
    for (const name of await this.#names()) {
      if (stray.test(name)) {
        await removeIfPresent(`${this.#dir}/${name}`);
        removed++;
      }
    }
    return removed;
  }

  /**
   * The container IDs that have a record (temporary files are ignored), sorted.
   * @returns `[]` when the directory does not exist.
   * @throws {CniError} code 5 (I/O failure) when the directory cannot be read.
   */
  async list(): Promise<string[]> {
    const ids: string[] = [];
    for (const name of await this.#names()) {
      if (!name.endsWith(RECORD_SUFFIX)) continue;
      const id = name.slice(0, -RECORD_SUFFIX.length);
      if (isValidContainerId(id)) ids.push(id);
    }
    return ids.sort();
  }

  /** File names in the directory; [] when it does not exist. */
  async #names(): Promise<string[]> {
    const names: string[] = [];
    try {
      for await (const entry of Deno.readDir(this.#dir)) {
        if (entry.isFile) names.push(entry.name);
      }
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) return [];
      throw ioError("cannot list cache directory", this.#dir, err);
    }
    return names;
  }

  /** fsync the directory so a rename or unlink survives a crash. */
  async #syncDir(): Promise<void> {
    let dir: Deno.FsFile | undefined;
    try {
      dir = await Deno.open(this.#dir, { read: true });
      await dir.sync();
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) return;
      throw ioError("cannot sync cache directory", this.#dir, err);
    } finally {
      dir?.close();
    }
  }
}

/** Turns file text into a record, classifying every failure (see {@link CacheCorruptError}). */
function decodeRecord(path: string, text: string): CacheRecord {
  // A crash before the data blocks reached the disk leaves an empty or NUL-padded file.
  const written = text.replace(/\0+$/, "");
  if (written.trim() === "") throw new CacheCorruptError(path, "truncated", "empty file");
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
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
  const parsed = recordSchema().safeParse(raw);
  if (!parsed.success) {
    throw new CacheCorruptError(path, "schema", z.prettifyError(parsed.error));
  }
  return parsed.data;
}

function isValidContainerId(id: string): boolean {
  return CONTAINER_ID.test(id) && !id.includes("..");
}

function checkContainerId(id: string): void {
  if (!isValidContainerId(id)) {
    throw new CniError(
      CniErrorCode.InvalidEnvironment,
      "invalid container ID for the cache",
      `${JSON.stringify(id)}: must match ${CONTAINER_ID.source} and not contain ".."`,
    );
  }
}

function ioError(msg: string, path: string, err: unknown): CniError {
  const message = err instanceof Error ? err.message : String(err);
  return new CniError(CniErrorCode.IoFailure, msg, `${path}: ${message}`);
}

async function removeIfPresent(path: string): Promise<void> {
  try {
    await Deno.remove(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return;
    throw ioError("cannot remove cache file", path, err);
  }
}

function randomHex(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(8));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** Thrown inside {@link isJsonPrefix} when the input ends before the value does. */
const END = Symbol("end of input");

/**
 * True when `text` is the beginning of some valid JSON document (a cut-off write), false when
 * it contains a character no JSON document could have there. Only called after `JSON.parse`
 * failed, so a complete document here means trailing garbage (false).
 */
function isJsonPrefix(text: string): boolean {
  let i = 0;
  const peek = (): string => {
    while (i < text.length && " \t\n\r".includes(text[i])) i++;
    if (i >= text.length) throw END;
    return text[i];
  };
  const fail = (): never => {
    throw new SyntaxError("invalid");
  };
  const literal = (word: string) => {
    for (const ch of word) {
      if (i >= text.length) throw END;
      if (text[i++] !== ch) fail();
    }
  };
  const string = () => {
    i++; // opening quote
    for (;;) {
      if (i >= text.length) throw END;
      const ch = text[i++];
      if (ch === '"') return;
      if (ch < " ") fail();
      if (ch === "\\") {
        if (i >= text.length) throw END;
        const esc = text[i++];
        if (esc === "u") {
          for (let k = 0; k < 4; k++) {
            if (i >= text.length) throw END;
            if (!/[0-9a-fA-F]/.test(text[i++])) fail();
          }
        } else if (!'"\\/bfnrt'.includes(esc)) fail();
      }
    }
  };
  const digit = () => i < text.length && text[i] >= "0" && text[i] <= "9";
  const digits = () => {
    if (i >= text.length) throw END;
    if (!digit()) fail();
    while (digit()) i++;
  };
  const number = () => {
    if (text[i] === "-") i++;
    if (i >= text.length) throw END;
    if (text[i] === "0") i++;
    else digits();
    if (text[i] === ".") {
      i++;
      digits();
    }
    if (text[i] === "e" || text[i] === "E") {
      i++;
      if (text[i] === "+" || text[i] === "-") i++;
      digits();
    }
  };
  const value = (depth: number): void => {
    if (depth > 512) fail();
    const ch = peek();
    if (ch === "{") {
      i++;
      if (peek() === "}") return void i++;
      for (;;) {
        if (peek() !== '"') fail();
        string();
        if (peek() !== ":") fail();
        i++;
        value(depth + 1);
        const next = peek();
        i++;
        if (next === "}") return;
        if (next !== ",") fail();
      }
    }
    if (ch === "[") {
      i++;
      if (peek() === "]") return void i++;
      for (;;) {
        value(depth + 1);
        const next = peek();
        i++;
        if (next === "]") return;
        if (next !== ",") fail();
      }
    }
    if (ch === '"') return string();
    if (ch === "t") return literal("true");
    if (ch === "f") return literal("false");
    if (ch === "n") return literal("null");
    if (ch === "-" || (ch >= "0" && ch <= "9")) return number();
    fail();
  };
  try {
    value(0);
    return false; // complete value, yet JSON.parse failed: trailing garbage
  } catch (err) {
    return err === END;
  }
}
