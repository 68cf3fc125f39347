/**
 * Worker body of {@link warmTls} (see `tls_warm.ts`): performs one TLS client handshake
 * against a plain TCP listener of its own on loopback. The handshake fails (the listener
 * speaks no TLS), but only after the process-wide TLS client initialisation (≈ 45–65 ms of
 * CPU in a fresh Deno 2.9 process, measured) has run — on this worker's thread, in parallel
 * with the plugin's own start-up. No packet leaves the host; no API request is made.
 * Posts `{ ms }` (time spent) and closes.
 *
 * @module
 */

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
/** The worker global scope (this module only runs as a worker). */
const scope = self as unknown as { postMessage(msg: unknown): void; close(): void };
scope.postMessage({ ms: performance.now() - started });
scope.close();
