/**
 * One HTTP exchange with the API server, over TLS set up from a {@link KubeConnection}.
 *
 * Three implementations:
 * - `http1/`: HTTP/1.1 written to a `Deno.connectTls` socket — the default, because the
 *   first `fetch` of a process costs ≈ 20 ms (measured) and the plugin is a process per pod
 *   operation. Server verification against the kubeconfig CA (or the system roots) and
 *   client-certificate TLS.
 * - `fetch` with a `Deno.createHttpClient({ caCerts, cert, key })` (stable in Deno 2.9,
 *   no `--unstable` flag), used when a proxy environment variable (`HTTPS_PROXY`,
 *   `HTTP_PROXY`, not excluded by `NO_PROXY`) applies to the server (fetch honours them),
 *   and for client-certificate authentication (which `http1/` does not do).
 * - `node:https` with `rejectUnauthorized: false`, loaded lazily and used only for
 *   kubeconfig `insecure-skip-tls-verify: true`: `Deno.createHttpClient` has no
 *   per-client switch to skip verification (only the process-wide
 *   `--unsafely-ignore-certificate-errors` flag), whereas Deno's `node:https` honours
 *   `rejectUnauthorized` per request.
 *
 * @module
 */

import type { KubeConnection } from "./connection.ts";
import { KubeError } from "./errors.ts";
import { type Http1Options, Http1Transport } from "./http1/transport.ts";
import type { Transport, TransportRequest, TransportResponse } from "./transport_types.ts";

export type {
  ResponseHeaderReader,
  Transport,
  TransportRequest,
  TransportResponse,
} from "./transport_types.ts";
import { errorText } from "../util/text.ts";

/**
 * Creates the transport for a connection. Nothing is opened until the first request.
 *
 * @param conn where and how to connect.
 * @param env the process environment, for the proxy variables (default: read from `Deno.env`
 *   when permitted).
 * @param http1 options of the HTTP/1.1 socket transport (pipelining); the others ignore them.
 * @returns the `node:https` transport when `conn.insecureSkipTlsVerify` is set on an `https:`
 *   server, the fetch one when a proxy applies or a client certificate is used, else the
 *   HTTP/1.1 socket one.
 */
export function createTransport(
  conn: KubeConnection,
  env: Record<string, string | undefined> = proxyEnv(),
  http1: Http1Options = {},
): Transport {
  if (conn.insecureSkipTlsVerify && conn.server.startsWith("https:")) {
    return new NodeInsecureTransport(conn);
  }
  const proxied = proxyApplies(conn.server, env);
  if (!proxied && conn.caCertPem && conn.server.startsWith("https:")) {
    // The kubeconfig's CA alone is trusted: HTTP/1.1 over node:tls (pinned_tls.ts), which
    // also does the client certificate.
    return new Http1Transport(conn, http1);
  }
  if (proxied || (conn.clientCertPem && conn.clientKeyPem)) {
    if (proxied && conn.caCertPem) warnUnpinnedOnce(conn.server);
    return new FetchTransport(conn);
  }
  return new Http1Transport(conn, http1);
}

let warnedUnpinned = false;

/**
 * Logs once per process that a proxied connection cannot pin the kubeconfig CA: `fetch`
 * (the only transport that honours `HTTPS_PROXY`) adds `caCerts` to the default roots.
 * @param server the API server URL
 */
export function warnUnpinnedOnce(server: string): void {
  if (warnedUnpinned) return;
  warnedUnpinned = true;
  console.error(
    `manifold: ${server} is reached through HTTPS_PROXY: the kubeconfig CA is trusted in ` +
      `addition to the system roots and DENO_CERT (not pinned); unset the proxy for ` +
      `this server (NO_PROXY) to pin it`,
  );
}

const PROXY_VARS = [
  "HTTPS_PROXY",
  "https_proxy",
  "HTTP_PROXY",
  "http_proxy",
  "NO_PROXY",
  "no_proxy",
];

/**
 * The proxy variables of the process environment (empty without env permission).
 * @returns `HTTPS_PROXY`, `HTTP_PROXY`, `NO_PROXY` (both cases) as set
 */
export function proxyEnv(): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = {};
  for (const k of PROXY_VARS) {
    try {
      out[k] = Deno.env.get(k);
    } catch { /* no env permission: no proxy */ }
  }
  return out;
}

