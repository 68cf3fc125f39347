/**
 * Executing delegate plugins (libcni `pkg/invoke`): a small {@link PluginExec}
 * interface with a real implementation ({@link ProcessPluginExec}) and a recording
 * fake ({@link RecordingPluginExec}); plugin lookup in `CNI_PATH`
 * ({@link findPlugin}); and {@link invokePlugin}, which sets the CNI environment,
 * writes the config on stdin and decodes the child's answer defensively.
 *
 * @module
 */

import { checkJsonDepth, jsonDepth, MAX_JSON_DEPTH } from "./decode.ts";
import { CniError, CniErrorCode } from "./errors.ts";
import type { CniCommand } from "./env.ts";
import { delegateEnv } from "./recursion.ts";
import { redactText } from "../log/redact.ts";
import { assertPluginType, isPlainObject } from "./types.ts";
import { sleep, startTimer, type Timer } from "../util/timer.ts";

/** One plugin execution request. */
export interface ExecRequest {
  /** Absolute path of the plugin binary. */
  path: string;
  /** Bytes written to the child's stdin (the JSON config). */
  stdin: Uint8Array;
  /**
   * The child's complete environment (nothing is inherited). {@link ProcessPluginExec}
   * adds only the delegation marker `MANIFOLD_DELEGATION_DEPTH` (lib/cni/recursion.ts).
   */
  env: Record<string, string>;
  /** Kill the child with SIGKILL after this many milliseconds. */
  timeoutMs: number;
}

/** What a plugin execution produced. */
export interface ExecResponse {
  /** Exit code (128 + signal number when killed by a signal). */
  code: number;
  /** Terminating signal name, e.g. "SIGKILL", or null. */
  signal: string | null;
  /** Captured stdout, at most the exec's output cap. */
  stdout: Uint8Array;
  /** Captured stderr, at most the exec's output cap. */
  stderr: Uint8Array;
  /** True when the child was killed because `timeoutMs` elapsed. */
  timedOut: boolean;
  /** True when stdout or stderr was cut at the output cap (optional, Manifold extension). */
  truncated?: boolean;
}

/** Runs a plugin binary (libcni `invoke.Exec`). */
export interface PluginExec {
  /**
   * Runs one plugin to completion.
   * @throws {CniError} when the binary cannot be started at all.
   */
  exec(req: ExecRequest): Promise<ExecResponse>;
}

/** Options of {@link ProcessPluginExec}. */
export interface ProcessPluginExecOptions {
  /** Cap for each of stdout and stderr in bytes; the rest is drained and dropped. Default 4 MiB. */
  maxOutputBytes?: number;
  /** Extra spawn attempts after ETXTBSY ("text file busy"). Default 5. */
  spawnRetries?: number;
  /** First retry delay in ms, doubled on each retry. Default 20. */
  retryDelayMs?: number;
  /** How long to keep reading output after the child exited, in ms (a grandchild may hold the pipes). Default 500. */
  drainGraceMs?: number;
}

/** Default output cap per stream: 4 MiB. */
export const DEFAULT_MAX_OUTPUT_BYTES = 4 * 1024 * 1024;

/**
 * Runs plugins as child processes with `Deno.Command`: a cleared environment plus
 * exactly `req.env` and the delegation marker `MANIFOLD_DELEGATION_DEPTH` (its depth + 1:
 * a Manifold started as a delegate refuses to work, see lib/cni/recursion.ts), no
 * arguments, config on stdin. Spawning is retried on ETXTBSY
 * (the binary is still open for writing, e.g. just installed; libcni `RawExec` does
 * the same); the child is SIGKILLed after `timeoutMs`; each output stream is capped.
 * Needs `--allow-run` (and read access to the binary).
 *
 * @example
 * ```ts
 * const exec = new ProcessPluginExec({ maxOutputBytes: 1 << 20 });
 * ```
 */
