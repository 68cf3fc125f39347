/**
 * Setting up one connection to the API server for the HTTP/1.1 transport (transport.ts): TCP
 * with `TCP_NODELAY`; TLS with the kubeconfig CA pinned — `Deno.startTls` then
 * `checkPinnedPeer` (tls_pin.ts), or, with a client certificate (which `Deno.startTls` takes
 * none of), `node:tls` whose `ca` replaces the roots (pinned_tls.ts); without a CA the system
 * roots; with `nativeTls` and a CA, OpenSSL (native_tls.ts: the CA alone trusted, a client
 * certificate presented) when it can be opened. Plain TCP for an `http:` server.
 *
 * @module
 */

import { abortable } from "../../util/abortable.ts";
import { lazyImport } from "../../util/lazy.ts";
import type { KubeConnection } from "../connection.ts";
import { Connection } from "./wire.ts";
import { connectNativeTls, nativeTlsAvailable } from "./native_tls.ts";

/**
 * Opens a connection to `base` (the server's URL) as `server` says (CA, client certificate).
 *
 * @param server the server and TLS material (`caCertPem`, `clientCertPem`, `clientKeyPem`)
 * @param base the server's URL (`https:`, else plain TCP)
 * @param signal ends the set-up; a socket that arrives after it is closed
 * @param opts `nativeTls`: OpenSSL rather than Deno's TLS where a CA is pinned (and
 *   `libssl.so.3` opens)
 * @returns the connection, ready for requests
 * @throws the signal's reason when aborted; Deno's connect and TLS errors; the pin check's
 *   error when the server's chain does not lead to the kubeconfig's CA (tls_pin.ts)
 */
export async function openConnection(
  server: KubeConnection,
  base: URL,
  signal: AbortSignal,
  opts: { nativeTls?: boolean } = {},
): Promise<Connection> {
  const https = base.protocol === "https:";
  const hostname = base.hostname.replace(/^\[(.*)\]$/, "$1");
  const port = Number(base.port || (https ? 443 : 80));
  // The CA alone trusted, the client certificate presented: the two set-ups that take both.
  const pinned = https && server.caCertPem
    ? {
      hostname,
      port,
      caPem: server.caCertPem,
      clientCertPem: server.clientCertPem,
      clientKeyPem: server.clientKeyPem,
      signal,
    }
    : undefined;
  if (pinned && opts.nativeTls && nativeTlsAvailable()) {
    return new Connection(await connectNativeTls(pinned));
  }
  if (pinned && server.clientCertPem && server.clientKeyPem) {
    // A client certificate (Deno.startTls takes none) with a pinned CA: node:tls, whose `ca`
    // replaces the trusted roots (pinned_tls.ts).
    const { connectPinnedTls } = await lazyImport<typeof import("../pinned_tls.ts")>(
      "../pinned_tls.ts",
      import.meta.url,
    );
    return new Connection(await connectPinnedTls({ ...pinned, alpnProtocols: ["http/1.1"] }));
  }
  const tcp = await abortable(Deno.connect({ hostname, port }), signal, (late) => late.close());
  // TCP_NODELAY: the request must not wait behind the TLS Finished record for the server's
  // delayed ACK (Nagle), which costs 40 ms per new connection (measured).
  tcp.setNoDelay(true);
  if (!https) return new Connection(tcp);
  const caCerts = server.caCertPem ? [server.caCertPem] : undefined;
  let tls: Deno.TlsConn | undefined;
  try {
    tls = await abortable(
      Deno.startTls(tcp, { hostname, caCerts, alpnProtocols: ["http/1.1"] }),
      signal,
      (late) => late.close(),
    );
    const conn = tls;
    await abortable(conn.handshake(), signal, () => conn.close());
    // Trust pinned to the kubeconfig's CA, as client-go's RootCAs (tls_pin.ts): Deno also
    // accepted its own roots (Mozilla's, DENO_CERT) in the handshake.
    if (server.caCertPem) {
      const { checkPinnedPeer } = await lazyImport<typeof import("../tls_pin.ts")>(
        "../tls_pin.ts",
        import.meta.url,
      );
      await checkPinnedPeer(conn, server.caCertPem);
    }
    return new Connection(conn);
  } catch (err) {
    try {
      (tls ?? tcp).close();
    } catch { /* already closed */ }
    throw err;
  }
}
