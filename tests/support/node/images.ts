/**
 * The node tier's images, built offline: each is one static binary (`gcc -static` from a C
 * source in tests/fixtures/node/) in a one-layer image, written as a docker-archive tarball
 * (`manifest.json` + config + layer, the format `ctr images import` reads) and imported into
 * containerd's `k8s.io` namespace. Archives are cached by the hash of their source under
 * `$MANIFOLD_NODE_CACHE` (default `$TMPDIR/manifold-node-images`), so a start costs one
 * import, not a compile.
 *
 * @module
 */

import { run } from "./procs.ts";

/** One test image: a static binary as its entrypoint. */
export interface TestImage {
  /** Image reference, e.g. `manifold.test/pause:1`. */
  ref: string;
  /** C source under tests/fixtures/node/. */
  source: string;
  /** Path of the binary inside the image (also the entrypoint). */
  binary: string;
}

/** The pause image (kubelet's `sandbox_image`): sleeps, reaps children. */
export const PAUSE_IMAGE: TestImage = {
  ref: "manifold.test/pause:1",
  source: "pause.c",
  binary: "/pause",
};

/** The pod container image: `netcheck echo-server PORT`, `netcheck connect HOST PORT`, sleep. */
export const NETCHECK_IMAGE: TestImage = {
  ref: "manifold.test/netcheck:1",
  source: "netcheck.c",
  binary: "/netcheck",
};

const FIXTURES = new URL("../../fixtures/node/", import.meta.url).pathname;

async function sha256Hex(data: Uint8Array): Promise<string> {
  const d = await crypto.subtle.digest("SHA-256", data as Uint8Array<ArrayBuffer>);
  return [...new Uint8Array(d)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

function cacheDir(): string {
  return Deno.env.get("MANIFOLD_NODE_CACHE") ??
    `${Deno.env.get("TMPDIR") ?? "/tmp"}/manifold-node-images`;
}

/**
 * The docker-archive tarball of `image`, built (compile, layer, config, manifest) when the
 * cache holds none for the current source.
 *
 * @returns the archive's path
 * @throws Error when gcc or tar fails (their output in the message)
 */
export async function imageArchive(image: TestImage): Promise<string> {
  const src = await Deno.readFile(`${FIXTURES}${image.source}`);
  const key = (await sha256Hex(src)).slice(0, 16);
  const dir = cacheDir();
  await Deno.mkdir(dir, { recursive: true });
  const archive = `${dir}/${image.source.replace(/\.c$/, "")}-${key}.tar`;
  try {
    await Deno.stat(archive);
    return archive;
  } catch { /* build it */ }
  const work = await Deno.makeTempDir({ dir, prefix: "build-" });
  try {
    await Deno.mkdir(`${work}/rootfs`);
    await run("gcc", [
      "-static",
      "-O2",
      "-o",
      `${work}/rootfs${image.binary}`,
      `${FIXTURES}${image.source}`,
    ]);
    await run("tar", [
      "--owner=0",
      "--group=0",
      "--numeric-owner",
      "--mtime=@0",
      "-C",
      `${work}/rootfs`,
      "-cf",
      `${work}/layer.tar`,
      ".",
    ]);
    const layerHash = await sha256Hex(await Deno.readFile(`${work}/layer.tar`));
    const config = {
      architecture: "amd64",
      os: "linux",
      config: { Entrypoint: [image.binary], WorkingDir: "/" },
      rootfs: { type: "layers", diff_ids: [`sha256:${layerHash}`] },
      history: [{ created_by: `gcc -static ${image.source}` }],
    };
    const configText = JSON.stringify(config);
    const configName = `${await sha256Hex(new TextEncoder().encode(configText))}.json`;
    await Deno.writeTextFile(`${work}/${configName}`, configText);
    await Deno.writeTextFile(
      `${work}/manifest.json`,
      JSON.stringify([{ Config: configName, RepoTags: [image.ref], Layers: ["layer.tar"] }]),
    );
    const tmp = `${archive}.tmp-${crypto.randomUUID()}`;
    await run("tar", ["-C", work, "-cf", tmp, "manifest.json", configName, "layer.tar"]);
    await Deno.rename(tmp, archive);
    return archive;
  } finally {
    await Deno.remove(work, { recursive: true }).catch(() => {});
  }
}

/**
 * Builds (or takes from the cache) every image and imports it into the `k8s.io` namespace
 * of the containerd listening on `socket`.
 *
 * @throws Error when a build or `ctr images import` fails
 */
export async function importImages(socket: string, images: TestImage[]): Promise<void> {
  const archives = await Promise.all(images.map(imageArchive));
  for (const archive of archives) {
    await run("ctr", [
      "--address",
      socket,
      "-n",
      "k8s.io",
      "images",
      "import",
      "--no-unpack=false",
      archive,
    ]);
  }
}
