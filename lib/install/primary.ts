/**
 * Finding the primary CNI configuration (the cluster default network's) in the host's CNI
 * configuration directory, the way the node installer must: a pinned file name when given
 * (Multus `multusMasterCNI`, the workaround for #1499), else the first `*.conf` /
 * `*.conflist` in lexical order that is not a delegating plugin's own config.
 *
 * The first candidate is taken as is: when it does not parse (a network plugin writing it
 * right now, or broken), the primary is "invalid" — not ready — and the next file is never
 * picked instead, since a wrong primary is worse than waiting (NPWG v1.3 §6.1.1: write
 * nothing until the default network's config exists).
 *
 * @module
 */

import { CniError } from "../cni/errors.ts";
import { type NetworkConfigList, parseNetworkConfig } from "../cni/types.ts";
import { oneLine } from "../util/text.ts";

/** Plugin types of delegating plugins, whose configs are never a primary. */
export const DELEGATING_PLUGIN_TYPES: readonly string[] = ["manifold", "multus", "multus-shim"];

/** A primary configuration that exists and parses. */
export interface PrimaryConfig {
  /** File name inside the configuration directory, e.g. `"10-flannel.conflist"`. */
  fileName: string;
  /** Path as it was read (installer view, host root prefixed). */
  path: string;
  /** The file's text, exactly as read. */
  text: string;
  /** The parsed configuration (a `.conf` is wrapped into a one-plugin list). */
  list: NetworkConfigList;
}

/** Outcome of {@link findPrimaryConfig}. */
export type PrimaryLookup =
  | { status: "found"; primary: PrimaryConfig; skipped: string[] }
  | { status: "missing"; reason: string; skipped: string[] }
  | { status: "invalid"; fileName: string; reason: string; skipped: string[] };

/** Options of {@link findPrimaryConfig}. */
export interface FindPrimaryOptions {
  /** Only this file name (no `/`) is the primary. */
  pinned?: string;
  /** Manifold's own file name (e.g. `"00-manifold.conflist"`), never a candidate. */
  ownFileName: string;
}

/**
 * Looks for the primary configuration in `dir`.
 *
 * Candidates: regular files (symlinks followed) named `*.conf` or `*.conflist`, not hidden
 * (temporary files start with `.`), not `ownFileName`, in lexical (byte) order. A candidate
 * whose plugins include a delegating plugin (`manifold`, `multus`, `multus-shim`) is
 * skipped (listed in `skipped`).
 *
 * @param dir the CNI configuration directory (installer view)
 * @param options pinned file name and Manifold's own file name
 * @returns `found` with the parsed config; `missing` when no candidate (or the pinned file)
 *   exists, or the directory is missing; `invalid` when the first candidate does not parse
 *   (reason: `does not parse: <the parse error>`) or is a symbolic link that does not resolve
 *   in this process's view (reason: `is a symbolic link to <target>, …`, what to mount); the
 *   reason reads after "primary config <fileName> "
 * @throws Deno errors other than `NotFound` when the directory cannot be read
 */
export async function findPrimaryConfig(
  dir: string,
  options: FindPrimaryOptions,
): Promise<PrimaryLookup> {
  const skipped: string[] = [];
  let names: string[];
  if (options.pinned !== undefined) {
    names = [options.pinned];
  } else {
    names = [];
    try {
      for await (const e of Deno.readDir(dir)) {
        if (e.isDirectory || e.name.startsWith(".") || e.name === options.ownFileName) continue;
        if (e.name.endsWith(".conf") || e.name.endsWith(".conflist")) names.push(e.name);
      }
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) {
        return { status: "missing", reason: `directory ${dir} does not exist`, skipped };
      }
      throw err;
    }
    names.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  }
  for (const fileName of names) {
    const path = `${dir.replace(/\/+$/, "")}/${fileName}`;
    let text: string;
    try {
      const st = await Deno.stat(path);
      if (!st.isFile) {
        skipped.push(`${fileName}: not a regular file`);
        continue;
      }
      text = await Deno.readTextFile(path);
    } catch (err) {
      if (err instanceof Deno.errors.NotFound) {
        const link = await danglingLink(path);
        // A link whose target this process cannot see (an absolute target outside the
        // directories mounted below the host root, or a broken link): the runtime on the host
        // may well load it, so taking the next file instead would pick a wrong primary.
        if (link !== undefined) {
          return {
            status: "invalid",
            fileName,
            reason: `is a symbolic link to ${link}, which does not resolve here (${path}): ` +
              "mount the target's directory into the install container below --host-root, " +
              "or replace the link by the file",
            skipped,
          };
        }
        // Removed between listing and reading: as if it never was there.
        continue;
      }
      throw err;
    }
    let list: NetworkConfigList;
    try {
      list = parseNetworkConfig(text, { source: path });
    } catch (err) {
      const why = err instanceof CniError
        ? `${err.msg}${err.details ? `: ${oneLine(err.details)}` : ""}`
        : String(err);
      return { status: "invalid", fileName, reason: `does not parse: ${why}`, skipped };
    }
    if (list.plugins.some((p) => DELEGATING_PLUGIN_TYPES.includes(String(p.type)))) {
      skipped.push(`${fileName}: a delegating plugin's own config`);
      continue;
    }
    return { status: "found", primary: { fileName, path, text, list }, skipped };
  }
  const reason = options.pinned !== undefined
    ? `pinned primary config ${options.pinned} does not exist in ${dir}`
    : `no *.conf or *.conflist file in ${dir}`;
  return { status: "missing", reason, skipped };
}

/** Suffixes of the files the container runtime loads from the directory (libcni `ConfFiles`). */
const RUNTIME_CONFIG_SUFFIXES = [".conf", ".conflist", ".json"];

/**
 * The file the container runtime loads: the lexically (byte) first non-directory entry named
 * `*.conf`, `*.conflist` or `*.json` — hidden ones included — as containerd and CRI-O do
 * (go-cni / ocicni over libcni `ConfFiles`, sorted, first one). When this is not Manifold's
 * config, pods bypass Manifold.
 *
 * @param dir the CNI configuration directory (installer view)
 * @returns the file name, or undefined when there is none (or no directory)
 * @throws Deno errors other than `NotFound` when the directory cannot be read
 */
export async function firstLoadedConfig(dir: string): Promise<string | undefined> {
  const names: string[] = [];
  try {
    for await (const e of Deno.readDir(dir)) {
      if (e.isDirectory) continue;
      if (RUNTIME_CONFIG_SUFFIXES.some((x) => e.name.endsWith(x))) names.push(e.name);
    }
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return undefined;
    throw err;
  }
  return names.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))[0];
}

/** The target of `path` when it is a symbolic link (that did not resolve), else undefined. */
async function danglingLink(path: string): Promise<string | undefined> {
  try {
    return (await Deno.lstat(path)).isSymlink ? await Deno.readLink(path) : undefined;
  } catch {
    return undefined;
  }
}
