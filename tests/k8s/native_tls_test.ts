/**
 * TLS through OpenSSL 3 by FFI (lib/k8s/http1/native_tls.ts, native_context.ts,
 * native_addr.ts) against real TLS servers on loopback: Deno's own (`Deno.listenTls`, the
 * scripted server), the Kubernetes API stand-in (`node:https`), and `openssl s_server` where
 * the server must send a chain or require a client certificate. That a connection went through
 * OpenSSL is read from the context it was made with: `SSL_CTX_sess_connect_good` of the
 * process's shared `SSL_CTX` for that trust (native_context.ts `tlsContext`) counts its
 * completed handshakes — Deno's TLS leaves it at 0.
 *
 * Also: the address parser (pure), and a subprocess without `--allow-ffi` that falls back to
 * Deno's TLS. The plugin-process check (no AWS-LC initialisation in an ADD) is
 * tests/integration/native_tls_test.ts.
 */

import assert from "node:assert/strict";
import { connectNativeTls, nativeTlsAvailable } from "../../lib/k8s/http1/native_tls.ts";
import {
  type ContextOptions,
  nativeColdLib,
  tlsContext,
} from "../../lib/k8s/http1/native_context.ts";
import { parseIp, sockaddr } from "../../lib/k8s/http1/native_addr.ts";
import { connectionBroken } from "../../lib/k8s/http1/wire.ts";
import { Http1Transport } from "../../lib/k8s/http1/mod.ts";
import type { ByteConn } from "../../lib/k8s/pinned_tls.ts";
import { KubeClient, loadKubeconfig } from "../../lib/k8s/mod.ts";
import { kubeErrorCode } from "../../lib/multinet/api_errors.ts";
import { createCa, defaultCertSet, issueCert, type KeyPair } from "../support/certs.ts";
import { okResponse, type ScriptedConn, withScriptedServer } from "../support/scripted_http.ts";
import { startKubeApi } from "../support/kube_api.ts";
import { startTcpProxy } from "../support/tcp_proxy.ts";
import { loopbackPort } from "../support/ports.ts";

const available = (() => {
  try {
    return nativeTlsAvailable();
  } catch {
    return false;
  }
})();
if (!available) console.log("native TLS tests skipped: libssl.so.3 cannot be opened here");
/** Tests that need OpenSSL (skipped with one line above without it). */
const ssl = { ignore: !available };
/** Tests that also run `openssl s_server` (a child process outlives single ops). */
const sServer = { ignore: !available, sanitizeOps: false, sanitizeResources: false };

const enc = new TextEncoder();
const dec = new TextDecoder();

/** `SSL_CTRL_SESS_CONNECT_GOOD` (openssl/ssl.h): `SSL_CTX_sess_connect_good`. */
const SSL_CTRL_SESS_CONNECT_GOOD = 22;

/**
 * Handshakes completed so far through OpenSSL with this trust: the counter of the `SSL_CTX`
 * the transport shares (one per CA, certificate and key in a process).
 */
async function handshakes(opts: ContextOptions): Promise<number> {
  const ctx = await tlsContext(opts);
  return Number(nativeColdLib().SSL_CTX_ctrl(ctx, SSL_CTRL_SESS_CONNECT_GOOD, 0n, null));
}

/** Sockets this process holds open (`/proc/self/fd` entries that are sockets). */
function socketFds(): number {
  let n = 0;
  for (const e of Deno.readDirSync("/proc/self/fd")) {
    try {
      if (Deno.readLinkSync(`/proc/self/fd/${e.name}`).startsWith("socket:")) n++;
    } catch { /* closed meanwhile (the readDir's own fd) */ }
  }
  return n;
}

async function openssl(dir: string, args: string[]): Promise<void> {
  const out = await new Deno.Command("openssl", { args, cwd: dir, stdout: "null", stderr: "piped" })
    .output();
  if (!out.success) throw new Error(`openssl ${args[0]}: ${dec.decode(out.stderr)}`);
}