/**
 * True when a proxy variable applies to `server` the way Go's `httpproxy` reads them:
 * `HTTPS_PROXY` for https, `HTTP_PROXY` for http (upper case first), unless `NO_PROXY` has `*`
 * or a host suffix / IP that matches (ports and CIDRs are not interpreted: such entries never
 * exclude, so the proxy-honouring fetch transport is used).
 * @example proxyApplies("https://10.96.0.1:443", { HTTPS_PROXY: "http://p:3128" }) // true
 */
export function proxyApplies(server: string, env: Record<string, string | undefined>): boolean {
  const url = new URL(server);
  const proxy = url.protocol === "https:"
    ? env.HTTPS_PROXY || env.https_proxy
    : env.HTTP_PROXY || env.http_proxy;
  if (!proxy) return false;
  const host = url.hostname.replace(/^\[(.*)\]$/, "$1").toLowerCase();
  for (const raw of (env.NO_PROXY || env.no_proxy || "").split(",")) {
    const entry = raw.trim().toLowerCase().replace(/^\[(.*)\]$/, "$1");
    if (entry === "") continue;
    if (entry === "*") return false;
    const bare = entry.replace(/^\./, "");
    if (host === bare || host.endsWith(`.${bare}`)) return false;
  }
  return true;
}

/**
 * `fetch` over the `Deno.HttpClient` of a connection (the kubeconfig CA, else the system
 * roots, and the client certificate), created on the first request. Shared by the request
 * transport here and the streaming one (`stream.ts`).
 */
export class FetchClient {
  #conn: KubeConnection;
  #client: Deno.HttpClient | undefined;
  #closed = false;

  /**
   * Creates it; nothing is opened until the first request.
   * @param conn where and how to connect
   */
  constructor(conn: KubeConnection) {
    this.#conn = conn;
  }

  /**
   * Sends `req`; the response body is left for the caller to read.
   * @throws {KubeError} `"config"` when the certificate or key is unusable; Error when closed;
   *   whatever `fetch` throws for connection, TLS and abort failures.
   */
  fetch(req: TransportRequest): Promise<Response> {
    if (this.#closed) throw new Error("Transport is closed");
    return fetch(req.url, {
      method: req.method,
      headers: req.headers,
      body: req.body,
      signal: req.signal,
      client: this.#client ??= this.#create(),
    });
  }

  /** Closes the client and its pooled connections; idempotent. */
  close(): void {
    this.#closed = true;
    this.#client?.close();
    this.#client = undefined;
  }

  #create(): Deno.HttpClient {
    const c = this.#conn;
    const opts: Deno.CreateHttpClientOptions & Partial<Deno.TlsCertifiedKeyPem> = {};
    if (c.caCertPem) opts.caCerts = [c.caCertPem];
    if (c.clientCertPem && c.clientKeyPem) {
      opts.cert = c.clientCertPem;
      opts.key = c.clientKeyPem;
    }
    try {
      return Deno.createHttpClient(opts as Deno.CreateHttpClientOptions);
    } catch (err) {
      throw tlsMaterialError(err);
    }
  }
}

function tlsMaterialError(err: unknown): KubeError {
  return new KubeError(
    "config",
    "Unusable TLS certificate or key in the Kubernetes connection",
    { details: errorText(err) },
  );
}

class FetchTransport implements Transport {
  #fetch: FetchClient;

  constructor(conn: KubeConnection) {
    this.#fetch = new FetchClient(conn);
  }

  async send(req: TransportRequest): Promise<TransportResponse> {
    const res = await this.#fetch.fetch(req);
    return { status: res.status, headers: res.headers, body: await res.text() };
  }

  close(): void {
    this.#fetch.close();
  }
}

type NodeHttps = typeof import("node:https");

/** An answer of {@link NodeInsecureClient}, its body still arriving. */
export interface InsecureResponse {
  /** HTTP status. */
  status: number;
  /** Response headers. */
  headers: Headers;
  /**
   * The body's bytes as they arrive; iterate once. Throws the request signal's reason when
   * it aborts. Ending or breaking the iteration releases the response.
   */
  body: AsyncIterable<Uint8Array>;
  /** Stops reading and releases the response (idempotent). */
  cancel(): void;
}

