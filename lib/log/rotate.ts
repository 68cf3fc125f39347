/**
 * Size-based rotation of the plugin's log file (Multus `logOptions` for `logFile`, which
 * Multus hands to lumberjack): when a write would take the file past `maxSize` megabytes,
 * the file is renamed to `<file>.1` (`.1` → `.2`, …), backups beyond `maxBackups` and
 * backups last written more than `maxAge` days ago are removed, and writing goes on in a
 * new file.
 *
 * Many plugin processes (one per pod operation, often at once) append to one file, each
 * with its own `O_APPEND` descriptor, so:
 * - before each line a writer `stat`s the path (≈ 3 µs, the only cost on the hot path): a
 *   different inode or none means another process rotated — the writer reopens the path;
 * - one process rotates at a time, under an exclusive `flock` of `<file>.lock` (created
 *   0600 next to the file and left there; the kernel drops the lock when a process dies, so
 *   it never goes stale). Under the lock the rotating process checks again that the path is
 *   still the inode it measured: a writer that waited on the lock behind another rotation
 *   just reopens;
 * - a line written through a descriptor whose file was just renamed lands at the end of the
 *   newest backup: nothing is lost, nothing is written twice.
 *
 * `compress` is not done (no gzip on the hot path, and a plugin process may exit before an
 * asynchronous compression ends): backups stay plain text, and each rotation writes a warning
 * saying so as the first line of the new file.
 *
 * @module
 */

/** Multus's `logOptions` as written in the config (lumberjack's settings). */
export interface LogOptions {
  /** Rotate when the file would grow past this many megabytes (MiB, 1 048 576 bytes). */
  maxSize?: number;
  /** Remove backups last written more than this many days ago; 0 = keep regardless of age. */
  maxAge?: number;
  /** Keep at most this many backups; 0 = no count limit (`maxAge` still applies). */
  maxBackups?: number;
  /** Gzip the backups (Multus default true). Not done by Manifold: a warning says so. */
  compress?: boolean;
}

/**
 * Defaults of a key missing from a given `logOptions`, as Multus sets them
 * (`logging.SetLogOptions`): 100 MB, 5 days, 5 backups, compress.
 */
export const LOG_OPTIONS_DEFAULTS: Readonly<Required<LogOptions>> = {
  maxSize: 100,
  maxAge: 5,
  maxBackups: 5,
  compress: true,
};

/** Largest accepted `maxSize` (MB), `maxAge` (days) and `maxBackups`. */
export const LOG_OPTIONS_LIMITS = { maxSize: 1_048_576, maxAge: 36_500, maxBackups: 10_000 };

/** Rotation settings in the units the writer uses. */
export interface LogRotation {
  /** Largest file size in bytes before rotation (≥ 1). */
  maxBytes: number;
  /** Backups kept; 0 = no count limit. */
  maxBackups: number;
  /** Oldest backup kept, by mtime, in ms; 0 = no age limit. */
  maxAgeMs: number;
  /** Whether the configuration asked for compression (not done; warned at rotation). */
  compress: boolean;
}

const MIB = 1024 * 1024;
const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * Problems of a `logOptions` value, as zod prints its issues (`"✖ problem\n  → at path"`),
 * for {@link parseManifoldConf}-style code-7 errors; `[]` when valid. Keys other than the
 * four are rejected (a key that silently does nothing is a defect).
 *
 * @param value the `logOptions` value of the config (any JSON)
 * @param at the key's name in messages; default `"logOptions"`
 * @returns the issues, one string each
 * @example
 * ```ts
 * logOptionsIssues({ maxSize: 0 }); // ["✖ Expected an integer from 1 to 1048576 (megabytes)\n  → at logOptions.maxSize"]
 * ```
 */