export class ProcessPluginExec implements PluginExec {
  #maxOutputBytes: number;
  #spawnRetries: number;
  #retryDelayMs: number;
  #drainGraceMs: number;

  /** @param opts caps, retry and drain settings (all optional). */
  constructor(opts: ProcessPluginExecOptions = {}) {
    this.#maxOutputBytes = opts.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
    this.#spawnRetries = opts.spawnRetries ?? 5;
    this.#retryDelayMs = opts.retryDelayMs ?? 20;
    this.#drainGraceMs = opts.drainGraceMs ?? 500;
  }

  /**
   * Runs one plugin.
   * @param req path, stdin, environment and timeout.
   * @returns exit status and captured output; a timeout is reported, not thrown.
   * @throws {CniError} code 11 when the binary stays busy (ETXTBSY) after all retries;
   *   code 999 when it cannot be spawned otherwise (missing, not executable).
   */
  async exec(req: ExecRequest): Promise<ExecResponse> {
    const child = await this.#spawn(req);
    let timedOut = false;
    const timer = startTimer(req.timeoutMs, () => {
      timedOut = true;
      try {
        child.kill("SIGKILL");
      } catch { /* already exited */ }
    });

    const writing = writeAll(child.stdin, req.stdin);
    const out = readCapped(child.stdout, this.#maxOutputBytes);
    const err = readCapped(child.stderr, this.#maxOutputBytes);
    let status: Deno.CommandStatus;
    try {
      status = await child.status;
    } finally {
      timer.cancel();
    }
    // A grandchild may keep the pipes open after the child exits: read what is
    // there within a grace period, then stop.
    let graceTimer: Timer | undefined;
    const grace = new Promise<void>((resolve) => {
      graceTimer = startTimer(this.#drainGraceMs, resolve);
    });
    await Promise.race([Promise.all([out.done, err.done, writing.done]), grace]);
    graceTimer?.cancel();
    const [stdout, stderr] = await Promise.all([out.finish(), err.finish(), writing.finish()]);
    return {
      code: status.code,
      signal: status.signal ?? null,
      stdout: stdout.bytes,
      stderr: stderr.bytes,
      timedOut,
      truncated: stdout.truncated || stderr.truncated,
    };
  }

  async #spawn(req: ExecRequest): Promise<Deno.ChildProcess> {
    for (let attempt = 0;; attempt++) {
      try {
        return new Deno.Command(req.path, {
          args: [],
          clearEnv: true,
          env: delegateEnv(req.env),
          stdin: "piped",
          stdout: "piped",
          stderr: "piped",
        }).spawn();
      } catch (err) {
        const message = err instanceof Error ? err.message : String(err);
        const busy = /text file busy|os error 26/i.test(message);
        if (busy && attempt < this.#spawnRetries) {
          await sleep(this.#retryDelayMs * 2 ** attempt);
          continue;
        }
        if (busy) {
          throw new CniError(
            CniErrorCode.TryAgainLater,
            `plugin ${basename(req.path)} is busy`,
            `${message} (after ${attempt + 1} attempts)`,
          );
        }
        throw new CniError(
          CniErrorCode.Internal,
          `failed to execute plugin ${basename(req.path)}`,
          message,
        );
      }
    }
  }
}

/** A handler answering {@link RecordingPluginExec} requests. */
export type ExecHandler = (req: ExecRequest) => ExecResponse | Promise<ExecResponse>;

/**
 * Test fake: records every request in {@link RecordingPluginExec.calls} and answers
 * with `handler` (libcni `invoke/fakes`).
 *
 * @example
 * ```ts
 * const exec = new RecordingPluginExec(() => execResponse({ stdout: { cniVersion: "1.0.0" } }));
 * ```
 */
export class RecordingPluginExec implements PluginExec {
  /** Every request received, in order. */
  readonly calls: ExecRequest[] = [];
  #handler: ExecHandler;

  /** @param handler produces the response for each request (may throw). */
  constructor(handler: ExecHandler) {
    this.#handler = handler;
  }

  /** Records `req` and returns the handler's response. */
  async exec(req: ExecRequest): Promise<ExecResponse> {
    this.calls.push(req);
    return await this.#handler(req);
  }
}

/** Options of {@link execResponse}. */
export interface ExecResponseInit {
  /** Exit code, default 0. */
  code?: number;
  /** stdout as text, or a value printed as JSON. */
  stdout?: string | Record<string, unknown>;
  /** stderr text. */
  stderr?: string;
  signal?: string | null;
  timedOut?: boolean;
}

/**
 * Builds an {@link ExecResponse} (for fakes).
 * @param init exit code and output; objects are JSON-encoded.
 * @returns the response.
 * @example
 * ```ts
 * execResponse({ code: 1, stdout: { code: 7, msg: "bad config" } });
 * ```
 */
export function execResponse(init: ExecResponseInit = {}): ExecResponse {
  const enc = new TextEncoder();
  const out = init.stdout === undefined
    ? ""
    : typeof init.stdout === "string"
    ? init.stdout
    : JSON.stringify(init.stdout);
  return {
    code: init.code ?? 0,
    signal: init.signal ?? null,
    stdout: enc.encode(out),
    stderr: enc.encode(init.stderr ?? ""),
    timedOut: init.timedOut ?? false,
  };
}

/**
 * Decodes a recorded request (for fakes and tests): its `CNI_COMMAND` and stdin config.
 * @param req a request from {@link RecordingPluginExec.calls}.
 * @returns the command and parsed config.
 * @throws {SyntaxError} when stdin is not JSON.
 * @example
 * ```ts
 * const { command, config } = readExecRequest(exec.calls[0]); // "ADD", { name, type, ... }
 * ```
 */
export function readExecRequest(
  req: ExecRequest,
): { command: string; config: Record<string, unknown> } {
  return {
    command: req.env.CNI_COMMAND ?? "",
    config: JSON.parse(new TextDecoder().decode(req.stdin)),
  };
}

/**
 * Finds a plugin binary in `CNI_PATH` directories (libcni `invoke.FindInPath`): the
 * first directory holding an executable regular file named `type` wins. Needs read
 * permission on the directories.
 *
 * @param type the plugin `type`, e.g. `"bridge"`.
 * @param dirs directories to search, in order.
 * @returns the plugin's path `${dir}/${type}`.
 * @throws {CniError} code 7 for an unsafe type ("/", "..", NUL, empty) or when not found
 *   (`failed to find plugin "x" in path [a b]`).
 */
export async function findPlugin(type: string, dirs: string[]): Promise<string> {
  assertPluginType(type);
  for (const dir of dirs) {
    if (dir === "") continue;
    const candidate = `${dir.replace(/\/+$/, "")}/${type}`;
    try {
      const st = await Deno.stat(candidate);
      if (st.isFile && st.mode !== null && (st.mode & 0o111) !== 0) return candidate;
    } catch {
      // Missing or unreadable: try the next directory.
    }
  }
  throw new CniError(
    CniErrorCode.InvalidNetworkConfig,
    `failed to find plugin "${type}" in path [${dirs.join(" ")}]`,
  );
}

/** Options of {@link invokePlugin}: the CNI environment of the call. */
export interface InvokeOptions {
  command: CniCommand;
  containerId?: string;
  netns?: string;
  ifName?: string;
  /** `CNI_ARGS` value, "K=V;K2=V2". */
  args?: string;
  /** `CNI_PATH` directories. */
  path: string[];
  /** Environment the child gets besides the CNI variables (which always win). */
  baseEnv?: Record<string, string>;
  /** Kill the plugin after this many milliseconds. */
  timeoutMs: number;
}

/** Longest raw output copied into an error's `details`, in characters. */
const MAX_DETAILS_CHARS = 64 * 1024;

/**
 * Runs one plugin with the CNI protocol (libcni `invoke.ExecPluginWithResult`):
 * environment = `baseEnv` + `CNI_COMMAND`, `CNI_CONTAINERID`, `CNI_NETNS`,
 * `CNI_IFNAME`, `CNI_ARGS`, `CNI_PATH` (all six always set, "" when absent, exactly
 * as libcni's `Args.AsEnv`); stdin = the JSON of `config`.
 *
 * On exit 0 the stdout JSON is returned (undefined when stdout is empty); it must not
 * nest deeper than `MAX_JSON_DEPTH` (64) levels. On failure the child's answer is decoded
 * defensively: a valid `{code,msg,details}` on stdout (or, when stdout is empty, on
 * stderr; at most 64 levels deep) is preserved as a {@link CniError}; empty stdout yields
 * the stderr text; unparsable stdout yields code 999 with the raw text. Text taken from
 * the child (its `msg`, `details`, raw output) has secrets masked (`redactText` of
 * lib/log/redact.ts: a plugin may echo its config, tokens and keys included).
 *
 * @param exec how to run the binary.
 * @param pluginPath the binary, e.g. from {@link findPlugin}.
 * @param config the plugin's full stdin config.
 * @param opts the CNI environment and timeout.
 * @returns the decoded stdout JSON, or undefined when the plugin printed nothing.
 * @throws {CniError} the plugin's own error; code 6 for invalid JSON on success or a
 *   result nested too deeply (`result of plugin X is nested more than 64 levels deep
 *   (limit 64)`); code 11 on timeout (`plugin X timed out after N ms`); code 999 for an undecodable failure.
 */
export async function invokePlugin(
  exec: PluginExec,
  pluginPath: string,
  config: Record<string, unknown>,
  opts: InvokeOptions,
): Promise<unknown | undefined> {
  const name = basename(pluginPath);
  const env: Record<string, string> = {
    ...(opts.baseEnv ?? {}),
    CNI_COMMAND: opts.command,
    CNI_CONTAINERID: opts.containerId ?? "",
    CNI_NETNS: opts.netns ?? "",
    CNI_IFNAME: opts.ifName ?? "",
    CNI_ARGS: opts.args ?? "",
    CNI_PATH: opts.path.join(":"),
  };
  const stdin = new TextEncoder().encode(JSON.stringify(config));
  const res = await exec.exec({ path: pluginPath, stdin, env, timeoutMs: opts.timeoutMs });
  const dec = new TextDecoder();
  const stdout = dec.decode(res.stdout).trim();
  const stderr = dec.decode(res.stderr).trim();

  if (res.timedOut) {
    throw new CniError(
      CniErrorCode.TryAgainLater,
      `plugin ${name} timed out after ${opts.timeoutMs} ms`,
      clip(stderr),
    );
  }
  if (res.code === 0 && res.signal === null) {
    if (stdout === "") return undefined;
    let result: unknown;
    try {
      result = JSON.parse(stdout);
    } catch (err) {
      throw new CniError(
        CniErrorCode.DecodingFailure,
        `plugin ${name} printed invalid JSON: ${(err as Error).message}`,
        clip(stdout),
      );
    }
    checkJsonDepth(result, `result of plugin ${name}`, { code: CniErrorCode.DecodingFailure });
    return result;
  }
  throw decodeChildError(name, res, stdout, stderr);
}

/**
 * Decodes a failed child's output (libcni `invoke` `pluginErr`).
 * @param name plugin name for messages.
 * @param res the exec response.
 * @param stdout trimmed stdout text.
 * @param stderr trimmed stderr text.
 */
function decodeChildError(
  name: string,
  res: ExecResponse,
  stdout: string,
  stderr: string,
): CniError {
  const how = res.signal ? `killed by ${res.signal}` : `exited with code ${res.code}`;
  if (stdout !== "") {
    const err = asCniErrorJson(stdout);
    if (err) return err;
    return new CniError(
      CniErrorCode.Internal,
      `plugin ${name} failed`,
      `${how}; stdout: ${clip(stdout)}${stderr ? `; stderr: ${clip(stderr)}` : ""}`,
    );
  }
  if (stderr !== "") {
    const err = asCniErrorJson(stderr);
    if (err) return err;
    return new CniError(CniErrorCode.Internal, `plugin ${name} failed: ${clip(stderr, 1024)}`, how);
  }
  return new CniError(CniErrorCode.Internal, `plugin ${name} failed with no error message`, how);
}

/** Parses `text` as a CNI error JSON `{code, msg, details?}`; undefined if it is not one. */
function asCniErrorJson(text: string): CniError | undefined {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!isPlainObject(v)) return undefined;
  // Too deep to be an error object we can re-encode safely: kept as raw text instead.
  if (jsonDepth(v, MAX_JSON_DEPTH) > MAX_JSON_DEPTH) return undefined;
  const { code, msg, details } = v;
  if (typeof code !== "number" || !Number.isInteger(code) || code < 1) return undefined;
  if (typeof msg !== "string") return undefined;
  const d = details === undefined || details === null
    ? ""
    : typeof details === "string"
    ? details
    : JSON.stringify(details);
  return new CniError(code, redactText(msg), redactText(d));
}

/**
 * A child's output for an error message: cut at `max` characters and with secrets masked
 * (a delegate may echo its config, tokens included; the error reaches logs, events and the
 * runtime's logs).
 */
function clip(s: string, max = MAX_DETAILS_CHARS): string {
  return redactText(
    s.length > max ? `${s.slice(0, max)}… (${s.length - max} more characters)` : s,
  );
}

function basename(p: string): string {
  const i = p.lastIndexOf("/");
  return i >= 0 ? p.slice(i + 1) : p;
}

interface PendingWrite {
  /** Resolves when all bytes were written and stdin closed (or writing failed). */
  done: Promise<void>;
  /** Aborts a write still pending (nobody reads stdin) and waits for it to settle. */
  finish(): Promise<void>;
}

function writeAll(stream: WritableStream<Uint8Array>, data: Uint8Array): PendingWrite {
  const w = stream.getWriter();
  let settled = false;
  const done = (async () => {
    try {
      await w.write(data);
      await w.close();
    } catch {
      // The child exited without reading stdin, or was killed: nothing to do.
    } finally {
      settled = true;
    }
  })();
  return {
    done,
    async finish() {
      if (!settled) {
        try {
          await w.abort();
        } catch { /* already closed */ }
      }
      await done;
    },
  };
}

interface CappedRead {
  /** Resolves when the stream ended. */
  done: Promise<void>;
  /** Stops reading (if still going) and returns what was kept. */
  finish(): Promise<{ bytes: Uint8Array; truncated: boolean }>;
}

function readCapped(stream: ReadableStream<Uint8Array>, cap: number): CappedRead {
  const reader = stream.getReader();
  const chunks: Uint8Array[] = [];
  let kept = 0;
  let truncated = false;
  const done = (async () => {
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        if (kept < cap) {
          const take = Math.min(value.length, cap - kept);
          chunks.push(take === value.length ? value : value.subarray(0, take));
          kept += take;
          if (take < value.length) truncated = true;
        } else if (value.length > 0) {
          truncated = true;
        }
      }
    } catch {
      // Cancelled or broken pipe: keep what we have.
    }
  })();
  return {
    done,
    async finish() {
      try {
        await reader.cancel();
      } catch { /* already closed */ }
      await done;
      try {
        reader.releaseLock();
      } catch { /* ignore */ }
      const bytes = new Uint8Array(kept);
      let off = 0;
      for (const c of chunks) {
        bytes.set(c, off);
        off += c.length;
      }
      return { bytes, truncated };
    },
  };
}
