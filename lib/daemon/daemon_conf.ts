/**
 * The daemon's trusted configuration: the plugin config of `--config` (the file the installer
 * keeps), re-read when the file changes, and the one configuration every request, the
 * hot-plug controller and the policy agent act on.
 *
 * A forwarded request carries only what CNI defines per invocation (CNI SPEC "Section 3:
 * Execution Protocol", "Section 4: Plugin Delegation"): `cniVersion` (the result's version),
 * `runtimeConfig` (the runtime's capability arguments), `args`, `prevResult` (CHECK, DEL),
 * and GC's `cni.dev/valid-attachments` / `cni.dev/attachments`. Every other key of the
 * request's config — `binDir`, `chrootDir`, `cniDir`, `logFile`, `clusterNetwork`,
 * `kubeconfig`, … — is ignored: the daemon's own is used ({@link requestConfig}). A request
 * naming another network (`name`) or plugin (`type`) than `--config` is refused (code 7).
 * Multus thick does the same: its daemon overlays its own configuration on the shim's
 * (multus-cni pkg/server/server.go, `overrideCNIConfigWithServerConfig`).
 *
 * Keys that shape the daemon itself ({@link RESTART_KEYS}: the socket, the cache, the API
 * connection, hot-plug, policy, the chroot) keep their start-up values until a restart; a
 * rewrite that changes them is logged once.
 *
 * @module
 */

import { CniError, CniErrorCode } from "../cni/errors.ts";
import { isPlainObject } from "../cni/types.ts";
import type { Logger } from "../log/mod.ts";
import { type ManifoldConf, parseManifoldConf } from "../multinet/config.ts";
import { errorText } from "../util/text.ts";

/** The keys of a request's config the daemon takes (CNI per-invocation fields besides `cniVersion`). */
export const REQUEST_CONFIG_KEYS: readonly string[] = [
  "runtimeConfig",
  "args",
  "prevResult",
  "cni.dev/valid-attachments",
  "cni.dev/attachments",
];

/** Keys of `--config` read once at start-up: a change takes effect at the daemon's restart. */
export const RESTART_KEYS: readonly string[] = [
  "daemonSocket",
  "cniDir",
  "kubeconfig",
  "nadDir",
  "nadMirrorDir",
  "hotPlug",
  "multiNetworkPolicy",
  "chrootDir",
  "events",
  "apiTimeoutMs",
  "apiDeadlineMs",
  "statusPublish",
];

/**
 * Reads the runtime's plugin config: a conf, or a conflist whose Manifold entry (the one with
 * `daemonSocket`, else type `manifold`) gets the list's `name` and `cniVersion` (as the
 * runtime injects them, CNI SPEC "Network configuration lists").
 * @param path the file (`--config`)
 * @returns the raw config object of Manifold's entry
 * @throws Error naming the path when unreadable, not JSON, or without a Manifold entry
 */
export async function readPluginConf(path: string): Promise<Record<string, unknown>> {
  let raw;
  try {
    raw = JSON.parse(await Deno.readTextFile(path));
  } catch (e) {
    throw new Error(`--config ${path}: ${errorText(e)}`); // Deno's I/O errors name no path
  }
  if (!isPlainObject(raw)) throw new Error(`--config ${path}: not a JSON object`);
  if (!Array.isArray(raw.plugins)) return raw;
  const plugins = raw.plugins as Record<string, unknown>[];
  const entry = plugins.find((p) => typeof p?.daemonSocket === "string") ??
    plugins.find((p) => p?.type === "manifold");
  if (!isPlainObject(entry)) throw new Error(`${path}: no manifold plugin in the conflist`);
  return { ...entry, name: raw.name, cniVersion: raw.cniVersion };
}

/**
 * The config a forwarded request runs with: `trusted` (the daemon's `--config` entry) with the
 * request's `cniVersion` and {@link REQUEST_CONFIG_KEYS}; nothing else of the request.
 *
 * @param trusted the daemon's raw config object
 * @param stdin the request's stdin bytes
 * @returns the config to dispatch, as JSON bytes
 * @throws {CniError} 6 when the request's config is not a JSON object; 7 when its `name` or
 *   `type` differs from `trusted`'s (the message names both values)
 * @example
 * ```ts
 * const t = { cniVersion: "1.0.0", name: "n", type: "manifold", binDir: "/opt/cni/bin" };
 * requestConfig(t, new TextEncoder().encode('{"cniVersion":"0.4.0","name":"n","type":"manifold","binDir":"/tmp"}'));
 * // bytes of {"cniVersion":"0.4.0","name":"n","type":"manifold","binDir":"/opt/cni/bin"}
 * ```
 */
