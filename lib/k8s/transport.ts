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
 * The last two live in `stream.ts` with their streaming forms, loaded on a first request that
 * needs them: a per-call ADD over HTTP/1.1 never loads them.
 *
 * @module
 */

import type { KubeConnection } from "./connection.ts";
import { type Http1Options, Http1Transport } from "./http1/transport.ts";
import type { Transport, TransportRequest, TransportResponse } from "./transport_types.ts";
import { lazyImport } from "../util/lazy.ts";

export type { Http1Options } from "./http1/transport.ts";
export type {
  ResponseHeaderReader,
  Transport,
  TransportRequest,
  TransportResponse,
} from "./transport_types.ts";

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
    return new LoadedTransport((m) => new m.NodeInsecureTransport(conn));
  }
  const proxied = proxyApplies(conn.server, env);
  if (!proxied && conn.caCertPem && conn.server.startsWith("https:")) {
    // The kubeconfig's CA alone is trusted: HTTP/1.1 over node:tls (pinned_tls.ts), which
    // also does the client certificate.
    return new Http1Transport(conn, http1);
  }
  if (proxied || (conn.clientCertPem && conn.clientKeyPem)) {
    if (proxied && conn.caCertPem) warnUnpinnedOnce(conn.server);
    return new LoadedTransport((m) => new m.FetchTransport(conn));
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

type Streams = typeof import("./stream.ts");

/** A transport of `stream.ts`, loaded with that module on its first request. */
class LoadedTransport implements Transport {
  #make: (m: Streams) => Transport;
  #impl: Promise<Transport> | undefined;
  #closed = false;

  constructor(make: (m: Streams) => Transport) {
    this.#make = make;
  }

  send(req: TransportRequest): Promise<TransportResponse> {
    if (this.#closed) return Promise.reject(new Error("Transport is closed"));
    this.#impl ??= lazyImport<typeof import("./stream.ts")>("./stream.ts", import.meta.url)
      .then(this.#make);
    return this.#impl.then((t) => t.send(req));
  }

  close(): void {
    this.#closed = true;
    this.#impl?.then((t) => t.close(), () => {});
  }
}
