/**
 * The plugin-side dispatcher (libcni `pkg/skel`): reads the CNI environment and
 * stdin, validates them, calls the matching handler and prints exactly one JSON
 * document on stdout — the result (ADD), the version info (VERSION), or an error
 * `{cniVersion, code, msg, details}`. Environment, stdin and stdout are injected
 * ({@link SkelIO}), so it is tested without a process.
 *
 * @module
 */

import { mark, nullLogger } from "../log/mod.ts";
import type { Logger } from "../log/mod.ts";
import { checkJsonDepth, MAX_JSON_DEPTH } from "./decode.ts";
import { CniError, CniErrorCode, toCniError } from "./errors.ts";
import { isCniCommand, parseCniEnv } from "./env.ts";
import { MAX_STDIN_BYTES, readStdinBytes } from "./stdin.ts";
import type { CniEnv } from "./env.ts";
import { convertDecoded, type DecodedResult } from "./result_convert.ts";
import { withResultSchemas } from "./result_codecs.ts";
import { DEFAULT_CONFIG_VERSION, isPlainObject, validateNetworkName } from "./netconf.ts";
import {
  CURRENT_VERSION,
  isSupportedVersion,
  SUPPORTED_VERSIONS,
  supportsCheck,
  supportsGcAndStatus,
} from "./version.ts";
import { errorText } from "../util/text.ts";

/** What a handler receives. */
export interface SkelContext {
  /** The validated CNI environment. */
  env: CniEnv;
  /** The raw stdin bytes. */
  stdin: Uint8Array;
  /** The decoded stdin config, every key kept. */
  config: Record<string, unknown>;
  /** The config's `cniVersion` (0.1.0 when absent), always supported. */
  cniVersion: string;
}

/** The plugin's operations (CNI SPEC 1.1 "CNI operations"). */
export interface SkelHandlers {
  /**
   * ADD: returns a result of any supported version, decoded once (`decodeResult`); it is
   * converted to `ctx.cniVersion` without being decoded again.
   */
  add(ctx: SkelContext): Promise<DecodedResult>;
  /** DEL: nothing is printed on success. */
  del(ctx: SkelContext): Promise<void>;
  /** CHECK (config ≥ 0.4.0): nothing is printed on success. */
  check(ctx: SkelContext): Promise<void>;
  /** GC (config ≥ 1.1.0): nothing is printed on success. */
  gc(ctx: SkelContext): Promise<void>;
  /** STATUS (config ≥ 1.1.0): nothing is printed on success. */
  status(ctx: SkelContext): Promise<void>;
}

/** The process edges the dispatcher uses. */
export interface SkelIO {
  /** The process environment. */
  env: Record<string, string | undefined>;
  /**
   * Reads stdin to its end, but at most `maxBytes + 1` bytes; returning more than
   * `maxBytes` tells the dispatcher the input is too large.
   */
  readStdin(maxBytes: number): Promise<Uint8Array>;
  /** Writes text to stdout (the CNI wire). Called at most once per dispatch. */
  writeStdout(text: string): void;
}

/** Options of {@link dispatch}. */
export interface DispatchOptions {
  /** Largest accepted stdin in bytes. Default 1 MiB. */
  maxStdinBytes?: number;
  /** Deepest accepted nesting of arrays/objects in the stdin config, in levels. Default 64 ({@link MAX_JSON_DEPTH}). */
  maxJsonDepth?: number;
  /** Where a failed command is logged; default no logging. */
  logger?: Logger;
}

/** Default stdin cap: 1 MiB. */
export const DEFAULT_MAX_STDIN_BYTES: number = MAX_STDIN_BYTES;

/**
 * Dispatches one CNI invocation.
 *
 * - VERSION: prints `{"cniVersion":"1.1.0","supportedVersions":[...]}`; needs nothing
 *   but `CNI_COMMAND` (stdin is not read).
 * - Otherwise, in order: a missing/unknown `CNI_COMMAND` (code 4, stdin not read);
 *   read stdin (code 5 on I/O error, code 7 above `maxStdinBytes`); decode the JSON
 *   object (code 6); `cniVersion` must be supported (code 1); the object must not nest
 *   deeper than `maxJsonDepth` (default {@link MAX_JSON_DEPTH} = 64 levels, code 7,
 *   `checkJsonDepth`); the environment must be
 *   valid (code 4, every variable named in one error); `name` must be valid (code 7);
 *   CHECK needs ≥ 0.4.0 and GC/STATUS ≥ 1.1.0 (code 1, like skel); then the handler.
 *   ADD's result is converted to the config's `cniVersion` and printed.
 * - Any exception is printed as `{cniVersion, code, msg, details}` (non-CniError →
 *   999) and the exit code is 1. Nothing else is written to stdout.
 *
 * @param handlers the plugin's operations.
 * @param io environment, stdin and stdout.
 * @param opts stdin size and depth caps, and logger.
 * @returns the process exit code: 0 on success, 1 on error.
 * @example
 * ```ts
 * const code = await dispatch(handlers, denoSkelIO());
 * Deno.exit(code);
 * ```
 */