export function requestConfig(trusted: Record<string, unknown>, stdin: Uint8Array): Uint8Array {
  let req: unknown;
  try {
    req = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(stdin));
  } catch (e) {
    throw new CniError(
      CniErrorCode.DecodingFailure,
      "failed to decode network config from stdin",
      errorText(e),
    );
  }
  if (!isPlainObject(req)) {
    throw new CniError(CniErrorCode.DecodingFailure, "network config must be a JSON object");
  }
  for (const key of ["name", "type"] as const) {
    if (req[key] !== trusted[key]) {
      throw new CniError(
        CniErrorCode.InvalidNetworkConfig,
        `the request's network ${key} ${JSON.stringify(req[key] ?? null)} is not the daemon's ` +
          `${JSON.stringify(trusted[key] ?? null)}`,
        "manifold daemon serves only the network of its --config; the request's config must be " +
          "the same network (the runtime's copy of that file)",
      );
    }
  }
  const out: Record<string, unknown> = { ...trusted };
  delete out.cniVersion;
  if (req.cniVersion !== undefined) out.cniVersion = req.cniVersion;
  for (const k of REQUEST_CONFIG_KEYS) {
    if (Object.hasOwn(req, k)) out[k] = req[k];
  }
  return new TextEncoder().encode(JSON.stringify(out));
}

/** What the file looked like when last read: inode, size, mtime and ctime (ms). */
function fileStamp(st: Deno.FileInfo): string {
  return `${st.ino}:${st.size}:${st.mtime?.getTime()}:${st.ctime?.getTime()}`;
}

/** The daemon's configuration, followed from its file (module doc). */
export class DaemonConf {
  #path: string | undefined;
  #logger: Logger | undefined;
  #start: Record<string, unknown>;
  #raw: Record<string, unknown>;
  #conf: ManifoldConf;
  #stamp = "";
  #failedStamp = "";
  #refreshing: Promise<void> | undefined;

  private constructor(
    raw: Record<string, unknown>,
    conf: ManifoldConf,
    path?: string,
    logger?: Logger,
  ) {
    this.#start = raw;
    this.#raw = raw;
    this.#conf = conf;
    this.#path = path;
    this.#logger = logger;
  }

  /**
   * Reads and validates `--config`.
   * @param path the plugin config file
   * @param logger where a failed re-read or a change needing a restart is reported
   * @returns the followed configuration
   * @throws Error naming the path (unreadable, not JSON); {@link CniError} 7 when invalid
   */
  static async load(path: string, logger?: Logger): Promise<DaemonConf> {
    const st = await Deno.stat(path).catch(() => undefined);
    const raw = await readPluginConf(path);
    const c = new DaemonConf(raw, parseManifoldConf(raw), path, logger);
    if (st) c.#stamp = fileStamp(st);
    return c;
  }

  /**
   * A configuration that never changes (an embedder without a file, tests).
   * @param conf the parsed configuration
   * @returns the configuration source
   */
  static fixed(conf: ManifoldConf): DaemonConf {
    return new DaemonConf(conf.raw, conf);
  }

  /** The configuration as last read (see {@link DaemonConf.current} for a checked one). */
  get conf(): ManifoldConf {
    return this.#conf;
  }

  /** The raw config object as last read (Manifold's entry, with the list's name and version). */
  get raw(): Record<string, unknown> {
    return this.#raw;
  }

  /**
   * The configuration, re-read first when the file changed (one `stat` per call). A file that
   * cannot be read or is invalid keeps the last good configuration (an installer writing it
   * in place must not fail requests) and is logged once per change.
   * @returns the current configuration
   */
  async current(): Promise<ManifoldConf> {
    if (this.#path === undefined) return this.#conf;
    const st = await Deno.stat(this.#path).catch(() => undefined);
    if (st && fileStamp(st) !== this.#stamp && fileStamp(st) !== this.#failedStamp) {
      // Concurrent requests share one re-read.
      this.#refreshing ??= this.#reread(fileStamp(st)).finally(() => this.#refreshing = undefined);
      await this.#refreshing;
    }
    return this.#conf;
  }

  /**
   * The config a request runs with ({@link requestConfig} over the current configuration).
   * @param stdin the request's stdin bytes
   * @returns the config bytes to dispatch
   * @throws {CniError} 6 or 7 (see {@link requestConfig})
   */
  async requestStdin(stdin: Uint8Array): Promise<Uint8Array> {
    await this.current();
    return requestConfig(this.#raw, stdin);
  }

  async #reread(stamp: string): Promise<void> {
    const path = this.#path!;
    let raw: Record<string, unknown>;
    let conf: ManifoldConf;
    try {
      raw = await readPluginConf(path);
      const pinned: string[] = [];
      for (const k of RESTART_KEYS) {
        if (JSON.stringify(raw[k]) !== JSON.stringify(this.#start[k])) pinned.push(k);
        if (Object.hasOwn(this.#start, k)) raw[k] = this.#start[k];
        else delete raw[k];
      }
      conf = parseManifoldConf(raw);
      if (pinned.length > 0) {
        this.#logger?.warn("--config changed keys that take effect at the daemon's restart", {
          conf: path,
          keys: pinned,
        });
      }
    } catch (e) {
      this.#failedStamp = stamp;
      this.#logger?.error(
        "--config changed but cannot be used; keeping the previous configuration",
        {
          conf: path,
          error: e instanceof CniError ? `${e.msg}: ${e.details ?? ""}` : errorText(e),
        },
      );
      return;
    }
    this.#raw = raw;
    this.#conf = conf;
    this.#stamp = stamp;
    this.#logger?.info("--config re-read", { conf: path });
  }
}
