/**
 * Reading procfs (proc(5)) through libc: Deno refuses every path under `/proc` other than its
 * own few (`NotCapable: Requires all access to "/proc/…"`) unless the process runs with
 * `--allow-all`, which Manifold never does (scripts/permissions). Used to identify and watch
 * delegate process groups (lib/cni/process_group.ts). Synchronous, on the calling thread;
 * needs `--allow-ffi` (libc is opened on first use: its file symbols alone for the reads,
 * native/libc.ts `openLibcFiles`, the whole table, shared with lib/netlink, for `listPids`).
 *
 * @module
 */

import { O_RDONLY_CLOEXEC, openLibc, openLibcFiles } from "../../native/libc.ts";

/** `struct dirent` `d_name` offset in glibc on LP64 (x86_64, aarch64). */
const D_NAME_OFFSET = 19;
/** procfs text files read here (`stat`, `boot_id`) fit one page. */
const buffer = new Uint8Array(4096);
const encoder = new TextEncoder();
const decoder = new TextDecoder();

function cString(s: string): Uint8Array {
  return encoder.encode(`${s}\0`);
}

/**
 * Reads a small procfs file (at most 4096 bytes, e.g. `/proc/<pid>/stat`).
 * @param path an absolute path, e.g. `"/proc/42/stat"`
 * @returns its text, or undefined when it cannot be opened or read (no such process)
 * @throws {Deno.errors.NotCapable} without `--allow-ffi`
 */
export function readProcFile(path: string): string | undefined {
  const libc = openLibcFiles();
  const fd = libc.symbols.open(cString(path), O_RDONLY_CLOEXEC);
  if (fd < 0) return undefined;
  try {
    let n = 0;
    while (n < buffer.length) {
      const r = Number(libc.symbols.read(fd, buffer.subarray(n), BigInt(buffer.length - n)));
      if (r < 0) return undefined;
      if (r === 0) break;
      n += r;
    }
    return decoder.decode(buffer.subarray(0, n));
  } finally {
    libc.symbols.close(fd);
  }
}

/**
 * The target of a procfs link, e.g. `/proc/self/ns/pid` → `"pid:[4026531836]"`.
 * @param path the link
 * @returns its target, or undefined when it cannot be read
 * @throws {Deno.errors.NotCapable} without `--allow-ffi`
 */
export function readProcLink(path: string): string | undefined {
  const r = Number(openLibcFiles().symbols.readlink(cString(path), buffer, BigInt(buffer.length)));
  return r < 0 ? undefined : decoder.decode(buffer.subarray(0, r));
}

/**
 * The PIDs procfs lists now (`/proc/<pid>` directories), in its order.
 * @returns the PIDs; [] when /proc cannot be opened
 * @throws {Deno.errors.NotCapable} without `--allow-ffi`
 */
export function listPids(): number[] {
  const libc = openLibc();
  const dir = libc.symbols.opendir(cString("/proc"));
  if (dir === null) return [];
  const pids: number[] = [];
  try {
    for (;;) {
      const entry = libc.symbols.readdir(dir);
      if (entry === null) break;
      const name = new Deno.UnsafePointerView(entry).getCString(D_NAME_OFFSET);
      const pid = Number(name);
      if (Number.isSafeInteger(pid) && pid > 0) pids.push(pid);
    }
  } finally {
    libc.symbols.closedir(dir);
  }
  return pids;
}
