/**
 * Invoking delegate plugins with the CNI protocol (libcni `pkg/invoke`): plugin lookup in
 * `CNI_PATH` ({@link findPlugin}) and {@link invokePlugin}, which sets the CNI environment,
 * writes the config on stdin and decodes the child's answer defensively. How a binary is run
 * is a {@link PluginExec} (exec.ts, re-exported here; the recording fake is exec_fake.ts).
 *
 * @module
 */

import { lazyImport } from "../util/lazy.ts";
import { checkJsonDepth, jsonDepth, MAX_JSON_DEPTH } from "./decode.ts";
import { CniError, CniErrorCode } from "./errors.ts";
import type { CniCommand } from "./env.ts";
import { type ExecResponse, type PluginExec, pluginName } from "./exec.ts";
import { redactText } from "../log/redact.ts";
import { assertPluginType, isPlainObject } from "./netconf.ts";

// Callers that run plugins take the exec interface from here, with the protocol.
export * from "./exec.ts";

/**
 * Finds a plugin binary in `CNI_PATH` directories (libcni `invoke.FindInPath`): the
 * first directory holding an executable regular file named `type` wins. Needs read
 * permission on the directories.
 *
 * With `opts.root` (the plugin config's `chrootDir`) the directories are the root's: each
 * candidate is looked at where it is inside that root (`pathInRoot` of root.ts, symbolic links
 * followed inside the root) and the returned path is the one inside the root, as chroot(8)
 * then runs it.
 *
 * @param type the plugin `type`, e.g. `"bridge"`.
 * @param dirs directories to search, in order.
 * @param opts `root`: the directory the plugin will be chrooted into, e.g. `"/hostroot"`.
 * @returns the plugin's path `${dir}/${type}` (inside `opts.root` when given).
 * @throws {CniError} code 7 for an unsafe type ("/", "..", NUL, empty) or when not found
 *   (`failed to find plugin "x" in path [a b]`, see {@link isPluginNotFound}).
 */
export async function findPlugin(
  type: string,
  dirs: string[],
  opts: { root?: string } = {},
): Promise<string> {
  assertPluginType(type);
  // Loaded only with a root (a chroot: the runtime's root differs from ours).
  const inRoot = opts.root
    ? (await lazyImport<typeof import("./root.ts")>("./root.ts", import.meta.url)).pathInRoot
    : undefined;
  for (const dir of dirs) {
    if (dir === "") continue;
    const candidate = `${dir.replace(/\/+$/, "")}/${type}`;
    try {
      // statSync: one syscall (≈ 20 µs) where `Deno.stat` is a trip through the blocking pool
      // (0.2–0.5 ms in a fresh process), once per delegate plugin of every ADD, CHECK and DEL.
      const st = Deno.statSync(inRoot ? await inRoot(opts.root!, candidate) : candidate);
      if (st.isFile && st.mode !== null && (st.mode & 0o111) !== 0) return candidate;
    } catch {
      // Missing or unreadable: try the next directory.
    }
  }
  throw new CniError(
    CniErrorCode.InvalidNetworkConfig,
    `${NOT_FOUND} "${type}" in path [${dirs.join(" ")}]`,
  );
}

/** The start of {@link findPlugin}'s not-found message (libcni `FindInPath`). */
const NOT_FOUND = "failed to find plugin";

/**
 * The plugin type of {@link findPlugin}'s "not found" error (the delegate binary is missing
 * from every directory: it never ran), also after a context prefix (`[ns/pod:net] failed to
 * find plugin "x" in path [...]`).
 *
 * @param err any error.
 * @returns the type that was not found, or undefined for any other error (only a code-7
 *   CniError can be one).
 * @example
 * ```ts
 * missingPluginType(new CniError(7, '[a/b:c] failed to find plugin "x" in path [/opt/cni/bin]')); // "x"
 * ```
 */
export function missingPluginType(err: unknown): string | undefined {
  if (!(err instanceof CniError) || err.code !== CniErrorCode.InvalidNetworkConfig) {
    return undefined;
  }
  return new RegExp(`(?:^|\\] )${NOT_FOUND} "(.*)" in path \\[`).exec(err.msg)?.[1];
}

/**
 * Whether an error is {@link findPlugin}'s "not found" ({@link missingPluginType}).
 *
 * @param err any error.
 * @returns true for a code-7 CniError whose `msg` names a plugin not found.
 * @example
 * ```ts
 * isPluginNotFound(new CniError(7, '[a/b:c] failed to find plugin "x" in path [/opt/cni/bin]')); // true
 * ```
 */
export function isPluginNotFound(err: unknown): boolean {
  return missingPluginType(err) !== undefined;
}

/** Options of {@link invokePlugin}: the CNI environment of the call. */
export interface InvokeOptions {
  /** `CNI_COMMAND`. */
  command: CniCommand;
  /** `CNI_CONTAINERID`; "" when absent. */
  containerId?: string;
  /** `CNI_NETNS` path; "" when absent (DEL may have none). */
  netns?: string;
  /** `CNI_IFNAME`; "" when absent. */
  ifName?: string;
  /** `CNI_ARGS` value, "K=V;K2=V2". */
  args?: string;
  /** `CNI_PATH` directories. */
  path: string[];
  /** Environment the child gets besides the CNI variables (which always win). */
  baseEnv?: Record<string, string>;
  /** Kill the plugin after this many milliseconds. */
  timeoutMs: number;
  /** Write the config to the plugin's stdin only once this resolves (`ExecRequest.stdinGate`). */
  stdinGate?: Promise<void>;
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
  const name = pluginName(pluginPath);
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
  const res = await exec.exec({
    path: pluginPath,
    stdin,
    env,
    timeoutMs: opts.timeoutMs,
    ...(opts.stdinGate ? { stdinGate: opts.stdinGate } : {}),
  });
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
