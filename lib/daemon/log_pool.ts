/**
 * The daemon's request loggers: one per destination (level, file, rotation, stderr) for the
 * daemon's life, so serving a request opens no descriptor (a plugin process makes its logger
 * per call and exits; the daemon would keep one open file per request). Closed on stop.
 *
 * @module
 */

import { type ClosableLogger, createLogger, type Logger, type LoggerOptions } from "../log/mod.ts";

/** Loggers by destination. */
export class LoggerPool {
  #loggers = new Map<string, ClosableLogger>();

  /**
   * The logger writing to `opts`' destination, created on first use.
   * @param opts level, file, rotation, stderr (as `createLogger`)
   * @returns the shared logger
   */
  get(opts: LoggerOptions): Logger {
    const key = JSON.stringify([opts.level, opts.file, opts.logOptions, opts.toStderr]);
    let logger = this.#loggers.get(key);
    if (!logger) {
      logger = createLogger(opts);
      this.#loggers.set(key, logger);
    }
    return logger;
  }

  /** Destinations in use (tests, leaks). */
  get size(): number {
    return this.#loggers.size;
  }

  /** Closes every logger's file. Idempotent. */
  close(): void {
    for (const l of this.#loggers.values()) l.close();
    this.#loggers.clear();
  }
}
