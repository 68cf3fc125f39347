/**
 * Loopback TCP ports for the servers tests start (kube-apiserver, etcd, a daemon's metrics).
 *
 * @module
 */

/**
 * A port on 127.0.0.1 that is free right now and below the kernel's ephemeral range
 * (32768–60999). A port picked by binding port 0 lies inside that range, where the many outgoing
 * connections of a test run (the kube-apiserver's to etcd among them) can take it between the
 * pick and the server's bind ("Address already in use").
 * @returns a port in [20000, 32000) that could be bound a moment ago
 * @throws {Error} when 100 random picks were all taken
 */
export function loopbackPort(): number {
  for (let i = 0; i < 100; i++) {
    const port = 20000 + Math.floor(Math.random() * 12000);
    try {
      Deno.listen({ hostname: "127.0.0.1", port }).close();
      return port;
    } catch { /* taken: another */ }
  }
  throw new Error("no free port in [20000, 32000)");
}
