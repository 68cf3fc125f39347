/**
 * The daemon's HTTP endpoint on `--metrics-address HOST:PORT`: `GET /healthz` (liveness),
 * `GET /readyz` (readiness) and `GET /metrics` (Prometheus text format 0.0.4, see
 * `metrics.ts`). Loaded by `manifold daemon` only: this module pulls in `prom-client`.
 *
 * @module
 */

import { createDaemonMetrics } from "./metrics.ts";
import type { DaemonObserver } from "./observer.ts";

/** What `/readyz` reports: ready or not, and why not (one short sentence per reason). */
export interface Readiness {
  /** True when the daemon can serve (API reachable, NAD watch synced). */
  ok: boolean;
  /** Why it cannot, one line each; empty when ready. */
  reasons: string[];
}

/** Options of {@link startDaemonHttp}. */
export interface DaemonHttpOptions {
  /** `HOST:PORT` to listen on (`127.0.0.1:9091`, `[::1]:9091`; port 0 picks a free port). */
  address: string;
  /** Called on each `/readyz`; must not throw (a throw answers 503 with its message). */
  ready: () => Readiness;
  /** The forwarder's fallbacks file (`<socket dir>/fallbacks`), counted at each scrape. */
  fallbackFile?: string;
}

/** A running endpoint. */
export interface DaemonHttp {
  /** Feeds `/metrics`; hand it to the daemon. */
  observer: DaemonObserver;
  /** Where it listens (the real port when 0 was asked). */
  addr: { hostname: string; port: number };
  /** Stops listening and waits for open requests; idempotent. */
  close(): Promise<void>;
}

/**
 * Splits `HOST:PORT` (IPv6 in brackets).
 *
 * @param address `127.0.0.1:9091`, `0.0.0.0:9091`, `[::1]:9091`, `localhost:0`
 * @returns hostname (brackets removed) and port 0–65535
 * @throws Error when the shape or the port is invalid
 * @example
 * ```ts
 * parseListenAddress("[::1]:9091"); // { hostname: "::1", port: 9091 }
 * ```
 */
export function parseListenAddress(address: string): { hostname: string; port: number } {
  const m = /^(?:\[([0-9A-Fa-f:.]+)\]|([^\s:[\]]+)):(\d{1,5})$/.exec(address);
  const port = m ? Number(m[3]) : NaN;
  if (!m || port > 65535) {
    throw new Error(`invalid listen address "${address}": expected HOST:PORT, e.g. 127.0.0.1:9091`);
  }
  return { hostname: m[1] ?? m[2], port };
}

/**
 * Starts the health and metrics endpoint (Deno.serve). `/healthz` answers 200 `ok` while the
 * process lives; `/readyz` 200 `ok` when `ready()` says so, else 503 with the reasons, one per
 * line; `/metrics` the registry in Prometheus text format. `GET` and `HEAD` only (405
 * otherwise); other paths 404.
 *
 * @param opts address, readiness probe and fallbacks file
 * @returns the observer feeding `/metrics`, the bound address and `close()`
 * @throws Error for an invalid address; Deno.errors.AddrInUse when the port is taken
 */
export async function startDaemonHttp(opts: DaemonHttpOptions): Promise<DaemonHttp> {
  const { hostname, port } = parseListenAddress(opts.address);
  const metrics = createDaemonMetrics({ fallbackFile: opts.fallbackFile });
  const text = (body: string, status = 200, type = "text/plain; charset=utf-8") =>
    new Response(body, { status, headers: { "content-type": type } });
  const handler = async (req: Request): Promise<Response> => {
    const path = new URL(req.url).pathname;
    if (path !== "/healthz" && path !== "/readyz" && path !== "/metrics") {
      return text("not found\n", 404);
    }
    if (req.method !== "GET" && req.method !== "HEAD") {
      return new Response("method not allowed\n", { status: 405, headers: { allow: "GET, HEAD" } });
    }
    if (path === "/healthz") return text("ok\n");
    if (path === "/readyz") {
      let r: Readiness;
      try {
        r = opts.ready();
      } catch (e) {
        r = { ok: false, reasons: [`readiness probe failed: ${String(e)}`] };
      }
      return r.ok
        ? text("ok\n")
        : text(`not ready\n${r.reasons.map((x) => `${x}\n`).join("")}`, 503);
    }
    try {
      return text(await metrics.scrape(), 200, metrics.contentType);
    } catch (e) {
      return text(`metrics collection failed: ${String(e)}\n`, 500);
    }
  };
  const { promise: listening, resolve } = Promise.withResolvers<void>();
  const server = Deno.serve({ hostname, port, onListen: () => resolve() }, handler);
  await listening;
  const addr = server.addr as Deno.NetAddr;
  let closing: Promise<void> | undefined;
  return {
    observer: metrics.observer,
    addr: { hostname: addr.hostname, port: addr.port },
    close() {
      closing ??= server.shutdown().then(() => metrics.clear());
      return closing;
    },
  };
}
