/**
 * The attachment cache: what DEL, CHECK and GC need to undo or verify what ADD did, even when
 * the NetworkAttachmentDefinitions or the API server are gone.
 *
 * One JSON file per runtime attachment, keyed as the CNI spec identifies an attachment (CNI
 * SPEC "Parameters": CNI_CONTAINERID + CNI_IFNAME): `<dir>/<containerId>@<ifName>.json` (mode
 * 0600, dir 0700), the interface name percent-encoded outside `[A-Za-z0-9_.-]` (container IDs
 * never contain `@`). Two ADDs for one container with different CNI_IFNAME (podman or nerdctl
 * attaching two networks) have two records; DEL, CHECK and GC act on exactly theirs.
 *
 * Migration: records written before this layout are `<dir>/<containerId>.json`, one per
 * container. Such a legacy record is read as the record of the interface it stores
 * (`ifName`) and renamed to the new name on that first read (link + unlink, so a newer record
 * is never overwritten); a damaged legacy record is reported as damaged for every interface
 * of its container (DEL then rebuilds, as before) and removed with the tombstone.
 *
 * Avoids Multus's cache bugs:
 * - #948/#1087 (truncated cache after a reboot): every write goes through
 *   `lib/fs/atomic.ts` (temporary file, fsync, rename, directory fsync); a damaged file is
 *   reported as {@link CacheCorruptError} with the reason instead of being half-read.
 * - #1449 (conflist plugin fields lost, calico DEL failed): the full delegate conflist is kept
 *   as executed, together with its capability arguments (portMappings, bandwidth…).
 * - Multus assumed `delegates[0]` was the default network on load: here each attachment says so.
 * - The ADD intent is recorded before any delegate runs (`state: "adding"`), so DEL can clean
 *   up an attachment whose ADD crashed half-way.
 *
 * @module
 */

import { lazyImport } from "../../util/lazy.ts";
import { CniError, CniErrorCode } from "../../cni/errors.ts";
import { syncDir, writeFileAtomic } from "../../fs/atomic.ts";
import { errorText } from "../../util/text.ts";
import { type CacheKey, KEY_SEPARATOR, parseRecordName, recordName } from "./names.ts";
import { type CacheRecord, decodeRecordWith, fastRecordCheck } from "./record_format.ts";
import { DelegateGroups } from "./delegate_groups.ts";
import { crashpoint } from "../crashpoint.ts";

export type { CacheKey } from "./names.ts";
export {
  CACHE_SCHEMA_VERSION,
  CacheCorruptError,
  type CacheCorruptReason,
  type CachedAttachment,
  type CacheRecord,
  type DelFailures,
} from "./record_format.ts";

/**
 * A cache file's text as a record (record.ts's `decodeRecord`), without loading zod when the
 * fast check accepts the record (issue 30); zod decides, and words the error, otherwise.
 */
async function decodeRecord(path: string, text: string): Promise<CacheRecord> {
  return decodeRecordWith(path, text, fastRecordCheck) ??
    (await lazyImport<typeof import("./record.ts")>("./record.ts", import.meta.url)).decodeRecord(
      path,
      text,
    );
}

/** record.ts's `checkRecord` before a write, loading zod only when the fast check does not accept. */
async function checkRecord(record: CacheRecord): Promise<void> {
  if (fastRecordCheck(record) === undefined) {
    (await lazyImport<typeof import("./record.ts")>("./record.ts", import.meta.url)).checkRecord(
      record,
    );
  }
}

/** Temporary files a pre-`lib/fs` writer left: `<containerId>.json.tmp-<pid>-<hex>`. */
const LEGACY_TEMP = /^(.+)\.json\.tmp-\d+-[0-9a-f]+$/;
/** Temporary files of `lib/fs/atomic.ts`: `.<name>.tmp-<pid>-<base36>`. */
const ATOMIC_TEMP = /^\.(.+)\.tmp-\d+-[0-9a-z]+$/;

/**
 * Reads and writes {@link CacheRecord}s under one directory, e.g. "/var/lib/cni/manifold".
 * Writes are atomic and durable; readers never see a partial record.
 *
 * @example
 * ```ts
 * const cache = new AttachmentCache("/var/lib/cni/manifold");
 * await cache.write(record);                       // <dir>/<containerId>@<ifName>.json, 0600
 * const again = await cache.read(record.containerId, record.ifName);
 * await cache.remove(record.containerId, record.ifName); // idempotent
 * ```
 */
export class AttachmentCache {
  readonly #dir: string;
  #delegates: DelegateGroups | undefined;

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

  /** The cache directory, without a trailing slash. */
  get dir(): string {
    return this.#dir;
  }

  /**
   * The notes of delegate ADDs still running, by attachment (`<dir>/delegates/`, see
   * `cache/delegate_groups.ts`): what DEL stops before the delegate DEL of an attachment
   * whose ADD never completed.
   */
  get delegates(): DelegateGroups {
    return this.#delegates ??= new DelegateGroups(this.#dir);
  }

