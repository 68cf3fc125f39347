/**
 * The runtime role (libcni `CNIConfig`): runs a network configuration list's plugins
 * for ADD, CHECK, DEL, GC and STATUS, injecting `name`, `cniVersion`, `prevResult` and
 * the capability-filtered `runtimeConfig` into each plugin's config (libcni
 * `buildOneConfig`, `injectRuntimeConfig`). Unlike libcni it keeps no result cache:
 * callers pass `prevResult` to CHECK and DEL themselves. A plugin binary that is Manifold
 * itself is never run (lib/cni/recursion.ts).
 *
 * @module
 */

import { nullLogger } from "../log/mod.ts";
import type { Logger } from "../log/mod.ts";

/** The logger the runtime and the dispatcher take (lib/log) and its fields, re-exported with them. */
export type { LogFields, Logger } from "../log/mod.ts";
import { CniError, CniErrorCode, toCniError } from "./errors.ts";
import { formatCniArgs, validateContainerId, validateInterfaceName } from "./env.ts";
import type { CniCommand } from "./env.ts";
import { findPlugin, invokePlugin } from "./invoke.ts";
import type { PluginExec } from "./invoke.ts";
import { realPathOrUndefined, selfExecutable } from "./recursion.ts";
import {
  convertDecoded,
  convertResult,
  type DecodedResult,
  decodeResult,
} from "./result_convert.ts";
import { withResultSchemas } from "./result_codecs.ts";
import type { GcAttachment, NetworkConfigList } from "./types.ts";
import { assertPluginType, isPlainObject, validateNetworkName } from "./netconf.ts";
import { supportsCheck, supportsGcAndStatus } from "./version.ts";

/** The arguments of one invocation besides the network config (libcni `RuntimeConf`). */
export interface RuntimeConf {
  /** CNI_CONTAINERID (CNI SPEC "Parameters"). */
  containerId: string;
  /** Netns path; may be "" for DEL. */
  netns: string;
  /** CNI_IFNAME: the interface the plugin creates in the sandbox. */
  ifName: string;
  /** `CNI_ARGS` pairs, e.g. `[["K8S_POD_NAME","web"]]`. */
  args: [string, string][];
  /**
   * Capability arguments (CNI CONVENTIONS.md), e.g. `portMappings`, `ips`, `mac`;
   * each reaches only plugins declaring that capability true.
   */
  capabilityArgs: Record<string, unknown>;
}

/** Options of {@link CniRuntime}. */
export interface CniRuntimeOptions {
  /** `CNI_PATH` directories searched for plugin binaries, in order. */
  binDirs: string[];
  /** How plugins are executed (a {@link RecordingPluginExec} in tests). */
  exec: PluginExec;
  /** Per-plugin timeout in ms. Default 60000. */
  timeoutMs?: number;
  /** Environment passed to every plugin besides the CNI variables, e.g. `{ PATH }`. */
  baseEnv?: Record<string, string>;
  /** Where invocations and plugin failures are logged; default no logging. */
  logger?: Logger;
  /**
   * Resolves a plugin `type` to its binary path; default {@link findPlugin} (needs
   * read permission). Tests inject a fake to stay permission-free.
   */
  findPlugin?: (type: string, dirs: string[]) => Promise<string>;
  /**
   * Real path of Manifold's own executable. A plugin whose real path is this one is
   * Manifold itself and never runs: ADD, CHECK and STATUS fail with code 7; DEL and GC
   * skip it with a warning (it cannot have attached anything, and a failing DEL would
   * keep the attachment cached forever). Default: `selfExecutable()` (the compiled
   * binary; nothing when Manifold runs from source, where the dynamic guard of
   * lib/cni/recursion.ts applies). `null` turns the check off.
   */
  selfPath?: string | null;
}

/** Default per-plugin timeout: 60 s. */
export const DEFAULT_PLUGIN_TIMEOUT_MS = 60_000;

/** GC attachment keys: the CNI 1.1 name, and the misspelt one some plugins read (cni#1101). */
const GC_KEYS = ["cni.dev/valid-attachments", "cni.dev/attachments"] as const;

