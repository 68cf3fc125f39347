/**
 * A projected volume as kubelet writes it, for tests of whatever reads a mounted
 * service-account token. kubelet's AtomicWriter (pkg/volume/util/atomic_writer.go) never
 * rewrites a file in place: each update is a new hidden timestamped directory
 * (`..2026_11_29_02_10_00.123456789`) holding the whole payload, a `..data_tmp` symlink to it
 * renamed over `..data` (the one atomic step), user-visible symlinks `token` → `..data/token`
 * created once (and removed when a path leaves the payload), and the previous timestamped
 * directory removed. {@link ProjectedVolume.write} does exactly these steps, in this order.
 *
 * @module
 */

/** The AtomicWriter layout of one directory; every {@link write} is one kubelet update. */
export class ProjectedVolume {
  #visible = new Set<string>();

  /** @param dir the volume's directory (created on the first write) */
  constructor(readonly dir: string) {}

  /**
   * Publishes `files` (name → content) as the volume's whole payload, like one AtomicWriter
   * `Write`: paths not in `files` disappear.
   *
   * @param files the payload; flat names only (`token`, `ca.crt`, `namespace`)
   * @param mode permission bits of the payload files; default 0644 (the projected volume's
   *   `defaultMode` 420)
   * @returns the new timestamped directory's name
   */
  async write(files: Record<string, string>, mode = 0o644): Promise<string> {
    await Deno.mkdir(this.dir, { recursive: true });
    const previous = await Deno.readLink(`${this.dir}/..data`).catch(() => undefined);
    const ts = await Deno.makeTempDir({ dir: this.dir, prefix: `..${stamp()}.` });
    const tsName = ts.slice(this.dir.length + 1);
    await Deno.chmod(ts, 0o755);
    for (const [name, text] of Object.entries(files)) {
      await Deno.writeTextFile(`${ts}/${name}`, text, { mode });
      await Deno.chmod(`${ts}/${name}`, mode);
    }
    await Deno.remove(`${this.dir}/..data_tmp`).catch(() => {});
    await Deno.symlink(tsName, `${this.dir}/..data_tmp`);
    await Deno.rename(`${this.dir}/..data_tmp`, `${this.dir}/..data`);
    for (const name of Object.keys(files)) {
      if (!this.#visible.has(name)) await Deno.symlink(`..data/${name}`, `${this.dir}/${name}`);
    }
    for (const name of this.#visible) {
      if (!(name in files)) await Deno.remove(`${this.dir}/${name}`);
    }
    this.#visible = new Set(Object.keys(files));
    if (previous) await Deno.remove(`${this.dir}/${previous}`, { recursive: true });
    return tsName;
  }
}

/** `2006_01_02_15_04_05` of now (UTC), the AtomicWriter's timestamp directory prefix. */
function stamp(): string {
  const d = new Date();
  const p = (n: number) => String(n).padStart(2, "0");
  return `${d.getUTCFullYear()}_${p(d.getUTCMonth() + 1)}_${p(d.getUTCDate())}_` +
    `${p(d.getUTCHours())}_${p(d.getUTCMinutes())}_${p(d.getUTCSeconds())}`;
}