async function withDir<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = await Deno.makeTempDir({ prefix: "mft-ntls-" });
  try {
    return await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** An intermediate CA (`CA:TRUE`, `keyCertSign`) issued by `root`. */
function issueIntermediate(root: KeyPair, cn: string): Promise<KeyPair> {
  return withDir(async (dir) => {
    await Deno.writeTextFile(`${dir}/root.crt`, root.certPem);
    await Deno.writeTextFile(`${dir}/root.key`, root.keyPem);
    await Deno.writeTextFile(
      `${dir}/ext`,
      "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n",
    );
    const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    await openssl(dir, ["req", ...ec, "-keyout", "i.key", "-out", "i.csr", "-subj", `/CN=${cn}`]);
    await openssl(dir, [
      "x509",
      "-req",
      "-in",
      "i.csr",
      "-CA",
      "root.crt",
      "-CAkey",
      "root.key",
      "-CAcreateserial",
      "-out",
      "i.crt",
      "-days",
      "2",
      "-extfile",
      "ext",
    ]);
    return {
      certPem: await Deno.readTextFile(`${dir}/i.crt`),
      keyPem: await Deno.readTextFile(`${dir}/i.key`),
    };
  });
}

/**
 * A server certificate for 127.0.0.1 valid only from `start` to `end` (`YYYYMMDDHHMMSSZ`),
 * signed by `ca` with `openssl ca` (the CLI's `x509 -days` cannot date one in the past).
 */
function datedServerCert(ca: KeyPair, start: string, end: string): Promise<KeyPair> {
  return withDir(async (dir) => {
    await Deno.writeTextFile(`${dir}/ca.crt`, ca.certPem);
    await Deno.writeTextFile(`${dir}/ca.key`, ca.keyPem);
    await Deno.writeTextFile(`${dir}/index.txt`, "");
    await Deno.writeTextFile(`${dir}/serial`, "01\n");
    await Deno.writeTextFile(
      `${dir}/ca.cnf`,
      "[ca]\ndefault_ca = c\n[c]\ndatabase = index.txt\nnew_certs_dir = .\nserial = serial\n" +
        "default_md = sha256\npolicy = p\n[p]\ncommonName = supplied\n" +
        "[ext]\nsubjectAltName = IP:127.0.0.1\nextendedKeyUsage = serverAuth\n",
    );
    const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    await openssl(dir, ["req", ...ec, "-keyout", "s.key", "-out", "s.csr", "-subj", "/CN=dated"]);
    await openssl(dir, [
      "ca",
      "-batch",
      "-config",
      "ca.cnf",
      "-cert",
      "ca.crt",
      "-keyfile",
      "ca.key",
      "-in",
      "s.csr",
      "-out",
      "s.crt",
      "-notext",
      "-startdate",
      start,
      "-enddate",
      end,
      "-extensions",
      "ext",
    ]);
    return {
      certPem: await Deno.readTextFile(`${dir}/s.crt`),
      keyPem: await Deno.readTextFile(`${dir}/s.key`),
    };
  });
}

const serverCert = (ca: KeyPair, sans: string[]) =>
  issueCert(ca, { cn: "kube-apiserver", usage: "serverAuth", sans });

/**
 * Runs `openssl s_server -www` on 127.0.0.1 (it answers `GET /` with a status page naming the
 * client certificate, then sends `close_notify`) with `files` written to a temp dir and `args`
 * added, until `fn` returns.
 */
async function withSServer<T>(
  files: Record<string, string>,
  args: string[],
  fn: (port: number) => Promise<T>,
): Promise<T> {
  return await withDir(async (dir) => {
    for (const [name, text] of Object.entries(files)) {
      await Deno.writeTextFile(`${dir}/${name}`, text);
    }
    const port = loopbackPort();
    const server = new Deno.Command("openssl", {
      args: ["s_server", "-accept", `127.0.0.1:${port}`, "-www", "-quiet", ...args],
      cwd: dir,
      stdout: "null",
      stderr: "null",
    }).spawn();
    try {
      let up = false;
      for (let i = 0; i < 200 && !up; i++) {
        const probe = await Deno.connect({ hostname: "127.0.0.1", port }).catch(() => undefined);
        probe?.close();
        up = probe !== undefined;
        if (!up) await new Promise((r) => setTimeout(r, 25));
      }
      assert.ok(up, "openssl s_server listening");
      return await fn(port);
    } finally {
      server.kill();
      await server.status;
    }
  });
}

/** Writes `GET / HTTP/1.0` and reads until the end of the stream. */
async function getAll(conn: ByteConn): Promise<string> {
  await conn.write(enc.encode("GET / HTTP/1.0\r\n\r\n"));
  const buf = new Uint8Array(16384);
  let out = "";
  for (;;) {
    const n = await conn.read(buf);
    if (n === null) return out;
    out += dec.decode(buf.subarray(0, n), { stream: true });
  }
}

/** A scripted-server script answering every request with its path. */
const echoPath = async (c: ScriptedConn) => {
  for (let i = 0;; i++) {
    const req = await c.request(i);
    if (!req) return;
    await c.send(okResponse(req.path));
  }
};

const get = (t: Http1Transport, url: string, signal = new AbortController().signal) =>
  t.send({ method: "GET", url, headers: { accept: "application/json" }, signal });

/**
 * `p`, or a rejection when it has not settled within `ms` (a wait that nothing wakes fails the
 * test rather than hanging it).
 */
async function within<T>(ms: number, p: Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`not settled within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

const isInvalidPeer = (re: RegExp) => (e: Error) =>
  e instanceof Deno.errors.InvalidData && /^invalid peer certificate: /.test(e.message) &&
  re.test(e.message);

// ---- addresses (pure) ----

Deno.test("native TLS: parseIp reads IPv4 and IPv6 literals (URL host forms), nothing else", () => {
  const v6 = (...g: number[]) => new Uint8Array(g.flatMap((x) => [x >> 8, x & 0xff]));
  const cases: [string, Uint8Array | undefined][] = [
    ["10.96.0.1", new Uint8Array([10, 96, 0, 1])],
    ["127.0.0.1", new Uint8Array([127, 0, 0, 1])],
    ["0.0.0.0", new Uint8Array([0, 0, 0, 0])],
    ["255.255.255.255", new Uint8Array([255, 255, 255, 255])],
    ["::1", v6(0, 0, 0, 0, 0, 0, 0, 1)],
    ["::", v6(0, 0, 0, 0, 0, 0, 0, 0)],
    ["fd00:10:96::1", v6(0xfd00, 0x10, 0x96, 0, 0, 0, 0, 1)],
    ["2001:db8::", v6(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0)],
    ["2001:DB8:0:0:0:0:0:A", v6(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0xa)],
    ["0:0:0:0:0:0:0:1", v6(0, 0, 0, 0, 0, 0, 0, 1)],
    ["1:2:3:4:5:6:7::", v6(1, 2, 3, 4, 5, 6, 7, 0)],
    ["::ffff:a00:1", v6(0, 0, 0, 0, 0, 0xffff, 0xa00, 1)], // new URL's form of ::ffff:10.0.0.1
    // Not IP literals: names, and malformed ones (resolved as names, i.e. refused by DNS).
    ["localhost", undefined],
    ["kubernetes.default.svc", undefined],
    ["cafe", undefined], // hex digits but no colon: a name
    ["256.0.0.1", undefined],
    ["1.2.3", undefined],
    ["1.2.3.4.5", undefined],
    ["01234.1.1.1", undefined],
    [" 10.0.0.1", undefined],
    ["[::1]", undefined], // brackets are the URL's, stripped before
    ["::1%lo", undefined], // zones: none in a URL host
    ["1::2::3", undefined],
    [":::", undefined],
    ["1:2:3:4:5:6:7:8:9", undefined],
    ["1:2:3:4:5:6:7", undefined],
    ["1:2:3:4:5:6:7:8::", undefined], // "::" must stand for one group at least
    ["12345::1", undefined],
    ["1:", undefined],
    ["::ffff:10.0.0.1", undefined], // dotted tail: new URL rewrites it as hex
    ["", undefined],
  ];
  for (const [host, want] of cases) assert.deepEqual(parseIp(host), want, host);
});

Deno.test("native TLS: sockaddr lays out sockaddr_in / sockaddr_in6 (port and address in network order)", () => {
  const v4 = sockaddr(new Uint8Array([127, 0, 0, 1]), 6443);
  assert.deepEqual([...v4], [2, 0, 0x19, 0x2b, 127, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]);
  const v6 = sockaddr(parseIp("::1")!, 443);
  assert.equal(v6.length, 28);
  assert.deepEqual([...v6.subarray(0, 8)], [10, 0, 1, 0xbb, 0, 0, 0, 0]);
  assert.deepEqual([...v6.subarray(8, 24)], [...parseIp("::1")!]);
  assert.deepEqual([...v6.subarray(24)], [0, 0, 0, 0]);
});

// ---- end to end: KubeClient against the API stand-in ----

Deno.test({
  name:
    "native TLS: KubeClient with a token — GET, pipelined GETs, PATCH over one OpenSSL connection",
  ...ssl,
  async fn() {
    const api = await startKubeApi();
    let kube: KubeClient | undefined;
    try {
      api.addPod({ namespace: "default", name: "p" });
      for (const n of ["a", "b", "c"]) {
        api.addNad({ namespace: "default", name: n, config: '{"type":"bridge"}' });
      }
      await api.writeKubeconfig(`${api.dir}/kubeconfig`, { auth: "token" });
      const conn = await loadKubeconfig(`${api.dir}/kubeconfig`);
      assert.ok(conn.caCertPem && !conn.clientCertPem);
      const trust = { caPem: conn.caCertPem };
      const before = await handshakes(trust);
      kube = new KubeClient({ connection: conn, nativeTls: true, pipelineGets: true });
      assert.equal((await kube.getPod("default", "p")).metadata.name, "p");
      const nads = await Promise.all(
        ["a", "b", "c"].map((n) => kube!.getNetworkAttachmentDefinition("default", n)),
      );
      assert.deepEqual(nads.map((x) => x.metadata.name), ["a", "b", "c"]);
      await kube.patchPodStatusAnnotations("default", "p", { "example.com/x": "1" });
      assert.equal(
        api.getPod("default", "p")?.metadata &&
          (api.getPod("default", "p")!.metadata as { annotations: Record<string, string> })
            .annotations["example.com/x"],
        "1",
      );
      assert.equal(await handshakes(trust) - before, 1, "one handshake, through OpenSSL");
      assert.equal(api.connectionCount, 1, "kept alive, the GETs pipelined on it");
      assert.deepEqual(api.requests.map((r) => [r.method, r.status, r.user]), [
        ["GET", 200, api.tokenUser],
        ["GET", 200, api.tokenUser],
        ["GET", 200, api.tokenUser],
        ["GET", 200, api.tokenUser],
        ["PATCH", 200, api.tokenUser],
      ]);
    } finally {
      kube?.close();
      await api.stop();
    }
  },
});

Deno.test({
  name: "native TLS: KubeClient with a client certificate — the stand-in sees its user",
  ...ssl,
  async fn() {
    const api = await startKubeApi({ clientCertAuth: true });
    let kube: KubeClient | undefined;
    try {
      api.addPod({ namespace: "default", name: "p" });
      await api.writeKubeconfig(`${api.dir}/kubeconfig`, { auth: "clientCert" });
      const conn = await loadKubeconfig(`${api.dir}/kubeconfig`);
      assert.ok(conn.caCertPem && conn.clientCertPem && conn.clientKeyPem && !conn.token);
      const trust = {
        caPem: conn.caCertPem,
        clientCertPem: conn.clientCertPem,
        clientKeyPem: conn.clientKeyPem,
      };
      const before = await handshakes(trust);
      kube = new KubeClient({ connection: conn, nativeTls: true });
      await kube.getPod("default", "p");
      await kube.getPod("default", "p");
      assert.equal(await handshakes(trust) - before, 1, "one handshake, through OpenSSL");
      assert.deepEqual(api.requests.map((r) => r.user), [api.clientCertUser, api.clientCertUser]);
      assert.deepEqual(api.tlsRejections, []);
    } finally {
      kube?.close();
      await api.stop();
    }
  },
});

// ---- trust: the kubeconfig's CA alone ----

Deno.test({
  name: "native TLS: a server certificate from another CA with the same subject is refused",
  ...ssl,
  async fn() {
    const ours = await createCa("kubernetes");
    const theirs = await createCa("kubernetes"); // same subject name, another key
    const mitm = await serverCert(theirs, ["IP:127.0.0.1"]);
    await withScriptedServer({ script: echoPath, tls: mitm }, async (server) => {
      const port = Number(new URL(server.url).port);
      const fds = socketFds();
      await assert.rejects(
        connectNativeTls({ hostname: "127.0.0.1", port, caPem: ours.certPem }),
        isInvalidPeer(/unable to get local issuer certificate/),
      );
      assert.equal(socketFds(), fds + 1, "only the server's side of it is left");
      // Through the client: code 7, not retried (the request layer sees a verification failure).
      const kube = new KubeClient({
        connection: { server: server.url, caCertPem: ours.certPem, insecureSkipTlsVerify: false },
        nativeTls: true,
        backoffMs: 10,
      });
      try {
        const err = await kube.getPod("default", "p").then(() => undefined, (e) => e);
        assert.equal(kubeErrorCode(err), 7, String(err));
        assert.equal(err.reason, "TlsVerification");
        assert.equal(kube.requestCount, 1);
      } finally {
        kube.close();
      }
      assert.deepEqual(server.paths().flat(), [], "no request reached the server");
    });
  },
});

Deno.test({
  name:
    "native TLS: a chain the server sends leads to the root, or to an intermediate alone (partial chain, as Go)",
  ...sServer,
  async fn() {
    const root = await createCa("root-ca");
    const inter = await issueIntermediate(root, "intermediate-ca");
    const leaf = await serverCert(inter, ["IP:127.0.0.1"]);
    const files = { "leaf.crt": leaf.certPem, "leaf.key": leaf.keyPem, "chain.crt": inter.certPem };
    await withSServer(
      files,
      ["-cert", "leaf.crt", "-key", "leaf.key", "-cert_chain", "chain.crt"],
      async (port) => {
        for (
          const [what, caPem] of [["root alone", root.certPem], [
            "intermediate alone",
            inter.certPem,
          ]]
        ) {
          const conn = await connectNativeTls({ hostname: "127.0.0.1", port, caPem });
          try {
            assert.match(await getAll(conn), /^HTTP\/1\.0 200 ok/, what);
          } finally {
            conn.close();
          }
        }
        // Through the transport: Deno's path pins the leaf's issuer to the bundle (tls_pin.ts),
        // OpenSSL's follows the chain to the root.
        const url = `https://127.0.0.1:${port}`;
        const native = new Http1Transport(
          { server: url, caCertPem: root.certPem, insecureSkipTlsVerify: false },
          { nativeTls: true },
        );
        try {
          const before = await handshakes({ caPem: root.certPem });
          const r = await get(native, `${url}/`);
          assert.equal(r.status, 200);
          assert.equal(await handshakes({ caPem: root.certPem }) - before, 1);
        } finally {
          native.close();
        }
      },
    );
    // Without the intermediate sent, the root alone does not reach the leaf.
    await withSServer(files, ["-cert", "leaf.crt", "-key", "leaf.key"], async (port) => {
      await assert.rejects(
        connectNativeTls({ hostname: "127.0.0.1", port, caPem: root.certPem }),
        isInvalidPeer(/unable to get local issuer certificate/),
      );
    });
  },
});

