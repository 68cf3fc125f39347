/**
 * The plugin's side of the NAD mirror: a {@link NadSource} reading the node-local mirror
 * directory, with the API as fallback (format and freshness rules: `nad/mirror.ts`). Part of
 * the plugin's ADD: no watch or API code is imported here.
 *
 * @module
 */

import { CniError, CniErrorCode } from "../../cni/errors.ts";
import type { Logger } from "../../log/mod.ts";
import type { NadSource } from "./source.ts";
import {
  isMirrorName,
  MIRROR_MAX_AGE_MS,
  MIRROR_MAX_CLOCK_SKEW_MS,
  MIRROR_STATE_FILE,
  mirrorPath,
  type NadMirrorState,
  parseMirrorFile,
  parseMirrorState,
  trimMirrorDir,
} from "./mirror_format.ts";

/** Options of {@link mirrorNadSource}. */
export interface MirrorNadSourceOptions {
  /** How old `syncedAt` may be, ms; default {@link MIRROR_MAX_AGE_MS}. */
  maxAgeMs?: number;
  /** Clock, ms since the epoch (tests); default `Date.now`. */
  now?: () => number;
}

/** Whether the mirror may answer, and why not. */
type Freshness = { synced: true } | { synced: false; why: string; neverSynced?: boolean };

/**
 * A {@link NadSource} reading the node-local mirror, with `fallback` (the API GET,
 * `apiNadSource(kube)`) for what the mirror cannot answer:
 *
 * - the mirror is not synced (no or invalid `<dir>/.mirror.json`, `syncedAt` older than
 *   `maxAgeMs` or more than 30 s in the future) → `fallback`;
 * - the entry is missing → `fallback` (a NAD created a moment ago; "not found" is only
 *   what the fallback says);
 * - the entry is unreadable or invalid (bad JSON, wrong kind, another namespace/name in it)
 *   → logged as a warning, `fallback`;
 * - a namespace or name that cannot be a file name (`..`, `/`, upper case…) → `fallback`
 *   (which rejects it as the API path would).
 *
 * The state file is read once per source (one per CNI call), its age checked at each `get`.
 * Without a fallback the mirror answers alone: not synced → warning and the files are still
 * used (a missing entry is then `undefined`), never synced (no state file) → {@link CniError} 11.
 *
 * @param dir the mirror directory (config `nadMirrorDir`)
 * @param fallback the source behind the mirror, normally `apiNadSource(kube)`
 * @param logger receives why the mirror was bypassed
 * @param options `maxAgeMs`, `now`
 * @returns the source; its `get` resolves the same objects/`undefined` as `fallback` would
 *   (the object's `raw` is the mirror file's object, see {@link toMirrorObject})
 * @throws (from `get`) whatever `fallback` throws; without a fallback {@link CniError} 11 when
 *   the mirror has never synced, 5 when a file cannot be read, 6 when it is invalid
 * @example
 * ```ts
 * const nads = mirrorNadSource(conf.nadMirrorDir, apiNadSource(kube), logger);
 * await nads.get("default", "macvlan-conf"); // from the mirror when synced, else a GET
 * ```
 */
export function mirrorNadSource(
  dir: string,
  fallback: NadSource | undefined,
  logger: Logger,
  options: MirrorNadSourceOptions = {},
): NadSource {
  const maxAgeMs = options.maxAgeMs ?? MIRROR_MAX_AGE_MS;
  const now = options.now ?? Date.now;
  const base = trimMirrorDir(dir);
  let state: Promise<NadMirrorState | string> | undefined;

  const readState = async (): Promise<NadMirrorState | string> => {
    let text: string;
    try {
      text = await Deno.readTextFile(`${base}/${MIRROR_STATE_FILE}`);
    } catch (err) {
      return err instanceof Deno.errors.NotFound
        ? "no state file"
        : `cannot read the state file: ${(err as Error).message}`;
    }
    try {
      return await parseMirrorState(text);
    } catch (err) {
      logger.warn("NAD mirror state file is invalid", { dir, error: (err as Error).message });
      return "invalid state file";
    }
  };

  const freshness = async (): Promise<Freshness> => {
    const s = await (state ??= readState());
    if (typeof s === "string") return { synced: false, why: s, neverSynced: true };
    const age = now() - Date.parse(s.syncedAt);
    if (age > maxAgeMs) return { synced: false, why: `synced ${Math.round(age / 1000)} s ago` };
    if (age < -MIRROR_MAX_CLOCK_SKEW_MS) {
      return { synced: false, why: `syncedAt ${s.syncedAt} is in the future` };
    }
    return { synced: true };
  };

  const fromFallback = (namespace: string, name: string, why: string) => {
    logger.debug("NAD not taken from the mirror", { namespace, name, why });
    return fallback!.get(namespace, name);
  };

  return {
    async get(namespace, name) {
      if (!isMirrorName(namespace) || !isMirrorName(name)) {
        if (fallback) return await fromFallback(namespace, name, "not a mirror file name");
        return undefined;
      }
      const fresh = await freshness();
      if (!fresh.synced) {
        if (fallback) return await fromFallback(namespace, name, `mirror ${fresh.why}`);
        if (fresh.neverSynced) {
          throw new CniError(
            CniErrorCode.TryAgainLater,
            `NetworkAttachmentDefinition mirror ${dir} is not synced (${fresh.why})`,
          );
        }
        logger.warn("NAD mirror is stale and there is no API to ask", { dir, why: fresh.why });
      }
      const path = mirrorPath(base, namespace, name);
      let text: string;
      try {
        text = await Deno.readTextFile(path);
      } catch (err) {
        if (err instanceof Deno.errors.NotFound) {
          return fallback ? await fromFallback(namespace, name, "not in the mirror") : undefined;
        }
        if (!fallback) {
          throw new CniError(
            CniErrorCode.IoFailure,
            `Cannot read NetworkAttachmentDefinition mirror file ${path}`,
            (err as Error).message,
          );
        }
        logger.warn("cannot read NAD mirror file", { path, error: (err as Error).message });
        return await fromFallback(namespace, name, "unreadable mirror file");
      }
      try {
        return parseMirrorFile(text, namespace, name);
      } catch (err) {
        if (!fallback) throw err;
        logger.warn("invalid NAD mirror file", { path, error: (err as Error).message });
        return await fromFallback(namespace, name, "invalid mirror file");
      }
    },
  };
}
