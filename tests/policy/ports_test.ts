/** `ports[]` → port matches: default TCP, ranges, named ports, de-duplication, order. */

import assert from "node:assert/strict";
import { resolvePorts } from "../../lib/policy/ports.ts";

Deno.test("no ports: any protocol and port", () => {
  assert.deepEqual(resolvePorts(undefined), { matches: [null], unresolved: [] });
  assert.deepEqual(resolvePorts([]).matches, [null]);
});

Deno.test("protocol defaults to TCP; endPort makes a range; protocol only = all its ports", () => {
  assert.deepEqual(
    resolvePorts([{ port: 80 }, { protocol: "UDP", port: 53 }, { protocol: "SCTP" }, {
      port: 8000,
      endPort: 8080,
    }]).matches,
    [
      { protocol: "sctp" },
      { protocol: "tcp", from: 80, to: 80 },
      { protocol: "tcp", from: 8000, to: 8080 },
      { protocol: "udp", from: 53, to: 53 },
    ],
  );
});

Deno.test("duplicates collapse", () => {
  assert.equal(resolvePorts([{ port: 80 }, { protocol: "TCP", port: 80 }]).matches.length, 1);
});

Deno.test("named ports resolve through container ports with the same protocol", () => {
  const named = [
    { name: "http", port: 8080, protocol: "TCP" as const },
    { name: "dns", port: 5353, protocol: "UDP" as const },
  ];
  assert.deepEqual(resolvePorts([{ port: "http" }, { protocol: "UDP", port: "dns" }], named), {
    matches: [{ protocol: "tcp", from: 8080, to: 8080 }, { protocol: "udp", from: 5353, to: 5353 }],
    unresolved: [],
  });
  assert.deepEqual(resolvePorts([{ port: "dns" }, { port: "metrics" }], named), {
    matches: [],
    unresolved: ["dns/tcp", "metrics/tcp"],
  });
});
