/**
 * A recording fake of {@link PluginExec} for tests (libcni `invoke/fakes`):
 * {@link RecordingPluginExec} keeps every request and answers with a handler;
 * {@link execResponse} builds answers; {@link readExecRequest} decodes a recorded request.
 *
 * @module
 */

import type { ExecRequest, ExecResponse, PluginExec } from "./exec.ts";

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

  /**
   * A fake answering every request with `handler`.
   *
   * @param handler produces the response for each request (may throw).
   */
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
  /** Terminating signal name, default null. */
  signal?: string | null;
  /** Whether the fake child timed out, default false. */
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
