/**
 * Structured logging to stderr and/or a file. stdout is reserved for the CNI result
 * (CNI SPEC "Result"), so nothing here ever writes there. Levels follow Multus's
 * `logLevel` words (`debug` < `verbose` < `error` < `panic`), plus `info`/`warning` aliases.
 *
 * @module
 */

import { redact, redactText } from "./redact.ts";

/** Severity, lowest first. `verbose` = info. */
export type LogLevel = "debug" | "verbose" | "warning" | "error" | "panic";

const RANK: Record<LogLevel, number> = { debug: 0, verbose: 1, warning: 2, error: 3, panic: 4 };

/** Extra key/values for one log line; secrets are redacted before writing. */
export type LogFields = Record<string, unknown>;

/** The logging interface every module takes (inject {@link nullLogger} in tests). */
export interface Logger {
  /** Writes a `debug` line: `msg` plus `fields` (redacted). */
  debug(msg: string, fields?: LogFields): void;
  /** Writes a `verbose` (info) line. */
  info(msg: string, fields?: LogFields): void;
  /** Writes a `warning` line. */
  warn(msg: string, fields?: LogFields): void;
  /** Writes an `error` line. */
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

/**
 * Creates a logger writing one JSON object per line: `{"ts","level","msg",...fields}`.
 * File errors are swallowed (logging must never fail a pod).
 */
export function createLogger(opts: LoggerOptions = {}, base: LogFields = {}): Logger {
  const min = RANK[parseLogLevel(opts.level ?? "panic")];
  const toStderr = opts.toStderr ?? true;
  const enc = new TextEncoder();
  let file: Deno.FsFile | undefined;
  let fileFailed = false;
  const write = (level: LogLevel, msg: string, fields?: LogFields) => {
    if (RANK[level] < min) return;
    // Fields never overwrite ts/level/msg (a field named "msg" would hide the message).
    const { ts: _ts, level: _level, msg: _msg, ...rest } = redact({
      ...base,
      ...fields,
    }) as LogFields;
    const line = JSON.stringify({
      ts: new Date().toISOString(),
      level,
      msg: redactText(msg),
      ...rest,
    }) + "\n";
    const bytes = enc.encode(line);
    if (toStderr) {
      try {
        Deno.stderr.writeSync(bytes);
      } catch { /* stderr closed */ }
    }
    if (opts.file && !fileFailed) {
      try {
        file ??= Deno.openSync(opts.file, { append: true, create: true, mode: 0o600 });
        file.writeSync(bytes);
      } catch {
        fileFailed = true;
      }
    }
  };
  return {
    debug: (m, f) => write("debug", m, f),
    info: (m, f) => write("verbose", m, f),
    warn: (m, f) => write("warning", m, f),
    error: (m, f) => write("error", m, f),
    with: (f) => createLogger(opts, { ...base, ...f }),
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
