/**
 * Directories the container runtime executes from must be writable by their owner alone:
 * a bundle directory (lib/install/bundle.ts) another user could write would let that user
 * change what runs as root for every pod. These checks refuse such a directory instead of
 * using it (trust: what cannot be trusted is not used, never "fixed" by following it).
 *
 * @module
 */

/** What an operator does about a directory the installer refuses. */
const FIX_HINT =
  "; the installer will not use it: remove it (the installer recreates it) or make " +
  "it a directory owned by the installer's user (root) and writable by it alone";

/**
 * Checks that `dir` is a real directory (not a symbolic link), owned by `uid` (this
 * process's user, {@link ownUid}) and not writable by group or others.
 *
 * @param dir the directory
 * @param uid the owner it must have
 * @throws Deno.errors.NotFound when it does not exist
 * @throws Error naming the problem otherwise
 */
export async function assertOwnedDir(dir: string, uid: number): Promise<void> {
  const info = await Deno.lstat(dir);
  if (info.isSymlink || !info.isDirectory) {
    throw new Error(
      `${dir} is not a directory (a symbolic link or a file is not followed)${FIX_HINT}`,
    );
  }
  if (info.uid !== uid) {
    throw new Error(
      `${dir} is owned by uid ${info.uid}, not by this installer (uid ${uid})${FIX_HINT}`,
    );
  }
  if (((info.mode ?? 0) & 0o022) !== 0) {
    throw new Error(
      `${dir} is writable by group or others (mode ${
        ((info.mode ?? 0) & 0o777).toString(8)
      })${FIX_HINT}`,
    );
  }
}

/**
 * This process's effective uid, as the owner of a probe file it creates (and removes) in
 * `dir`: the compiled binary has no `--allow-sys` for `Deno.uid()`, and Deno reserves
 * `/proc/self` for `--allow-all`.
 *
 * @param dir a directory this process can write
 * @returns the uid
 * @throws Deno errors when the probe cannot be created
 */
export async function ownUid(dir: string): Promise<number> {
  const rnd = crypto.getRandomValues(new Uint32Array(1))[0].toString(36);
  const probe = `${dir}/.uid-probe-${Deno.pid}-${rnd}`;
  await Deno.writeFile(probe, new Uint8Array(), { createNew: true, mode: 0o600 });
  try {
    return (await Deno.lstat(probe)).uid!;
  } finally {
    await Deno.remove(probe).catch(() => {});
  }
}

/**
 * Creates `dir` (mode 0755, parents as needed) when missing, then {@link assertOwnedDir}
 * with this process's uid.
 *
 * @param dir the directory
 * @returns this process's uid ({@link ownUid}, probed in `dir`)
 * @throws Error from {@link assertOwnedDir} for an existing directory that fails the checks
 */
export async function ensureOwnedDir(dir: string): Promise<number> {
  try {
    await Deno.mkdir(dir, { recursive: true, mode: 0o755 });
  } catch (e) {
    if (!(e instanceof Deno.errors.AlreadyExists)) throw e;
  }
  // Checked before the probe is written into it.
  const info = await Deno.lstat(dir);
  if (info.isSymlink || !info.isDirectory) {
    throw new Error(
      `${dir} is not a directory (a symbolic link or a file is not followed)${FIX_HINT}`,
    );
  }
  const uid = await ownUid(dir);
  await assertOwnedDir(dir, uid);
  return uid;
}
