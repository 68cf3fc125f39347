/**
 * Logging: {@link createLogger}, {@link nullLogger} and secret {@link redact}ion.
 * @module
 */
export * from "./logger.ts";
export * from "./redact.ts";
export * from "./trace.ts";
export * from "./rotate.ts";
