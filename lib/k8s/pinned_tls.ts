/**
 * A TLS connection to the API server that trusts ONLY the kubeconfig's certificate authority
 * (client-go sets `tls.Config.RootCAs` to that CA alone).
 *
 * Why `node:tls`: in Deno 2.9.6 the `caCerts` of `Deno.connectTls`/`Deno.startTls` and of
 * `Deno.createHttpClient` are used *in addition to* the default root store (Mozilla's roots or
 * `DENO_TLS_CA_STORE=system`, plus every certificate of `DENO_CERT`), and Deno offers no option
 * that replaces that store, no verification hook and no access to the peer's certificate
 * after the handshake (`TlsHandshakeInfo` holds only the ALPN protocol). Deno's `node:tls`
 * implements Node's semantics where `ca` REPLACES the trusted roots: measured with Deno 2.9.6,
 * a server whose certificate chains to CA-B is refused with `ca: [CA-A]` even when `DENO_CERT`
 * holds CA-B, whereas `Deno.startTls({ caCerts: [CA-A] })` accepts it. Host name checking is
 * Node's default `checkServerIdentity` (SAN DNS/IP against the URL host), as client-go.
 *
 * Used where the cheaper post-handshake check of `tls_pin.ts` (Deno.startTls + the peer
 * certificate checked against the CA, ≈ 1 ms) cannot be: client-certificate connections
 * (`Deno.startTls` takes no client certificate) in `http1/`, and, through `node:https` with
 * the same `ca` semantics, the watch streams (`stream.ts`) — the per-pod ADD never loads it
 * unless the kubeconfig authenticates with a client certificate.
 *
 * Cost (measured, loopback, 2-core machine, fresh process, connect + handshake + one GET):
 * ≈ 46 ms instead of ≈ 28 ms with `Deno.startTls` — ≈ 15 ms of it loading `node:tls` once
 * per process; later connections of the same process ≈ 2.0 ms instead of ≈ 1.2 ms.
 *
 * @module
 */

import type * as NodeTls from "node:tls";

let tlsModule: Promise<typeof NodeTls> | undefined;

/** Options of {@link connectPinnedTls}. */
export interface PinnedTlsOptions {
  /** Host name or IP literal (no brackets) of the server; checked against the certificate. */
  hostname: string;
  /** TCP port. */
  port: number;
  /** The only trusted CA(s), PEM (one or more certificates). */
  caPem: string;
  /** Client certificate chain (PEM) for client-certificate authentication. */
  clientCertPem?: string;
  /** The client certificate's private key (PEM). */
  clientKeyPem?: string;
  /** ALPN protocols offered, e.g. `["http/1.1"]`. */
  alpnProtocols?: string[];
  /** Aborts the connect/handshake. */
  signal?: AbortSignal;
}

/** The subset of `Deno.Conn` the HTTP/1.1 client uses. */
export interface ByteConn {
  /** Reads into `p`; resolves to the byte count, or null at end of stream. */
  read(p: Uint8Array): Promise<number | null>;
  /** Writes `p`; resolves to the byte count written. */
  write(p: Uint8Array): Promise<number>;
  /** Closes the connection (idempotent). */
  close(): void;
}

const IP_LITERAL = /^(\d{1,3}(\.\d{1,3}){3}|.*:.*)$/;
const HIGH_WATER = 1024 * 1024;

/** A `node:tls` socket seen as a {@link ByteConn}, with back-pressure (pauses above 1 MiB). */
class NodeTlsByteConn implements ByteConn {
  #sock: NodeTls.TLSSocket;
  #chunks: Uint8Array[] = [];
  #buffered = 0;
  #ended = false;
  #error: Error | undefined;
  #wake: (() => void) | undefined;
  #closed = false;

