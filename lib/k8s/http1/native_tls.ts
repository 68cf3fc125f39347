/**
 * TLS to the API server through OpenSSL 3 (native/libssl.ts), for the per-call plugin
 * (`Http1Options.nativeTls`). Deno's TLS (rustls over AWS-LC) makes a fresh process wait ≈
 * 25 ms of CPU (AWS-LC's CPU Jitter Entropy, switched off only when Deno is built) before its
 * first handshake, and the plugin is a fresh process per pod operation; OpenSSL seeds its
 * generator from `getrandom(2)`. Measured on loopback in a fresh process: handshake done 8.3–8.9
 * ms after the runtime started, against 26.3 ms with `Deno.connectTls`.
 *
 * Trust is the kubeconfig's CA alone, as client-go's `RootCAs` (native_context.ts): none of the
 * system's roots, any of the CA's certificates an anchor, and the chain the server sends is
 * used, so a server certificate issued by an intermediate passes with the root alone in the
 * kubeconfig (which the Deno path's pin check cannot: tls_pin.ts). The host is checked against
 * the certificate as Go does (`SSL_set1_host`: a name against the DNS SANs only — never the
 * subject CN, no partial wildcard —, an IP literal against the IP SANs only); SNI is
 * sent for names only (RFC 6066 §3); TLS 1.2 at least, as client-go. No ALPN: a server speaks
 * HTTP/1.1 on a TLS connection that offers none (RFC 7301 §3.2).
 *
 * Every OpenSSL call runs on the main thread on a non-blocking socket; only `poll(2)` (and
 * `getaddrinfo(3)` for a name) waits on a thread of Deno's blocking pool, so the abort signal
 * and {@link ByteConn.close} wake a wait with `shutdown(2)`. The socket is freed once no wait
 * uses it. `close` sends no `close_notify` (the server sees the TCP end).
 *
 * Read against its references (client-go's `tls.Config`, the OpenSSL 3.0 manual, Deno's FFI;
 * tests/k8s/native_tls_review_test.ts holds what a test can show):
 * - Threads: OpenSSL's error queue is per thread; it is emptied before each `SSL_connect`,
 *   `SSL_read` and `SSL_write` (`SSL_get_error(3)` reads it), and `errno` is read on the main
 *   thread right after the call that failed.
 * - A read and a write at once on one `SSL` (a pipelined GET's read waiting while the next
 *   request is written): each retries its own call with the same arguments;
 *   `SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER` as the bytes may move (a small typed array lives on
 *   V8's heap). OpenSSL would refuse ("bad write retry") a read that must itself write while a
 *   write is pending — a TLS 1.2 renegotiation, a TLS 1.3 KeyUpdate asking for an answer — and
 *   a Go API server starts neither (crypto/tls never renegotiates as a server and only answers
 *   a peer's KeyUpdate). Go's client refuses renegotiation where OpenSSL's accepts a secure one;
 *   left so, as no Go server asks.
 * - The buffers of `nonblocking` calls (`poll`'s `pollfd`; `getaddrinfo`'s strings, hints and
 *   result) are `ArrayBuffer`s of their own (off V8's heap, never resized), and Deno keeps a
 *   buffer argument's store alive until the call returns (denoland/deno#32775, Deno 2.9).
 * - Descriptors: `close` (an abort during the connect or the handshake calls it) shuts the
 *   socket down, which ends a `poll` at once, connecting or connected; the `SSL` and the
 *   descriptor are freed when the last wait has returned. A `poll` ended by a handled signal
 *   (EINTR, no `revents`; poll(2) is never restarted) waits again. `getaddrinfo` cannot be
 *   interrupted: an abort during a lookup takes effect when it returns (bounded by
 *   resolv.conf's `timeout` and `attempts`).
 * - Errors keep the classes wire.ts's `connectionBroken` and the transport's retry of an
 *   idempotent request expect: `errno` through `SSL_ERROR_SYSCALL` (EPIPE → `BrokenPipe`,
 *   ECONNRESET → `ConnectionReset`), OpenSSL 3's "unexpected eof while reading" →
 *   `UnexpectedEof`, a `close_notify` → end of stream. SIGPIPE: the socket BIO writes with
 *   write(2), not `MSG_NOSIGNAL`, and the Deno runtime starts with SIGPIPE ignored (Rust's
 *   runtime; `SigIgn` bit 13 in /proc/self/status), so a write to a closed peer is EPIPE.
 * - Names: the kubeconfig's `tls-server-name` is ignored by the whole client
 *   (kubeconfig/load.ts), so the server URL's host is both the name checked and the SNI. A name
 *   resolves with `AI_ADDRCONFIG`, its addresses tried in the resolver's order; IPv6 literals
 *   as a URL writes them.
 * - Without OpenSSL (no `libssl.so.3` on the host — RHEL 8 has only libssl.so.1.1 — or no
 *   `--allow-ffi`) open.ts takes Deno's TLS and tls_warm.ts warms AWS-LC as before. With it the
 *   warm-up is skipped, so a plugin whose client still ends on Deno's or node's TLS pays the ≈ 25
 *   ms at its first handshake: a kubeconfig without a CA (the system's roots),
 *   `insecure-skip-tls-verify`, an `HTTPS_PROXY` of the runtime's environment covering the API
 *   server. Accepted: rare for a CNI plugin's kubeconfig, and main.ts does not read the
 *   kubeconfig before it decides.
 *
 * @module
 */