/**
 * Runs network configuration lists like libcni does.
 *
 * @example
 * ```ts
 * const runtime = new CniRuntime({ binDirs: ["/opt/cni/bin"], exec: new ProcessPluginExec() });
 * const result = await runtime.addNetworkList(list, rt);
 * ```
 */
export class CniRuntime {
  #binDirs: string[];
  #exec: PluginExec;
  #timeoutMs: number;
  #baseEnv: Record<string, string>;
  #logger: Logger;
  #findPlugin: (type: string, dirs: string[]) => Promise<string>;
  #selfPath: string | null | undefined;
  #self: Promise<string | undefined> | undefined;

  /**
   * A runtime over the given plugin directories and executor.
   * @param opts plugin directories, exec, timeout, base environment, logger and self path.
   */
  constructor(opts: CniRuntimeOptions) {
    this.#binDirs = [...opts.binDirs];
    this.#exec = opts.exec;
    this.#timeoutMs = opts.timeoutMs ?? DEFAULT_PLUGIN_TIMEOUT_MS;
    this.#baseEnv = { ...(opts.baseEnv ?? {}) };
    this.#logger = opts.logger ?? nullLogger;
    this.#findPlugin = opts.findPlugin ?? findPlugin;
    this.#selfPath = opts.selfPath;
  }

  /**
   * Builds one plugin's stdin config (libcni `buildOneConfig`): a deep copy of
   * `plugin` with the list's `name` and `cniVersion`, `prevResult` when given, and
   * `runtimeConfig` holding only the `rt.capabilityArgs` keys whose capability the
   * plugin declares `true` in `capabilities` (omitted when none match; an existing
   * `runtimeConfig` is then left as is). Inputs are never mutated.
   *
   * @param list the network configuration list.
   * @param plugin one of `list.plugins`.
   * @param rt runtime arguments (only `capabilityArgs` is used).
   * @param prevResult the previous plugin's result, in `list.cniVersion`.
   * @returns a fresh config object.
   * @example
   * ```ts
   * runtime.buildPluginConfig(list, { type: "portmap", capabilities: { portMappings: true } },
   *   { ...rt, capabilityArgs: { portMappings: [], mac: "x" } });
   * // { type: "portmap", capabilities: {...}, name, cniVersion, runtimeConfig: { portMappings: [] } }
   * ```
   */
  buildPluginConfig(
    list: NetworkConfigList,
    plugin: Record<string, unknown>,
    rt: RuntimeConf,
    prevResult?: unknown,
  ): Record<string, unknown> {
    const out = structuredClone(plugin);
    out.name = list.name;
    out.cniVersion = list.cniVersion;
    if (prevResult !== undefined && prevResult !== null) {
      out.prevResult = structuredClone(prevResult);
    }
    const caps = plugin.capabilities;
    if (isPlainObject(caps)) {
      const rc: Record<string, unknown> = {};
      for (const [cap, supported] of Object.entries(caps)) {
        if (supported !== true) continue;
        if (Object.hasOwn(rt.capabilityArgs, cap) && rt.capabilityArgs[cap] !== undefined) {
          rc[cap] = structuredClone(rt.capabilityArgs[cap]);
        }
      }
      if (Object.keys(rc).length > 0) out.runtimeConfig = rc;
    }
    return out;
  }