export async function dispatch(
  handlers: SkelHandlers,
  io: SkelIO,
  opts: DispatchOptions = {},
): Promise<number> {
  const logger = opts.logger ?? nullLogger;
  const maxStdinBytes = opts.maxStdinBytes ?? DEFAULT_MAX_STDIN_BYTES;
  const maxJsonDepth = opts.maxJsonDepth ?? MAX_JSON_DEPTH;
  let cniVersion: string = CURRENT_VERSION;
  let output: string;
  try {
    output = await run(handlers, io, { maxStdinBytes, maxJsonDepth }, (v) => {
      cniVersion = v;
    });
  } catch (err) {
    const e = toCniError(err);
    logger.error("CNI command failed", {
      command: io.env.CNI_COMMAND,
      code: e.code,
      msg: e.msg,
      details: e.details,
    });
    write(io, JSON.stringify(e.toJSON(cniVersion)), logger);
    return 1;
  }
  return write(io, output, logger) ? 0 : 1;
}

async function run(
  handlers: SkelHandlers,
  io: SkelIO,
  limits: { maxStdinBytes: number; maxJsonDepth: number },
  setVersion: (v: string) => void,
): Promise<string> {
  const { maxStdinBytes, maxJsonDepth } = limits;
  const command = io.env.CNI_COMMAND ?? "";
  if (command === "VERSION") {
    return JSON.stringify({ cniVersion: CURRENT_VERSION, supportedVersions: SUPPORTED_VERSIONS });
  }
  if (!isCniCommand(command)) parseCniEnv(io.env); // throws the aggregated code 4 error

  let stdin: Uint8Array;
  try {
    mark("stdinStart");
    stdin = await io.readStdin(maxStdinBytes);
    mark("stdinRead");
  } catch (err) {
    if (err instanceof CniError) throw err;
    throw new CniError(
      CniErrorCode.IoFailure,
      "failed to read network config from stdin",
      errorText(err),
    );
  }
  if (stdin.length > maxStdinBytes) {
    throw new CniError(
      CniErrorCode.InvalidNetworkConfig,
      `network config on stdin exceeds the limit of ${maxStdinBytes} bytes`,
    );
  }
  let config: unknown;
  try {
    config = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(stdin));
  } catch (err) {
    throw new CniError(
      CniErrorCode.DecodingFailure,
      "failed to decode network config from stdin",
      (err as Error).message,
    );
  }
  if (!isPlainObject(config)) {
    throw new CniError(CniErrorCode.DecodingFailure, "network config must be a JSON object");
  }
  const rawVersion = config.cniVersion ?? "";
  if (typeof rawVersion !== "string") {
    throw new CniError(CniErrorCode.DecodingFailure, "cniVersion must be a string");
  }
  const cniVersion = rawVersion || DEFAULT_CONFIG_VERSION;
  if (!isSupportedVersion(cniVersion)) {
    throw new CniError(
      CniErrorCode.IncompatibleVersion,
      "incompatible CNI versions",
      `config is "${cniVersion}", plugin supports [${SUPPORTED_VERSIONS.join(", ")}]`,
    );
  }
  setVersion(cniVersion);
  // Only now does anything walk the whole document (the checks above read top-level keys).
  checkJsonDepth(config, "network config on stdin", { maxDepth: maxJsonDepth });

  const env = parseCniEnv(io.env);
  if (typeof config.name !== "string") {
    throw new CniError(CniErrorCode.InvalidNetworkConfig, "missing network name");
  }
  validateNetworkName(config.name);

  const ctx: SkelContext = { env, stdin, config, cniVersion };
  switch (env.command) {
    case "ADD": {
      const result = await handlers.add(ctx);
      return JSON.stringify(
        (await withResultSchemas(() => convertDecoded(result, cniVersion))).raw,
      );
    }
    case "DEL":
      await handlers.del(ctx);
      return "";
    case "CHECK":
      if (!supportsCheck(cniVersion)) {
        throw new CniError(CniErrorCode.IncompatibleVersion, "config version does not allow CHECK");
      }
      await handlers.check(ctx);
      return "";
    case "GC":
      if (!supportsGcAndStatus(cniVersion)) {
        throw new CniError(CniErrorCode.IncompatibleVersion, "config version does not allow GC");
      }
      await handlers.gc(ctx);
      return "";
    case "STATUS":
      if (!supportsGcAndStatus(cniVersion)) {
        throw new CniError(
          CniErrorCode.IncompatibleVersion,
          "config version does not allow STATUS",
        );
      }
      await handlers.status(ctx);
      return "";
    case "VERSION":
      // Handled above; unreachable.
      return "";
  }
}

function write(io: SkelIO, text: string, logger: Logger): boolean {
  if (text === "") return true;
  try {
    io.writeStdout(text);
    return true;
  } catch (err) {
    logger.error("failed to write to stdout", { error: String(err) });
    return false;
  }
}

/**
 * The real process edges: `Deno.env`, `Deno.stdin` (read up to the cap + 1 byte, then
 * stop) and `Deno.stdout`. Needs `--allow-env`.
 *
 * @param opts `stdin`: bytes main.ts already read from stdin (read at most `maxBytes + 1`
 *   of the dispatcher's cap), served instead of reading again
 * @returns a {@link SkelIO} for `main.ts`.
 * @example
 * ```ts
 * Deno.exit(await dispatch(handlers, denoSkelIO()));
 * ```
 */
export function denoSkelIO(opts: { stdin?: Uint8Array } = {}): SkelIO {
  const { stdin } = opts;
  return {
    env: Deno.env.toObject(),
    readStdin: (maxBytes: number) =>
      stdin ? Promise.resolve(stdin.subarray(0, maxBytes + 1)) : readStdinBytes(maxBytes),
    writeStdout(text: string): void {
      const bytes = new TextEncoder().encode(text);
      let off = 0;
      while (off < bytes.length) off += Deno.stdout.writeSync(bytes.subarray(off));
    },
  };
}
