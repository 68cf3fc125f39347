/**
 * The daemon's descriptors, for `process_open_fds` and `process_max_fds` (the series every
 * Prometheus client exports; prom-client's read `/proc/self`, which Deno refuses without
 * `--allow-all`, metrics.ts `PROC_SELF_SERIES`): counted through libc (native/process.ts).
 *
 * @module
 */

import { PROCESS_LIBC_PATH, PROCESS_SYMBOLS, RLIMIT_NOFILE } from "../../native/process.ts";

type Lib = Deno.DynamicLibrary<typeof PROCESS_SYMBOLS>;
let lib: Lib | undefined;

function open(): Lib {
  lib ??= Deno.dlopen(PROCESS_LIBC_PATH, PROCESS_SYMBOLS);
  return lib;
}

/**
 * Descriptors open in this process now: the entries of `/proc/self/fd`, less the one the walk
 * itself holds.
 * @returns the count
 * @throws Error without `--allow-ffi` or when `/proc/self/fd` cannot be opened
 */
export function openFds(): number {
  const l = open();
  const dir = l.symbols.opendir(new TextEncoder().encode("/proc/self/fd\0"));
  if (dir === null) throw new Error("cannot open /proc/self/fd");
  let n = 0;
  try {
    while (l.symbols.readdir(dir) !== null) n++;
  } finally {
    l.symbols.closedir(dir);
  }
  return n - 3; // ".", ".." and the directory's own descriptor
}

/**
 * The soft limit on descriptors (`RLIMIT_NOFILE`, what `ulimit -n` shows).
 * @returns the limit; `Infinity` when unlimited
 * @throws Error without `--allow-ffi` or when `getrlimit` fails
 */
export function maxFds(): number {
  const buf = new BigUint64Array(2);
  if (open().symbols.getrlimit(RLIMIT_NOFILE, buf) !== 0) throw new Error("getrlimit failed");
  return buf[0] === 0xffffffffffffffffn ? Infinity : Number(buf[0]);
}
