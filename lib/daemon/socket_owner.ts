/**
 * Who owns the daemon's socket path: one daemon at a time, and only its own socket removed.
 *
 * - An exclusive `flock(2)` on `<socket>.lock`, held for the daemon's life (the kernel drops
 *   it when the process dies, however it dies); the holder writes its PID there, so a second
 *   daemon exits naming it instead of unlinking a live socket.
 * - With the lock held, whatever socket is at the path is a dead daemon's: it is replaced.
 * - The socket is removed on stop only when the path still holds the inode this daemon bound.
 * - The socket's directory is created 0700 when absent; an existing one that a group or other
 *   users may write (where anyone could replace the socket or the lock) is refused, never
 *   chmodded.
 *
 * @module
 */

/** What {@link claimSocketPath} holds: release it when the listener is closed. */
export interface SocketClaim {
  /** The lock file (`<socket>.lock`). */
  readonly lockPath: string;
  /** This process's uid (the lock file's owner; read without `--allow-sys`). */
  readonly uid: number;
  /** Records the bound socket's inode (call right after `listen`). */
  bound(): void;
  /** Removes the socket when it is still ours, then releases the lock. Idempotent. */
  release(): void;
}

/**
 * The lock file of a socket.
 * @param socketPath the socket path
 * @returns `<socketPath>.lock`
 * @example
 * ```ts
 * lockPathOf("/run/manifold/manifold.sock"); // "/run/manifold/manifold.sock.lock"
 * ```
 */
export function lockPathOf(socketPath: string): string {
  return `${socketPath}.lock`;
}

/**
 * Makes sure the socket's directory is safe, takes the lock and clears a dead daemon's socket.
 * The lock file then reads `<pid>\n` and, when given, `requestTimeoutMs=<ms>\n` (read by the
 * forwarder for its reply deadline, forward.ts).
 * @param socketPath an absolute socket path
 * @param opts `requestTimeoutMs`: the daemon's bound on one request, ms
 * @returns the claim
 * @throws Error when the path is relative, the directory is unsafe or cannot be created, the
 *   lock is held by another daemon (naming its PID), or something other than a socket is at
 *   the path
 */
export async function claimSocketPath(
  socketPath: string,
  opts: { requestTimeoutMs?: number } = {},
): Promise<SocketClaim> {
  if (!socketPath.startsWith("/")) {
    throw new Error(
      `the daemon socket must be an absolute path, got ${JSON.stringify(socketPath)}`,
    );
  }
  const dir = socketPath.slice(0, socketPath.lastIndexOf("/")) || "/";
  const st = await Deno.lstat(dir).catch((e) => {
    if (e instanceof Deno.errors.NotFound) return undefined;
    throw e;
  });
  if (!st) {
    await Deno.mkdir(dir, { recursive: true, mode: 0o700 });
  } else {
    if (!st.isDirectory) throw new Error(`${dir}: not a directory (the socket's parent)`);
    const mode = (st.mode ?? 0) & 0o7777;
    if (mode & 0o022) {
      throw new Error(
        `${dir} (the socket's directory) is writable by its group or others (mode ` +
          `${mode.toString(8).padStart(4, "0")}): anyone could replace the socket; use a ` +
          "directory only root can write (it is created 0700 when absent)",
      );
    }
  }
  const lockPath = lockPathOf(socketPath);
  const lock = await Deno.open(lockPath, { read: true, write: true, create: true, mode: 0o600 });
  let locked = false;
  let uid = 0;
  try {
    // Our uid, without --allow-sys: the owner of the lock file we just opened (or created).
    uid = (await lock.stat()).uid ?? 0;
    if (st && st.uid !== uid && st.uid !== 0) {
      throw new Error(`${dir} (the socket's directory) is owned by uid ${st.uid}, not by root`);
    }
    locked = lock.tryLockSync(true);
    if (!locked) {
      const holder = (await Deno.readTextFile(lockPath).catch(() => "")).trim().split("\n")[0];
      throw new Error(
        `another manifold daemon (pid ${holder || "unknown"}) serves ${socketPath} ` +
          `(it holds ${lockPath})`,
      );
    }
    await lock.truncate(0);
    const timeout = opts.requestTimeoutMs ? `requestTimeoutMs=${opts.requestTimeoutMs}\n` : "";
    const pid = new TextEncoder().encode(`${Deno.pid}\n${timeout}`);
    for (let off = 0; off < pid.length;) off += await lock.write(pid.subarray(off));
    const existing = await Deno.lstat(socketPath).catch(() => undefined);
    if (existing) {
      if (!existing.isSocket) {
        throw new Error(`${socketPath} exists and is not a socket; not replacing it`);
      }
      await Deno.remove(socketPath); // a dead daemon's: we hold the lock
    }
  } catch (e) {
    lock.close(); // drops the lock, if taken
    throw e;
  }
  let ino: number | null = null;
  let released = false;
  return {
    lockPath,
    uid,
    bound() {
      ino = Deno.lstatSync(socketPath).ino;
    },
    release() {
      if (released) return;
      released = true;
      try {
        const now = Deno.lstatSync(socketPath);
        if (ino !== null && now.ino === ino) Deno.removeSync(socketPath);
      } catch { /* gone already */ }
      lock.close(); // the lock file stays: removing it would let two daemons lock two files
    },
  };
}
