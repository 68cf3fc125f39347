/**
 * One HTTP exchange with the API server, over TLS set up from a {@link KubeConnection}.
 *
 * Two implementations:
 * - `fetch` with a `Deno.createHttpClient({ caCerts, cert, key })` (stable in Deno 2.9,
 *   no `--unstable` flag): server verification against the kubeconfig CA (or the
 *   system roots) and client-certificate TLS.
 * - `node:https` with `rejectUnauthorized: false`, loaded lazily and used only for
 *   kubeconfig `insecure-skip-tls-verify: true`: `Deno.createHttpClient` has no
 *   per-client switch to skip verification (only the process-wide
 *   `--unsafely-ignore-certificate-errors` flag), whereas Deno's `node:https` honours
 *   `rejectUnauthorized` per request.
 *
 * @module
 */

import type { KubeConnection } from "./kubeconfig.ts";
import { CniError, CniErrorCode } from "../cni/errors.ts";

/** One request; `url` is absolute, `body` is UTF-8 text. */
export interface TransportRequest {
  method: string;
  url: string;
  headers: Record<string, string>;
  body?: string;
  /** Aborts connecting, sending and reading the body. */
  signal: AbortSignal;
}

/** The answer with its body fully read (so the connection can be reused). */
export interface TransportResponse {
  status: number;
  headers: Headers;
  body: string;
}

/** Sends requests over kept-alive connections until closed. */
export interface Transport {
  /**
   * Sends one request.
   * @throws whatever the underlying stack throws for connection, TLS and abort failures
   *   (the caller classifies them), or {@link CniError} 7 when the TLS material is unusable.
   */
  send(req: TransportRequest): Promise<TransportResponse>;
  /** Closes pooled connections; idempotent. */
  close(): void;
}

/**
 * Creates the transport for a connection. Nothing is opened until the first request.
 *
 * @param conn where and how to connect.
 * @returns a fetch-based transport, or a `node:https` one when
 *   `conn.insecureSkipTlsVerify` is set on an `https:` server.
 */
export function createTransport(conn: KubeConnection): Transport {
  if (conn.insecureSkipTlsVerify && conn.server.startsWith("https:")) {
    return new NodeInsecureTransport(conn);
  }
  return new FetchTransport(conn);
}

function tlsMaterialError(err: unknown): CniError {
  return new CniError(
    CniErrorCode.InvalidNetworkConfig,
    "Unusable TLS certificate or key in the Kubernetes connection",
    err instanceof Error ? err.message : String(err),
  );
}

class FetchTransport implements Transport {
  #conn: KubeConnection;
  #client: Deno.HttpClient | undefined;
  #closed = false;

  constructor(conn: KubeConnection) {
    this.#conn = conn;
  }

  #httpClient(): Deno.HttpClient {
    if (this.#client) return this.#client;
    const c = this.#conn;
    const opts: Deno.CreateHttpClientOptions & Partial<Deno.TlsCertifiedKeyPem> = {};
    if (c.caCertPem) opts.caCerts = [c.caCertPem];
    if (c.clientCertPem && c.clientKeyPem) {
      opts.cert = c.clientCertPem;
      opts.key = c.clientKeyPem;
    }
    try {
      this.#client = Deno.createHttpClient(opts as Deno.CreateHttpClientOptions);
    } catch (err) {
      throw tlsMaterialError(err);
    }
    return this.#client;
  }

  async send(req: TransportRequest): Promise<TransportResponse> {
    if (this.#closed) throw new Error("Transport is closed");
    const res = await fetch(req.url, {
      method: req.method,
      headers: req.headers,
      body: req.body,
      signal: req.signal,
      client: this.#httpClient(),
    });
    const body = await res.text();
    return { status: res.status, headers: res.headers, body };
  }

  close(): void {
    this.#closed = true;
    this.#client?.close();
    this.#client = undefined;
  }
}

type NodeHttps = typeof import("node:https");

class NodeInsecureTransport implements Transport {
  #conn: KubeConnection;
  #https: Promise<{ https: NodeHttps; agent: import("node:https").Agent }> | undefined;
  #closed = false;

  constructor(conn: KubeConnection) {
    this.#conn = conn;
  }

  #load() {
    this.#https ??= import("node:https").then((mod) => {
      const https = (mod.default ?? mod) as NodeHttps;
      const c = this.#conn;
      const agent = new https.Agent({
        keepAlive: true,
        rejectUnauthorized: false,
        ...(c.clientCertPem && c.clientKeyPem
          ? { cert: c.clientCertPem, key: c.clientKeyPem }
          : {}),
      });
      return { https, agent };
    });
    return this.#https;
  }

  async send(req: TransportRequest): Promise<TransportResponse> {
    if (this.#closed) throw new Error("Transport is closed");
    const { https, agent } = await this.#load();
    req.signal.throwIfAborted();
    const url = new URL(req.url);
    return await new Promise<TransportResponse>((resolve, reject) => {
      const onAbort = () => r.destroy(req.signal.reason);
      const r = https.request({
        hostname: url.hostname.replace(/^\[(.*)\]$/, "$1"),
        port: url.port || 443,
        path: url.pathname + url.search,
        method: req.method,
        headers: req.headers,
        agent,
        rejectUnauthorized: false,
      }, (res) => {
        const chunks: Uint8Array[] = [];
        res.on("data", (c: Uint8Array) => chunks.push(c));
        res.on("error", reject);
        res.on("end", () => {
          req.signal.removeEventListener("abort", onAbort);
          const headers = new Headers();
          for (const [k, v] of Object.entries(res.headers)) {
            if (v !== undefined) headers.set(k, Array.isArray(v) ? v.join(", ") : String(v));
          }
          const bytes = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
          let off = 0;
          for (const c of chunks) {
            bytes.set(c, off);
            off += c.length;
          }
          resolve({ status: res.statusCode ?? 0, headers, body: new TextDecoder().decode(bytes) });
        });
      });
      r.on("error", (err: Error) => {
        req.signal.removeEventListener("abort", onAbort);
        reject(req.signal.aborted ? req.signal.reason : err);
      });
      req.signal.addEventListener("abort", onAbort, { once: true });
      r.end(req.body);
    });
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#https?.then(({ agent }) => agent.destroy(), () => {});
  }
}
