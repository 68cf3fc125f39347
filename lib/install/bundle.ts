/**
 * The source variant's plugin bundle: what the image built by `scripts/image.sh` without
 * `DENORT_BIN` holds instead of one compiled binary — the `deno` runtime and Manifold's
 * source tree with its npm cache (`/usr/local/bin/deno` and `/opt/manifold` in the image).
 * On the host these must not depend on anything outside the CNI bin dir, so the installer
 * copies them into one versioned directory, `<cni-bin-dir>/.manifold/<content hash>/`:
 *
 * ```
 * <hash>/deno                 the runtime (0755)
 * <hash>/main.ts deno.json deno.lock lib/ native/
 * <hash>/scripts/manifold     the source launcher (scripts/manifold), with
 * <hash>/scripts/permissions  the compiled binary's permissions and V8 flags
 * <hash>/scripts/runtime-flags
 * <hash>/deno-dir/npm/        the npm cache (`--cached-only`: nothing is downloaded at run time)
 * <hash>/pack/                the plugin call's code in chunks (scripts/pack.ts), when the tree
 *                             has it (an image-built tree does)
 * ```
 *
 * The bundle is written under a temporary name (`.tmp-<hash>-<pid>-<random>`, mode 0700 while
 * written, each file fsynced), then made 0755 and renamed to its hash: a directory named by a
 * hash is complete. The name is the SHA-256 of every file's path, executable bit and bytes, so
 * the same image gives the same directory on every node and restart (the installer then copies
 * nothing), and an upgrade gives a new one beside the old. `deno` writes its compile caches
 * (`deno-dir/gen`, `*_cache_v2`) into the bundle's `deno-dir` when the plugin runs; they are
 * not part of the hash.
 *
 * What is copied is fixed here ({@link BUNDLE_ENTRIES}), from the tree this process runs from
 * (the image's own layout), never from a request: see lib/install/variant.ts.
 *
 * @module
 */

import { createHash } from "node:crypto";
import { syncDir } from "../fs/atomic.ts";
import { assertOwnedDir, ensureOwnedDir } from "./owned_dir.ts";
import { dropPageCache } from "./page_cache.ts";

/**
 * The source tree's entries that make up a bundle, relative to the tree's root (the image's
 * `/opt/manifold`): the same list `scripts/image.sh` copies into the image. Directories are
 * copied whole (regular files and directories only).
 */
export const BUNDLE_ENTRIES = [
  "main.ts",
  "deno.json",
  "deno.lock",
  "lib",
  "native",
  "scripts/manifold",
  "scripts/permissions",
  "scripts/runtime-flags",
  "deno-dir/npm",
] as const;

/**
 * Entries copied when the source tree has them: `pack` (scripts/pack.ts), which
 * `scripts/image.sh` builds into every image and a development tree does not have. Copied whole
 * or not at all; part of the bundle's hash when present.
 */
export const BUNDLE_OPTIONAL_ENTRIES = ["pack"] as const;

/** Name of the runtime inside a bundle. */
export const BUNDLE_DENO = "deno";

/** Directory of the bundles inside the CNI bin dir. */
export const BUNDLES_DIR = ".manifold";

/** A bundle directory's name: 32 lower-case hex digits (128 bits of SHA-256). */
export const BUNDLE_NAME = /^[0-9a-f]{32}$/;

/** Size of one read when hashing or copying, bytes. */
const CHUNK_BYTES = 1 << 20;

/** One file of a bundle: where it comes from and where it goes. */
export interface BundleFile {
  /** Path inside the bundle, `/`-separated, e.g. `lib/cni/skel.ts` or `deno`. */
  rel: string;
  /** Absolute source path (installer view). */
  source: string;
  /** Whether the file is executable (any x bit in the source); copied as 0755, else 0644. */
  executable: boolean;
  /** Size, bytes. */
  size: number;
}

/** What a bundle is made from (installer view). */
export interface BundleSource {
  /** The source tree's root (the image's `/opt/manifold`). */
  root: string;
  /** The `deno` runtime to bundle (the image's `/usr/local/bin/deno`). */
  deno: string;
}

/**
 * Every file of the bundle made from `src`, sorted by `rel`.
 *
 * @param src the source tree and the runtime
 * @returns the files; directories are implied by their paths
 * @throws Error naming the entry when one of {@link BUNDLE_ENTRIES} is missing, or when the
 *   tree holds a symbolic link or a special file (the bundle must be self-contained)
 */
export async function listBundleFiles(src: BundleSource): Promise<BundleFile[]> {
  const files: BundleFile[] = [];
  const root = src.root.replace(/\/+$/, "");
  for (const entry of BUNDLE_ENTRIES) {
    await collect(root, entry, files);
  }
  for (const entry of BUNDLE_OPTIONAL_ENTRIES) {
    const present = await Deno.lstat(`${root}/${entry}`).then(() => true, (e) => {
      if (e instanceof Deno.errors.NotFound) return false;
      throw e;
    });
    if (present) await collect(root, entry, files);
  }
  const deno = await Deno.stat(src.deno).catch((e) => {
    throw new Error(`deno runtime ${src.deno}: ${e instanceof Error ? e.message : e}`);
  });
  if (!deno.isFile) throw new Error(`deno runtime ${src.deno} is not a file`);
  files.push({ rel: BUNDLE_DENO, source: src.deno, executable: true, size: deno.size });
  return files.sort((a, b) => a.rel < b.rel ? -1 : a.rel > b.rel ? 1 : 0);
}

