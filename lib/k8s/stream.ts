/**
 * Streaming HTTP answers from the API server, for watches: the status and headers as soon
 * as they arrive, then the body chunk by chunk for as long as the server keeps the
 * response open. The request/answer {@link Transport} of `transport.ts` reads bodies
 * whole, which a watch (a response that never ends by itself) cannot use.
 *
 * Same TLS rules as `transport.ts`: `fetch` with a `Deno.createHttpClient` (the
 * kubeconfig CA, client certificate and key), or `node:https` with
 * `rejectUnauthorized: false` for `insecure-skip-tls-verify`. Also the request/answer forms of
 * those two ({@link FetchTransport}, {@link NodeInsecureTransport}), which `transport.ts`
 * chooses for a proxied server, a client certificate without a CA, or
 * `insecure-skip-tls-verify`. Loaded only by {@link KubeClient.watch} and those: the plugin's
 * ADD over HTTP/1.1 never imports it.
 *
 * @module
 */

import type { KubeConnection } from "./connection.ts";
import { KubeError } from "./errors.ts";
import { proxyApplies, proxyEnv, warnUnpinnedOnce } from "./transport.ts";
import type { Transport, TransportRequest, TransportResponse } from "./transport_types.ts";
import { errorText } from "../util/text.ts";

/** An answer whose body is still arriving. */
export interface StreamResponse {
  /** HTTP status. */
  status: number;
  /** Response headers. */
  headers: Headers;
  /** The body's bytes as they arrive; ends when the server ends the response. */
  body: AsyncIterable<Uint8Array>;
  /** Reads the rest of the body as text (for error answers), at most `maxBytes` (default 64 KiB). */
  text(maxBytes?: number): Promise<string>;
  /** Stops reading and releases the connection; idempotent. */
  cancel(): void;
}

/** Opens streaming requests over its own connections until closed. */
export interface StreamTransport {
  /**
   * Sends one request and resolves once the status line and headers are in.
   * `req.signal` also aborts reading the body later.
   * @throws whatever the underlying stack throws for connection, TLS and abort failures,
   *   or a `KubeError` of kind `"config"` when the TLS material is unusable.
   */
  open(req: TransportRequest): Promise<StreamResponse>;
  /** Closes its connections; idempotent. */
  close(): void;
}

/**
 * Creates the streaming transport of a connection; nothing is opened until the first request.
 *
 * @param conn where and how to connect (see `loadKubeconfig`)
 * @returns a `fetch`-based transport, or a `node:https` one for
 *   `insecureSkipTlsVerify` on an `https:` server
 */
export function createStreamTransport(conn: KubeConnection): StreamTransport {
  if (conn.insecureSkipTlsVerify && conn.server.startsWith("https:")) {
    return new NodeInsecureStreamTransport(conn);
  }
  if (conn.caCertPem && conn.server.startsWith("https:")) {
    if (!proxyApplies(conn.server, proxyEnv())) {
      // Pinned: node:https with the kubeconfig CA as the only trusted root.
      return new NodeInsecureStreamTransport(conn);
    }
    warnUnpinnedOnce(conn.server);
  }
  return new FetchStreamTransport(conn);
}

async function readText(body: AsyncIterable<Uint8Array>, maxBytes: number): Promise<string> {
  const dec = new TextDecoder();
  let out = "";
  let n = 0;
  for await (const chunk of body) {
    out += dec.decode(chunk, { stream: true });
    n += chunk.length;
    if (n >= maxBytes) break;
  }
  return out + dec.decode();
}

class FetchStreamTransport implements StreamTransport {
  #fetch: FetchClient;

  constructor(conn: KubeConnection) {
    this.#fetch = new FetchClient(conn);
  }

  async open(req: TransportRequest): Promise<StreamResponse> {
    const res = await this.#fetch.fetch(req);
    const stream = res.body;
    let reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
    const cancel = () => {
      const r = reader;
      reader = undefined;
      if (r) r.cancel().catch(() => {});
      else stream?.cancel().catch(() => {});
    };
    const body: AsyncIterable<Uint8Array> = {
      async *[Symbol.asyncIterator]() {
        if (!stream) return;
        reader = stream.getReader();
        try {
          for (;;) {
            if (!reader) return;
            const { done, value } = await reader.read();
            if (done) return;
            yield value;
          }
        } finally {
          cancel();
        }
      },
    };
    return {
      status: res.status,
      headers: res.headers,
      body,
      text: (maxBytes = 65536) => readText(body, maxBytes),
      cancel,
    };
  }

  close(): void {
    this.#fetch.close();
  }
}

class NodeInsecureStreamTransport implements StreamTransport {
  #client: NodeInsecureClient;

  constructor(conn: KubeConnection) {
    this.#client = new NodeInsecureClient(conn);
  }

  async open(req: TransportRequest): Promise<StreamResponse> {
    const res = await this.#client.request(req);
    return { ...res, text: (maxBytes = 65536) => readText(res.body, maxBytes) };
  }

  close(): void {
    this.#client.close();
  }
}

/**
 * `fetch` over the `Deno.HttpClient` of a connection (the kubeconfig CA, else the system
 * roots, and the client certificate), created on the first request. Shared by the request
 * transport ({@link FetchTransport}) and the streaming one here.
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

/** Requests over {@link FetchClient}, bodies read whole (`transport.ts` chooses it). */
export class FetchTransport implements Transport {
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
 * first request. Shared by the request transport ({@link NodeInsecureTransport}) and the streaming one here.
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

/** Requests over {@link NodeInsecureClient}, bodies read whole (`transport.ts` chooses it). */
export class NodeInsecureTransport implements Transport {
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
