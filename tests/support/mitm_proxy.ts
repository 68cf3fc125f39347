/**
 * A TLS man in the middle for trust tests: terminates the client's TLS with a certificate of
 * its own CA (not the API server's), opens its own TLS connection to the real server and
 * relays the decrypted bytes both ways, counting what the client sent in clear.
 *
 * @module
 */

import { createCa, issueCert, type KeyPair } from "./certs.ts";

/** A running man in the middle. */
export interface MitmProxy {
  /** `https://127.0.0.1:<port>` to put in a kubeconfig instead of the real server. */
  url: string;
  /** The MITM's own CA (PEM), for `DENO_CERT`. */
  ca: KeyPair;
  /** Decrypted request bytes received from clients so far (> 0: a client trusted the MITM). */
  clearBytes(): number;
  /** Handshakes the clients completed with the MITM. */
  handshakes(): number;
  /** Stops listening and closes every relayed connection. */
  close(): void;
}

/**
 * Starts a MITM in front of `upstream` (an `https://host:port` URL whose CA is `upstreamCaPem`).
 * @param upstream the real server
 * @param upstreamCaPem the real server's CA
 * @returns the running proxy; always `close()` it
 */
export async function startMitm(upstream: string, upstreamCaPem: string): Promise<MitmProxy> {
  const ca = await createCa("mitm-ca");
  const leaf = await issueCert(ca, {
    cn: "kube-apiserver",
    usage: "serverAuth",
    sans: ["IP:127.0.0.1", "DNS:localhost"],
  });
  const up = new URL(upstream);
  const listener = Deno.listenTls({
    hostname: "127.0.0.1",
    port: 0,
    cert: leaf.certPem,
    key: leaf.keyPem,
    alpnProtocols: ["http/1.1"],
  });
  const open = new Set<Deno.Conn>();
  let clear = 0;
  let shakes = 0;
  const pipe = async (from: Deno.Conn, to: Deno.Conn, count: boolean) => {
    const buf = new Uint8Array(64 * 1024);
    try {
      for (;;) {
        const n = await from.read(buf);
        if (n === null) break;
        if (count) clear += n;
        for (let off = 0; off < n;) off += await to.write(buf.subarray(off, n));
      }
    } catch { /* either side went away */ }
    for (const c of [from, to]) {
      try {
        c.close();
      } catch { /* closed */ }
      open.delete(c);
    }
  };
  (async () => {
    for await (const c of listener) {
      open.add(c);
      (async () => {
        try {
          await c.handshake();
          shakes++;
          const u = await Deno.connectTls({
            hostname: up.hostname,
            port: Number(up.port),
            caCerts: [upstreamCaPem],
          });
          open.add(u);
          pipe(c, u, true);
          pipe(u, c, false);
        } catch {
          try {
            c.close();
          } catch { /* closed */ }
          open.delete(c);
        }
      })();
    }
  })().catch(() => {});
  return {
    url: `https://127.0.0.1:${(listener.addr as Deno.NetAddr).port}`,
    ca,
    clearBytes: () => clear,
    handshakes: () => shakes,
    close() {
      try {
        listener.close();
      } catch { /* closed */ }
      for (const c of open) {
        try {
          c.close();
        } catch { /* closed */ }
      }
      open.clear();
    },
  };
}