async function collect(root: string, rel: string, out: BundleFile[]): Promise<void> {
  const source = `${root}/${rel}`;
  let info: Deno.FileInfo;
  try {
    info = await Deno.lstat(source);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) {
      throw new Error(`the source tree ${root} has no ${rel} (not an image-built tree?)`);
    }
    throw e;
  }
  if (info.isSymlink) throw new Error(`${source} is a symbolic link; a bundle holds none`);
  if (info.isFile) {
    out.push({ rel, source, executable: ((info.mode ?? 0) & 0o111) !== 0, size: info.size });
    return;
  }
  if (!info.isDirectory) throw new Error(`${source} is not a regular file or directory`);
  const names: string[] = [];
  for await (const e of Deno.readDir(source)) names.push(e.name);
  for (const name of names.sort()) await collect(root, `${rel}/${name}`, out);
}

/**
 * The bundle's name: SHA-256 over every file's `rel`, executable bit, size and bytes, in
 * `rel` order, as 32 hex digits.
 *
 * @param files from {@link listBundleFiles}
 * @returns e.g. `"3f0c…"` (matches {@link BUNDLE_NAME})
 * @throws Deno errors reading a file; Error when a file changed size while read
 */
export async function bundleHash(files: BundleFile[]): Promise<string> {
  const h = createHash("sha256");
  const buf = new Uint8Array(CHUNK_BYTES);
  for (const f of files) {
    h.update(`${f.rel}\0${f.executable ? 1 : 0}\0${f.size}\0`);
    using file = await Deno.open(f.source, { read: true });
    let total = 0;
    for (;;) {
      const n = await file.read(buf);
      if (n === null) break;
      total += n;
      h.update(buf.subarray(0, n));
    }
    if (total !== f.size) throw new Error(`${f.source} changed while read`);
  }
  return h.digest("hex").slice(0, 32);
}

/** What {@link installBundle} did. */
export interface BundleInstallResult {
  /** The bundle's name (its hash). */
  name: string;
  /** The bundle directory, installer view. */
  dir: string;
  /** `"installed"` (copied now) or `"present"` (a complete bundle of that hash was there). */
  outcome: "installed" | "present";
  /** Files in the bundle. */
  files: number;
  /** Bytes in the bundle. */
  bytes: number;
}

/**
 * Puts the bundle of `src` into `bundlesDir` (installer view of `<cni-bin-dir>/.manifold`):
 * nothing to do when a directory of its hash is there; else copied under a temporary name
 * (0700, files fsynced), made 0755 and renamed to the hash (see the module documentation).
 * `bundlesDir` is created 0755 when missing.
 *
 * @param src the source tree and the runtime
 * @param bundlesDir the bundles' directory, installer view
 * @returns the bundle's name, directory and whether it was copied
 * @throws Error when `bundlesDir` or an existing bundle directory is not a real directory
 *   owned by this user and writable by it alone (someone else could change what the runtime
 *   executes), or from {@link listBundleFiles}; Deno errors of the copy (the temporary
 *   directory is removed first)
 */
export async function installBundle(
  src: BundleSource,
  bundlesDir: string,
): Promise<BundleInstallResult> {
  const files = await listBundleFiles(src);
  const name = await bundleHash(files);
  const bytes = files.reduce((n, f) => n + f.size, 0);
  const uid = await ensureOwnedDir(bundlesDir);
  const dir = `${bundlesDir}/${name}`;
  try {
    await assertOwnedDir(dir, uid);
    return { name, dir, outcome: "present", files: files.length, bytes };
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
  const rnd = crypto.getRandomValues(new Uint32Array(1))[0].toString(36);
  const tmp = `${bundlesDir}/.tmp-${name}-${Deno.pid}-${rnd}`;
  let renamed = false;
  try {
    await Deno.mkdir(tmp, { mode: 0o700 });
    const made = new Set<string>();
    for (const f of files) {
      const parts = f.rel.split("/");
      for (let i = 1; i < parts.length; i++) {
        const d = parts.slice(0, i).join("/");
        if (made.has(d)) continue;
        await Deno.mkdir(`${tmp}/${d}`, { mode: 0o755 }).catch((e) => {
          if (!(e instanceof Deno.errors.AlreadyExists)) throw e;
        });
        await Deno.chmod(`${tmp}/${d}`, 0o755);
        made.add(d);
      }
      await copyDurable(f, `${tmp}/${f.rel}`);
    }
    // Its written pages would inflate every plugin call's resident set (page_cache.ts).
    dropPageCache(`${tmp}/${BUNDLE_DENO}`);
    for (const d of [...made].sort((a, b) => b.length - a.length)) await syncDir(`${tmp}/${d}`);
    await Deno.chmod(tmp, 0o755);
    await syncDir(tmp);
    try {
      await Deno.rename(tmp, dir);
      renamed = true;
    } catch (e) {
      // Another installer renamed the same content first: theirs is as good as ours.
      await assertOwnedDir(dir, uid).catch(() => {
        throw e;
      });
      return { name, dir, outcome: "present", files: files.length, bytes };
    }
    await syncDir(bundlesDir);
    return { name, dir, outcome: "installed", files: files.length, bytes };
  } finally {
    if (!renamed) await Deno.remove(tmp, { recursive: true }).catch(() => {});
  }
}

async function copyDurable(f: BundleFile, dest: string): Promise<void> {
  const mode = f.executable ? 0o755 : 0o644;
  using src = await Deno.open(f.source, { read: true });
  using out = await Deno.open(dest, { write: true, createNew: true, mode });
  const buf = new Uint8Array(CHUNK_BYTES);
  for (;;) {
    const n = await src.read(buf);
    if (n === null) break;
    for (let off = 0; off < n;) off += await out.write(buf.subarray(off, n));
  }
  await out.sync();
  await Deno.chmod(dest, mode);
}
