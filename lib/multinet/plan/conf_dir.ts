/**
 * On-disk CNI configs of a directory (Multus `confDir`, a `clusterNetwork` directory): every
 * parsable `*.conflist`, `*.conf` and `*.json` in lexical order, and the lookup by `"name"` of
 * NPWG v1.3 §3.4.1 steps 2–3 (libcni `LoadConfList` / `ConfFiles` order).
 *
 * @module
 */

import { checkJsonDepth } from "../../cni/decode.ts";
import { CniError } from "../../cni/errors.ts";
import { type NetworkConfigList, parseNetworkConfig } from "../../cni/netconf.ts";

/** A parsed on-disk CNI config. */
export interface ConfFile {
  /** The file's path. */
  path: string;
  /** The parsed config. */
  list: NetworkConfigList;
}

const CONFLIST_EXTENSIONS = [".conflist"];
const CONF_EXTENSIONS = [".conf", ".json"];

/**
 * §3.4.1 steps 2–3: the first `*.conflist`, else the first `*.conf`/`*.json`, whose
 * `"name"` is `name`. `tried` explains every skipped or non-matching file.
 * @param confDir the directory.
 * @param name the network name looked for.
 * @returns the match (if any) and what was tried.
 */
export async function findConfByName(
  confDir: string,
  name: string,
): Promise<{ match?: ConfFile; tried: string[] }> {
  const { configs, tried } = await readConfDir(confDir);
  const isList = (c: ConfFile) => CONFLIST_EXTENSIONS.some((e) => c.path.endsWith(e));
  const match = configs.find((c) => isList(c) && c.list.name === name) ??
    configs.find((c) => !isList(c) && c.list.name === name);
  if (!match) {
    for (const c of configs) tried.push(`${c.path}: name is "${c.list.name}"`);
  }
  return { match, tried };
}

/**
 * Every parsable CNI config of `dir`, in lexical order; a missing directory is empty.
 * @param dir the directory.
 * @returns the configs, and a line per file skipped (unreadable, invalid, too deep).
 */
export async function readConfDir(dir: string): Promise<{ configs: ConfFile[]; tried: string[] }> {
  const tried: string[] = [];
  const names: string[] = [];
  try {
    for await (const entry of Deno.readDir(dir)) {
      if (entry.isDirectory) continue;
      if ([...CONFLIST_EXTENSIONS, ...CONF_EXTENSIONS].some((e) => entry.name.endsWith(e))) {
        names.push(entry.name);
      }
    }
  } catch (err) {
    tried.push(
      err instanceof Deno.errors.NotFound
        ? `${dir}: directory does not exist`
        : `${dir}: cannot read directory: ${err}`,
    );
    return { configs: [], tried };
  }
  names.sort();
  const configs: ConfFile[] = [];
  for (const file of names) {
    const path = `${dir.replace(/\/+$/, "")}/${file}`;
    try {
      const list = parseNetworkConfig(await Deno.readTextFile(path), { source: path });
      checkJsonDepth(list.raw, "network config");
      configs.push({ path, list });
    } catch (err) {
      const why = err instanceof CniError ? err.msg : String(err);
      tried.push(`${path}: skipped (${why})`);
    }
  }
  return { configs, tried };
}
