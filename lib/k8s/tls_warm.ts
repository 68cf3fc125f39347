/**
 * TLS warm-up for the per-pod hot path. A fresh Deno process pays a one-time, process-wide
 * TLS client initialisation on its first handshake (≈ 45–65 ms of CPU on the 2-core CI
 * machines, measured with `Deno.connectTls`; later handshakes ≈ 2 ms whatever the CA). Paid
 * by the first API request, it lands on the critical path of ADD.
 *
 * {@link warmTls} pays it early with a handshake that needs no server: a TLS client against a
 * plain TCP listener of our own on loopback. The handshake fails (the peer speaks no TLS), but
 * only after the initialisation has run. No packet leaves the host; no API request is made.
 * - `"worker"`: on a worker thread, in parallel with the main thread's start-up (for ADD with
 *   annotations from the API, whose first request comes before any delegate runs). Creating a
 *   worker costs the main thread ≈ 15–25 ms, so this pays off only when the main thread would
 *   otherwise block on the initialisation.
 * - `"here"`: on the calling thread, asynchronously — for when the main thread is about to wait
 *   anyway (a delegate process is running), e.g. before the final status PATCH of an ADD that
 *   made no other API request.
 *
 * Needs `--allow-net` like the API client. The compiled binary must include the worker module
 * (`deno compile --include lib/k8s/tls_warm_worker.ts`).
 *
 * @module
 */

/** A started warm-up. */
export interface TlsWarmup {
  /** Resolves when done (ms it took), or undefined if it could not run. Never rejects. */
  done: Promise<number | undefined>;
  /** Stops a worker warm-up (idempotent; a no-op for `"here"`). */
  stop(): void;
}

let current: TlsWarmup | undefined;

/**
 * Starts the process-wide TLS client initialisation (once per process; later calls return
 * the first warm-up). Never throws: a warm-up that cannot run just means the first API request
 * pays the cost itself.
 * @param where `"worker"` (another thread) or `"here"` (this thread, asynchronously).
 */
export function warmTls(where: "worker" | "here"): TlsWarmup {
  if (current) return current;
  if (where === "here") {
    current = { done: dummyHandshake().catch(() => undefined), stop() {} };
    return current;
  }
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

/**
 * One TLS client handshake against a plain TCP listener on 127.0.0.1 (an ephemeral port of
 * this process): it fails by design once the client has initialised TLS.
 * @returns the ms it took.
 */
export async function dummyHandshake(): Promise<number> {
  const started = performance.now();
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const accepting = (async () => {
    try {
      const conn = await listener.accept();
      conn.close();
    } catch { /* listener closed */ }
  })();
  try {
    const conn = await Deno.connectTls({
      hostname: "127.0.0.1",
      port: (listener.addr as Deno.NetAddr).port,
    });
    try {
      await conn.handshake();
    } finally {
      conn.close();
    }
  } catch { /* expected: the peer is not TLS */ }
  listener.close();
  await accepting;
  return performance.now() - started;
}
