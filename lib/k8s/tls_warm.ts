/**
 * TLS warm-up for the per-pod hot path. A fresh Deno process pays a one-time, process-wide
 * TLS client initialisation on its first handshake (≈ 40–60 ms of CPU on the 2-core CI
 * machines, measured with `Deno.connectTls`; later handshakes ≈ 2 ms whatever the CA). Paid
 * by the first API request, it lands on the critical path of ADD, and everything on the main
 * thread (the event loop included) waits for it.
 *
 * {@link warmTls} pays it on a worker thread, started as soon as ADD knows it will talk to the
 * API, in parallel with the main thread's start-up and default delegate. Creating the worker
 * costs the main thread ≈ 16 ms; measured net gain ≈ 20 ms for ADDs with annotations from the
 * runtime, neutral for those from the API. (Doing it on the main thread while the first
 * delegate runs gains nothing: the initialisation blocks the event loop longer than the
 * delegate runs.)
 *
 * The worker performs {@link dummyHandshake}: no API request, no packet off the host. It needs
 * `--allow-net` like the API client. The compiled binary must include the worker module
 * (`deno compile --include lib/k8s/tls_warm_worker.ts`).
 *
 * @module
 */

let started: Promise<number | undefined> | undefined;

/**
 * Starts the process-wide TLS client initialisation on a worker thread (once per process;
 * later calls return the first one).
 * @returns resolves when the worker is done, with the ms its handshake took, or undefined when
 *   it could not run (the first API request then pays the cost itself). Never rejects.
 */
export function warmTls(): Promise<number | undefined> {
  return started ??= new Promise((resolve) => {
    let worker: Worker;
    try {
      worker = new Worker(new URL("./tls_warm_worker.ts", import.meta.url), { type: "module" });
    } catch {
      return resolve(undefined);
    }
    worker.onmessage = (e: MessageEvent<{ ms: number }>) => {
      resolve(e.data.ms);
      worker.terminate();
    };
    worker.onerror = (e) => {
      e.preventDefault();
      resolve(undefined);
      worker.terminate();
    };
  });
}

/**
 * One TLS client handshake against a plain TCP listener on 127.0.0.1 (an ephemeral port of
 * this process): it fails by design, once the client has initialised TLS.
 * @returns the ms it took.
 */
export async function dummyHandshake(): Promise<number> {
  const t0 = performance.now();
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
  return performance.now() - t0;
}
