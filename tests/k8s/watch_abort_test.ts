/**
 * Stopping a watch after a garbage collection: KubeClient.watch must end promptly when its
 * signal aborts. In Deno 2.9.6, once a fetch `Response` is collected while its body stream is
 * still read, aborting the request's signal no longer errors that body (a standalone check:
 * 60 of 60 reads hung). Found with `manifold mirror` against a real kube-apiserver: it took
 * 282 s to stop on SIGTERM. Runs tests/fixtures/k8s/watch_abort_gc.ts with `--expose-gc`.
 */

import assert from "node:assert/strict";

const FIXTURE = new URL("../fixtures/k8s/watch_abort_gc.ts", import.meta.url).pathname;

Deno.test("a quiet watch ends within 2 s of its abort, also after gc()", async () => {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--quiet", "--v8-flags=--expose-gc", FIXTURE, "60"],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const kill = setTimeout(() => child.kill("SIGKILL"), 60_000);
  const out = await child.output();
  clearTimeout(kill);
  const dec = new TextDecoder();
  const stdout = dec.decode(out.stdout);
  assert.equal(out.code, 0, `${stdout}\n${dec.decode(out.stderr)}`);
  assert.deepEqual(JSON.parse(stdout.trim()), { rounds: 60, hangs: 0 });
});
