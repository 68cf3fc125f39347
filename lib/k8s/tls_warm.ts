/**
 * TLS warm-up for the per-pod hot path. A fresh Deno process pays a one-time, process-wide
 * initialisation of its crypto library (AWS-LC, used by rustls for TLS and by WebCrypto) the
 * first time it needs randomness or keys: ≈ 29 ms of CPU on the 2-core CI machines, measured
 * with `strace -tt` as one uninterrupted stretch after AWS-LC's fork-safety probes
 * (`/dev/sysgenid`, `MADV_WIPEONFORK`); later handshakes cost ≈ 2 ms whatever the CA. Paid by
 * the first API request, it lands on the critical path of ADD, and everything on the main
 * thread (the event loop included) waits for it.
 *
 * {@link warmTls} pays it on a Tokio blocking thread instead: an ECDSA P-256 `generateKey`
 * of WebCrypto, whose op Deno runs off the main thread (`spawn_blocking`) and which
 * initialises the same library. Calling it costs the main thread ≈ 0.3 ms (the worker thread
 * used before cost it ≈ 12–16 ms to create); a handshake after it resolves takes ≈ 2 ms
 * instead of ≈ 31 ms. No socket is opened and no permission is needed.
 *
 * @module
 */

import { preloadNativeTls } from "./http1/native_context.ts";

let started: Promise<number | undefined> | undefined;

/**
 * Whether the per-call plugin asks its client for TLS through OpenSSL
 * (`KubeClientOptions.nativeTls`): yes unless `MANIFOLD_NATIVE_TLS=0` (Deno's TLS, to measure
 * or to step around OpenSSL).
 * @param env the process environment
 * @returns false only for `MANIFOLD_NATIVE_TLS=0`
 */
export function nativeTlsWanted(env: Record<string, string | undefined>): boolean {
  return env.MANIFOLD_NATIVE_TLS !== "0";
}

/**
 * Starts {@link warmTls} when a plugin ADD with this (raw, not yet validated) config will talk
 * to the Kubernetes API: no standalone `nadDir`, and a `kubeconfig` or the in-cluster service
 * environment (`KUBERNETES_SERVICE_HOST`); never with `MANIFOLD_TLS_WARMUP=0` (to measure it).
 * main.ts calls it as soon as stdin is read (≈ 15 ms before the plugin's modules are loaded);
 * the daemon never does (its connection is warm).
 * @param config the stdin config as parsed JSON (anything: checked loosely here)
 * @param env the process environment
 * @returns true when the warm-up runs (started now or before); false too when the client will
 *   use OpenSSL (`nativeTlsWanted`): OpenSSL is then loaded ({@link preloadNativeTls}), and
 *   Deno's TLS warmed only if `libssl.so.3` cannot be
 */
export function warmTlsForApi(config: unknown, env: Record<string, string | undefined>): boolean {
  if (env.MANIFOLD_TLS_WARMUP === "0" || typeof config !== "object" || config === null) {
    return false;
  }
  const c = config as Record<string, unknown>;
  if (typeof c.nadDir === "string" && c.nadDir !== "") return false;
  const api = (typeof c.kubeconfig === "string" && c.kubeconfig !== "") ||
    !!env.KUBERNETES_SERVICE_HOST;
  if (!api) return false;
  if (nativeTlsWanted(env)) {
    // The plugin's TLS through OpenSSL needs none of it (http1/native_tls.ts): OpenSSL is
    // loaded now, off the main thread where it can be; only a node without libssl.so.3 warms.
    preloadNativeTls().then((native) => {
      if (!native) warmTls();
    });
    return false;
  }
  warmTls();
  return true;
}

/**
 * Starts the process-wide crypto initialisation on a blocking thread (once per process; later
 * calls return the first one). The key made is thrown away.
 * @returns resolves when done, with the ms it took, or undefined when WebCrypto refused (the
 *   first API request then pays the cost itself). Never rejects.
 * @example
 * ```ts
 * warmTls(); // fire and forget, as early as the process knows it will talk to the API
 * ```
 */
export function warmTls(): Promise<number | undefined> {
  return started ??= (async () => {
    const t0 = performance.now();
    try {
      await crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, false, ["sign"]);
      return performance.now() - t0;
    } catch {
      return undefined;
    }
  })();
}