  /**
   * CNI ADD of a whole list (libcni `AddNetworkList`): plugins in order, each getting
   * the previous result as `prevResult`; a plugin printing nothing keeps the previous
   * result. Every plugin's output is decoded once ({@link decodeResult}) and converted to
   * `list.cniVersion`.
   *
   * @param list the network configuration list.
   * @param rt container ID, netns, ifName, CNI_ARGS and capability arguments.
   * @returns the final result in `list.cniVersion`, raw and normalized (`{cniVersion}` alone
   *   when no plugin printed a result).
   * @throws {CniError} the failing plugin's error (its code preserved); code 4/7 for an
   *   invalid container ID, ifName or network name; code 7 when a plugin is not found or
   *   is Manifold itself (`network "n": plugin "evil" is Manifold itself: recursive
   *   delegation refused`); code 1/6 when a result cannot be decoded or converted.
   */
  async addNetworkList(
    list: NetworkConfigList,
    rt: RuntimeConf,
    opts: { stdinGate?: Promise<void> } = {},
  ): Promise<DecodedResult> {
    validateContainerId(rt.containerId);
    validateNetworkName(list.name);
    validateInterfaceName(rt.ifName);
    let result: DecodedResult | undefined;
    for (const [i, plugin] of list.plugins.entries()) {
      const conf = this.buildPluginConfig(list, plugin, rt, result?.raw);
      const gate = i === 0 ? opts.stdinGate : undefined;
      const out = await this.#run("ADD", list, plugin, conf, rt, gate);
      if (out === undefined) {
        this.#logger.debug("plugin printed no result, keeping prevResult", {
          network: list.name,
          type: plugin.type,
        });
        continue;
      }
      result = await withResultSchemas(() => convertDecoded(decodeResult(out), list.cniVersion));
    }
    if (!result) {
      this.#logger.warn("no plugin printed a result", { network: list.name });
      return { raw: { cniVersion: list.cniVersion }, result: { cniVersion: list.cniVersion } };
    }
    return result;
  }

  /**
   * CNI CHECK of a whole list (libcni `CheckNetworkList`): plugins in order, each with
   * `prevResult` (converted to `list.cniVersion`).
   *
   * @param list the network configuration list.
   * @param rt runtime arguments.
   * @param prevResult the result ADD returned for this attachment, decoded once by the caller.
   * @throws {CniError} code 1 when `list.cniVersion` < 0.4.0 ("does not support the
   *   CHECK command"); the first failing plugin's error. No-op when `disableCheck`.
   */
  async checkNetworkList(
    list: NetworkConfigList,
    rt: RuntimeConf,
    prevResult: DecodedResult | undefined,
  ): Promise<void> {
    if (!supportsCheck(list.cniVersion)) {
      throw new CniError(
        CniErrorCode.IncompatibleVersion,
        `configuration version "${list.cniVersion}" does not support the CHECK command`,
      );
    }
    if (list.disableCheck) return;
    const prev = prevResult === undefined
      ? undefined
      : (await withResultSchemas(() => convertDecoded(prevResult, list.cniVersion))).raw;
    for (const plugin of list.plugins) {
      const conf = this.buildPluginConfig(list, plugin, rt, prev);
      await this.#run("CHECK", list, plugin, conf, rt);
    }
  }

  /**
   * CNI DEL of a whole list (libcni `DelNetworkList`): plugins in reverse order;
   * `prevResult` is passed for versions ≥ 0.4.0 (converted to `list.cniVersion`; an
   * unconvertible one is dropped with a warning, as libcni drops a bad cache entry).
   *
   * @param list the network configuration list.
   * @param rt runtime arguments (`netns` may be "").
   * @param prevResult the result ADD returned, when known.
   * @throws {CniError} the first failing plugin's error (later plugins are not run).
   */
  async delNetworkList(
    list: NetworkConfigList,
    rt: RuntimeConf,
    prevResult?: unknown,
  ): Promise<void> {
    let prev: Record<string, unknown> | undefined;
    if (supportsCheck(list.cniVersion) && prevResult !== undefined && prevResult !== null) {
      try {
        prev = await withResultSchemas(() => convertResult(prevResult, list.cniVersion));
      } catch (err) {
        this.#logger.warn("dropping unusable prevResult for DEL", {
          network: list.name,
          error: toCniError(err).message,
        });
      }
    }
    for (let i = list.plugins.length - 1; i >= 0; i--) {
      const plugin = list.plugins[i];
      const conf = this.buildPluginConfig(list, plugin, rt, prev);
      await this.#run("DEL", list, plugin, conf, rt);
    }
  }

  /**
   * CNI GC of a whole list (libcni `GCNetworkList`, plugin part): every plugin gets
   * the list's `name`/`cniVersion` and the valid attachments under both
   * `"cni.dev/valid-attachments"` and `"cni.dev/attachments"`. All plugins are tried.
   * No-op below 1.1.0 or when `disableGC`.
   *
   * @param list the network configuration list.
   * @param validAttachments attachments that must be kept.
   * @throws {CniError} the only failure as is, or for several failures one error with
   *   the first failure's code and every message.
   */
  async gcNetworkList(
    list: NetworkConfigList,
    validAttachments: GcAttachment[],
  ): Promise<void> {
    if (!supportsGcAndStatus(list.cniVersion) || list.disableGC) return;
    const attachments = validAttachments.map((a) => ({
      containerID: a.containerID,
      ifname: a.ifname,
    }));
    const errors: CniError[] = [];
    for (const plugin of list.plugins) {
      const conf = structuredClone(plugin);
      conf.name = list.name;
      conf.cniVersion = list.cniVersion;
      for (const key of GC_KEYS) conf[key] = structuredClone(attachments);
      try {
        await this.#run("GC", list, plugin, conf);
      } catch (err) {
        errors.push(toCniError(err));
      }
    }
    if (errors.length === 1) throw errors[0];
    if (errors.length > 1) {
      throw new CniError(
        errors[0].code,
        `GC failed for ${errors.length} plugins of network ${list.name}`,
        errors.map((e) => e.message).join("\n"),
      );
    }
  }

  /**
   * CNI STATUS of a whole list (libcni `GetStatusNetworkList`): each plugin with the
   * list's `name`/`cniVersion`; stops at the first failure. No-op below 1.1.0.
   *
   * @param list the network configuration list.
   * @throws {CniError} the failing plugin's error as is (e.g. code 50 or 51).
   */
  async statusNetworkList(list: NetworkConfigList): Promise<void> {
    if (!supportsGcAndStatus(list.cniVersion)) return;
    for (const plugin of list.plugins) {
      const conf = structuredClone(plugin);
      conf.name = list.name;
      conf.cniVersion = list.cniVersion;
      await this.#run("STATUS", list, plugin, conf);
    }
  }

  async #run(
    command: CniCommand,
    list: NetworkConfigList,
    plugin: Record<string, unknown>,
    conf: Record<string, unknown>,
    rt?: RuntimeConf,
    stdinGate?: Promise<void>,
  ): Promise<unknown | undefined> {
    const type = String(plugin.type);
    const log = this.#logger.with({ network: list.name, type, command });
    assertPluginType(type);
    const pluginPath = await this.#findPlugin(type, this.#binDirs);
    const self = await this.#isSelf(pluginPath);
    if (self !== undefined) {
      const why = `${pluginPath} resolves to the running Manifold executable ${self}`;
      if (command === "DEL" || command === "GC") {
        log.warn("plugin is Manifold itself, not run", { path: pluginPath, why });
        return undefined;
      }
      throw new CniError(
        CniErrorCode.InvalidNetworkConfig,
        `network "${list.name}": plugin "${type}" is Manifold itself: recursive delegation refused`,
        why,
      );
    }
    log.debug("invoking plugin", { path: pluginPath });
    try {
      return await invokePlugin(this.#exec, pluginPath, conf, {
        command,
        containerId: rt?.containerId,
        netns: rt?.netns,
        ifName: rt?.ifName,
        args: rt ? formatCniArgs(rt.args) : undefined,
        path: this.#binDirs,
        baseEnv: this.#baseEnv,
        timeoutMs: this.#timeoutMs,
        ...(stdinGate ? { stdinGate } : {}),
      });
    } catch (err) {
      if (stdinGate && err === await stdinGate.then(() => undefined, (e) => e)) throw err;
      const e = toCniError(err);
      log.error("plugin failed", { code: e.code, error: e.msg });
      throw e;
    }
  }

  /** The executable's real path when `pluginPath` is Manifold itself, else undefined. */
  async #isSelf(pluginPath: string): Promise<string | undefined> {
    if (this.#selfPath === null) return undefined;
    this.#self ??= this.#selfPath !== undefined
      ? realPathOrUndefined(this.#selfPath).then((p) => p ?? this.#selfPath!)
      : selfExecutable();
    const self = await this.#self;
    if (self === undefined) return undefined;
    const real = await realPathOrUndefined(pluginPath) ?? pluginPath;
    return real === self ? self : undefined;
  }
}
