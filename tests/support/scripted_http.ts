/**
 * A scripted HTTP/1.1 server for the transport's tests (tests/k8s/http1*_test.ts): it accepts
 * on a loopback port (plain TCP, or TLS with a given certificate), splits each connection's
 * bytes into requests (head, and a body of its `content-length`) and hands every connection to
 * a script that decides what is written back, when, and when the connection ends — what a real
 * server cannot be told to do at an exact point (close between two pipelined requests, hold a
 * body, reset). Everything it opened is closed when the test's function returns or throws.
 */

/** One request as it arrived. */
export interface ScriptedRequest {
  /** The method, e.g. `GET`. */
  method: string;
  /** The request target (path and query). */
  path: string;
  /** The request's bytes as text: head, blank line and body. */
  raw: string;
}

/** One accepted connection, its requests and a few ways to answer. */
export class ScriptedConn {
  /** The requests read so far, in arrival order (none when the server does not parse). */
  readonly requests: ScriptedRequest[] = [];
  /** The client closed its side (or the read failed): no more requests will arrive. */
  ended = false;
  #wake: (() => void)[] = [];

  /**
   * Wraps an accepted connection.
   * @param index its place in accept order (0 for the first)
   * @param conn the socket (a `Deno.TlsConn` on a TLS server)
   */
  constructor(readonly index: number, readonly conn: Deno.Conn) {}

  /**
   * Waits for the `i`-th request (from 0) of this connection.
   * @param i the request's index
   * @param ms give up after this long (default: never)
   * @returns the request, or undefined when the client ended first or `ms` passed
   */
  async request(i: number, ms = Infinity): Promise<ScriptedRequest | undefined> {
    const until = Date.now() + ms;
    while (this.requests.length <= i && !this.ended && Date.now() < until) {
      await new Promise<void>((r) => {
        this.#wake.push(r);
        if (ms !== Infinity) setTimeout(r, Math.min(50, Math.max(0, until - Date.now())));
      });
    }
    return this.requests[i];
  }

  /**
   * Writes `text` (all of it).
   * @param text what to send, usually a response
   */
  async send(text: string): Promise<void> {
    const bytes = new TextEncoder().encode(text);
    for (let off = 0; off < bytes.length;) off += await this.conn.write(bytes.subarray(off));
  }

  /** Closes the socket (idempotent). */
  close(): void {
    try {
      this.conn.close();
    } catch { /* already closed */ }
  }

  /** Reads requests until the client ends; called by the server unless told not to parse. */
  async readRequests(): Promise<void> {
    const buf = new Uint8Array(65536);
    let pending = "";
    try {
      for (;;) {
        const n = await this.conn.read(buf);
        if (n === null) break;
        pending += new TextDecoder().decode(buf.subarray(0, n));
        for (let end; (end = pending.indexOf("\r\n\r\n")) >= 0;) {
          const len = Number(/content-length: (\d+)/i.exec(pending.slice(0, end))?.[1] ?? 0);
          if (pending.length < end + 4 + len) break;
          const raw = pending.slice(0, end + 4 + len);
          pending = pending.slice(end + 4 + len);
          const [method, path] = raw.split(" ");
          this.requests.push({ method, path, raw });
          this.#notify();
        }
      }
    } catch { /* closed */ }
    this.ended = true;
    this.#notify();
  }

  #notify(): void {
    for (const w of this.#wake.splice(0)) w();
  }
}

/** A running scripted server. */
export interface ScriptedServer {
  /** `http://127.0.0.1:<port>` (`https://` with `tls`). */
  url: string;
  /** Every accepted connection, in accept order. */
  conns: ScriptedConn[];
  /** Per connection, its requests so far: a GET's path, else `METHOD path`. */
  paths(): string[][];
}

/** Options of {@link withScriptedServer}. */
export interface ScriptedServerOptions {
  /**
   * Runs for each accepted connection (not awaited; its errors are dropped): answers its
   * requests. Absent: the connection is accepted and never answered.
   */
  script?: (c: ScriptedConn) => Promise<void> | void;
  /** Split the bytes into {@link ScriptedConn.requests} (default true); false: the script reads. */
  parse?: boolean;
  /** Serve TLS with this certificate and key (PEM) instead of plain TCP. */
  tls?: { certPem: string; keyPem: string };
}

/**
 * Runs `fn` against a scripted server, then closes the listener and every connection.
 * @param opts the per-connection script, parsing, TLS
 * @param fn the test, given the server's URL and connections
 * @returns what `fn` returns
 */
export async function withScriptedServer<T>(
  opts: ScriptedServerOptions,
  fn: (server: ScriptedServer) => Promise<T>,
): Promise<T> {
  const listener = opts.tls
    ? Deno.listenTls({
      hostname: "127.0.0.1",
      port: 0,
      cert: opts.tls.certPem,
      key: opts.tls.keyPem,
    })
    : Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const conns: ScriptedConn[] = [];
  const serving = (async () => {
    for await (const conn of listener) {
      const c = new ScriptedConn(conns.length, conn);
      conns.push(c);
      if (opts.parse ?? true) void c.readRequests();
      (async () => await opts.script?.(c))().catch(() => {});
    }
  })();
  const port = (listener.addr as Deno.NetAddr).port;
  try {
    return await fn({
      url: `${opts.tls ? "https" : "http"}://127.0.0.1:${port}`,
      conns,
      paths: () =>
        conns.map((c) =>
          c.requests.map((r) => r.method === "GET" ? r.path : `${r.method} ${r.path}`)
        ),
    });
  } finally {
    listener.close();
    for (const c of conns) c.close();
    await serving.catch(() => {});
  }
}

/**
 * A complete `200 OK` response with a `Content-Length` body.
 * @param body the body
 * @param close add `Connection: close`
 * @returns the response's text
 */
export function okResponse(body: string, close = false): string {
  return `HTTP/1.1 200 OK\r\nContent-Length: ${new TextEncoder().encode(body).length}\r\n` +
    (close ? "Connection: close\r\n" : "") + `\r\n${body}`;
}
