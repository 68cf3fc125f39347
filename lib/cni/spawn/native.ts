/**
 * Starting a plugin with glibc's `posix_spawn(3)` through FFI (native/spawn.ts), for the
 * per-call plugin: the child leads a session and process group of its own from its first
 * instruction (`POSIX_SPAWN_SETSID`, set in the child before its exec), started by a
 * `CLONE_VFORK` clone. `Deno.Command` can give the same group only through an exec of setsid(1)
 * in front of the plugin (≈ 0.5 ms a delegate) or a fork of the whole plugin process
 * (`detached`, ≈ 1-1.5 ms a spawn, measured), and loads its own implementation on first use
 * (≈ 2 ms of main-thread JavaScript, plus ≈ 2 ms more for the first spawn and the first write).
 *
 * What exec.ts gets is a {@link SpawnedChild} (native_child.ts: the pipes read and written on
 * the main thread with plain FFI calls, the child reaped there). The child gets exactly `argv`
 * and `env` (nothing inherited but descriptors 0-2, which are the pipes: every other descriptor
 * of this process is close-on-exec), every signal at its default action and none blocked, as
 * Go's os/exec gives a child.
 *
 * @module
 */

import { errnoAt, openLibcFiles } from "../../../native/libc.ts";
import { SPAWN, SPAWN_LIBC_PATH, SPAWN_SYMBOLS, type SpawnLibc } from "../../../native/spawn.ts";
import type { SpawnedChild } from "../exec_types.ts";
import { errnoText, NativeChild } from "./native_child.ts";

let lib: SpawnLibc | null | undefined;
const encoder = new TextEncoder();

/** The child's session made before its exec, its signals reset to default and unblocked. */
const FLAGS = SPAWN.POSIX_SPAWN_SETSID | SPAWN.POSIX_SPAWN_SETSIGDEF |
  SPAWN.POSIX_SPAWN_SETSIGMASK;

/**
 * Binds the spawn symbols (the FFI `dlopen`, ≈ 1 ms: libc is already mapped) and libc's file
 * symbols, so that the first {@link spawnNative} costs only the spawn, and asks glibc once
 * whether it takes `POSIX_SPAWN_SETSID` (glibc < 2.26 refuses it in `posix_spawnattr_setflags`
 * with EINVAL). Never throws.
 * @returns whether {@link spawnNative} can be used in this process
 */
export function prefetchNativeSpawn(): boolean {
  if (lib === undefined) {
    try {
      const S = Deno.dlopen(SPAWN_LIBC_PATH, SPAWN_SYMBOLS).symbols;
      openLibcFiles();
      const attr = new Uint8Array(SPAWN.ATTR_BYTES);
      lib = S.posix_spawnattr_init(attr) === 0 && S.posix_spawnattr_setflags(attr, FLAGS) === 0
        ? S
        : null;
    } catch {
      lib = null; // no --allow-ffi, or no libc.so.6 (not glibc)
    }
  }
  return lib !== null;
}

/**
 * The error of a spawn that failed, worded as setsid(1) words it: `failed to execute <path>:
 * <strerror>`.
 */
export class SpawnError extends Error {
  /** The errno value posix_spawn returned. */
  readonly errno: number;

  /**
   * The error for `path`, which posix_spawn could not start.
   * @param path the program that was not started
   * @param errno its errno value
   */
  constructor(path: string, errno: number) {
    super(`failed to execute ${path}: ${errnoText(errno)}`);
    this.name = "SpawnError";
    this.errno = errno;
  }
}

/**
 * Starts `argv[0]` (an absolute path; no PATH search) with `argv` and exactly `env`, in a new
 * session whose process group it leads (pgid = its PID), its stdin, stdout and stderr pipes to
 * this process.
 * @param argv the program and its arguments (`[path]` for a CNI plugin)
 * @param env the child's whole environment
 * @returns the child, or undefined when this process cannot spawn this way (no FFI, not glibc,
 *   glibc < 2.26, or descriptor 0-2 closed): the caller uses `Deno.Command`
 * @throws {SpawnError} when the program cannot be executed (its errno: ENOENT, EACCES,
 *   ETXTBSY, ENOEXEC…), or pipes cannot be made (EMFILE); {@link TypeError} for a NUL byte in
 *   an argument or the environment
 */
