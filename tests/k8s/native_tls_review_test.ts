/**
 * The per-call plugin's TLS through OpenSSL (lib/k8s/http1/native_tls.ts, native_context.ts)
 * read against its references — client-go's `tls.Config` (Go's crypto/tls and crypto/x509:
 * `RootCAs` the only trust, host names matched against SANs only), the OpenSSL 3.0 manual —
 * each finding held by a test against a real TLS server (`Deno.listenTls`) with certificates
 * made by the `openssl` CLI. What keeps per-process state (the spare `SSL_CTX`, the cache of
 * contexts) runs in a fresh process: tests/fixtures/k8s/native_tls_fresh.ts.
 */

import assert from "node:assert/strict";
import { createCa, issueCert, type KeyPair } from "../support/certs.ts";
import { nativeTlsAvailable } from "../../lib/k8s/http1/native_tls.ts";

const FIXTURE = new URL("../fixtures/k8s/native_tls_fresh.ts", import.meta.url).pathname;

let available = false;
try {
  available = nativeTlsAvailable();
} catch { /* no --allow-ffi */ }
if (!available) console.log("native_tls_review_test: skipped, libssl.so.3 cannot be opened");
const ignore = !available;

/** A TLS server on 127.0.0.1 presenting `leaf`, completing every handshake it is offered. */
function serve(leaf: KeyPair): { port: number; [Symbol.asyncDispose](): Promise<void> } {
  const listener = Deno.listenTls({
    hostname: "127.0.0.1",
    port: 0,
    cert: leaf.certPem,
    key: leaf.keyPem,
  });
  const conns = new Set<Deno.TlsConn>();
  const accepting = (async () => {
    for await (const conn of listener) {
      conns.add(conn);
      conn.handshake().catch(() => {});
    }
  })().catch(() => {});
  return {
    port: (listener.addr as Deno.NetAddr).port,
    async [Symbol.asyncDispose]() {
      listener.close();
      for (const c of conns) {
        try {
          c.close();
        } catch { /* closed by the peer's end */ }
      }
      await accepting;
    },
  };
}

/** Runs the fresh-process fixture; its JSON answer. */
async function fresh(
  input: { scenario: string; port: number; caPem: string; otherCaPems?: string[] },
  env: Record<string, string> = {},
): Promise<{ ok: boolean; error?: string }> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--no-prompt", FIXTURE],
    env,
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const writer = child.stdin.getWriter();
  await writer.write(new TextEncoder().encode(JSON.stringify(input)));
  await writer.close();
  const out = await child.output();
  const text = new TextDecoder().decode(out.stdout).trim();
  assert.ok(
    out.success && text !== "",
    `fixture exited with ${out.code} (signal ${out.signal}): ${
      new TextDecoder().decode(out.stderr)
    }`,
  );
  return JSON.parse(text);
}

Deno.test({
  name: "two contexts asked for at once do not share the spare SSL_CTX (one CA's trust each)",
  ignore,
  async fn() {
    // Before: both awaited the one spare context and added their CA to it, so a connection
    // trusting CA B accepted a server of CA A (and evicting both freed one SSL_CTX twice).
    const [a, b] = await Promise.all([createCa("review-a"), createCa("review-b")]);
    const leaf = await issueCert(a, {
      cn: "server-a",
      usage: "serverAuth",
      sans: ["IP:127.0.0.1"],
    });
    await using server = serve(leaf);
    const res = await fresh({
      scenario: "concurrent-contexts",
      port: server.port,
      caPem: b.certPem,
      otherCaPems: [a.certPem],
    });
    assert.equal(res.ok, false, "a server issued by CA A is refused when only CA B is trusted");
    assert.match(res.error ?? "", /InvalidData: invalid peer certificate/);
  },
});
