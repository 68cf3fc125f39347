/**
 * TLS warm-up for the per-pod hot path. A fresh Deno process pays a one-time, process-wide
 * TLS client initialisation on its first handshake (≈ 45–65 ms of CPU on the 2-core CI
 * machines, measured with `Deno.connectTls`; later handshakes ≈ 2 ms whatever the CA). On the
 * main thread that cost lands on the first API request (the pod GET) and blocks everything
 * else. {@link warmTls} pays it on a worker thread instead, started as soon as ADD knows it
 * will talk to the API, so it overlaps config parsing and module loading on the main thread,
 * and the main thread's real handshake with the API server is then ≈ 2 ms.
 *
 * The worker makes no API request and sends nothing off the host (see
 * `tls_warm_worker.ts`); it needs `--allow-net` like the API client. The compiled binary must
 * include the worker module (`deno compile --include lib/k8s/tls_warm_worker.ts`).
 *
 * @module
 */

/** A started warm-up. */
export interface TlsWarmup {
  /** Resolves when the worker is done (ms it took), or undefined if it failed. Never rejects. */
  done: Promise<number | undefined>;
  /** Stops the worker (idempotent). */
  stop(): void;
}

let current: TlsWarmup | undefined;

/**
 * Starts the TLS client initialisation on a worker thread (once per process; later calls
 * return the same warm-up). Never throws: a worker that cannot start just means the first
 * API request pays the cost itself.
 */
export function warmTls(): TlsWarmup {
  if (current) return current;
  let worker: Worker | undefined;
  const done = new Promise<number | undefined>((resolve) => {
    try {
      worker = new Worker(new URL("./tls_warm_worker.ts", import.meta.url), { type: "module" });
      worker.onmessage = (e: MessageEvent<{ ms: number }>) => {
        resolve(e.data.ms);
        worker?.terminate();
      };
      worker.onerror = (e) => {
        e.preventDefault();
        resolve(undefined);
        worker?.terminate();
      };
    } catch {
      resolve(undefined);
    }
  });
  current = { done, stop: () => worker?.terminate() };
  return current;
}