import { errnoAt } from "../../../native/libc.ts";
import { SSL } from "../../../native/libssl.ts";
import type { ByteConn } from "../pinned_tls.ts";
import { parseIp, resolve, sockaddr } from "./native_addr.ts";
import {
  drainErrors,
  nativeColdLib,
  type NativeLib,
  nativeLib,
  sslError,
  tlsContext,
} from "./native_context.ts";

export { nativeTlsAvailable } from "./native_context.ts";

type Lib = NativeLib;
const encoder = new TextEncoder();

/** Options of {@link connectNativeTls}. */
export interface NativeTlsOptions {
  /** Host name or IP literal (IPv6 without brackets) of the server; checked against its certificate. */
  hostname: string;
  /** TCP port. */
  port: number;
  /** The only trusted CA certificate(s), PEM. */
  caPem: string;
  /** Client certificate (chain, leaf first), PEM, presented when asked. */
  clientCertPem?: string;
  /** The client certificate's private key, PEM (PKCS#8, SEC1 or PKCS#1). */
  clientKeyPem?: string;
  /** Ends the set-up: the socket is closed and the signal's reason thrown. */
  signal?: AbortSignal;
}

/**
 * Connects to `hostname:port` and completes a TLS handshake trusting `caPem` alone (module
 * doc). A name is resolved with `getaddrinfo(3)` and its addresses tried in order until one
 * accepts the TCP connection.
 *
 * @param opts the server, the trust and the client certificate, the abort signal
 * @returns the connection, ready for the HTTP/1.1 wire (wire.ts)
 * @throws the signal's reason when aborted; `Deno.errors.ConnectionRefused` (and the other
 *   `Deno.errors` of a socket) when no address accepts; `Deno.errors.InvalidData` "invalid
 *   peer certificate: …" when the server's chain does not lead to the CA or does not name the
 *   host; `Deno.errors.InvalidData` when `caPem` holds no certificate or the client key does
 *   not match its certificate; an `Error` naming OpenSSL's reason for other handshake failures
 * @example
 * ```ts
 * const conn = await connectNativeTls({ hostname: "10.96.0.1", port: 443, caPem });
 * ```
 */
export async function connectNativeTls(opts: NativeTlsOptions): Promise<ByteConn> {
  const L = nativeLib();
  const { signal } = opts;
  signal?.throwIfAborted();
  const ip = parseIp(opts.hostname);
  const [, addrs] = await Promise.all([
    tlsContext(opts), // its errors (a key that does not match) before any connection
    ip ? [sockaddr(ip, opts.port)] : resolve(opts.hostname, opts.port, signal),
  ]);
  signal?.throwIfAborted();
  let last: unknown = new Deno.errors.NotFound(`no address found for ${opts.hostname}`);
  for (const sa of addrs) {
    signal?.throwIfAborted();
    const family = sa.length === 16 ? SSL.AF_INET : SSL.AF_INET6;
    const fd = L.socket(family, SSL.SOCK_STREAM | SSL.SOCK_NONBLOCK | SSL.SOCK_CLOEXEC, 0);
    if (fd < 0) throw osError(errnoAt(L));
    const conn = new NativeTlsConn(L, fd);
    const onAbort = () => conn.close();
    signal?.addEventListener("abort", onAbort, { once: true });
    try {
      // TCP_NODELAY: the request must not wait behind the handshake's last record for the
      // server's delayed ACK (Nagle; 40 ms a new connection, measured on the Deno path).
      L.setsockopt(fd, SSL.IPPROTO_TCP, SSL.TCP_NODELAY, new Int32Array([1]), 4);
      try {
        await conn.connectTcp(sa);
      } catch (err) {
        conn.close();
        if (signal?.aborted) throw signal.reason;
        last = err;
        continue;
      }
      // The context again, right before SSL_new takes its reference: the one awaited above may
      // have been evicted by other trusts and freed meanwhile (native_context.ts keeps a few).
      const ctx = await tlsContext(opts);
      signal?.throwIfAborted();
      await conn.handshake(ctx, opts.hostname, ip !== undefined);
      return conn;
    } catch (err) {
      conn.close();
      throw signal?.aborted ? signal.reason : err;
    } finally {
      signal?.removeEventListener("abort", onAbort);
    }
  }
  throw last;
}

