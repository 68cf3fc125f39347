/**
 * Paths as a process chrooted into a root directory sees them: {@link pathInRoot} resolves a
 * path and its symbolic links inside the root (like `openat2(RESOLVE_IN_ROOT)`), so that
 * Manifold, outside the chroot, looks at the same file a delegate run with `chrootDir` opens
 * (lib/cni/exec.ts runs it through chroot(8)).
 *
 * @module
 */

/** Symbolic links followed before giving up (Linux `MAXSYMLINKS`). */
const MAX_LINKS = 40;

/** `readlink` of a procfs magic link naming a kernel object: `net:[4026531840]`, `anon_inode:…`. */
const MAGIC_LINK = /^(?:[a-z_]+:\[\d+\]|anon_inode:.*)$/;

/**
 * Where `path`, as seen by a process chrooted into `root`, is in this process's view:
 * `root` + the path with every symbolic link followed inside `root` (an absolute target
 * restarts at `root`, `..` never climbs above it). Components that do not exist are kept as
 * written, as are the components after a procfs magic link (`/proc/<pid>/ns/net`, whose
 * `readlink` is `net:[inode]`: the kernel resolves it to the namespace). `root` `"/"` or `""`
 * returns `path` unchanged.
 *
 * @param root the chroot directory in this process's view, e.g. `"/hostroot"`.
 * @param path an absolute path inside the root, e.g. `"/var/run/netns/cni-1"`.
 * @returns e.g. `"/hostroot/run/netns/cni-1"` when the root's `/var/run` links to `/run`.
 * @throws {Error} when more than 40 symbolic links are followed (a loop).
 * @example
 * ```ts
 * await pathInRoot("/", "/opt/cni/bin/bridge"); // "/opt/cni/bin/bridge"
 * ```
 */
export async function pathInRoot(root: string, path: string): Promise<string> {
  const base = root.replace(/\/+$/, "");
  if (base === "") return path;
  const pending = split(path);
  // Fast path (one system call): no symbolic link anywhere on the way.
  const direct = `${base}/${pending.join("/")}`;
  if (!pending.includes("..") && !pending.includes(".")) {
    try {
      if ((await Deno.realPath(direct)) === direct) return direct;
    } catch {
      // Missing or a link somewhere: resolve step by step.
    }
  }
  const resolved: string[] = [];
  let links = 0;
  while (pending.length > 0) {
    const c = pending.shift()!;
    if (c === ".") continue;
    if (c === "..") {
      resolved.pop();
      continue;
    }
    const here = `${base}/${[...resolved, c].join("/")}`;
    let target: string | undefined;
    try {
      if ((await Deno.lstat(here)).isSymlink) target = await Deno.readLink(here);
    } catch {
      // Missing or unreadable: keep the rest as written.
      resolved.push(c, ...pending.filter((p) => p !== "."));
      break;
    }
    if (target === undefined) {
      resolved.push(c);
      continue;
    }
    if (MAGIC_LINK.test(target)) {
      // A procfs magic link (`/proc/<pid>/ns/net` → `net:[4026531840]`): its text is no path;
      // the kernel opens the object itself, which cannot lead out of the root.
      resolved.push(c, ...pending.filter((p) => p !== "."));
      break;
    }
    if (++links > MAX_LINKS) throw new Error(`too many levels of symbolic links in ${path}`);
    if (target.startsWith("/")) resolved.length = 0;
    pending.unshift(...split(target));
  }
  return `${base}/${resolved.join("/")}`;
}

function split(path: string): string[] {
  return path.split("/").filter((p) => p !== "");
}