Deno.test({
  name:
    "native TLS: a body larger than the socket buffers goes out whole (write retried), a large answer comes back whole",
  ...ssl,
  async fn() {
    const certs = await defaultCertSet();
    const big = "x".repeat(6 * 1024 * 1024);
    const script = async (c: ScriptedConn) => {
      for (let i = 0;; i++) {
        const req = await c.request(i);
        if (!req) return;
        const body = req.raw.slice(req.raw.indexOf("\r\n\r\n") + 4);
        if (req.method === "PATCH") {
          // Answered with its length and digest, once all of it came.
          const digest = await crypto.subtle.digest("SHA-256", enc.encode(body));
          await c.send(
            okResponse(`${body.length} ${btoa(String.fromCharCode(...new Uint8Array(digest)))}`),
          );
        } else await c.send(okResponse(big));
      }
    };
    await withScriptedServer({ script, tls: certs.server }, async (server) => {
      const t = new Http1Transport(
        { server: server.url, caCertPem: certs.ca.certPem, insecureSkipTlsVerify: false },
        { nativeTls: true },
      );
      try {
        const before = await handshakes({ caPem: certs.ca.certPem });
        const sent = Array.from({ length: 5 * 1024 * 1024 }, (_, i) => "abcdefghij"[i % 10]).join(
          "",
        );
        const digest = await crypto.subtle.digest("SHA-256", enc.encode(sent));
        const r = await t.send({
          method: "PATCH",
          url: `${server.url}/p`,
          headers: { "content-type": "application/merge-patch+json" },
          body: sent,
          signal: new AbortController().signal,
        });
        assert.equal(
          r.body,
          `${sent.length} ${btoa(String.fromCharCode(...new Uint8Array(digest)))}`,
        );
        const g = await get(t, `${server.url}/big`);
        assert.equal(g.body.length, big.length);
        assert.ok(g.body === big);
        assert.equal(await handshakes({ caPem: certs.ca.certPem }) - before, 1);
      } finally {
        t.close();
      }
    });
  },
});

