/**
 * The per-call plugin's TLS through OpenSSL (lib/k8s/http1/native_tls.ts, native_context.ts)
 * read against its references — client-go's `tls.Config` (Go's crypto/tls and crypto/x509:
 * `RootCAs` the only trust, host names matched against SANs only), the OpenSSL 3.0 manual —
 * each finding held by a test against a real TLS server (`Deno.listenTls`) with certificates
 * made by the `openssl` CLI. What keeps per-process state (the spare `SSL_CTX`, the cache of
 * contexts) runs in a fresh process: tests/fixtures/k8s/native_tls_fresh.ts. And what the
 * same commit changed around it, through the plugin as a process (the pod's annotations read
 * from the runtime or the API: lib/multinet/verbs/add.ts).
 */

import assert from "node:assert/strict";
import { createCa, issueCert, type KeyPair } from "../support/certs.ts";
import { connectNativeTls, nativeTlsAvailable } from "../../lib/k8s/http1/native_tls.ts";
import { done, world } from "../support/world.ts";

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

/** Whether `unshare -m` can give a child its own /etc/hosts (root, util-linux). */
async function canUnshare(): Promise<boolean> {
  try {
    const out = await new Deno.Command("unshare", { args: ["-m", "true"], stderr: "null" })
      .output();
    return out.success;
  } catch {
    return false;
  }
}
const unshareOk = available && await canUnshare();
if (available && !unshareOk) {
  console.log("native_tls_review_test: host-name tests skipped, `unshare -m` unavailable");
}

/** Runs the fresh-process fixture; its JSON answer. */
async function fresh(
  input: {
    scenario: string;
    port: number;
    caPem: string;
    otherCaPems?: string[];
    hostname?: string;
    serverCertPem?: string;
    serverKeyPem?: string;
    clientCertPem?: string;
    clientKeyPem?: string;
  },
  opts: {
    env?: Record<string, string>;
    hosts?: string;
    /** Run under `script` (util-linux): a pseudo-terminal as the controlling terminal. */
    tty?: boolean;
  } = {},
): Promise<{ ok: boolean; error?: string; [more: string]: unknown }> {
  const deno = [Deno.execPath(), "run", "-A", "--no-prompt", FIXTURE];
  let hostsDir: string | undefined;
  let cmd = deno;
  if (opts.hosts !== undefined) {
    // Its own mount namespace with its own /etc/hosts: a name for the server, nothing shared.
    hostsDir = await Deno.makeTempDir({ prefix: "manifold-hosts-" });
    await Deno.writeTextFile(`${hostsDir}/hosts`, opts.hosts);
    cmd = [
      "unshare",
      "-m",
      "sh",
      "-c",
      `mount --bind "$0" /etc/hosts && exec "$@"`,
      `${hostsDir}/hosts`,
      ...deno,
    ];
  }
  const env = { ...opts.env };
  if (opts.tty) {
    // Its stdin is the terminal's: the input goes in the environment. A wait on the terminal
    // ends with `timeout` (the test then fails on the missing answer).
    env.FIXTURE_INPUT = JSON.stringify(input);
    const quoted = cmd.map((a) => `'${a.replaceAll("'", "'\\''")}'`).join(" ");
    cmd = ["script", "-qec", `timeout -s KILL 20 ${quoted}`, "/dev/null"];
  }
  try {
    return await runFixture(cmd, opts.tty ? undefined : input, env);
  } finally {
    if (hostsDir) await Deno.remove(hostsDir, { recursive: true });
  }
}