export function logOptionsIssues(value: unknown, at = "logOptions"): string[] {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return [`✖ Expected an object with maxSize, maxAge, maxBackups, compress\n  → at ${at}`];
  }
  const issues: string[] = [];
  const int = (key: keyof typeof LOG_OPTIONS_LIMITS, min: number, unit: string) => {
    const v = (value as Record<string, unknown>)[key];
    const max = LOG_OPTIONS_LIMITS[key];
    if (v !== undefined && (!Number.isInteger(v) || (v as number) < min || (v as number) > max)) {
      issues.push(`✖ Expected an integer from ${min} to ${max}${unit}\n  → at ${at}.${key}`);
    }
  };
  int("maxSize", 1, " (megabytes)");
  int("maxAge", 0, " (days; 0 = no age limit)");
  int("maxBackups", 0, " (0 = no count limit)");
  const compress = (value as Record<string, unknown>).compress;
  if (compress !== undefined && typeof compress !== "boolean") {
    issues.push(`✖ Expected a boolean\n  → at ${at}.compress`);
  }
  for (const key of Object.keys(value)) {
    if (!(key in LOG_OPTIONS_DEFAULTS)) {
      issues.push(
        `✖ Unknown key ${JSON.stringify(key)}: expected maxSize, maxAge, maxBackups or compress\n` +
          `  → at ${at}`,
      );
    }
  }
  return issues;
}

/**
 * Rotation settings from a validated `logOptions` ({@link logOptionsIssues} found nothing);
 * missing keys take {@link LOG_OPTIONS_DEFAULTS}.
 *
 * @param options Multus `logOptions`
 * @returns sizes in bytes, ages in ms
 * @example
 * ```ts
 * logRotation({ maxSize: 1 }).maxBytes; // 1048576
 * ```
 */
export function logRotation(options: LogOptions): LogRotation {
  const d = LOG_OPTIONS_DEFAULTS;
  return {
    maxBytes: (options.maxSize ?? d.maxSize) * MIB,
    maxBackups: options.maxBackups ?? d.maxBackups,
    maxAgeMs: (options.maxAge ?? d.maxAge) * DAY_MS,
    compress: options.compress ?? d.compress,
  };
}

/** What {@link rotateLogFile} did. */
export interface RotationOutcome {
  /** False when another process had rotated the file already (nothing done). */
  rotated: boolean;
  /** Backups removed by count or age (paths). */
  removed: string[];
}

/**
 * Rotates `path` under the `<path>.lock` flock: shifts `<path>.N` → `<path>.N+1` (highest
 * first), renames `path` → `<path>.1`, then removes backups past `maxBackups` and those
 * whose mtime is older than `maxAgeMs`. Does nothing when `path` is no longer the inode
 * `ino` (another process rotated it meanwhile) or is gone. Blocks while another process
 * rotates (renames only: microseconds).
 *
 * @param path the log file
 * @param ino inode of the file the caller found too big (`Deno.FileInfo.ino`)
 * @param rotation the settings
 * @param now the current time, ms since the epoch (tests)
 * @returns whether this call rotated, and what it removed
 * @throws Deno errors when the lock file cannot be created or a rename fails
 */
export function rotateLogFile(
  path: string,
  ino: number | null,
  rotation: LogRotation,
  now: number = Date.now(),
): RotationOutcome {
  const lock = Deno.openSync(`${path}.lock`, { create: true, write: true, mode: 0o600 });
  try {
    lock.lockSync(true);
    const current = statOrUndefined(path);
    if (!current || current.ino !== ino) return { rotated: false, removed: [] };
    const highest = highestBackup(path);
    for (let n = highest; n >= 1; n--) Deno.renameSync(`${path}.${n}`, `${path}.${n + 1}`);
    Deno.renameSync(path, `${path}.1`);
    return { rotated: true, removed: pruneBackups(path, highest + 1, rotation, now) };
  } finally {
    lock.close(); // releases the flock
  }
}

/** The largest N such that `<path>.1` … `<path>.N` all exist (0 when `<path>.1` does not). */
function highestBackup(path: string): number {
  let n = 0;
  while (statOrUndefined(`${path}.${n + 1}`)) n++;
  return n;
}

