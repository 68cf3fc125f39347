/**
 * The real-API harness itself: a kube-apiserver that fails to start leaves nothing behind
 * (etcd stopped, temp dir removed), and the skip line names how to enable the tests.
 * Needs etcd on PATH (else ignored); no kube-apiserver binary needed.
 */

import assert from "node:assert/strict";
import { SKIP_NOTICE, startKubeApiServer } from "./kube_apiserver.ts";

function hasEtcd(): boolean {
  return (Deno.env.get("PATH") ?? "").split(":").some((d) => {
    try {
      return Deno.statSync(`${d}/etcd`).isFile;
    } catch {
      return false;
    }
  });
}

/** Processes whose command line mentions `text`. */
function processesMentioning(text: string): { pid: number; cmd: string }[] {
  const out: { pid: number; cmd: string }[] = [];
  for (const e of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    try {
      const cmd = Deno.readTextFileSync(`/proc/${e.name}/cmdline`);
      if (cmd.includes(text)) out.push({ pid: Number(e.name), cmd });
    } catch { /* gone */ }
  }
  return out;
}

function envtestDirs(): string[] {
  const out: string[] = [];
  for (const base of ["/dev/shm", Deno.env.get("TMPDIR") ?? "/tmp"]) {
    try {
      for (const e of Deno.readDirSync(base)) {
        if (e.name.startsWith("manifold-envtest-")) out.push(`${base}/${e.name}`);
      }
    } catch { /* no such dir */ }
  }
  return out;
}

Deno.test({
  name: "a kube-apiserver that exits at start: the error says so, etcd and the temp dir are gone",
  ignore: !hasEtcd(),
  async fn() {
    const before = envtestDirs();
    const err = await startKubeApiServer({ binary: "/bin/false", readyTimeoutMs: 10_000 }).then(
      () => undefined,
      (e: Error) => e,
    );
    assert.ok(err, "start must fail");
    assert.match(err.message, /kube-apiserver exited during start/);
    const left = envtestDirs().filter((d) => !before.includes(d));
    assert.deepEqual(left, [], "temp dir removed");
    // Processes of a removed envtest dir (others' live servers keep their dirs).
    const live = envtestDirs();
    const orphans = processesMentioning("manifold-envtest-").filter((p) =>
      p.pid !== Deno.pid && !live.some((d) => p.cmd.includes(d))
    );
    assert.deepEqual(orphans, [], "etcd stopped");
  },
});

Deno.test("the skip line says where kube-apiserver and etcd come from", () => {
  assert.match(SKIP_NOTICE, /MANIFOLD_KUBE_APISERVER/);
  assert.match(SKIP_NOTICE, /kubernetes-server-linux-amd64\.tar\.gz/);
  assert.match(SKIP_NOTICE, /etcd-server/);
});