Deno.test({
  name: "native TLS: an expired or not yet valid server certificate is refused",
  ...ssl,
  async fn() {
    const ca = await createCa("dated-ca");
    const cases = [
      ["20200101000000Z", "20200102000000Z", /certificate has expired/],
      ["20990101000000Z", "20990102000000Z", /certificate is not yet valid/],
    ] as const;
    for (const [start, end, why] of cases) {
      const cert = await datedServerCert(ca, start, end);
      await withScriptedServer({ script: echoPath, tls: cert }, async (server) => {
        await assert.rejects(
          connectNativeTls({
            hostname: "127.0.0.1",
            port: Number(new URL(server.url).port),
            caPem: ca.certPem,
          }),
          isInvalidPeer(why),
        );
      });
    }
  },
});

// ---- the host against the certificate ----

Deno.test({
  name: "native TLS: the address connected to must be in the certificate's IP SANs",
  ...ssl,
  async fn() {
    const ca = await createCa("host-ca");
    const other = await serverCert(ca, ["IP:127.0.0.2", "DNS:127.0.0.1"]);
    await withScriptedServer({ script: echoPath, tls: other }, async (server) => {
      const port = Number(new URL(server.url).port);
      await assert.rejects(
        connectNativeTls({ hostname: "127.0.0.1", port, caPem: ca.certPem }),
        isInvalidPeer(/IP address mismatch/),
      );
    });
    const right = await serverCert(ca, ["IP:127.0.0.1"]);
    await withScriptedServer({ script: echoPath, tls: right }, async (server) => {
      const port = Number(new URL(server.url).port);
      const conn = await connectNativeTls({ hostname: "127.0.0.1", port, caPem: ca.certPem });
      conn.close();
    });
  },
});