export function spawnNative(
  argv: readonly string[],
  env: Record<string, string>,
): SpawnedChild | undefined {
  if (!prefetchNativeSpawn()) return undefined;
  const S = lib!;
  const F = openLibcFiles().symbols;
  const args = argv.map((a) => cString(a, "argument"));
  const envs = Object.entries(env).map(([k, v]) => {
    if (k === "" || k.includes("=")) throw new TypeError(`invalid environment variable name ${k}`);
    return cString(`${k}=${v}`, "environment variable");
  });
  const fds = new Int32Array(6);
  let made = 0;
  const closeAll = () => {
    for (let i = 0; i < made; i++) F.close(fds[i]);
  };
  for (; made < 6; made += 2) {
    if (S.pipe2(new Uint8Array(fds.buffer, made * 4, 8), SPAWN.O_CLOEXEC) !== 0) {
      const e = errnoAt(S);
      closeAll();
      throw new SpawnError(argv[0], e);
    }
  }
  // Descriptors 0-2 closed in this process would make a pipe one of them, which dup2 onto
  // itself leaves close-on-exec: not this way.
  if (fds.some((fd) => fd <= 2)) {
    closeAll();
    return undefined;
  }
  const [inRead, inWrite, outRead, outWrite, errRead, errWrite] = fds;
  const actions = new Uint8Array(SPAWN.FILE_ACTIONS_BYTES);
  const attr = new Uint8Array(SPAWN.ATTR_BYTES);
  const pid = new Int32Array(1);
  let r: number;
  S.posix_spawn_file_actions_init(actions);
  try {
    if (
      S.posix_spawn_file_actions_adddup2(actions, inRead, 0) !== 0 ||
      S.posix_spawn_file_actions_adddup2(actions, outWrite, 1) !== 0 ||
      S.posix_spawn_file_actions_adddup2(actions, errWrite, 2) !== 0 ||
      S.posix_spawnattr_init(attr) !== 0 ||
      S.posix_spawnattr_setsigdefault(attr, ALL_SIGNALS) !== 0 ||
      S.posix_spawnattr_setsigmask(attr, NO_SIGNALS) !== 0 ||
      S.posix_spawnattr_setflags(attr, FLAGS) !== 0
    ) {
      closeAll();
      return undefined;
    }
    r = S.posix_spawn(
      new Uint8Array(pid.buffer),
      args[0],
      actions,
      attr,
      pointerArray(args),
      pointerArray(envs),
    );
  } finally {
    S.posix_spawn_file_actions_destroy(actions);
  }
  F.close(inRead);
  F.close(outWrite);
  F.close(errWrite);
  if (r !== 0) {
    F.close(inWrite);
    F.close(outRead);
    F.close(errRead);
    throw new SpawnError(argv[0], r); // the exec's own (EINVAL too: the flags were taken above)
  }
  for (const fd of [inWrite, outRead, errRead]) S.fcntl(fd, SPAWN.F_SETFL, SPAWN.O_NONBLOCK);
  return new NativeChild(S, pid[0], inWrite, outRead, errRead);
}

/** A NUL-terminated copy of `s`. @throws {TypeError} when `s` holds a NUL byte */
function cString(s: string, what: string): Uint8Array {
  if (s.includes("\0")) throw new TypeError(`${what} holds a NUL byte`);
  return encoder.encode(`${s}\0`);
}

/** A NULL-terminated array of pointers to `items` (kept alive by the caller). */
function pointerArray(items: Uint8Array[]): Uint8Array {
  const out = new BigUint64Array(items.length + 1);
  items.forEach((b, i) => out[i] = BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(b))));
  return new Uint8Array(out.buffer);
}

/** glibc's `sigfillset`: every signal but its two internal ones (32, 33). */
const ALL_SIGNALS = (() => {
  const set = new Uint8Array(SPAWN.SIGSET_BYTES);
  for (let sig = 1; sig <= 64; sig++) {
    if (sig === 32 || sig === 33) continue;
    set[(sig - 1) >> 3] |= 1 << ((sig - 1) & 7);
  }
  return set;
})();
const NO_SIGNALS = new Uint8Array(SPAWN.SIGSET_BYTES);