/** Removes backups 1…`count` beyond `maxBackups` or older than `maxAgeMs`; returns their paths. */
function pruneBackups(path: string, count: number, rotation: LogRotation, now: number): string[] {
  const removed: string[] = [];
  let aged = false;
  for (let n = 1; n <= count; n++) {
    const backup = `${path}.${n}`;
    const st: Deno.FileInfo | undefined = aged ? undefined : statOrUndefined(backup);
    const tooMany = rotation.maxBackups > 0 && n > rotation.maxBackups;
    // Backups are ordered by age: once one is too old, every later one is too.
    aged ||= rotation.maxAgeMs > 0 && st?.mtime != null &&
      now - st.mtime.getTime() > rotation.maxAgeMs;
    if (tooMany || aged) {
      try {
        Deno.removeSync(backup);
        removed.push(backup);
      } catch (e) {
        if (!(e instanceof Deno.errors.NotFound)) throw e;
      }
    }
  }
  return removed;
}

/**
 * An append-only log file that rotates itself ({@link rotateLogFile}) before a write would
 * take it past `maxBytes`, and follows the path when another process rotated it. Writes are
 * synchronous: a plugin process may exit right after its last line.
 */
export class RotatingLogFile {
  #path: string;
  #rotation: LogRotation;
  #file: Deno.FsFile | undefined;
  #ino: number | null = null;
  #now: () => number;
  #cannotRotate = false;

  /**
   * A writer of `path`; nothing is opened before the first write.
   *
   * @param path the log file (created 0600 when missing)
   * @param rotation the settings ({@link logRotation})
   * @param now clock for the age limit, ms since the epoch (tests)
   */
  constructor(path: string, rotation: LogRotation, now: () => number = Date.now) {
    this.#path = path;
    this.#rotation = rotation;
    this.#now = now;
  }

  /**
   * Appends `bytes` (whole lines), rotating first when the file would exceed `maxBytes`
   * (a single line longer than `maxBytes` still goes into a file of its own). After this
   * process rotated, `notice(rotation)` is written first when given. When rotating fails
   * (the lock file cannot be created, a rename is refused), the file just grows: this
   * process does not try again.
   *
   * @param bytes one or more complete lines
   * @param notice builds the first line of a new file after this process rotated
   * @throws Deno errors from the file system (the logger swallows them)
   */
  write(bytes: Uint8Array, notice?: (outcome: RotationOutcome) => Uint8Array | undefined): void {
    let st = statOrUndefined(this.#path);
    if (!st || st.ino !== this.#ino) st = this.#reopen();
    if (
      !this.#cannotRotate && st.size > 0 && st.size + bytes.length > this.#rotation.maxBytes
    ) {
      let outcome: RotationOutcome | undefined;
      try {
        outcome = rotateLogFile(this.#path, st.ino, this.#rotation, this.#now());
      } catch {
        // No lock file or no rename in that directory: keep appending (logging never fails
        // a pod), and stop trying in this process.
        this.#cannotRotate = true;
      }
      if (outcome) {
        this.#reopen();
        const first = outcome.rotated ? notice?.(outcome) : undefined;
        if (first) writeAll(this.#file!, first);
      }
    }
    writeAll(this.#file!, bytes);
  }

  /** Closes the descriptor (idempotent). */
  close(): void {
    this.#file?.close();
    this.#file = undefined;
  }

  /** Opens the path (again) and returns what the new descriptor points at. */
  #reopen(): Deno.FileInfo {
    this.close();
    this.#file = Deno.openSync(this.#path, { append: true, create: true, mode: 0o600 });
    const st = this.#file.statSync();
    this.#ino = st.ino;
    return st;
  }
}

function writeAll(file: Deno.FsFile, bytes: Uint8Array): void {
  for (let off = 0; off < bytes.length;) off += file.writeSync(bytes.subarray(off));
}

function statOrUndefined(path: string): Deno.FileInfo | undefined {
  try {
    return Deno.statSync(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return undefined;
    throw e;
  }
}