/**
 * Requests over `node:https` without server verification (kubeconfig
 * `insecure-skip-tls-verify`; `Deno.createHttpClient` has no per-client switch for it), with
 * the connection's client certificate and a keep-alive agent; `node:https` is loaded on the
 * first request. Shared by the request transport here and the streaming one (`stream.ts`).
 */
export class NodeInsecureClient {
  #conn: KubeConnection;
  #pinned: boolean;
  #https: Promise<{ https: NodeHttps; agent: import("node:https").Agent }> | undefined;
  #closed = false;

  /**
   * Creates it; nothing is opened until the first request.
   * @param conn where and how to connect
   */
  constructor(conn: KubeConnection) {
    this.#conn = conn;
    // With a CA and no insecure-skip-tls-verify: verify against that CA alone (node's `ca`
    // replaces the trusted roots; Deno's `caCerts` would add to them).
    this.#pinned = !conn.insecureSkipTlsVerify && !!conn.caCertPem;
  }

  /**
   * Sends `req` and resolves once the status and headers are in.
   * @throws Error when closed; the signal's reason when it aborts; the connection's error.
   */
  async request(req: TransportRequest): Promise<InsecureResponse> {
    if (this.#closed) throw new Error("Transport is closed");
    const { https, agent } = await this.#load();
    req.signal.throwIfAborted();
    const url = new URL(req.url);
    return await new Promise<InsecureResponse>((resolve, reject) => {
      const onAbort = () => r.destroy(req.signal.reason);
      const r = https.request({
        hostname: url.hostname.replace(/^\[(.*)\]$/, "$1"),
        port: url.port || 443,
        path: url.pathname + url.search,
        method: req.method,
        headers: req.headers,
        agent,
        rejectUnauthorized: this.#pinned,
        ...(this.#pinned ? { ca: this.#conn.caCertPem } : {}),
      }, (res) => {
        const headers = new Headers();
        for (const [k, v] of Object.entries(res.headers)) {
          if (v !== undefined) headers.set(k, Array.isArray(v) ? v.join(", ") : String(v));
        }
        const cancel = () => {
          req.signal.removeEventListener("abort", onAbort);
          res.destroy();
        };
        const body: AsyncIterable<Uint8Array> = {
          async *[Symbol.asyncIterator]() {
            try {
              for await (const chunk of res) yield chunk as Uint8Array;
            } catch (err) {
              throw req.signal.aborted ? req.signal.reason : err;
            } finally {
              cancel();
            }
          },
        };
        resolve({ status: res.statusCode ?? 0, headers, body, cancel });
      });
      r.on("error", (err: Error) => {
        req.signal.removeEventListener("abort", onAbort);
        reject(req.signal.aborted ? req.signal.reason : err);
      });
      req.signal.addEventListener("abort", onAbort, { once: true });
      r.end(req.body);
    });
  }

  /** Destroys the agent's connections; idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#https?.then(({ agent }) => agent.destroy(), () => {});
  }

  #load() {
    return this.#https ??= import("node:https").then((mod) => {
      const https = (mod.default ?? mod) as NodeHttps;
      const c = this.#conn;
      const agent = new https.Agent({
        keepAlive: true,
        rejectUnauthorized: this.#pinned,
        ...(this.#pinned ? { ca: c.caCertPem } : {}),
        ...(c.clientCertPem && c.clientKeyPem
          ? { cert: c.clientCertPem, key: c.clientKeyPem }
          : {}),
      });
      return { https, agent };
    });
  }
}

class NodeInsecureTransport implements Transport {
  #client: NodeInsecureClient;

  constructor(conn: KubeConnection) {
    this.#client = new NodeInsecureClient(conn);
  }

  async send(req: TransportRequest): Promise<TransportResponse> {
    const res = await this.#client.request(req);
    const chunks: Uint8Array[] = [];
    for await (const chunk of res.body) chunks.push(chunk);
    const bytes = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
    let off = 0;
    for (const c of chunks) {
      bytes.set(c, off);
      off += c.length;
    }
    return { status: res.status, headers: res.headers, body: new TextDecoder().decode(bytes) };
  }

  close(): void {
    this.#client.close();
  }
}
