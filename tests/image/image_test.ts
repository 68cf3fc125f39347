/**
 * scripts/image.sh (issue 29 §1): the OCI image archive built without a container engine.
 * Builds the source variant twice (the second build reuses the cached Debian root file
 * system, the documented contract) and checks that both give the same manifest digest and the
 * same bytes; validates the OCI layout (oci-layout, index.json, every blob's sha256 and size,
 * the config's diff_ids against the uncompressed layers, sorted unique tar entries with one
 * mtime per layer, numeric owners, root-owned Manifold files) and the file layout
 * docs/install.md promises; imports the archive into a throwaway containerd with
 * `ctr images import` and runs `manifold --version` in a container, also on a read-only root
 * (the DaemonSet's `readOnlyRootFilesystem`), where it must warn about nothing; on a writable
 * root it must leave no transpile cache behind. Prints the archive size, the uncompressed size,
 * the build times and the start time of `manifold --version` in the image.
 *
 * Needs root, mmdebstrap, containerd, ctr, runc; otherwise skipped with one line. The first
 * build on a machine runs mmdebstrap (≈ 1–3 min); later ones take seconds.
 */

import assert from "node:assert/strict";
import { containerdToml, type NodeLayout } from "../support/node/configs.ts";
import { Proc, run } from "../support/node/procs.ts";
import { gunzip, readTar, sha256Hex, type TarEntry, tarNameBefore } from "../support/tar.ts";
import { loopbackPort } from "../support/ports.ts";
import { VERSION } from "../../main.ts";

const REPO = new URL("../../", import.meta.url).pathname.replace(/\/$/, "");
/** Fixed, so the test can check every entry of Manifold's layer carries it. */
const EPOCH = 1_700_000_000;
const REF = "manifold.test/manifold:image-test";

function onPath(cmd: string): boolean {
  return (Deno.env.get("PATH") ?? "").split(":").some((d) => {
    try {
      return Deno.statSync(`${d}/${cmd}`).isFile;
    } catch {
      return false;
    }
  });
}

function missing(): string | undefined {
  if (Deno.uid() !== 0) return "root";
  for (const c of ["mmdebstrap", "containerd", "ctr", "runc", "setsid", "git"]) {
    if (!onPath(c)) return c;
  }
  return undefined;
}

const lack = missing();
if (lack) {
  console.log(
    `image tests (tests/image/) skipped: need root, mmdebstrap, containerd, ctr, runc (scripts/setup.sh installs them); missing: ${lack}`,
  );
}

interface Build {
  digest: string;
  archive: Uint8Array;
  ms: number;
}

async function build(out: string): Promise<Build> {
  const t0 = performance.now();
  const env: Record<string, string> = { SOURCE_DATE_EPOCH: String(EPOCH) };
  const res = await run(`${REPO}/scripts/image.sh`, ["-t", REF, "-o", out], { env });
  const ms = performance.now() - t0;
  return { digest: res.stdout.trim(), archive: await Deno.readFile(out), ms };
}

