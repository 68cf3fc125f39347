/**
 * Structured logging to stderr and/or a file. stdout is reserved for the CNI result
 * (CNI SPEC "Result"), so nothing here ever writes there. Levels follow Multus's
 * `logLevel` words (`debug` < `verbose` < `error` < `panic`), plus `info`/`warning` aliases.
 *
 * @module
 */

import { redact, redactText } from "./redact.ts";
import { type LogOptions, logRotation, RotatingLogFile, type RotationOutcome } from "./rotate.ts";

/** Severity, lowest first. `verbose` = info. */
export type LogLevel = "debug" | "verbose" | "warning" | "error" | "panic";

const RANK: Record<LogLevel, number> = { debug: 0, verbose: 1, warning: 2, error: 3, panic: 4 };

/** Extra key/values for one log line; secrets are redacted before writing. */
export type LogFields = Record<string, unknown>;

/** The logging interface every module takes (inject {@link nullLogger} in tests). */
export interface Logger {
  /** Detail for debugging (Multus `debug`). */
  debug(msg: string, fields?: LogFields): void;
  /** Progress (Multus `verbose`). */
  info(msg: string, fields?: LogFields): void;
  /** A problem that did not fail the operation (`warning`). */
  warn(msg: string, fields?: LogFields): void;
  /** A failure (`error`). */
  error(msg: string, fields?: LogFields): void;
  /** A logger that adds `fields` to every line (e.g. containerID, pod). */
  with(fields: LogFields): Logger;
}

/** Options of {@link createLogger}. */
export interface LoggerOptions {
  /** Lowest level written; Multus default is `panic` (almost silent). Unknown words → `verbose`. */
  level?: string;
  /** Append JSON lines to this file (created 0600). */
  file?: string;
  /**
   * Rotate `file` by size (Multus `logOptions`, validated; see lib/log/rotate.ts). Absent:
   * the file is never rotated and no `stat` is made per line.
   */
  logOptions?: LogOptions;
  /** Also write to stderr (Multus `logToStderr`, default true). */
  toStderr?: boolean;
}

/**
 * Normalises a Multus/Manifold level word to a {@link LogLevel}.
 * @example parseLogLevel("info") // "verbose"
 */
export function parseLogLevel(word: string | undefined): LogLevel {
  switch ((word ?? "").toLowerCase()) {
    case "debug":
      return "debug";
    case "verbose":
    case "info":
      return "verbose";
    case "warning":
    case "warn":
      return "warning";
    case "error":
      return "error";
    case "panic":
      return "panic";
    default:
      return "verbose";
  }
}

/** One log line: `{"ts","level","msg",...fields}` + newline, secrets redacted. */
function formatLine(level: LogLevel, msg: string, fields: LogFields): string {
  // Fields never overwrite ts/level/msg (a field named "msg" would hide the message).
  const { ts: _ts, level: _level, msg: _msg, ...rest } = redact(fields) as LogFields;
  return JSON.stringify({ ts: new Date().toISOString(), level, msg: redactText(msg), ...rest }) +
    "\n";
}

/** A log file's writer: plain append, or rotating when `logOptions` are given. */
interface LogFileWriter {
  write(bytes: Uint8Array): void;
  close(): void;
}

/** A logger that owns its file descriptor (see {@link createLogger}). */
export interface ClosableLogger extends Logger {
  /**
   * Closes the log file's descriptor (idempotent); a later line opens it again. The loggers
   * `with` derived share the descriptor.
   */
  close(): void;
}

/** Opens `path` for appending (on first write), rotating by {@link LogOptions} when given. */
function logFileWriter(path: string, logOptions: LogOptions | undefined): LogFileWriter {
  if (logOptions) {
    const file = new RotatingLogFile(path, logRotation(logOptions));
    const enc = new TextEncoder();
    const notice = (outcome: RotationOutcome) =>
      logOptions.compress === false ? undefined : enc.encode(formatLine(
        "warning",
        "log file rotated; logOptions.compress is not implemented: backups are kept uncompressed",
        { file: path, removedBackups: outcome.removed.length },
      ));
    return { write: (bytes) => file.write(bytes, notice), close: () => file.close() };
  }
  let file: Deno.FsFile | undefined;
  return {
    write(bytes) {
      file ??= Deno.openSync(path, { append: true, create: true, mode: 0o600 });
      file.writeSync(bytes);
    },
    close() {
      file?.close();
      file = undefined;
    },
  };
}

/**
 * Creates a logger writing one JSON object per line: `{"ts","level","msg",...fields}`.
 * File errors are swallowed (logging must never fail a pod): after the first, the file is
 * no longer written.
 *
 * The file is opened at the first line and stays open: a long-lived process makes one logger
 * per destination and closes it when done (`close`).
 *
 * @param opts level, file (and its rotation), stderr
 * @param base fields added to every line
 * @returns the logger
 */
export function createLogger(opts: LoggerOptions = {}, base: LogFields = {}): ClosableLogger {
  const min = RANK[parseLogLevel(opts.level ?? "panic")];
  const toStderr = opts.toStderr ?? true;
  const enc = new TextEncoder();
  let file: LogFileWriter | undefined;
  let fileFailed = false;
  /** Writes one line; shared by the loggers `with` derives (one descriptor per process). */
  const emit = (level: LogLevel, msg: string, fields: LogFields) => {
    if (RANK[level] < min) return;
    const bytes = enc.encode(formatLine(level, msg, fields));
    if (toStderr) {
      try {
        Deno.stderr.writeSync(bytes);
      } catch { /* stderr closed */ }
    }
    if (opts.file && !fileFailed) {
      try {
        file ??= logFileWriter(opts.file, opts.logOptions);
        file.write(bytes);
      } catch {
        fileFailed = true;
      }
    }
  };
  const derive = (fixed: LogFields): Logger => ({
    debug: (m, f) => emit("debug", m, { ...fixed, ...f }),
    info: (m, f) => emit("verbose", m, { ...fixed, ...f }),
    warn: (m, f) => emit("warning", m, { ...fixed, ...f }),
    error: (m, f) => emit("error", m, { ...fixed, ...f }),
    with: (f) => derive({ ...fixed, ...f }),
  });
  return {
    ...derive(base),
    close() {
      try {
        file?.close();
      } catch { /* already closed */ }
    },
  };
}

/** A logger that drops everything (tests, dry runs). */
export const nullLogger: Logger = {
  debug() {},
  info() {},
  warn() {},
  error() {},
  with: () => nullLogger,
};