Deno.test({
  name: "native TLS: a name is resolved (getaddrinfo) and checked against the DNS SANs",
  ...ssl,
  async fn() {
    const ca = await createCa("dns-ca");
    const named = await serverCert(ca, ["DNS:localhost"]);
    await withScriptedServer({ script: echoPath, tls: named }, async (server) => {
      const port = Number(new URL(server.url).port);
      const url = `https://localhost:${port}`;
      const t = new Http1Transport(
        { server: url, caCertPem: ca.certPem, insecureSkipTlsVerify: false },
        { nativeTls: true },
      );
      try {
        const before = await handshakes({ caPem: ca.certPem });
        const r = await get(t, `${url}/by-name`);
        assert.equal(r.body, "/by-name");
        assert.equal(await handshakes({ caPem: ca.certPem }) - before, 1);
      } finally {
        t.close();
      }
      assert.match(server.conns[0].requests[0].raw, /\r\nhost: localhost:\d+\r\n/);
      // The name's address is not in the certificate as an IP: no match by address.
      await assert.rejects(
        connectNativeTls({ hostname: "127.0.0.1", port, caPem: ca.certPem }),
        isInvalidPeer(/IP address mismatch/),
      );
    });
    const elsewhere = await serverCert(ca, ["DNS:kubernetes.default.svc", "IP:127.0.0.1"]);
    await withScriptedServer({ script: echoPath, tls: elsewhere }, async (server) => {
      const port = Number(new URL(server.url).port);
      await assert.rejects(
        connectNativeTls({ hostname: "localhost", port, caPem: ca.certPem }),
        isInvalidPeer(/[Hh]ostname mismatch/),
      );
    });
    await assert.rejects(
      connectNativeTls({ hostname: "no-such-host.invalid", port: 443, caPem: ca.certPem }),
      Deno.errors.NotFound,
    );
  },
});

Deno.test({
  name:
    "native TLS: SNI names the host for a name, and is not sent for an IP literal (RFC 6066 §3)",
  ...sServer,
  async fn() {
    const ca = await createCa("sni-ca");
    // s_server presents cert2 only to a ClientHello whose SNI is -servername; else cert.
    const fallback = await serverCert(ca, ["DNS:fallback.invalid"]);
    for (const [sni, host] of [["localhost", "localhost"], ["127.0.0.1", "127.0.0.1"]]) {
      const named = await serverCert(ca, [host === "localhost" ? "DNS:localhost" : "IP:127.0.0.1"]);
      const files = {
        "a.crt": fallback.certPem,
        "a.key": fallback.keyPem,
        "b.crt": named.certPem,
        "b.key": named.keyPem,
      };
      const args = ["-cert", "a.crt", "-key", "a.key", "-servername", sni];
      await withSServer(files, [...args, "-cert2", "b.crt", "-key2", "b.key"], async (port) => {
        const connecting = connectNativeTls({ hostname: host, port, caPem: ca.certPem });
        if (host === "localhost") {
          (await connecting).close(); // the name went out: the server chose cert2
        } else {
          // No SNI: the server's default certificate, which does not name the address.
          await assert.rejects(connecting, isInvalidPeer(/IP address mismatch/));
        }
      });
    }
  },
});

Deno.test({
  name: "native TLS: an IPv6 literal (::1) connects and is checked against the IPv6 SANs",
  ...ssl,
  async fn() {
    const certs = await defaultCertSet(); // SANs 127.0.0.1, ::1, localhost
    const ca = await createCa("v6-ca");
    const v4only = await serverCert(ca, ["IP:127.0.0.1"]);
    for (
      const [cert, caPem, ok] of [[certs.server, certs.ca.certPem, true], [
        v4only,
        ca.certPem,
        false,
      ]] as const
    ) {
      let listener: Deno.TlsListener;
      try {
        listener = Deno.listenTls({
          hostname: "::1",
          port: 0,
          cert: cert.certPem,
          key: cert.keyPem,
        });
      } catch (err) {
        console.log(`IPv6 loopback unavailable, part skipped: ${err}`);
        return;
      }
      const port = (listener.addr as Deno.NetAddr).port;
      const serving = (async () => {
        for await (const c of listener) {
          try {
            const buf = new Uint8Array(4096);
            const n = await c.read(buf);
            if (n) {
              await c.write(
                enc.encode(okResponse(`v6 ${dec.decode(buf.subarray(0, n)).split(" ")[1]}`)),
              );
            }
          } catch {
            /* the client refused us */
          } finally {
            c.close();
          }
        }
      })();
      try {
        const url = `https://[::1]:${port}`;
        const t = new Http1Transport(
          { server: url, caCertPem: caPem, insecureSkipTlsVerify: false },
          { nativeTls: true },
        );
        try {
          if (ok) {
            const before = await handshakes({ caPem });
            assert.equal((await get(t, `${url}/six`)).body, "v6 /six");
            assert.equal(await handshakes({ caPem }) - before, 1);
          } else {
            await assert.rejects(get(t, `${url}/six`), isInvalidPeer(/IP address mismatch/));
          }
        } finally {
          t.close();
        }
      } finally {
        listener.close();
        await serving.catch(() => {});
      }
    }
  },
});

// ---- the client certificate ----

Deno.test({
  name: "native TLS: a client key that does not match its certificate fails before connecting",
  ...ssl,
  async fn() {
    const certs = await defaultCertSet();
    const stranger = await issueCert(certs.ca, { cn: "someone", usage: "clientAuth" });
    const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    let accepted = 0;
    const serving = (async () => {
      for await (const c of listener) {
        accepted++;
        c.close();
      }
    })();
    try {
      await assert.rejects(
        connectNativeTls({
          hostname: "127.0.0.1",
          port: (listener.addr as Deno.NetAddr).port,
          caPem: certs.ca.certPem,
          clientCertPem: certs.client.certPem,
          clientKeyPem: stranger.keyPem,
        }),
        (e: Error) =>
          e instanceof Deno.errors.InvalidData && /client key does not match/.test(e.message),
      );
      await assert.rejects(
        connectNativeTls({
          hostname: "127.0.0.1",
          port: (listener.addr as Deno.NetAddr).port,
          caPem: "not a certificate",
        }),
        (e: Error) =>
          e instanceof Deno.errors.InvalidData && /holds no PEM certificate/.test(e.message),
      );
      await new Promise((r) => setTimeout(r, 50));
      assert.equal(accepted, 0, "no TCP connection was made");
    } finally {
      listener.close();
      await serving.catch(() => {});
    }
  },
});