  constructor(sock: NodeTls.TLSSocket) {
    this.#sock = sock;
    sock.on("data", (d: Uint8Array) => {
      this.#chunks.push(d);
      this.#buffered += d.length;
      if (this.#buffered > HIGH_WATER) sock.pause();
      this.#notify();
    });
    sock.on("end", () => {
      this.#ended = true;
      this.#notify();
    });
    sock.on("close", () => {
      this.#ended = true;
      this.#notify();
    });
    sock.on("error", (e: Error) => {
      this.#error ??= e;
      this.#notify();
    });
  }

  #notify(): void {
    const w = this.#wake;
    this.#wake = undefined;
    w?.();
  }

  async read(p: Uint8Array): Promise<number | null> {
    while (this.#chunks.length === 0) {
      if (this.#error) throw this.#error;
      if (this.#ended || this.#closed) return null;
      await new Promise<void>((r) => this.#wake = r);
    }
    const head = this.#chunks[0];
    const n = Math.min(p.length, head.length);
    p.set(head.subarray(0, n));
    if (n === head.length) this.#chunks.shift();
    else this.#chunks[0] = head.subarray(n);
    this.#buffered -= n;
    if (this.#buffered <= HIGH_WATER && this.#sock.isPaused()) this.#sock.resume();
    return n;
  }

  write(p: Uint8Array): Promise<number> {
    if (this.#error) return Promise.reject(this.#error);
    if (this.#closed) return Promise.reject(new Error("connection closed"));
    return new Promise((resolve, reject) => {
      this.#sock.write(p, (err?: Error | null) => err ? reject(err) : resolve(p.length));
    });
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#sock.destroy();
    this.#notify();
  }
}

/**
 * Opens a TCP + TLS connection that trusts only `caPem` (never the built-in roots,
 * `DENO_TLS_CA_STORE` nor `DENO_CERT`), with `TCP_NODELAY`, and completes the handshake.
 * @param opts server, the pinned CA, optional client certificate, ALPN, abort signal
 * @returns the connection, handshake done and the server verified
 * @throws Error whose message starts with `invalid peer certificate:` (so
 *   `isTlsVerifyFailure` classifies it as final) when the server's certificate does not chain
 *   to `caPem` or does not name `hostname`; the socket error for connection failures; the
 *   signal's reason when aborted.
 */
export async function connectPinnedTls(opts: PinnedTlsOptions): Promise<ByteConn> {
  tlsModule ??= import("node:tls");
  const tls = await tlsModule;
  opts.signal?.throwIfAborted();
  return await new Promise<ByteConn>((resolve, reject) => {
    const sock = tls.connect({
      host: opts.hostname,
      port: opts.port,
      servername: IP_LITERAL.test(opts.hostname) ? undefined : opts.hostname,
      ca: opts.caPem,
      cert: opts.clientCertPem,
      key: opts.clientKeyPem,
      ALPNProtocols: opts.alpnProtocols,
      rejectUnauthorized: true,
    });
    const onAbort = () => {
      sock.destroy();
      reject(opts.signal?.reason);
    };
    opts.signal?.addEventListener("abort", onAbort, { once: true });
    const fail = (e: Error & { code?: string }) => {
      opts.signal?.removeEventListener("abort", onAbort);
      sock.destroy();
      const code = e.code ?? "";
      const verify = /CERT|ALTNAME|SELF_SIGNED|UNABLE_TO|VERIFY/.test(code) ||
        /certificate|Hostname\/IP does not match/i.test(e.message);
      reject(
        verify
          ? new Error(
            `invalid peer certificate: ${e.message}${code ? ` (${code})` : ""} ` +
              `(trusted: only the kubeconfig's certificate authority)`,
          )
          : e,
      );
    };
    sock.once("error", fail);
    sock.once("secureConnect", () => {
      opts.signal?.removeEventListener("abort", onAbort);
      sock.off("error", fail);
      if (!sock.authorized) {
        fail(Object.assign(new Error(String(sock.authorizationError)), { code: "CERT" }));
        return;
      }
      sock.setNoDelay(true);
      resolve(new NodeTlsByteConn(sock));
    });
  });
}
