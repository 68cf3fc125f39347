/**
 * The leak check every fault-injection, crash and concurrency test ends with: after the
 * runtime's DELs, nothing Manifold or its delegates made for the containers may remain.
 *
 * A leak is any of:
 * - an interface other than `lo` in the pod netns (when the netns still exists);
 * - a host-local lease (a file named by an IP under the IPAM data dir) whose content names
 *   one of the containers (host-local writes `<containerId>\r\n<ifName>` into it);
 * - a cache record of one of the containers that is not a tombstone (has attachments or no
 *   `deletedAt`), a cache temp file (`*.json.tmp-*`), or a record that is not valid JSON;
 * - a file under the device-info dir or the standalone network-status dir naming a container;
 * - a note of a running delegate ADD (`<cniDir>/delegates/<containerId>@<ifName>.group`) of one
 *   of the containers: DEL stops such a delegate and drops its note.
 *
 * Tombstones are not leaks: they are how a repeated DEL stays a no-op (GC removes them).
 *
 * @module
 */

import assert from "node:assert/strict";
import { linkNames } from "./netns.ts";

/** Where to look. */
export interface LeakScope {
  /** The containers whose traces must be gone. */
  containerIds: string[];
  /** Name of the pod netns (`ip netns` name); skipped when it no longer exists. */
  podNetns?: string;
  /** host-local `dataDir`. */
  ipamDir?: string;
  /** Manifold's `cniDir` (cache records, `network-status/`). */
  cacheDir?: string;
  /** Manifold's `deviceInfoDir`. */
  deviceInfoDir?: string;
}

/** What was found; every list empty means no leak. */
export interface LeakReport {
  interfaces: string[];
  leases: string[];
  cache: string[];
  files: string[];
}

/** Collects every leak in `scope` (see the module doc for what counts). */
export async function findLeaks(scope: LeakScope): Promise<LeakReport> {
  const report: LeakReport = { interfaces: [], leases: [], cache: [], files: [] };
  const ids = new Set(scope.containerIds);
  const names = (text: string) => scope.containerIds.some((id) => text.includes(id));

  if (scope.podNetns && await netnsExists(scope.podNetns)) {
    report.interfaces = (await linkNames(scope.podNetns)).map((l) => `${scope.podNetns}:${l}`);
  }
  if (scope.ipamDir) {
    for (const path of await walk(scope.ipamDir)) {
      const base = path.slice(path.lastIndexOf("/") + 1);
      if (!/^[0-9a-f.:]+$/i.test(base)) continue; // lock, last_reserved_ip.N
      const text = await Deno.readTextFile(path).catch(() => "");
      if (names(text)) report.leases.push(`${path}: ${text.replace(/\s+/g, " ").trim()}`);
    }
  }
  if (scope.cacheDir) {
    for (const path of await walk(scope.cacheDir)) {
      const base = path.slice(path.lastIndexOf("/") + 1);
      if (path.includes("/delegates/") && base.endsWith(".group")) {
        if (ids.has(base.split("@")[0])) report.files.push(path);
        continue;
      }
      if (path.includes("/network-status/")) {
        if (names(base)) report.files.push(path);
        continue;
      }
      if (base.includes(".json.tmp-")) {
        report.cache.push(`${path}: temp file`);
        continue;
      }
      // `<containerId>@<ifName>.json` (lib/multinet/cache/cache.ts), or a legacy `<containerId>.json`.
      if (!base.endsWith(".json") || !ids.has(base.slice(0, -5).split("@")[0])) continue;
      let record: { deletedAt?: string; attachments?: unknown[] };
      try {
        record = JSON.parse(await Deno.readTextFile(path));
      } catch (e) {
        report.cache.push(`${path}: unreadable (${(e as Error).message})`);
        continue;
      }
      const n = record.attachments?.length ?? 0;
      if (!record.deletedAt || n > 0) {
        report.cache.push(`${path}: ${n} attachment(s), deletedAt=${record.deletedAt ?? "-"}`);
      }
    }
  }
  if (scope.deviceInfoDir) {
    for (const path of await walk(scope.deviceInfoDir)) {
      if (names(path.slice(path.lastIndexOf("/") + 1))) report.files.push(path);
    }
  }
  return report;
}

/** Fails with the whole report when anything leaked. */
export async function assertNoLeaks(scope: LeakScope, what = "after DEL"): Promise<void> {
  const r = await findLeaks(scope);
  const all = [...r.interfaces, ...r.leases, ...r.cache, ...r.files];
  assert.deepEqual(all, [], `leaks ${what}:\n${JSON.stringify(r, null, 2)}`);
}

async function netnsExists(name: string): Promise<boolean> {
  try {
    await Deno.stat(`/var/run/netns/${name}`);
    return true;
  } catch {
    return false;
  }
}

/** Every regular file under `dir` (recursively); [] when `dir` does not exist. */
async function walk(dir: string): Promise<string[]> {
  const out: string[] = [];
  let entries: Deno.DirEntry[];
  try {
    entries = await Array.fromAsync(Deno.readDir(dir));
  } catch {
    return out;
  }
  for (const e of entries) {
    const path = `${dir}/${e.name}`;
    if (e.isDirectory) out.push(...await walk(path));
    else if (e.isFile) out.push(path);
  }
  return out;
}
