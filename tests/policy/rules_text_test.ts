import assert from "node:assert/strict";
import { formatRules } from "../../lib/policy/mod.ts";

Deno.test("formatRules renders a libnftables listing close to nft's text", () => {
  assert.deepEqual(formatRules(null), ["No MultiNetworkPolicy rules."]);
  const lines = formatRules([
    { table: { family: "inet", name: "manifold_mnp", handle: 1 } },
    {
      set: {
        family: "inet",
        name: "s4",
        table: "manifold_mnp",
        type: "ipv4_addr",
        elem: ["10.0.0.1", { prefix: { addr: "10.1.0.0", len: 24 } }],
      },
    },
    { set: { family: "inet", name: "s6", table: "manifold_mnp", type: "ipv6_addr" } },
    {
      chain: {
        family: "inet",
        table: "manifold_mnp",
        name: "input",
        hook: "input",
        prio: 0,
        policy: "accept",
      },
    },
    {
      rule: {
        chain: "in_net1",
        comment: "a/db ingress[0]",
        expr: [
          {
            match: {
              op: "==",
              left: { payload: { protocol: "ip", field: "saddr" } },
              right: "@s4",
            },
          },
          {
            match: {
              op: "==",
              left: { payload: { protocol: "tcp", field: "dport" } },
              right: { range: [8000, 8002] },
            },
          },
          { counter: { packets: 1, bytes: 60 } },
          { accept: null },
        ],
      },
    },
  ]);
  assert.deepEqual(lines, [
    "table inet manifold_mnp",
    "  set s4 (ipv4_addr): { 10.0.0.1, 10.1.0.0/24 }",
    "  set s6 (ipv6_addr): { }",
    "  chain input hook input priority 0 policy accept",
    '    [in_net1] ip saddr @s4 tcp dport 8000-8002 counter packets 1 bytes 60 accept comment "a/db ingress[0]"',
  ]);
});
