/**
 * The real-API harness retries once when kube-apiserver exits before `/readyz` (it sometimes
 * dies in a post-start hook under load). A fake kube-apiserver exits at once the first time
 * and, the second time, serves `/readyz` over TLS with the harness's certificate. Needs etcd
 * on PATH (else ignored); no kube-apiserver binary needed.
 */

import assert from "node:assert/strict";
import { startKubeApiServer } from "./kube_apiserver.ts";

const hasEtcd = (Deno.env.get("PATH") ?? "").split(":").some((d) => {
  try {
    return Deno.statSync(`${d}/etcd`).isFile;
  } catch {
    return false;
  }
});

/** Serves `GET /readyz` → `ok` on `--secure-port` with `--tls-cert-file`/`--tls-private-key-file`. */
const FAKE_SERVER = `
const flag = (n) => Deno.args.find((a) => a.startsWith("--" + n + "="))?.split("=")[1];
Deno.serve({
  hostname: "127.0.0.1",
  port: Number(flag("secure-port")),
  cert: Deno.readTextFileSync(flag("tls-cert-file")),
  key: Deno.readTextFileSync(flag("tls-private-key-file")),
  onListen() {},
}, (req) => new URL(req.url).pathname === "/readyz" ? new Response("ok") : new Response("", { status: 404 }));
`;

Deno.test({
  name: "kube-apiserver exiting before /readyz is started once more, with fresh dir and ports",
  ignore: !hasEtcd,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "mft-fake-apiserver-" });
    const lines: string[] = [];
    try {
      await Deno.writeTextFile(`${dir}/server.js`, FAKE_SERVER);
      await Deno.writeTextFile(
        `${dir}/kube-apiserver`,
        [
          "#!/bin/sh",
          `echo "$@" >>'${dir}/calls'`,
          `if [ ! -e '${dir}/first' ]; then`,
          `  : >'${dir}/first'`,
          '  echo "F1125 poststarthook/apiserver/bootstrap-controller failed: APF" >&2',
          "  exit 1",
          "fi",
          `exec '${Deno.execPath()}' run -A --no-config '${dir}/server.js' "$@"`,
        ].join("\n") + "\n",
      );
      await Deno.chmod(`${dir}/kube-apiserver`, 0o755);
      const api = await startKubeApiServer({
        binary: `${dir}/kube-apiserver`,
        readyTimeoutMs: 20_000,
        log: (l) => lines.push(l),
      });
      try {
        assert.equal((await api.admin.raw("GET", "/readyz")).status, 200);
      } finally {
        await api.stop();
      }
      assert.equal(lines.length, 1, lines.join("\n"));
      assert.match(lines[0], /kube-apiserver exited during start/);
      assert.match(lines[0], /poststarthook\/apiserver\/bootstrap-controller failed: APF/);
      assert.match(lines[0], /retrying once with a fresh etcd data dir and ports/);
      // Two starts with different ports and different temp dirs.
      const calls = (await Deno.readTextFile(`${dir}/calls`)).trim().split("\n");
      assert.equal(calls.length, 2);
      const port = (c: string) => c.match(/--secure-port=(\d+)/)?.[1];
      const certDir = (c: string) => c.match(/--cert-dir=(\S+)/)?.[1];
      assert.notEqual(port(calls[0]), port(calls[1]));
      assert.notEqual(certDir(calls[0]), certDir(calls[1]));
      assert.ok(certDir(calls[0]), calls[0]);
      await assert.rejects(Deno.stat(certDir(calls[0])!), Deno.errors.NotFound, "first dir gone");
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name: "kube-apiserver exiting twice: the start fails after one retry",
  ignore: !hasEtcd,
  async fn() {
    const lines: string[] = [];
    const err = await startKubeApiServer({
      binary: "/bin/false",
      readyTimeoutMs: 10_000,
      log: (l) => lines.push(l),
    }).then(() => undefined, (e: Error) => e);
    assert.ok(err, "start must fail");
    assert.match(err.message, /kube-apiserver exited during start/);
    assert.equal(lines.length, 1);
  },
});
