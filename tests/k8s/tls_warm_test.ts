import assert from "node:assert/strict";
import { dummyHandshake, warmTls } from "../../lib/k8s/tls_warm.ts";

Deno.test("dummyHandshake fails its handshake by design and leaves nothing open", async () => {
  const ms = await dummyHandshake();
  assert.ok(ms >= 0 && ms < 5000, `took ${ms} ms`);
  // The sanitizers fail this test if the listener or a connection is left open.
});

Deno.test("warmTls runs the handshake on a worker once per process", async () => {
  const first = warmTls();
  assert.equal(warmTls(), first, "one warm-up per process");
  const ms = await first;
  assert.equal(typeof ms, "number", "the worker ran and reported");
});