/** A TLS connection over a non-blocking socket (module doc). */
class NativeTlsConn implements ByteConn {
  #L: Lib;
  #fd: number;
  #ssl: Deno.PointerObject | null = null;
  #closed = false;
  #released = false;
  /** `poll` calls in flight on another thread: the socket is freed after the last. */
  #waits = 0;

  constructor(L: Lib, fd: number) {
    this.#L = L;
    this.#fd = fd;
  }

  async connectTcp(sa: Uint8Array): Promise<void> {
    const L = this.#L;
    if (L.connect(this.#fd, sa, sa.length) === 0) return;
    const err = errnoAt(L);
    if (err !== SSL.EINPROGRESS) throw osError(err);
    let revents = 0;
    // No revents: poll returned EINTR (a handled signal landed on its thread; poll(2) is never
    // restarted, signal(7)) — the socket is still connecting.
    while (revents === 0) {
      revents = await this.#wait(SSL.POLLOUT);
      if (this.#closed) throw closedError();
    }
    if (revents & (SSL.POLLERR | SSL.POLLHUP)) {
      const value = new Int32Array(new ArrayBuffer(4));
      const len = new Uint32Array([4]);
      nativeColdLib().getsockopt(this.#fd, SSL.SOL_SOCKET, SSL.SO_ERROR, value, len);
      throw osError(value[0] || 111);
    }
  }

  async handshake(ctx: Deno.PointerObject, hostname: string, ip: boolean): Promise<void> {
    const L = this.#L;
    const ssl = this.#ssl = L.SSL_new(ctx);
    if (ssl === null) throw sslError("SSL_new");
    const host = encoder.encode(hostname + "\0");
    // A name matches the DNS SANs alone, `*` only as a whole left-most label: Go's
    // crypto/x509 (client-go), where OpenSSL would fall back to the subject CN when the
    // certificate has no DNS SAN and accept `ap*.example.com`.
    L.SSL_set_hostflags(
      ssl,
      SSL.X509_CHECK_FLAG_NEVER_CHECK_SUBJECT | SSL.X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS,
    );
    if (
      L.SSL_set_fd(ssl, this.#fd) !== 1 ||
      L.SSL_ctrl(ssl, SSL.SSL_CTRL_MODE, SSL.SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER, null) === 0n ||
      L.SSL_ctrl(ssl, SSL.SSL_CTRL_SET_MIN_PROTO_VERSION, SSL.TLS1_2_VERSION, null) !== 1n ||
      (!ip &&
        L.SSL_ctrl(ssl, SSL.SSL_CTRL_SET_TLSEXT_HOSTNAME, SSL.TLSEXT_NAMETYPE_host_name, host) !==
          1n) ||
      L.SSL_set1_host(ssl, host) !== 1
    ) throw sslError("TLS set-up");
    for (;;) {
      L.ERR_clear_error(); // SSL_get_error(3): the queue empty before the I/O call
      const r = L.SSL_connect(ssl);
      if (r === 1) return;
      await this.#retry(L.SSL_get_error(ssl, r), "handshake");
    }
  }

  async read(p: Uint8Array): Promise<number | null> {
    const L = this.#L;
    for (;;) {
      if (this.#closed || this.#ssl === null) throw closedError();
      L.ERR_clear_error(); // SSL_get_error(3): the queue empty before the I/O call
      const n = L.SSL_read(this.#ssl, p, Math.min(p.length, 0x7fffffff));
      if (n > 0) return n;
      const e = L.SSL_get_error(this.#ssl, n);
      if (e === SSL.SSL_ERROR_ZERO_RETURN) return null; // close_notify
      await this.#retry(e, "read");
    }
  }

  async write(p: Uint8Array): Promise<number> {
    const L = this.#L;
    if (p.length === 0) return 0;
    for (;;) {
      if (this.#closed || this.#ssl === null) throw closedError();
      L.ERR_clear_error(); // SSL_get_error(3): the queue empty before the I/O call
      const n = L.SSL_write(this.#ssl, p, Math.min(p.length, 0x7fffffff));
      if (n > 0) return n;
      await this.#retry(L.SSL_get_error(this.#ssl, n), "write");
    }
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#L.shutdown(this.#fd, SSL.SHUT_RDWR); // wakes a poll in flight
    this.#release();
  }

  [Symbol.dispose](): void {
    this.close();
  }

  /** Waits for what `SSL_get_error` asked, or throws what it reported. */
  async #retry(e: number, op: string): Promise<void> {
    if (e === SSL.SSL_ERROR_WANT_READ) await this.#wait(SSL.POLLIN);
    else if (e === SSL.SSL_ERROR_WANT_WRITE) await this.#wait(SSL.POLLOUT);
    else throw this.#failure(e, op);
    if (this.#closed) throw closedError();
  }

  /** The error for a failed `SSL_*` call (`SSL_get_error` said `e`). */
  #failure(e: number, op: string): Error {
    if (e === SSL.SSL_ERROR_SYSCALL) {
      const err = errnoAt(this.#L);
      drainErrors();
      return err === 0 ? unexpectedEof() : osError(err);
    }
    if (e !== SSL.SSL_ERROR_SSL) return new Error(`TLS ${op} failed (SSL_get_error ${e})`);
    const errors = drainErrors();
    if (errors.some((x) => x.eof)) return unexpectedEof();
    if (op === "handshake" && this.#ssl !== null) {
      const C = nativeColdLib();
      const verify = C.SSL_get_verify_result(this.#ssl);
      if (verify !== 0n) {
        const text = C.X509_verify_cert_error_string(verify);
        return new Deno.errors.InvalidData(
          `invalid peer certificate: ${
            text === null ? `X509 error ${verify}` : Deno.UnsafePointerView.getCString(text)
          }`,
        );
      }
    }
    const why = errors.map((x) => x.text).join("; ") || "no reason given";
    return new Error(`TLS ${op} failed: ${why}`);
  }

  /** Polls the socket for `events` on another thread; returns `revents`. */
  async #wait(events: number): Promise<number> {
    // Its own buffer per wait (a read and a write may wait at once), never moved by the GC.
    const view = new DataView(new ArrayBuffer(8));
    view.setInt32(0, this.#fd, true);
    view.setInt16(4, events, true);
    this.#waits++;
    try {
      await this.#L.poll(new Uint8Array(view.buffer), 1n, -1);
      return view.getInt16(6, true);
    } finally {
      this.#waits--;
      if (this.#closed) this.#release();
    }
  }

  #release(): void {
    if (this.#released || this.#waits > 0) return;
    this.#released = true;
    if (this.#ssl !== null) this.#L.SSL_free(this.#ssl);
    this.#L.close(this.#fd);
  }
}

function unexpectedEof(): Error {
  return new Deno.errors.UnexpectedEof("peer closed connection without sending TLS close_notify");
}

function closedError(): Error {
  return new Deno.errors.BadResource("the TLS connection is closed");
}

const OS_ERRORS: Record<number, [string, new (msg: string) => Error]> = {
  32: ["Broken pipe", Deno.errors.BrokenPipe],
  99: ["Cannot assign requested address", Deno.errors.AddrNotAvailable],
  101: ["Network is unreachable", Deno.errors.NetworkUnreachable],
  103: ["Software caused connection abort", Deno.errors.ConnectionAborted],
  104: ["Connection reset by peer", Deno.errors.ConnectionReset],
  110: ["Connection timed out", Deno.errors.TimedOut],
  111: ["Connection refused", Deno.errors.ConnectionRefused],
  113: ["No route to host", Error],
};

/** The `Deno.errors` class and message (Rust's `io::Error` wording) for an `errno`. */
function osError(err: number): Error {
  const [text, Class] = OS_ERRORS[err] ?? ["I/O error", Error];
  return new Class(`${text} (os error ${err})`);
}
