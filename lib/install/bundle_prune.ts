/**
 * Removing bundles an upgrade left behind (`<cni-bin-dir>/.manifold/<hash>/`, see
 * lib/install/bundle.ts). A bundle is removed only when all of these hold:
 *
 * - no launcher in the CNI bin dir names it (any small `/bin/sh` file there with the
 *   `# manifold-bundle:` marker, lib/install/launcher.ts: also copies an operator made);
 * - no process runs from it (no `/proc/<pid>/cmdline` holds its host path: a plugin call
 *   that started on the old launcher runs deno with the bundle's `main.ts`; the DaemonSet
 *   has `hostPID`, so the installer sees the host's processes);
 * - it has been so for `graceMs` of this installer's own observation (a call that read the
 *   old launcher a moment before the swap has not exec'd into the bundle yet).
 *
 * A bundle is renamed to a temporary name before it is deleted, so a deletion cut short never
 * leaves a partial directory under a bundle's name. Temporary directories (`.tmp-*`) of an
 * installer that died mid-copy or mid-delete are removed once older than `graceMs` by their
 * modification time. Anything else in the directory is left alone.
 *
 * @module
 */

import { listPids, readProcFile } from "../fs/procfs.ts";
import { BUNDLE_NAME } from "./bundle.ts";
import { launcherBundle } from "./launcher.ts";

/** Largest file read as a possible launcher, bytes. */
const LAUNCHER_MAX_BYTES = 4096;

/** Inputs of {@link pruneBundles}. */
export interface PruneOptions {
  /** `<cni-bin-dir>/.manifold`, installer view. */
  bundlesDir: string;
  /** The same directory as the host sees it (what launchers and command lines name). */
  bundlesDirHost: string;
  /** The CNI bin dir, installer view (where launchers are looked for). */
  cniBinDir: string;
  /** Minimum time a bundle must be seen unnamed and unused before removal, ms. */
  graceMs: number;
  /** When each candidate was first seen unnamed and unused (kept between calls), ms epoch. */
  firstSeen: Map<string, number>;
  /** The processes to look at; default the proc file system's ({@link procCmdlines}). */
  cmdlines?: () => string[][];
  /** Current time; default `Date.now`. */
  now?: () => number;
}

/** What {@link pruneBundles} found and did. */
export interface PruneResult {
  /** Bundle names removed. */
  removed: string[];
  /** Bundle names kept, each with why: `named`, `running` or `grace`. */
  kept: { name: string; why: "named" | "running" | "grace" }[];
}

/**
 * The host paths of the bundles named by launchers in `cniBinDir`.
 *
 * @param cniBinDir the CNI bin dir, installer view
 * @returns the named bundle directories (host paths)
 */
export async function namedBundles(cniBinDir: string): Promise<Set<string>> {
  const named = new Set<string>();
  for await (const e of Deno.readDir(cniBinDir)) {
    if (!e.isFile) continue;
    const p = `${cniBinDir}/${e.name}`;
    try {
      const info = await Deno.stat(p);
      if (info.size > LAUNCHER_MAX_BYTES) continue;
      const b = launcherBundle(await Deno.readTextFile(p));
      if (b !== undefined) named.add(b);
    } catch { /* gone or unreadable: names nothing */ }
  }
  return named;
}

/**
 * Every process's command line (its arguments), read from `/proc/<pid>/cmdline` through libc
 * (lib/fs/procfs.ts: Deno refuses `/proc` to a process without `--allow-all`); the first
 * 4096 bytes of each, where the executable and script paths are. Processes that exit
 * meanwhile are skipped.
 *
 * @returns one argument list per process
 * @throws {Deno.errors.NotCapable} without `--allow-ffi`
 */
export function procCmdlines(): string[][] {
  const out: string[][] = [];
  for (const pid of listPids()) {
    const text = readProcFile(`/proc/${pid}/cmdline`);
    if (text) out.push(text.split("\0").filter((a) => a !== ""));
  }
  return out;
}

/**
 * The subset of `dirs` some process's command line names (a path of the directory, or a path
 * below it).
 *
 * @param dirs host paths of bundle directories
 * @param cmdlines the processes' argument lists (default {@link procCmdlines})
 * @returns the directories in use
 */
export function bundlesInUse(dirs: string[], cmdlines = procCmdlines): Set<string> {
  const used = new Set<string>();
  if (dirs.length === 0) return used;
  for (const args of cmdlines()) {
    for (const arg of args) {
      for (const d of dirs) if (arg === d || arg.includes(`${d}/`)) used.add(d);
    }
  }
  return used;
}

/**
 * Removes the bundles no launcher names and no process uses once they have been so for
 * `graceMs`, and stale temporary directories (see the module documentation).
 *
 * @param o directories, grace and the first-seen memory
 * @returns what was removed and what was kept
 * @throws Deno errors reading the directories (a failed removal is retried on the next call)
 */
export async function pruneBundles(o: PruneOptions): Promise<PruneResult> {
  const now = o.now ?? Date.now;
  const result: PruneResult = { removed: [], kept: [] };
  const candidates: string[] = [];
  try {
    await Deno.lstat(o.bundlesDir);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return result; // no bundle was ever installed
    throw e;
  }
  const named = await namedBundles(o.cniBinDir);
  for await (const e of Deno.readDir(o.bundlesDir)) {
    if (e.isDirectory && BUNDLE_NAME.test(e.name)) candidates.push(e.name);
    else if (e.isDirectory && e.name.startsWith(".tmp-")) {
      const p = `${o.bundlesDir}/${e.name}`;
      const mtime = (await Deno.lstat(p).catch(() => undefined))?.mtime?.getTime();
      if (mtime !== undefined && now() - mtime >= o.graceMs) {
        await Deno.remove(p, { recursive: true }).catch(() => {});
      }
    }
  }
  const host = (name: string) => `${o.bundlesDirHost.replace(/\/+$/, "")}/${name}`;
  const unnamed = candidates.filter((n) => !named.has(host(n)));
  const inUse = bundlesInUse(unnamed.map(host), o.cmdlines);
  for (const name of candidates.sort()) {
    if (named.has(host(name))) {
      o.firstSeen.delete(name);
      result.kept.push({ name, why: "named" });
    } else if (inUse.has(host(name))) {
      o.firstSeen.delete(name);
      result.kept.push({ name, why: "running" });
    } else {
      const seen = o.firstSeen.get(name) ?? now();
      o.firstSeen.set(name, seen);
      if (now() - seen < o.graceMs) {
        result.kept.push({ name, why: "grace" });
        continue;
      }
      // Renamed away first (atomic), then removed: a removal cut short never leaves a partial
      // directory under a bundle's name, which the installer would take for complete.
      const rnd = crypto.getRandomValues(new Uint32Array(1))[0].toString(36);
      const doomed = `${o.bundlesDir}/.tmp-old-${name}-${rnd}`;
      try {
        await Deno.rename(`${o.bundlesDir}/${name}`, doomed);
      } catch {
        result.kept.push({ name, why: "grace" });
        continue;
      }
      o.firstSeen.delete(name);
      result.removed.push(name);
      await Deno.remove(doomed, { recursive: true }).catch(() => {});
    }
  }
  return result;
}