async function runFixture(
  cmd: string[],
  input: unknown | undefined,
  env: Record<string, string>,
): Promise<{ ok: boolean; error?: string; [more: string]: unknown }> {
  const child = new Deno.Command(cmd[0], {
    args: cmd.slice(1),
    env,
    stdin: input === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (input !== undefined) {
    const writer = child.stdin.getWriter();
    await writer.write(new TextEncoder().encode(JSON.stringify(input)));
    await writer.close();
  }
  const out = await child.output();
  // The last line (a terminal's output, under `script`, may hold other text before it).
  const text = new TextDecoder().decode(out.stdout).trim().split(/\r?\n/).at(-1) ?? "";
  assert.ok(
    out.success && text.startsWith("{"),
    `fixture exited with ${out.code} (signal ${out.signal}): ${
      new TextDecoder().decode(out.stderr)
    } ${new TextDecoder().decode(out.stdout)}`,
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

/** Connects in this process to `127.0.0.1:port` trusting `ca`; the error's text or "ok". */
async function tryConnect(hostname: string, port: number, ca: KeyPair): Promise<string> {
  try {
    const conn = await connectNativeTls({ hostname, port, caPem: ca.certPem });
    conn.close();
    return "ok";
  } catch (err) {
    return String(err);
  }
}

Deno.test({
  name: "a host name is matched against the DNS SANs only, never the subject CN (as Go)",
  ignore,
  async fn() {
    // Go's crypto/x509 (since 1.17) ignores the CN; OpenSSL's X509_check_host falls back to it
    // when the certificate has no DNS SAN — before, both certificates below were accepted.
    const ca = await createCa("review-cn");
    const cnOnly = await issueCert(ca, { cn: "localhost", usage: "serverAuth" });
    const ipSanAndCn = await issueCert(ca, {
      cn: "localhost",
      usage: "serverAuth",
      sans: ["IP:127.0.0.1"],
    });
    const dnsSan = await issueCert(ca, { cn: "x", usage: "serverAuth", sans: ["DNS:localhost"] });
    for (const [leaf, want] of [[cnOnly, false], [ipSanAndCn, false], [dnsSan, true]] as const) {
      await using server = serve(leaf);
      const got = await tryConnect("localhost", server.port, ca);
      if (want) assert.equal(got, "ok");
      else assert.match(got, /InvalidData: invalid peer certificate: hostname mismatch/);
    }
  },
});

Deno.test({
  name: "an IP literal is matched against the IP SANs only (SSL_set1_host of OpenSSL 3.0)",
  ignore,
  async fn() {
    // Guard (passes before): OpenSSL 3.0's SSL_set1_host parses an IP literal as an address,
    // as Go matches an IP host against IPAddresses alone; a DNS SAN or a CN spelling the
    // address does not name it.
    const ca = await createCa("review-ip");
    const ipSan = await issueCert(ca, { cn: "x", usage: "serverAuth", sans: ["IP:127.0.0.1"] });
    const dnsSpelling = await issueCert(ca, {
      cn: "127.0.0.1",
      usage: "serverAuth",
      sans: ["DNS:127.0.0.1"],
    });
    {
      await using server = serve(ipSan);
      assert.equal(await tryConnect("127.0.0.1", server.port, ca), "ok");
    }
    {
      await using server = serve(dnsSpelling);
      assert.match(
        await tryConnect("127.0.0.1", server.port, ca),
        /InvalidData: invalid peer certificate: IP address mismatch/,
      );
    }
  },
});

Deno.test({
  name: "a wildcard matches only as a whole left-most label (no partial wildcard, as Go)",
  ignore: ignore || !unshareOk,
  async fn() {
    // Go's matchHostnames takes `*` only as the whole first label; OpenSSL accepts `ap*.x.y`
    // unless X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS — before, the first certificate passed.
    const ca = await createCa("review-wild");
    const hosts = "127.0.0.1 localhost\n127.0.0.1 api.review.test\n";
    const cases: [string, boolean][] = [["DNS:ap*.review.test", false], [
      "DNS:*.review.test",
      true,
    ]];
    for (const [san, want] of cases) {
      const leaf = await issueCert(ca, { cn: "x", usage: "serverAuth", sans: [san] });
      await using server = serve(leaf);
      const res = await fresh(
        { scenario: "connect", port: server.port, caPem: ca.certPem, hostname: "api.review.test" },
        { hosts },
      );
      assert.equal(res.ok, want, `${san}: ${res.error}`);
      if (!want) assert.match(res.error ?? "", /hostname mismatch/);
    }
  },
});

Deno.test({
  name: "a context pushed out of the cache while a connection is being set up stays valid for it",
  ignore,
  async fn() {
    // An exec-credential plugin rotating client certificates (or several CAs) makes a fifth
    // context while a connection waits for its own: before, the evicted SSL_CTX was freed while
    // that connection still had to call SSL_new with it (a use after free: glibc's
    // MALLOC_PERTURB_ fills freed memory, the fixture crashed or trusted another CA).
    const cas = await Promise.all(
      ["a", "b", "c", "d", "e"].map((n) => createCa(`review-evict-${n}`)),
    );
    const leaf = await issueCert(cas[0], { cn: "x", usage: "serverAuth", sans: ["IP:127.0.0.1"] });
    await using server = serve(leaf);
    const res = await fresh(
      {
        scenario: "evict-while-connecting",
        port: server.port,
        caPem: cas[0].certPem,
        otherCaPems: cas.slice(1).map((c) => c.certPem),
      },
      { env: { MALLOC_PERTURB_: "165" } },
    );
    assert.deepEqual(res, { ok: true });
  },
});

Deno.test({
  name: "ADD with malformed runtime pod annotations fails with CNI code 6, no event, no crash",
  ignore: Deno.uid() !== 0,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const w = await world();
    try {
      const conf = {
        ...w.conf,
        capabilities: { "io.kubernetes.cri.pod-annotations": true },
        runtimeConfig: { "io.kubernetes.cri.pod-annotations": "not a map" },
      };
      // Before: podFromApi (c0bc9f2) threw synchronously in cmdAdd's try, whose catch sent a
      // Warning event while the plan's rejection went unhandled: the process died with
      // "Uncaught (in promise)" and an empty stdout (no CNI error for the runtime).
      const add = await w.call("ADD", { config: conf });
      assert.equal(add.code, 1);
      const err = JSON.parse(add.stdout);
      assert.equal(err.code, 6, add.stdout);
      assert.match(err.msg, /is not a map/);
      assert.doesNotMatch(add.stderr, /Uncaught/);
      assert.deepEqual(w.api.events, [], "nothing to report on the pod: its input is unreadable");
    } finally {
      await done(w);
    }
  },
});

Deno.test({
  name: "openssl.cnf (OPENSSL_CONF from the runtime's environment) is never read",
  ignore,
  async fn() {
    // Guard (passes before): a CNI plugin's environment is the runtime's. OPENSSL_init_ssl with
    // OPENSSL_INIT_NO_LOAD_CONFIG runs the config step once, empty, so the SSL_CTX_new calls
    // after it (their own OPENSSL_init_ssl without the flag) load nothing either: this file
    // would cap the protocol at TLS 1.1 and every handshake would fail.
    const ca = await createCa("review-conf");
    const leaf = await issueCert(ca, { cn: "x", usage: "serverAuth", sans: ["IP:127.0.0.1"] });
    const dir = await Deno.makeTempDir({ prefix: "manifold-openssl-conf-" });
    try {
      const conf = `${dir}/openssl.cnf`;
      await Deno.writeTextFile(
        conf,
        "openssl_conf = init\n[init]\nssl_conf = ssl\n[ssl]\nsystem_default = sys\n" +
          "[sys]\nMaxProtocol = TLSv1.1\n",
      );
      await using server = serve(leaf);
      const res = await fresh(
        { scenario: "connect", port: server.port, caPem: ca.certPem },
        { env: { OPENSSL_CONF: conf } },
      );
      assert.deepEqual(res, { ok: true });
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name: "a signal that interrupts the TCP connect's poll does not end the wait early",
  ignore: ignore || !unshareOk,
  async fn() {
    // poll(2) is never restarted after a handled signal (signal(7)): it returns EINTR with no
    // revents. Before, connectTcp took that for "connected" and started the handshake on a
    // socket still connecting; the connect's refusal then came out of SSL_connect and the
    // name's next address was never tried.
    const ca = await createCa("review-eintr");
    const leaf = await issueCert(ca, {
      cn: "x",
      usage: "serverAuth",
      sans: ["DNS:api.review.test"],
    });
    const res = await fresh(
      {
        scenario: "eintr-connect",
        port: 0,
        caPem: ca.certPem,
        hostname: "api.review.test",
        serverCertPem: leaf.certPem,
        serverKeyPem: leaf.keyPem,
      },
      { hosts: "127.0.0.1 localhost\n127.0.0.1 api.review.test\n127.0.0.2 api.review.test\n" },
    );
    assert.deepEqual(res, { ok: true });
  },
});

Deno.test({
  name: "an error left on the thread's OpenSSL queue does not fail the next read",
  ignore,
  async fn() {
    // SSL_get_error(3): "the current thread's error queue must be empty before the TLS/SSL
    // I/O operation is attempted" — else a WANT_READ reads as SSL_ERROR_SSL. Before, nothing
    // emptied it before SSL_read or SSL_write (drainErrors stops at 16 entries; any other
    // libcrypto user on the main thread may leave one): the read failed on a stale error.
    const ca = await createCa("review-queue");
    const leaf = await issueCert(ca, { cn: "x", usage: "serverAuth", sans: ["IP:127.0.0.1"] });
    const listener = Deno.listenTls({
      hostname: "127.0.0.1",
      port: 0,
      cert: leaf.certPem,
      key: leaf.keyPem,
    });
    const serving = (async () => {
      const conn = await listener.accept();
      try {
        await conn.handshake();
        await new Promise((r) => setTimeout(r, 200)); // the client's read waits (WANT_READ)
        await conn.write(new TextEncoder().encode("hello"));
      } finally {
        conn.close();
      }
    })();
    const ssl = Deno.dlopen("libssl.so.3", {
      BIO_new_mem_buf: { parameters: ["buffer", "i32"], result: "pointer" },
      BIO_free: { parameters: ["pointer"], result: "i32" },
      PEM_read_bio_X509: {
        parameters: ["pointer", "pointer", "pointer", "pointer"],
        result: "pointer",
      },
      ERR_peek_error: { parameters: [], result: "u64" },
      ERR_clear_error: { parameters: [], result: "void" },
    });
    try {
      const conn = await connectNativeTls({
        hostname: "127.0.0.1",
        port: (listener.addr as Deno.NetAddr).port,
        caPem: ca.certPem,
      });
      try {
        const text = new Uint8Array(new ArrayBuffer(8));
        text.set(new TextEncoder().encode("garbage\n"));
        const bio = ssl.symbols.BIO_new_mem_buf(text, text.length);
        assert.equal(ssl.symbols.PEM_read_bio_X509(bio, null, null, null), null);
        ssl.symbols.BIO_free(bio);
        assert.notEqual(ssl.symbols.ERR_peek_error(), 0n, "an error is queued");
        const buf = new Uint8Array(16);
        const n = await conn.read(buf);
        assert.equal(new TextDecoder().decode(buf.subarray(0, n ?? 0)), "hello");
      } finally {
        conn.close();
      }
    } finally {
      ssl.symbols.ERR_clear_error();
      ssl.close();
      listener.close();
      await serving.catch(() => {});
    }
  },
});

/** Whether `script` (util-linux) can run a command under a pseudo-terminal here. */
async function canScript(): Promise<boolean> {
  try {
    const out = await new Deno.Command("script", {
      args: ["-qec", "true", "/dev/null"],
      stdout: "null",
      stderr: "null",
    }).output();
    return out.success;
  } catch {
    return false;
  }
}
const scriptOk = available && await canScript();
if (available && !scriptOk) {
  console.log("native_tls_review_test: terminal test skipped, `script` unavailable");
}

Deno.test({
  name: "an encrypted client key is refused, never a pass phrase asked on the terminal",
  ignore: !scriptOk,
  async fn() {
    // Go's tls.X509KeyPair (client-go) refuses an encrypted PEM key. OpenSSL's
    // PEM_read_bio_PrivateKey with no callback and no user data asks for the pass phrase on
    // the controlling terminal: before, a plugin run from a shell (a debugging session,
    // cnitool) printed "Enter PEM pass phrase:" and waited there for ever.
    const ca = await createCa("review-enc");
    const client = await issueCert(ca, { cn: "user", usage: "clientAuth" });
    const enc = new Deno.Command("openssl", {
      args: ["pkey", "-aes-128-cbc", "-passout", "pass:secret"],
      stdin: "piped",
      stdout: "piped",
      stderr: "null",
    }).spawn();
    const w = enc.stdin.getWriter();
    await w.write(new TextEncoder().encode(client.keyPem));
    await w.close();
    const encrypted = new TextDecoder().decode((await enc.output()).stdout);
    assert.match(encrypted, /ENCRYPTED PRIVATE KEY/);
    const res = await fresh(
      {
        scenario: "client-key",
        port: 0,
        caPem: ca.certPem,
        clientCertPem: client.certPem,
        clientKeyPem: encrypted,
      },
      { tty: true },
    );
    assert.equal(res.ok, false);
    assert.match(res.error ?? "", /TLS client key failed/);
    const plain = await fresh({
      scenario: "client-key",
      port: 0,
      caPem: ca.certPem,
      clientCertPem: client.certPem,
      clientKeyPem: client.keyPem,
    }, { tty: true });
    assert.deepEqual(plain, { ok: true }, "the same key unencrypted is used");
  },
});

/** Whether this machine can listen on ::1. */
function hasIpv6Loopback(): boolean {
  try {
    Deno.listen({ hostname: "::1", port: 0 }).close();
    return true;
  } catch {
    return false;
  }
}

Deno.test({
  name: "an IPv6 literal connects (sockaddr_in6) and matches an IP SAN of ::1 only",
  ignore: ignore || !hasIpv6Loopback(),
  async fn() {
    // Guard (passes before): the URL's host without brackets, parsed to 16 bytes, and
    // SSL_set1_host's IP match for IPv6.
    const ca = await createCa("review-v6");
    const v6 = await issueCert(ca, { cn: "x", usage: "serverAuth", sans: ["IP:::1"] });
    const v4 = await issueCert(ca, { cn: "x", usage: "serverAuth", sans: ["IP:127.0.0.1"] });
    for (const [leaf, want] of [[v6, "ok"], [v4, "IP address mismatch"]] as const) {
      const listener = Deno.listenTls({
        hostname: "::1",
        port: 0,
        cert: leaf.certPem,
        key: leaf.keyPem,
      });
      const accepting = listener.accept().then((c) =>
        c.handshake().catch(() => {}).then(() => c.close())
      )
        .catch(() => {});
      try {
        const got = await tryConnect("::1", (listener.addr as Deno.NetAddr).port, ca);
        assert.ok(got.includes(want), got);
      } finally {
        listener.close();
        await accepting;
      }
    }
  },
});
