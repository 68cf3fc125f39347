/**
 * TLS trust pinned to the kubeconfig's CA (lib/k8s/tls_pin.ts, issue 28 §1) over certificates
 * made by the `openssl` CLI: issued by the bundle's CA (RSA, ECDSA P-256/P-384, Ed25519) → pinned;
 * issued by another CA with the very same subject name (what a man in the middle whose CA the
 * process trusts through DENO_CERT or the root store would present) → refused; the CA itself as
 * the server certificate → pinned; an intermediate → pinned only when it is in the bundle;
 * garbage → refused with a reason. And on a real TLS connection (`openssl s_server`): the
 * handshake with Deno's extra roots passes, the pin check refuses.
 */

import assert from "node:assert/strict";
import {
  checkPinnedPeer,
  parseCertificate,
  pemCertificates,
  pinnedByBundle,
} from "../../lib/k8s/tls_pin.ts";

async function openssl(dir: string, args: string[]): Promise<void> {
  const out = await new Deno.Command("openssl", { args, cwd: dir, stdout: "null", stderr: "piped" })
    .output();
  if (!out.success) throw new Error(`openssl ${args[0]}: ${new TextDecoder().decode(out.stderr)}`);
}

const KEYS: Record<string, string[]> = {
  rsa: ["-newkey", "rsa:2048"],
  p256: ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"],
  p384: ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-384"],
  ed25519: ["-newkey", "ed25519"],
};

/** A self-signed CA `name` with subject CN=`cn` (key type `kind`). */
async function ca(dir: string, name: string, kind: string, cn = "kubernetes"): Promise<string> {
  await openssl(dir, [
    "req",
    "-x509",
    ...KEYS[kind],
    "-nodes",
    "-keyout",
    `${name}.key`,
    "-out",
    `${name}.crt`,
    "-subj",
    `/CN=${cn}`,
    "-days",
    "2",
    "-addext",
    "basicConstraints=critical,CA:TRUE",
    "-addext",
    "keyUsage=critical,keyCertSign",
  ]);
  return await Deno.readTextFile(`${dir}/${name}.crt`);
}

/** A certificate `name` for 127.0.0.1 signed by `issuer` (optionally itself a CA). */
async function issue(dir: string, name: string, issuer: string, isCa = false): Promise<string> {
  await openssl(dir, [
    "req",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-keyout",
    `${name}.key`,
    "-out",
    `${name}.csr`,
    "-subj",
    `/CN=${name}`,
  ]);
  await Deno.writeTextFile(
    `${dir}/${name}.ext`,
    isCa
      ? "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign\n"
      : "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
  );
  await openssl(dir, [
    "x509",
    "-req",
    "-in",
    `${name}.csr`,
    "-CA",
    `${issuer}.crt`,
    "-CAkey",
    `${issuer}.key`,
    "-CAcreateserial",
    "-out",
    `${name}.crt`,
    "-days",
    "2",
    "-extfile",
    `${name}.ext`,
  ]);
  return await Deno.readTextFile(`${dir}/${name}.crt`);
}

async function withDir(fn: (dir: string) => Promise<void>) {
  const dir = await Deno.makeTempDir({ prefix: "mft-pin-" });
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

const der = (pem: string) => pemCertificates(pem)[0];

for (const kind of Object.keys(KEYS)) {
  Deno.test(`tls pin (${kind} CA): its server certificate is pinned; a same-named CA's is not`, async () => {
    await withDir(async (dir) => {
      const caA = await ca(dir, "ca-a", kind);
      const server = await issue(dir, "server", "ca-a");
      assert.deepEqual(await pinnedByBundle(der(server), caA), { ok: true });
      // Another CA, same subject "CN=kubernetes", signs a certificate for the same server.
      await ca(dir, "ca-b", kind);
      const mitm = await issue(dir, "mitm", "ca-b");
      assert.deepEqual(parseCertificate(der(mitm)).issuer, parseCertificate(der(caA)).subject);
      const v = await pinnedByBundle(der(mitm), caA);
      assert.equal(v.ok, false);
      assert.match(!v.ok ? v.reason : "", /not issued by the kubeconfig's certificate authority/);
    });
  });
}

Deno.test("tls pin: the CA itself as server certificate; intermediates only from the bundle", async () => {
  await withDir(async (dir) => {
    const root = await ca(dir, "root", "rsa", "root");
    assert.deepEqual(await pinnedByBundle(der(root), root), { ok: true });
    const inter = await issue(dir, "inter", "root", true);
    const server = await issue(dir, "server", "inter");
    assert.equal((await pinnedByBundle(der(server), root)).ok, false, "root alone: refused");
    assert.deepEqual(await pinnedByBundle(der(server), root + inter), { ok: true });
    // A bundle of several CAs: any one that issued it.
    const other = await ca(dir, "other", "p256");
    assert.deepEqual(await pinnedByBundle(der(server), other + inter), { ok: true });
  });
});

Deno.test("tls pin: unreadable input is refused with a reason, never accepted", async () => {
  await withDir(async (dir) => {
    const caA = await ca(dir, "ca-a", "rsa");
    const garbage = await pinnedByBundle(new Uint8Array([0x30, 0x82, 0xff]), caA);
    assert.equal(garbage.ok, false);
    assert.match(!garbage.ok ? garbage.reason : "", /cannot be read/);
    const noCa = await pinnedByBundle(der(caA), "not a PEM");
    assert.equal(noCa.ok, false);
  });
});

Deno.test({
  name: "tls pin on a real connection: Deno's extra root passes the handshake, the pin refuses",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    await withDir(async (dir) => {
      const caA = await ca(dir, "ca-a", "rsa");
      const caB = await ca(dir, "ca-b", "rsa");
      await issue(dir, "good", "ca-a");
      await issue(dir, "mitm", "ca-b");
      for (const [name, pinned] of [["good", true], ["mitm", false]] as const) {
        const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
        const port = (l.addr as Deno.NetAddr).port;
        l.close();
        const server = new Deno.Command("openssl", {
          args: [
            "s_server",
            "-accept",
            `127.0.0.1:${port}`,
            "-cert",
            `${name}.crt`,
            "-key",
            `${name}.key`,
            "-www",
            "-quiet",
          ],
          cwd: dir,
          stdout: "null",
          stderr: "null",
        }).spawn();
        try {
          let tcp: Deno.TcpConn | undefined;
          for (let i = 0; i < 100 && !tcp; i++) {
            tcp = await Deno.connect({ hostname: "127.0.0.1", port }).catch(() => undefined);
            if (!tcp) await new Promise((r) => setTimeout(r, 50));
          }
          assert.ok(tcp, "s_server listening");
          // Both CAs trusted by the handshake, as DENO_CERT or the root store would.
          const conn = await Deno.startTls(tcp, { hostname: "127.0.0.1", caCerts: [caA, caB] });
          try {
            await conn.handshake();
            if (pinned) await checkPinnedPeer(conn, caA);
            else {
              await assert.rejects(
                () => checkPinnedPeer(conn, caA),
                /not issued by the kubeconfig/,
              );
            }
          } finally {
            conn.close();
          }
        } finally {
          server.kill();
          await server.status;
        }
      }
    });
  },
});
