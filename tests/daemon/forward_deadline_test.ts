/**
 * The forwarder's reply deadline (issue 20 §3): a daemon that takes a request and never
 * answers makes the real binary report CNI code 11 after the daemon's request timeout (from
 * its lock file) + 5 s — not hang until the runtime's own deadline — and never run the request
 * a second time in-process.
 */

import assert from "node:assert/strict";
import { MANIFOLD } from "../support/plugin.ts";

Deno.test("forwarder: no answer within the daemon's request timeout + 5 s → code 11", {
  sanitizeResources: false,
  sanitizeOps: false,
}, async () => {
  const dir = await Deno.makeTempDir({ prefix: "mft-fwd-" });
  const socket = `${dir}/manifold.sock`;
  // A daemon stand-in that reads requests and never answers; its lock says 500 ms.
  await Deno.writeTextFile(`${socket}.lock`, `${Deno.pid}\nrequestTimeoutMs=500\n`);
  const listener = Deno.listen({ transport: "unix", path: socket });
  const held: Deno.Conn[] = [];
  const accepting = (async () => {
    for await (const c of listener) held.push(c);
  })();
  try {
    const config = {
      cniVersion: "1.0.0",
      name: "net",
      type: "manifold",
      clusterNetwork: `${dir}/none.conf`,
      cniDir: `${dir}/cache`,
      daemonSocket: socket,
    };
    const child = new Deno.Command(MANIFOLD, {
      clearEnv: true,
      env: {
        PATH: "/usr/bin:/bin",
        CNI_COMMAND: "ADD",
        CNI_CONTAINERID: "c1",
        CNI_NETNS: "/var/run/netns/none",
        CNI_IFNAME: "eth0",
        CNI_PATH: "/usr/lib/cni",
      },
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const w = child.stdin.getWriter();
    await w.write(new TextEncoder().encode(JSON.stringify(config)));
    await w.close();
    const kill = setTimeout(() => child.kill("SIGKILL"), 20_000);
    const started = performance.now();
    const out = await child.output();
    clearTimeout(kill);
    const ms = performance.now() - started;
    const stdout = new TextDecoder().decode(out.stdout);
    assert.equal(out.signal, null, `the forwarder hung (killed after ${Math.round(ms)} ms)`);
    assert.equal(out.code, 1, stdout);
    assert.equal(JSON.parse(stdout).code, 11, stdout);
    assert.match(JSON.parse(stdout).details, /no answer within 5500 ms/);
    assert.ok(ms >= 5_000 && ms < 15_000, `gave up after ${Math.round(ms)} ms`);
    assert.doesNotMatch(new TextDecoder().decode(out.stderr), /in-process/, "never run twice");
  } finally {
    for (const c of held) c.close();
    listener.close();
    await accepting.catch(() => {});
    await Deno.remove(dir, { recursive: true });
  }
});
