/**
 * TLS trust pinned to the kubeconfig's CA (issue 28 §1), through the real plugin process and a
 * real kube-apiserver: a man in the middle on loopback terminates TLS with a certificate of
 * another CA — one the process trusts through `DENO_CERT`, as it would trust any root of its
 * store — and relays to the real server. Before the pin, ADD ran through it and attached; now
 * ADD refuses it (no delegate runs, nothing attached) and says why, while the same ADD straight
 * to the server succeeds. Needs root and `MANIFOLD_KUBE_APISERVER` (else skipped, one line).
 */

import assert from "node:assert/strict";
import { realApiSuite } from "../support/kube_apiserver.ts";
import { linkNames } from "../support/netns.ts";
import { done, realWorld } from "./cluster.ts";

const suite = realApiSuite({ root: true });

async function openssl(dir: string, args: string[]): Promise<void> {
  const out = await new Deno.Command("openssl", { args, cwd: dir, stdout: "null", stderr: "piped" })
    .output();
  if (!out.success) throw new Error(`openssl ${args[0]}: ${new TextDecoder().decode(out.stderr)}`);
}

/** A TLS-terminating relay to `upstream` presenting the given certificate; counts connections. */
function mitm(cert: string, key: string, upstream: URL, upstreamCa: string) {
  const listener = Deno.listenTls({ hostname: "127.0.0.1", port: 0, cert, key });
  let connections = 0;
  const pipes = new Set<Promise<unknown>>();
  const serve = (async () => {
    for await (const down of listener) {
      connections++;
      const p = (async () => {
        try {
          const up = await Deno.connectTls({
            hostname: upstream.hostname,
            port: Number(upstream.port),
            caCerts: [upstreamCa],
          });
          await Promise.allSettled([
            down.readable.pipeTo(up.writable),
            up.readable.pipeTo(down.writable),
          ]);
        } catch { /* the client hung up */ }
      })();
      pipes.add(p);
    }
  })();
  return {
    url: `https://127.0.0.1:${(listener.addr as Deno.NetAddr).port}`,
    connections: () => connections,
    async close() {
      listener.close();
      await serve.catch(() => {});
      await Promise.race([Promise.allSettled([...pipes]), new Promise((r) => setTimeout(r, 500))]);
    },
  };
}

suite.test("a man in the middle with a certificate of a root the process trusts is refused", async (api) => {
  const dir = await Deno.makeTempDir({ prefix: "mft-mitm-" });
  const w = await realWorld(api);
  let relay: ReturnType<typeof mitm> | undefined;
  try {
    // CA-B: another CA with the name kube-apiserver CAs usually have.
    await openssl(dir, [
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-keyout",
      "cab.key",
      "-out",
      "cab.crt",
      "-subj",
      "/CN=kubernetes",
      "-days",
      "2",
      "-addext",
      "basicConstraints=critical,CA:TRUE",
      "-addext",
      "keyUsage=critical,keyCertSign",
    ]);
    await openssl(dir, [
      "req",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-keyout",
      "mitm.key",
      "-out",
      "mitm.csr",
      "-subj",
      "/CN=kube-apiserver",
    ]);
    await Deno.writeTextFile(`${dir}/ext`, "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
    await openssl(dir, [
      "x509",
      "-req",
      "-in",
      "mitm.csr",
      "-CA",
      "cab.crt",
      "-CAkey",
      "cab.key",
      "-CAcreateserial",
      "-out",
      "mitm.crt",
      "-days",
      "2",
      "-extfile",
      "ext",
    ]);
    relay = mitm(
      await Deno.readTextFile(`${dir}/mitm.crt`),
      await Deno.readTextFile(`${dir}/mitm.key`),
      new URL(api.server),
      api.caPem,
    );
    const env = { DENO_CERT: `${dir}/cab.crt` };

    // Through the relay: refused before any delegate ran.
    const kc = JSON.parse(await Deno.readTextFile(w.kubeconfig));
    kc.clusters[0].cluster.server = relay.url;
    await Deno.writeTextFile(w.kubeconfig, JSON.stringify(kc));
    const add = await w.call("ADD", { env });
    assert.ok(relay.connections() > 0, "the plugin reached the man in the middle");
    assert.notEqual(add.code, 0, `ADD through the man in the middle must fail: ${add.stdout}`);
    assert.match(add.stdout + add.stderr, /not issued by the kubeconfig's certificate authority/);
    assert.deepEqual(await linkNames(w.podNetns), [], "nothing attached");
    // Classified as any failed certificate verification: a configuration problem (code 7).
    assert.equal(add.json?.code, 7);
    assert.match(String(add.json?.msg), /TLS verification error/);

    // Straight to the server, same environment: attached.
    kc.clusters[0].cluster.server = api.server;
    await Deno.writeTextFile(w.kubeconfig, JSON.stringify(kc));
    const direct = await w.call("ADD", { env });
    assert.equal(direct.code, 0, direct.stdout + direct.stderr.slice(-2000));
    assert.ok((await linkNames(w.podNetns)).includes("eth0"));
    assert.equal((await w.call("DEL", { env })).code, 0);
  } finally {
    await relay?.close();
    await done(w);
    await Deno.remove(dir, { recursive: true });
  }
});

suite.end();