  /**
   * The record file of an attachment: `<dir>/<containerId>@<ifName>.json` (the interface name
   * percent-encoded outside `[A-Za-z0-9_.-]`); for `ifName` `""` the legacy per-container file
   * `<dir>/<containerId>.json`.
   * @param containerId CNI_CONTAINERID.
   * @param ifName CNI_IFNAME, e.g. `"eth0"`.
   * @returns the absolute or relative path, as `dir` was given.
   * @throws {CniError} code 4 (invalid environment) when `containerId` is empty, contains "/"
   *   or "..", does not start with an alphanumeric character, or is longer than 200 bytes; or
   *   when `ifName` is not a valid interface name.
   */
  path(containerId: string, ifName: string): string {
    return `${this.#dir}/${recordName(containerId, ifName)}`;
  }

  /**
   * Reads an attachment's record; a legacy per-container record storing this `ifName` is
   * migrated (renamed to {@link AttachmentCache.path}) and returned.
   * @param containerId CNI_CONTAINERID.
   * @param ifName CNI_IFNAME; `""` reads the legacy per-container file as it is.
   * @returns the record, or undefined when there is none.
   * @throws {CacheCorruptError} (CNI code 6) when the file (or the container's legacy file) is
   *   empty, truncated, not JSON, of an unknown `schemaVersion` or of the wrong shape.
   * @throws {CniError} code 4 for a bad key; code 5 (I/O failure) when the file cannot be read.
   */
  async read(containerId: string, ifName: string): Promise<CacheRecord | undefined> {
    const path = this.path(containerId, ifName);
    const text = await readIfPresent(path);
    if (text !== undefined) return await decodeRecord(path, text);
    if (ifName === "") return undefined;
    const legacy = this.path(containerId, "");
    const legacyText = await readIfPresent(legacy);
    if (legacyText === undefined) return undefined;
    const record = await decodeRecord(legacy, legacyText);
    if (record.ifName !== ifName || record.containerId !== containerId) return undefined;
    try {
      await Deno.link(legacy, path); // never replaces a record written meanwhile
      await Deno.remove(legacy);
      await syncDir(this.#dir);
    } catch (e) {
      // A record appeared meanwhile: it is the newer one. Otherwise migrate on a later read.
      if (e instanceof Deno.errors.AlreadyExists) return await this.read(containerId, ifName);
    }
    return record;
  }

  /**
   * Writes an attachment's record, keyed by its `containerId` and `ifName`, atomically and
   * durably with `writeFileAtomic` (temporary file, fsync, rename, directory fsync). The
   * directory is created with mode 0700 when missing. The file always holds either the old or
   * the new complete record.
   * @param record the record; validated first so that nothing unreadable is ever written.
   * @throws {CniError} code 4 for a bad key; code 5 (I/O failure) when a file operation fails.
   * @throws {TypeError} when `record` does not match the schema (a programming error).
   */
  async write(record: CacheRecord): Promise<void> {
    if (record.ifName === "") {
      throw new CniError(
        CniErrorCode.InvalidEnvironment,
        "invalid interface name for the cache",
        "the record's ifName is empty",
      );
    }
    const path = this.path(record.containerId, record.ifName);
    await checkRecord(record);
    try {
      Deno.mkdirSync(this.#dir, { recursive: true, mode: 0o700 });
    } catch (err) {
      throw ioError("cannot create cache directory", this.#dir, err);
    }
    try {
      await writeFileAtomic(path, `${JSON.stringify(record, null, 2)}\n`, {
        mode: 0o600,
        beforeRename: () => crashpoint("cache:after-temp-write"),
      });
    } catch (err) {
      throw ioError("cannot write cache record", path, err);
    }
  }

  /**
   * Replaces an attachment's record with a tombstone: the same record with no attachments, no
   * network-status and `deletedAt` = now (`abandoned` attachments are kept for GC), written
   * like {@link AttachmentCache.write}. Used after a successful DEL (or a fully rolled-back
   * ADD) so that a repeated DEL does not rebuild and re-run delegates from the pod's
   * annotations; GC removes tombstones of attachments the runtime no longer lists (CNI SPEC 1.1
   * "GC"), DEL prunes old ones (`lib/multinet/cache/tombstones.ts`).
   * Temporary files a killed writer left for the attachment, and its legacy record, are
   * removed too: nothing will ever rename or read them.
   * @param record the attachment's record (its `containerId`, `pod`, `netns`… are kept).
   * @param options `now`: the deletion time (tests); default the current time.
   * @throws {CniError} code 4 for a bad key; code 5 (I/O failure) as for `write`.
   * @throws {TypeError} when `record` does not match the schema.
   */
  async writeTombstone(record: CacheRecord, options: { now?: Date } = {}): Promise<void> {
    const { networkStatus: _dropped, statusAnnotations: _also, ...rest } = record;
    await this.write({
      ...rest,
      attachments: [],
      deletedAt: (options.now ?? new Date()).toISOString(),
    });
    if (await this.#removeLeftovers(record.containerId, record.ifName) > 0) {
      await syncDir(this.#dir);
    }
  }

  /**
   * Deletes an attachment's record, its legacy record and any temporary files a crashed writer
   * left for it. Idempotent: a missing record or directory is fine.
   * @param containerId CNI_CONTAINERID.
   * @param ifName CNI_IFNAME (`""`: the legacy per-container record).
   * @throws {CniError} code 4 for a bad key; code 5 (I/O failure) when a file exists but
   *   cannot be removed.
   */
  async remove(containerId: string, ifName: string): Promise<void> {
    await removeIfPresent(this.path(containerId, ifName));
    await this.#removeLeftovers(containerId, ifName);
    await syncDir(this.#dir);
  }

  /**
   * Removes what belongs to an attachment besides its record: temporary files killed writers
   * left (both layouts) and the container's legacy record when it is this attachment's or
   * unreadable. Returns how many files went.
   */
  async #removeLeftovers(containerId: string, ifName: string): Promise<number> {
    const name = recordName(containerId, ifName);
    const containerPrefix = `${containerId}${KEY_SEPARATOR}`;
    let removed = 0;
    for (const file of await this.#names()) {
      const atomic = ATOMIC_TEMP.exec(file)?.[1];
      const legacy = LEGACY_TEMP.exec(file)?.[1];
      // A temporary name may be cut to fit NAME_MAX: a prefix of the record's name.
      const mine = (atomic !== undefined && atomic.startsWith(containerPrefix) &&
        name.startsWith(atomic)) || legacy === containerId;
      if (mine) {
        await removeIfPresent(`${this.#dir}/${file}`);
        removed++;
      }
    }
    if (ifName !== "" && await this.#legacyBelongsTo(containerId, ifName)) {
      await removeIfPresent(this.path(containerId, ""));
      removed++;
    }
    return removed;
  }

  /** Whether the container's legacy record exists and is this interface's or unreadable. */
  async #legacyBelongsTo(containerId: string, ifName: string): Promise<boolean> {
    const path = this.path(containerId, "");
    const text = await readIfPresent(path);
    if (text === undefined) return false;
    try {
      return (await decodeRecord(path, text)).ifName === ifName;
    } catch {
      return true;
    }
  }

  /**
   * The attachments that have a record, sorted by container ID, then interface name.
   * Temporary and hidden files are ignored; a legacy per-container record is listed under the
   * interface it stores (read, not migrated), a damaged one under `ifName` `""`.
   * @returns `[]` when the directory does not exist.
   * @throws {CniError} code 5 (I/O failure) when the directory cannot be read.
   */
  async list(): Promise<CacheKey[]> {
    const keys = new Map<string, CacheKey>();
    const legacy: string[] = [];
    for (const name of await this.#names()) {
      const key = parseRecordName(name);
      if (!key) continue;
      if (key.ifName === "") legacy.push(key.containerId);
      else keys.set(`${key.containerId}\0${key.ifName}`, key);
    }
    for (const containerId of legacy) {
      let ifName = "";
      try {
        ifName = (await this.read(containerId, ""))?.ifName ?? "";
      } catch { /* damaged: listed under "" so that reading it reports why */ }
      const id = `${containerId}\0${ifName}`;
      if (!keys.has(id)) keys.set(id, { containerId, ifName });
    }
    return [...keys.values()].sort((a, b) =>
      compare(a.containerId, b.containerId) || compare(a.ifName, b.ifName)
    );
  }

  /**
   * The record files of the directory (both layouts) with their keys, unsorted; for
   * maintenance such as pruning. Legacy files have `ifName` `""`.
   * @throws {CniError} code 5 (I/O failure) when the directory cannot be read.
   */
  async files(): Promise<(CacheKey & { path: string })[]> {
    const out: (CacheKey & { path: string })[] = [];
    for (const name of await this.#names()) {
      const key = parseRecordName(name);
      if (key) out.push({ ...key, path: `${this.#dir}/${name}` });
    }
    return out;
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
}

function ioError(msg: string, path: string, err: unknown): CniError {
  return new CniError(CniErrorCode.IoFailure, msg, `${path}: ${errorText(err)}`);
}

async function readIfPresent(path: string): Promise<string | undefined> {
  try {
    return await Deno.readTextFile(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return undefined;
    throw ioError("cannot read cache record", path, err);
  }
}

async function removeIfPresent(path: string): Promise<void> {
  try {
    await Deno.remove(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return;
    throw ioError("cannot remove cache file", path, err);
  }
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