Deno.test({
  name: "native TLS: a server that requires a client certificate (s_server -Verify) gets ours",
  ...sServer,
  async fn() {
    const certs = await defaultCertSet();
    const files = {
      "server.crt": certs.server.certPem,
      "server.key": certs.server.keyPem,
      "ca.crt": certs.ca.certPem,
    };
    const args = [
      "-cert",
      "server.crt",
      "-key",
      "server.key",
      "-Verify",
      "1",
      "-CAfile",
      "ca.crt",
      "-verify_return_error",
    ];
    await withSServer(files, args, async (port) => {
      const base = { hostname: "127.0.0.1", port, caPem: certs.ca.certPem };
      const conn = await connectNativeTls({
        ...base,
        clientCertPem: certs.client.certPem,
        clientKeyPem: certs.client.keyPem,
      });
      try {
        const page = await getAll(conn);
        assert.match(page, /^HTTP\/1\.0 200 ok/);
        assert.match(page, /Client certificate/);
        assert.match(
          page,
          new RegExp(`Subject: O ?= ?${certs.clientGroup}, CN ?= ?${certs.clientUser}`),
        );
      } finally {
        conn.close();
      }
      // Without one the server ends the connection (TLS 1.3: an alert after our Finished).
      await assert.rejects(async () => {
        const bare = await connectNativeTls(base);
        try {
          await getAll(bare);
        } finally {
          bare.close();
        }
      }, /certificate required|alert/);
    });
  },
});

// ---- errors and the connection's life ----

Deno.test({
  name: "native TLS: a closed port is ConnectionRefused",
  ...ssl,
  async fn() {
    const certs = await defaultCertSet();
    const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const port = (l.addr as Deno.NetAddr).port;
    l.close();
    const fds = socketFds();
    await assert.rejects(
      connectNativeTls({ hostname: "127.0.0.1", port, caPem: certs.ca.certPem }),
      Deno.errors.ConnectionRefused,
    );
    assert.equal(socketFds(), fds, "its socket is closed");
  },
});

