/**
 * Streaming HTTP answers from the API server, for watches: the status and headers as soon
 * as they arrive, then the body chunk by chunk for as long as the server keeps the
 * response open. The request/answer {@link Transport} of `transport.ts` reads bodies
 * whole, which a watch (a response that never ends by itself) cannot use.
 *
 * Same TLS rules as `transport.ts`: `fetch` with a `Deno.createHttpClient` (the
 * kubeconfig CA, client certificate and key), or `node:https` with
 * `rejectUnauthorized: false` for `insecure-skip-tls-verify`. Loaded only by
 * {@link KubeClient.watch}: the plugin's ADD never imports it.
 *
 * @module
 */

import type { KubeConnection } from "./connection.ts";
import {
  FetchClient,
  NodeInsecureClient,
  proxyApplies,
  proxyEnv,
  type TransportRequest,
  warnUnpinnedOnce,
} from "./transport.ts";

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
