/**
 * `manifold mirror` in process against the API stand-in: usage errors, `--once`, and the
 * long-running mirror following changes until its signal, then removing its state file.
 */

import assert from "node:assert/strict";
import { runMirror } from "../../lib/cli/mirror.ts";
import { nullLogger } from "../../lib/log/mod.ts";
import { MIRROR_STATE_FILE, mirrorPath, parseMirrorState } from "../../lib/multinet/nad/mirror.ts";
import { startKubeApi } from "../support/kube_api.ts";
import { exists, until } from "../support/wait.ts";

Deno.test("mirror: --help, usage errors (exit 2), no API (exit 1)", async () => {
  const out = { o: "", e: "" };
  const io = {
    stdout: (s: string) => void (out.o += s),
    stderr: (s: string) => void (out.e += s),
    env: {},
    logger: nullLogger,
  };
  assert.equal(await runMirror(["--help"], io), 0);
  assert.match(out.o, /Usage: manifold mirror/);
  for (
    const bad of [
      ["--dir", "relative"],
      ["--dir", "/"],
      ["--bogus"],
      ["--api-timeout-ms", "x"],
      ["--log-level", "loud"],
      ["extra"],
    ]
  ) {
    out.e = "";
    assert.equal(await runMirror(bad, io), 2, bad.join(" "));
    assert.match(out.e, /manifold mirror: .*\nTry 'manifold mirror --help'/);
  }
  out.e = "";
  assert.equal(await runMirror(["--dir", "/tmp/never-used", "--once"], io), 1);
  assert.match(out.e, /no API server/);
});

Deno.test("mirror --once writes the mirror and exits 0; a refused list exits 1", async () => {
  const api = await startKubeApi();
  try {
    api.addNad({ namespace: "default", name: "macvlan-conf", config: '{"type":"macvlan"}' });
    await api.writeKubeconfig(`${api.dir}/kubeconfig`, { auth: "tokenFile" });
    const dir = `${api.dir}/nads`;
    const args = ["--once", "--dir", dir, "--kubeconfig", `${api.dir}/kubeconfig`];
    assert.equal(await runMirror(args, { logger: nullLogger }), 0);
    const nad = JSON.parse(await Deno.readTextFile(mirrorPath(dir, "default", "macvlan-conf")));
    assert.equal(nad.spec.config, '{"type":"macvlan"}');
    const state = await parseMirrorState(await Deno.readTextFile(`${dir}/${MIRROR_STATE_FILE}`));
    assert.equal(state.resourceVersion, String(api.resourceVersion));
    assert.equal(api.nadWatchCount, 0);
    api.denyRbac(api.token);
    let err = "";
    assert.equal(await runMirror(args, { logger: nullLogger, stderr: (s) => err += s }), 1);
    assert.match(err, /403 Forbidden/);
  } finally {
    await api.stop();
  }
});

Deno.test("mirror follows changes until stopped, then removes its state file", async () => {
  const api = await startKubeApi();
  const stop = new AbortController();
  try {
    api.addNad({ namespace: "default", name: "a", config: '{"type":"macvlan"}' });
    await api.writeKubeconfig(`${api.dir}/kubeconfig`);
    const dir = `${api.dir}/nads`;
    const done = runMirror(["--dir", dir, "--kubeconfig", `${api.dir}/kubeconfig`], {
      signal: stop.signal,
      logger: nullLogger,
    });
    await until(() => Promise.resolve(api.nadWatchCount === 1), "the watch");
    api.addNad({ namespace: "tenant-a", name: "b", config: '{"type":"bridge"}' });
    await until(() => exists(mirrorPath(dir, "tenant-a", "b")), "the new NAD's file");
    api.deleteNad("default", "a");
    await until(async () => !await exists(mirrorPath(dir, "default", "a")), "the file removed");
    assert.ok(await exists(`${dir}/${MIRROR_STATE_FILE}`));
    stop.abort();
    assert.equal(await done, 0);
    assert.ok(!await exists(`${dir}/${MIRROR_STATE_FILE}`), "state removed on stop");
    assert.ok(await exists(mirrorPath(dir, "tenant-a", "b")), "NAD files kept");
  } finally {
    stop.abort();
    await api.stop();
  }
});