Deno.test({
  name:
    "native TLS: a server that does not speak TLS fails the handshake with OpenSSL's reason, no socket left",
  ...ssl,
  async fn() {
    const certs = await defaultCertSet();
    const script = async (c: ScriptedConn) => {
      await c.send("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
      c.close();
    };
    await withScriptedServer({ script, parse: false }, async (server) => {
      const fds = socketFds();
      await assert.rejects(
        connectNativeTls({
          hostname: "127.0.0.1",
          port: Number(new URL(server.url).port),
          caPem: certs.ca.certPem,
        }),
        (e: Error) =>
          !(e instanceof Deno.errors.InvalidData) &&
          /^TLS handshake failed: .*(wrong version number|packet length too long)/.test(e.message),
      );
      for (const c of server.conns) c.close();
      assert.equal(socketFds(), fds, "no socket left behind");
    });
  },
});

Deno.test({
  name:
    "native TLS: an abort while the server never answers the handshake rejects promptly with its reason, no socket left",
  ...ssl,
  async fn() {
    const certs = await defaultCertSet();
    const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const held: Deno.Conn[] = [];
    let arrived!: () => void;
    const helloSent = new Promise<void>((r) => arrived = r);
    const serving = (async () => {
      for await (const c of listener) {
        held.push(c); // TCP accepted, not a byte of TLS back
        // The ClientHello came: the client waits for the server's answer in poll(2).
        void c.read(new Uint8Array(4096)).then(arrived, arrived);
      }
    })();
    try {
      const fds = socketFds();
      const abort = new AbortController();
      const pending = connectNativeTls({
        hostname: "127.0.0.1",
        port: (listener.addr as Deno.NetAddr).port,
        caPem: certs.ca.certPem,
        signal: abort.signal,
      });
      await helloSent;
      const reason = new DOMException("API call timed out", "TimeoutError");
      abort.abort(reason);
      await assert.rejects(within(3000, pending), (e) => e === reason);
      for (const c of held) c.close();
      assert.equal(socketFds(), fds, "no socket left behind");
      // Aborted before it starts: nothing is opened.
      await assert.rejects(
        connectNativeTls({
          hostname: "127.0.0.1",
          port: (listener.addr as Deno.NetAddr).port,
          caPem: certs.ca.certPem,
          signal: AbortSignal.abort(reason),
        }),
        (e) => e === reason,
      );
      assert.equal(socketFds(), fds);
    } finally {
      for (const c of held) {
        try {
          c.close();
        } catch { /* closed */ }
      }
      listener.close();
      await serving.catch(() => {});
    }
  },
});

Deno.test({
  name: "native TLS: close() during a pending read rejects the read",
  ...ssl,
  async fn() {
    const certs = await defaultCertSet();
    await withScriptedServer({ tls: certs.server }, async (server) => { // accepts, never answers
      const conn = await connectNativeTls({
        hostname: "127.0.0.1",
        port: Number(new URL(server.url).port),
        caPem: certs.ca.certPem,
      });
      const fds = socketFds();
      const reading = conn.read(new Uint8Array(1024));
      await new Promise((r) => setTimeout(r, 50)); // the read waits in poll(2)
      conn.close();
      await assert.rejects(within(3000, reading), Deno.errors.BadResource);
      assert.equal(socketFds(), fds - 1, "its socket is closed");
      await assert.rejects(conn.read(new Uint8Array(8)), Deno.errors.BadResource);
      await assert.rejects(conn.write(enc.encode("x")), Deno.errors.BadResource);
      conn.close(); // idempotent
    });
  },
});

Deno.test({
  name:
    "native TLS: the server ending TCP without close_notify mid-response is a broken connection; close_notify is the end",
  ...sServer,
  async fn() {
    const certs = await defaultCertSet();
    let sent!: () => void;
    const partial = new Promise<void>((r) => sent = r);
    const script = async (c: ScriptedConn) => {
      await c.request(0);
      await c.send("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part of it");
      sent();
    };
    await withScriptedServer({ script, tls: certs.server }, async (server) => {
      const proxy = startTcpProxy({
        hostname: "127.0.0.1",
        port: Number(new URL(server.url).port),
      });
      try {
        const conn = await connectNativeTls({
          hostname: "127.0.0.1",
          port: proxy.port,
          caPem: certs.ca.certPem,
        });
        try {
          await conn.write(enc.encode("GET /x HTTP/1.1\r\nhost: x\r\n\r\n"));
          await partial;
          const buf = new Uint8Array(4096);
          let got = "";
          while (!got.endsWith("only part of it")) {
            const n = await conn.read(buf);
            assert.ok(n !== null);
            got += dec.decode(buf.subarray(0, n));
          }
          assert.equal(proxy.cut(), 1); // both TCP sides closed, no TLS alert
          const err = await conn.read(buf).then(() => undefined, (e) => e);
          assert.ok(err instanceof Error, `the read throws (got ${err})`);
          assert.ok(connectionBroken(err), `connectionBroken recognises ${err}`);
        } finally {
          conn.close();
        }
      } finally {
        await proxy.close();
      }
    });
    // s_server -www ends its answer with close_notify: the read returns null.
    await withSServer(
      { "s.crt": certs.server.certPem, "s.key": certs.server.keyPem },
      ["-cert", "s.crt", "-key", "s.key"],
      async (port) => {
        const conn = await connectNativeTls({
          hostname: "127.0.0.1",
          port,
          caPem: certs.ca.certPem,
        });
        try {
          assert.match(await getAll(conn), /^HTTP\/1\.0 200 ok[\s\S]*<\/HTML>\s*$/);
        } finally {
          conn.close();
        }
      },
    );
  },
});

Deno.test({
  name:
    "native TLS: writing to a connection the server closed fails as a broken connection (no SIGPIPE)",
  ...ssl,
  async fn() {
    const certs = await defaultCertSet();
    const script = async (c: ScriptedConn) => {
      await (c.conn as Deno.TlsConn).handshake();
      c.close();
    };
    await withScriptedServer({ script, tls: certs.server, parse: false }, async (server) => {
      const conn = await connectNativeTls({
        hostname: "127.0.0.1",
        port: Number(new URL(server.url).port),
        caPem: certs.ca.certPem,
      });
      try {
        while (server.conns.length === 0) await new Promise((r) => setTimeout(r, 10));
        await new Promise((r) => setTimeout(r, 50)); // the server's close is on its way
        const chunk = new Uint8Array(64 * 1024);
        let err: unknown;
        for (let i = 0; i < 200 && err === undefined; i++) {
          await conn.write(chunk).catch((e) => err = e);
        }
        assert.ok(err instanceof Error, "a write fails");
        assert.ok(connectionBroken(err), `connectionBroken recognises ${err}`);
      } finally {
        conn.close();
      }
    });
  },
});

Deno.test({
  name:
    "native TLS: a kept-alive connection dropped without close_notify — the GET is sent again on a new one",
  ...ssl,
  async fn() {
    const certs = await defaultCertSet();
    await withScriptedServer({ script: echoPath, tls: certs.server }, async (server) => {
      const proxy = startTcpProxy({
        hostname: "127.0.0.1",
        port: Number(new URL(server.url).port),
      });
      const url = `https://127.0.0.1:${proxy.port}`;
      const t = new Http1Transport(
        { server: url, caCertPem: certs.ca.certPem, insecureSkipTlsVerify: false },
        { nativeTls: true },
      );
      try {
        const before = await handshakes({ caPem: certs.ca.certPem });
        assert.equal((await get(t, `${url}/a`)).body, "/a");
        assert.equal(proxy.cut(), 1);
        assert.equal((await get(t, `${url}/b`)).body, "/b");
        assert.equal(proxy.accepted, 2);
        assert.equal(
          await handshakes({ caPem: certs.ca.certPem }) - before,
          2,
          "both through OpenSSL",
        );
      } finally {
        t.close();
        await proxy.close();
      }
    });
  },
});

Deno.test({
  name:
    "native TLS: an idle connection the server ended with close_notify — the next GET goes on a new one",
  ...ssl,
  async fn() {
    const certs = await defaultCertSet();
    const script = async (c: ScriptedConn) => {
      const req = await c.request(0);
      if (!req) return;
      await c.send(okResponse(req.path));
      // An idle timeout: close_notify, then the TCP end (as Go's tls.Conn.Close).
      await (c.conn as Deno.TlsConn).closeWrite();
      c.close();
    };
    await withScriptedServer({ script, tls: certs.server }, async (server) => {
      const t = new Http1Transport(
        { server: server.url, caCertPem: certs.ca.certPem, insecureSkipTlsVerify: false },
        { nativeTls: true },
      );
      try {
        const before = await handshakes({ caPem: certs.ca.certPem });
        assert.equal((await get(t, `${server.url}/a`)).body, "/a");
        while (!server.conns[0]?.ended) await new Promise((r) => setTimeout(r, 10));
        assert.equal((await get(t, `${server.url}/b`)).body, "/b");
        assert.equal(server.conns.length, 2);
        assert.equal(await handshakes({ caPem: certs.ca.certPem }) - before, 2);
      } finally {
        t.close();
      }
    });
  },
});

Deno.test({
  name:
    "native TLS: a request's deadline ends a handshake the server never answers (KubeClient: code 11, Timeout)",
  ...ssl,
  async fn() {
    const certs = await defaultCertSet();
    const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const held: Deno.Conn[] = [];
    const serving = (async () => {
      for await (const c of listener) held.push(c);
    })();
    const kube = new KubeClient({
      connection: {
        server: `https://127.0.0.1:${(listener.addr as Deno.NetAddr).port}`,
        caCertPem: certs.ca.certPem,
        token: "t",
        insecureSkipTlsVerify: false,
      },
      nativeTls: true,
      timeoutMs: 200,
      retries: 1,
      backoffMs: 10,
    });
    try {
      const fds = socketFds();
      const err = await within(5000, kube.getPod("default", "p").then(() => undefined, (e) => e));
      assert.equal(kubeErrorCode(err), 11, String(err));
      assert.equal(err.reason, "Timeout");
      assert.equal(held.length, 2, "tried twice, each on its own connection");
      for (const c of held) c.close();
      assert.equal(socketFds(), fds, "no socket left behind");
    } finally {
      kube.close();
      for (const c of held) {
        try {
          c.close();
        } catch { /* closed */ }
      }
      listener.close();
      await serving.catch(() => {});
    }
  },
});

Deno.test({
  name:
    "native TLS: a context evicted by other trusts while a connection is being set up with it is not used once freed",
  ...ssl,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    // native_context.ts keeps 4 contexts and frees the oldest when a fifth trust comes. A
    // connection that got its context before and reaches SSL_new after (here: while its host
    // name is looked up) must not use the freed one: in a child process, which a use after
    // free crashes (SIGSEGV).
    const certs = await defaultCertSet();
    const others = await Promise.all([1, 2, 3, 4].map((i) => createCa(`other-${i}`)));
    await withScriptedServer({ script: echoPath, tls: certs.server }, async (server) => {
      await withDir(async (dir) => {
        const lib = (p: string) => JSON.stringify(new URL(`../../lib/${p}`, import.meta.url).href);
        await Deno.writeTextFile(
          `${dir}/input.json`,
          JSON.stringify({
            caPem: certs.ca.certPem,
            others: others.map((o) => o.certPem),
            port: Number(new URL(server.url).port),
          }),
        );
        await Deno.writeTextFile(
          `${dir}/evict.ts`,
          `import { connectNativeTls } from ${lib("k8s/http1/native_tls.ts")};\n` +
            `import { tlsContext } from ${lib("k8s/http1/native_context.ts")};\n` +
            `const { caPem, others, port } = JSON.parse(Deno.readTextFileSync(Deno.args[0]));\n` +
            `await tlsContext({ caPem });\n` +
            `const connecting = connectNativeTls({ hostname: "localhost", port, caPem });\n` +
            `await Promise.all(others.map((o: string) => tlsContext({ caPem: o })));\n` +
            `const conn = await connecting;\n` +
            `await conn.write(new TextEncoder().encode("GET /evicted HTTP/1.1\\r\\nhost: x\\r\\n\\r\\n"));\n` +
            `const buf = new Uint8Array(4096);\n` +
            `const n = await conn.read(buf);\n` +
            `console.log(new TextDecoder().decode(buf.subarray(0, n ?? 0)));\n` +
            `conn.close();\n` +
            `Deno.exit(0);\n`,
        );
        const out = await new Deno.Command(Deno.execPath(), {
          args: ["run", "--quiet", "-A", `${dir}/evict.ts`, `${dir}/input.json`],
          stdout: "piped",
          stderr: "piped",
        }).output();
        assert.equal(
          out.code,
          0,
          `child ended with ${out.signal ?? out.code}: ${dec.decode(out.stderr).slice(-2000)}`,
        );
        assert.match(dec.decode(out.stdout), /^HTTP\/1\.1 200 OK[\s\S]*\/evicted/);
      });
    });
  },
});