/** The blobs of an OCI layout archive, by digest, and its other files, by name. */
function layoutFiles(archive: Uint8Array): Map<string, TarEntry> {
  return new Map(readTar(archive).map((e) => [e.name.replace(/^\.\//, ""), e]));
}

/** Checks a tar's entries are sorted, unique, with one mtime and no names; owners as given. */
function checkTar(what: string, entries: TarEntry[], mtime: number, root: boolean): void {
  const names = entries.map((e) => e.name.replace(/\/$/, ""));
  assert.equal(new Set(names).size, names.length, `${what}: duplicate entries`);
  for (let i = 1; i < entries.length; i++) {
    assert.ok(
      tarNameBefore(entries[i - 1].name, entries[i].name),
      `${what}: ${entries[i - 1].name} written before ${entries[i].name}`,
    );
  }
  const badTime = entries.filter((e) => e.mtime !== mtime).map((e) => `${e.name} ${e.mtime}`);
  assert.deepEqual(badTime.slice(0, 5), [], `${what}: mtimes other than ${mtime}`);
  const named = entries.filter((e) => e.uname || e.gname).map((e) => e.name);
  assert.deepEqual(named.slice(0, 5), [], `${what}: owner or group names (not numeric)`);
  const times = entries.filter((e) => e.paxKeys.some((k) => k === "atime" || k === "ctime"));
  assert.deepEqual(times.map((e) => e.name).slice(0, 5), [], `${what}: atime/ctime records`);
  if (root) {
    const owned = entries.filter((e) => e.uid !== 0 || e.gid !== 0).map((e) => e.name);
    assert.deepEqual(owned.slice(0, 5), [], `${what}: owners other than 0:0`);
  }
}

/**
 * The file layout docs/install.md promises for the source variant: the paths of the `text`
 * block under its "What is in the image" heading (a trailing `/` is a directory, with all
 * below it).
 */
async function promisedLayout(): Promise<string[]> {
  const doc = await Deno.readTextFile(`${REPO}/docs/install.md`);
  const at = doc.indexOf("### What is in the image");
  assert.ok(at >= 0, 'docs/install.md has no "### What is in the image" section');
  const block = doc.slice(at).match(/```text\n([\s\S]*?)```/);
  assert.ok(block, "no text block in docs/install.md's image section");
  return block[1].split("\n").filter((l) => l.startsWith("/")).map((l) => l.split(/\s+/)[0]);
}

interface Containerd {
  proc: Proc;
  dir: string;
  socket: string;
  ctr(...args: string[]): Promise<{ stdout: string; stderr: string }>;
  stop(): Promise<void>;
}

/** A containerd of its own (own root, state and socket in a temp dir), like the node tier's. */
async function startContainerd(): Promise<Containerd> {
  const dir = await Deno.makeTempDir({ prefix: "manifold-image-" });
  const layout: NodeLayout = {
    dir,
    containerdSocket: `${dir}/containerd/containerd.sock`,
    cniBinDir: `${dir}/cni/bin`,
    cniConfDir: `${dir}/cni/net.d`,
    cacheDir: `${dir}/cni/cache`,
    ipamDir: `${dir}/cni/ipam`,
    kubeletPort: 0,
    kubeletHealthzPort: 0,
  };
  for (const d of [layout.cniBinDir, layout.cniConfDir, `${dir}/logs`]) {
    await Deno.mkdir(d, { recursive: true });
  }
  await Deno.writeTextFile(`${dir}/containerd.toml`, containerdToml(layout, REF));
  const proc = new Proc(
    "containerd",
    "containerd",
    ["--config", `${dir}/containerd.toml`],
    `${dir}/logs/containerd.log`,
  );
  const ctr = (...args: string[]) =>
    run("ctr", ["--address", layout.containerdSocket, "-n", "k8s.io", ...args]);
  const c: Containerd = {
    proc,
    dir,
    socket: layout.containerdSocket,
    ctr,
    async stop() {
      await proc.stop(5000);
      // Whatever containerd left mounted under its root (snapshots of a failed run).
      const mounts = (await Deno.readTextFile("/proc/self/mountinfo")).split("\n")
        .map((l) => l.split(" ")[4]).filter((m) => m?.startsWith(dir)).reverse();
      for (const m of mounts) await run("umount", ["-l", m]).catch(() => {});
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    },
  };
  const end = Date.now() + 30_000;
  for (;;) {
    try {
      await ctr("version");
      return c;
    } catch (e) {
      if (proc.exited || Date.now() > end) {
        await c.stop();
        throw new Error(`containerd did not start: ${e}\n${await proc.tail()}`);
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

let seq = 0;
/** `ctr run --rm` of the image: the command's stdout and stderr. */
function runIn(
  c: Containerd,
  opts: string[],
  ...cmd: string[]
): Promise<{ stdout: string; stderr: string }> {
  return c.ctr("run", "--rm", ...opts, REF, `manifold-image-${++seq}`, ...cmd);
}

Deno.test({
  name: "image.sh: two builds, same digest; a valid OCI layout with the documented files",
  ignore: lack !== undefined,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "manifold-image-build-" });
    let c: Containerd | undefined;
    try {
      const first = await build(`${dir}/a.tar`);
      const second = await build(`${dir}/b.tar`);
      assert.match(first.digest, /^sha256:[0-9a-f]{64}$/);
      assert.equal(second.digest, first.digest, "two builds, two manifest digests");
      assert.ok(
        (await sha256Hex(first.archive)) === (await sha256Hex(second.archive)),
        "two builds, two archives",
      );

      // The OCI layout.
      const files = layoutFiles(first.archive);
      checkTar("archive", readTar(first.archive), EPOCH, true);
      const text = (name: string) => new TextDecoder().decode(files.get(name)?.data);
      assert.deepEqual(JSON.parse(text("oci-layout")), { imageLayoutVersion: "1.0.0" });
      const index = JSON.parse(text("index.json"));
      assert.equal(index.schemaVersion, 2);
      assert.equal(index.manifests.length, 1);
      assert.equal(index.manifests[0].digest, first.digest);
      assert.equal(index.manifests[0].annotations["io.containerd.image.name"], REF);
      const blobs = [...files.keys()].filter((n) => n.startsWith("blobs/sha256/") && n.length > 13);
      const referenced = new Set<string>();
      const blob = async (d: { digest: string; size: number; mediaType: string }) => {
        const e = files.get(`blobs/sha256/${d.digest.replace(/^sha256:/, "")}`);
        assert.ok(e, `blob ${d.digest} (${d.mediaType}) missing`);
        assert.equal(e.data.length, d.size, `${d.digest}: size`);
        assert.equal(`sha256:${await sha256Hex(e.data)}`, d.digest, "blob content ≠ its digest");
        referenced.add(`blobs/sha256/${d.digest.replace(/^sha256:/, "")}`);
        return e.data;
      };
      const manifest = JSON.parse(new TextDecoder().decode(await blob(index.manifests[0])));
      assert.equal(manifest.mediaType, "application/vnd.oci.image.manifest.v1+json");
      const config = JSON.parse(new TextDecoder().decode(await blob(manifest.config)));
      assert.deepEqual(config.config.Entrypoint, ["/usr/local/bin/manifold"]);
      assert.equal(config.config.Labels["io.manifold.variant"], "source");
      assert.equal(manifest.layers.length, 2);
      assert.equal(config.rootfs.diff_ids.length, 2);
      const layers: TarEntry[][] = [];
      let unpacked = 0;
      for (const [i, d] of manifest.layers.entries()) {
        assert.equal(d.mediaType, "application/vnd.oci.image.layer.v1.tar+gzip");
        const tar = await gunzip(await blob(d));
        unpacked += tar.length;
        assert.equal(`sha256:${await sha256Hex(tar)}`, config.rootfs.diff_ids[i], `diff_id ${i}`);
        layers.push(readTar(tar));
      }
      assert.deepEqual(blobs.sort(), [...referenced].sort(), "unreferenced blobs");
      // Debian's layer: its own epoch (history[0].created), Debian's numeric owners.
      checkTar("debian layer", layers[0], Date.parse(config.history[0].created) / 1000, false);
      checkTar("manifold layer", layers[1], EPOCH, true);
      assert.equal(Date.parse(config.history[1].created) / 1000, EPOCH);

      // The file layout docs/install.md promises (the source variant).
      const promised = await promisedLayout();
      const entries = new Map(layers[1].map((e) => [e.name.replace(/^\.\/?/, "/"), e]));
      for (const p of promised) {
        const e = entries.get(p);
        assert.ok(e, `docs/install.md promises ${p}; the image has no such entry`);
        assert.equal(e.type, p.endsWith("/") ? "5" : "0", `${p}: type`);
      }
      const covered = (n: string) =>
        promised.some((p) => n === p || (p.endsWith("/") && n.startsWith(p)) || p.startsWith(n));
      const extra = [...entries.keys()].filter((n) => n !== "/" && !covered(n));
      assert.deepEqual(extra, [], "files in the image that docs/install.md does not list");
      // deno's build-script markers are named by the builder's checkout path: not reproducible.
      const markers = [...entries.keys()].filter((n) => n.includes("/.scripts-warned-"));
      assert.deepEqual(markers, [], "builder-specific deno markers in the image");
      for (const exe of ["/usr/local/bin/manifold", "/usr/local/bin/deno"]) {
        assert.equal(entries.get(exe)?.mode, 0o755, `${exe}: mode`);
      }
      assert.equal(
        new TextDecoder().decode(entries.get("/usr/local/bin/manifold")?.data),
        await Deno.readTextFile(`${REPO}/scripts/image-launcher`),
        "the launcher is scripts/image-launcher",
      );

      // Containerfile copies `scripts/image.sh -s`'s directory: the same files as layer 2.
      const containerfile = await Deno.readTextFile(`${REPO}/Containerfile`);
      assert.match(containerfile, /^COPY dist\/image-root\/ \/$/m);
      await run(`${REPO}/scripts/image.sh`, ["-s", `${dir}/image-root`]);
      const staged: string[] = [];
      const walk = async (d: string, rel: string) => {
        for await (const e of Deno.readDir(d)) {
          const p = `${rel}/${e.name}`;
          staged.push(e.isDirectory ? `${p}/` : p);
          if (e.isDirectory) await walk(`${d}/${e.name}`, p);
          else {
            const want = entries.get(p)?.data;
            assert.ok(want, `-s staged ${p}, the image has none`);
            assert.ok(
              (await sha256Hex(await Deno.readFile(`${d}/${e.name}`))) === await sha256Hex(want),
              `${p}: -s and the image differ`,
            );
          }
        }
      };
      await walk(`${dir}/image-root`, "");
      const layerNames = [...entries.keys()].filter((n) => n !== "/");
      assert.deepEqual(staged.sort(), layerNames.sort(), "-s and layer 2 hold different files");

      // Imported into containerd and run.
      c = await startContainerd();
      await c.ctr("images", "import", `${dir}/a.tar`);
      const listed = (await c.ctr("images", "ls", "-q")).stdout.split("\n");
      assert.ok(listed.includes(REF), `ctr images ls: ${listed.join(" ")}`);
      const v = await runIn(c, [], "/usr/local/bin/manifold", "--version");
      assert.match(v.stdout, new RegExp(`^manifold ${VERSION.replaceAll(".", "\\.")} `));

      // Read-only root (the DaemonSet's readOnlyRootFilesystem): same answers, no warnings, also
      // for a command that loads modules and the npm cache (zod, yaml).
      const ro = await runIn(c, ["--read-only"], "/usr/local/bin/manifold", "--version");
      assert.equal(ro.stdout, v.stdout);
      assert.equal(ro.stderr, "", "warnings on a read-only root");
      const help = await runIn(c, ["--read-only"], "/usr/local/bin/manifold", "install", "--help");
      assert.match(help.stdout, /--host-root/);
      assert.equal(help.stderr, "", "warnings on a read-only root (install --help)");

      // Writable root: the launcher keeps deno from writing a transpile cache into the image.
      const w = await runIn(
        c,
        [],
        "sh",
        "-c",
        "/usr/local/bin/manifold install --help >/dev/null && " +
          "find /opt/manifold/deno-dir -maxdepth 1 -mindepth 1 | sort",
      );
      assert.ok(!w.stdout.includes("/gen"), `transpile cache written into the image: ${w.stdout}`);

      // Start times in the image on a read-only root (median of 5, from the container's shell):
      // `--version` (main.ts alone) and `install --help` (loads modules and npm packages,
      // transpiled on every start there).
      const median = async (args: string) => {
        const t = await runIn(
          c!,
          ["--read-only"],
          "sh",
          "-c",
          `for i in 1 2 3 4 5; do s=$(date +%s%N); /usr/local/bin/manifold ${args} >/dev/null; ` +
            "e=$(date +%s%N); echo $(( (e - s) / 1000 )); done",
        );
        const us = t.stdout.trim().split("\n").map(Number).sort((a, b) => a - b);
        return `${(us[2] / 1000).toFixed(0)} ms (${us.map((u) => (u / 1000).toFixed(0))})`;
      };
      console.log(
        `image: archive ${(first.archive.length / 2 ** 20).toFixed(1)} MiB, layers unpacked ` +
          `${(unpacked / 2 ** 20).toFixed(1)} MiB; builds ${(first.ms / 1000).toFixed(1)} s, ` +
          `${(second.ms / 1000).toFixed(1)} s; in the image, read-only root, median of 5: ` +
          `manifold --version ${await median("--version")}, ` +
          `manifold install --help ${await median("install --help")}`,
      );
    } finally {
      await c?.stop();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
});

const registryLack = lack ?? ["skopeo", "docker-registry"].find((c) => !onPath(c));
if (!lack && registryLack) {
  console.log(
    `image push to a registry skipped: needs skopeo and docker-registry (scripts/setup.sh installs them); missing: ${registryLack}`,
  );
}

Deno.test({
  name: "image.sh: the archive pushed with skopeo to a local registry keeps its digest and runs",
  ignore: registryLack !== undefined,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "manifold-image-registry-" });
    let c: Containerd | undefined;
    let registry: Proc | undefined;
    try {
      const { digest } = await build(`${dir}/image.tar`);
      const addr = `127.0.0.1:${loopbackPort()}`;
      await Deno.writeTextFile(
        `${dir}/registry.yml`,
        `version: 0.1\nlog: {level: error}\nstorage: {filesystem: {rootdirectory: ${dir}/data}}\n` +
          `http: {addr: "${addr}"}\n`,
      );
      registry = new Proc(
        "docker-registry",
        "docker-registry",
        ["serve", `${dir}/registry.yml`],
        `${dir}/registry.log`,
      );
      const ref = `${addr}/manifold/manifold:image-test`;
      // docs/install.md's command, the registry on plain HTTP here.
      const end = Date.now() + 30_000;
      for (;;) {
        try {
          await run("skopeo", [
            "copy",
            "--dest-tls-verify=false",
            `oci-archive:${dir}/image.tar`,
            `docker://${ref}`,
          ]);
          break;
        } catch (e) {
          if (registry.exited || Date.now() > end) throw e;
          await new Promise((r) => setTimeout(r, 300));
        }
      }
      const inspected = JSON.parse(
        (await run("skopeo", ["inspect", "--tls-verify=false", `docker://${ref}`])).stdout,
      );
      assert.equal(inspected.Digest, digest, "the registry holds another manifest");
      c = await startContainerd();
      await c.ctr("images", "pull", "--plain-http", ref);
      // No command: the image's Entrypoint and Cmd, `manifold --version`.
      const v = await c.ctr("run", "--rm", "--read-only", ref, "manifold-image-pulled");
      assert.match(v.stdout, new RegExp(`^manifold ${VERSION.replaceAll(".", "\\.")} `));
    } finally {
      await c?.stop();
      await registry?.stop(5000);
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
  },
});