// ---- without FFI: Deno's TLS ----

Deno.test({
  name:
    "native TLS: a process without --allow-ffi, or without libssl.so.3, connects through Deno's TLS",
  ...ssl,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const api = await startKubeApi();
    try {
      api.addPod({ namespace: "default", name: "p" });
      await api.writeKubeconfig(`${api.dir}/kubeconfig`, { auth: "clientCert" });
      const script = `${api.dir}/fallback.ts`;
      const lib = (p: string) => new URL(`../../lib/${p}`, import.meta.url).href;
      await Deno.writeTextFile(
        script,
        `import { KubeClient, loadKubeconfig } from ${JSON.stringify(lib("k8s/mod.ts"))};\n` +
          `import { nativeTlsAvailable } from ${
            JSON.stringify(lib("k8s/http1/native_tls.ts"))
          };\n` +
          `const conn = await loadKubeconfig(Deno.args[0]);\n` +
          `const kube = new KubeClient({ connection: conn, nativeTls: true, retries: 0 });\n` +
          `const pod = await kube.getPod("default", "p");\n` +
          `kube.close();\n` +
          `console.log(JSON.stringify({ available: nativeTlsAvailable(), name: pod.metadata.name }));\n` +
          // The request's timer (AbortSignal.timeout, lib/util/timer.ts) would hold the exit 5 s.
          `Deno.exit(0);\n`,
      );
      const deno = (ffi: string) => [
        Deno.execPath(),
        "run",
        "--quiet",
        "--config",
        new URL("../../deno.json", import.meta.url).pathname,
        "--allow-read",
        "--allow-net",
        "--allow-env",
        ffi,
        script,
        `${api.dir}/kubeconfig`,
      ];
      const libssl = Deno.realPathSync(
        ["/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"]
          .map((d) => `${d}/libssl.so.3`).find((f) => {
            try {
              return Deno.statSync(f).isFile;
            } catch {
              return false;
            }
          }) ?? "/nonexistent",
      );
      const variants: [string, string[], boolean][] = [
        ["--allow-ffi", deno("--allow-ffi"), true],
        ["--deny-ffi", deno("--deny-ffi"), false],
        ["no --allow-ffi", deno("--no-prompt"), false],
      ];
      if (Deno.uid() === 0) {
        // libssl.so.3 absent (an image without libssl3): /dev/null over it in a private mount
        // namespace, gone with the process.
        variants.push([
          "no libssl.so.3",
          [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            'mount --bind /dev/null "$0" && exec "$@"',
            libssl,
            ...deno("--allow-ffi"),
          ],
          false,
        ]);
      } else console.log("not root: the variant without libssl.so.3 is skipped");
      for (const [what, [cmd, ...args], native] of variants) {
        const out = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" })
          .output();
        assert.equal(out.code, 0, `${what}: ${dec.decode(out.stderr)}`);
        assert.deepEqual(
          JSON.parse(dec.decode(out.stdout)),
          { available: native, name: "p" },
          what,
        );
      }
      assert.deepEqual(
        api.requests.map((r) => r.user),
        variants.map(() => api.clientCertUser),
      );
    } finally {
      await api.stop();
    }
  },
});
