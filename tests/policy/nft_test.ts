/** Rendering a PodRuleset as libnftables JSON: full replacement, set-only updates, lockdown. */

import assert from "node:assert/strict";
import {
  type PodRuleset,
  renderRemove,
  renderRuleset,
  renderSetUpdate,
} from "../../lib/policy/mod.ts";

const T = { family: "inet", table: "manifold_mnp" };

function ruleset(peers: string[]): PodRuleset {
  return {
    interfaces: [{
      ifName: "net1",
      network: "a/net1",
      ingress: [
        {
          comment: "a/p ingress[0] from[0]",
          set: "in_net1_0_v4",
          port: { protocol: "tcp", from: 80, to: 90 },
        },
        { comment: "a/p ingress[1]", port: { protocol: "udp" } },
      ],
      egress: [{ comment: "a/p egress[0] to[0]", set: "out_net1_0_v4", port: null }],
    }],
    sets: [
      { name: "in_net1_0_v4", family: "ipv4", interval: false, elements: peers },
      {
        name: "out_net1_0_v4",
        family: "ipv4",
        interval: true,
        elements: ["10.0.0.1/32", "10.1.0.0/16"],
      },
    ],
  };
}

const rulesOf = (cmds: Record<string, unknown>[], chain: string) =>
  cmds.map((c) => (c.add as { rule?: { chain: string; expr: unknown[] } })?.rule).filter((r) =>
    r?.chain === chain
  );

Deno.test("full batch: table replaced atomically, sets, hooked chains, default drop last", () => {
  const { nftables: cmds } = renderRuleset(ruleset(["10.0.0.2"]));
  assert.deepEqual(cmds.slice(0, 3), [
    { add: { table: { family: "inet", name: "manifold_mnp" } } },
    { delete: { table: { family: "inet", name: "manifold_mnp" } } },
    { add: { table: { family: "inet", name: "manifold_mnp" } } },
  ]);
  assert.deepEqual(cmds[3], {
    add: { set: { ...T, name: "in_net1_0_v4", type: "ipv4_addr", elem: ["10.0.0.2"] } },
  });
  assert.deepEqual(cmds[4], {
    add: {
      set: {
        ...T,
        name: "out_net1_0_v4",
        type: "ipv4_addr",
        flags: ["interval"],
        elem: ["10.0.0.1", { prefix: { addr: "10.1.0.0", len: 16 } }],
      },
    },
  });
  assert.deepEqual(cmds[5], {
    add: {
      chain: { ...T, name: "input", type: "filter", hook: "input", prio: 0, policy: "accept" },
    },
  });
  const input = rulesOf(cmds, "input");
  assert.deepEqual(input.map((r) => r!.expr), [
    [{ match: { op: "in", left: { ct: { key: "state" } }, right: ["established", "related"] } }, {
      accept: null,
    }],
    [{ match: { op: "==", left: { meta: { key: "iifname" } }, right: "net1" } }, {
      jump: { target: "in_net1" },
    }],
  ]);
  const chain = rulesOf(cmds, "in_net1");
  assert.equal(chain.length, 4, "ND, two allows, drop");
  assert.deepEqual(chain[0]!.expr[1], {
    match: {
      op: "==",
      left: { payload: { protocol: "icmpv6", field: "type" } },
      right: {
        set: [
          "mld-listener-query", // 130
          "mld-listener-report", // 131
          "mld-listener-done", // 132
          "mld2-listener-report", // 143
          "nd-router-solicit",
          "nd-router-advert",
          "nd-neighbor-solicit",
          "nd-neighbor-advert",
        ],
      },
    },
  }, "MLD and neighbour discovery pass an isolated interface");
  assert.deepEqual(chain[1]!.expr, [
    {
      match: {
        op: "==",
        left: { payload: { protocol: "ip", field: "saddr" } },
        right: "@in_net1_0_v4",
      },
    },
    {
      match: {
        op: "==",
        left: { payload: { protocol: "tcp", field: "dport" } },
        right: { range: [80, 90] },
      },
    },
    { accept: null },
  ]);
  assert.deepEqual(chain[2]!.expr, [
    { match: { op: "==", left: { meta: { key: "l4proto" } }, right: "udp" } },
    { accept: null },
  ]);
  assert.deepEqual(chain[3]!.expr, [{ counter: null }, { drop: null }]);
  const out = rulesOf(cmds, "out_net1");
  assert.deepEqual(out[1]!.expr, [
    {
      match: {
        op: "==",
        left: { payload: { protocol: "ip", field: "daddr" } },
        right: "@out_net1_0_v4",
      },
    },
    { accept: null },
  ]);
  assert.deepEqual(rulesOf(cmds, "output")[1]!.expr[0], {
    match: { op: "==", left: { meta: { key: "oifname" } }, right: "net1" },
  });
});

Deno.test("equal input renders byte-identical batches", () => {
  assert.equal(
    JSON.stringify(renderRuleset(ruleset(["10.0.0.2", "10.0.0.3"]))),
    JSON.stringify(renderRuleset(ruleset(["10.0.0.2", "10.0.0.3"]))),
  );
});

Deno.test("a peer change is a set-only update; a rule change needs a full batch", () => {
  assert.deepEqual(renderSetUpdate(ruleset(["10.0.0.2"]), ruleset(["10.0.0.2"])), { nftables: [] });
  assert.deepEqual(renderSetUpdate(ruleset(["10.0.0.2"]), ruleset(["10.0.0.3", "10.0.0.4"])), {
    nftables: [
      { flush: { set: { ...T, name: "in_net1_0_v4" } } },
      { add: { element: { ...T, name: "in_net1_0_v4", elem: ["10.0.0.3", "10.0.0.4"] } } },
    ],
  });
  assert.deepEqual(renderSetUpdate(ruleset(["10.0.0.2"]), ruleset([])), {
    nftables: [{ flush: { set: { ...T, name: "in_net1_0_v4" } } }],
  });
  const changed = ruleset(["10.0.0.2"]);
  changed.interfaces[0].ingress![0].port = { protocol: "tcp", from: 81, to: 81 };
  assert.equal(renderSetUpdate(ruleset(["10.0.0.2"]), changed), null);
});

Deno.test("lockdown drops every interface but the kept ones, both directions", () => {
  const { nftables: cmds } = renderRuleset({
    interfaces: [],
    sets: [],
    lockdown: { keep: ["eth0", "lo"] },
  });
  for (const [chain, key] of [["input", "iifname"], ["output", "oifname"]]) {
    const rules = rulesOf(cmds, chain);
    assert.deepEqual(rules[1]!.expr, [
      { match: { op: "!=", left: { meta: { key } }, right: { set: ["eth0", "lo"] } } },
      { counter: null },
      { drop: null },
    ]);
  }
});

Deno.test("no policed interface: just the (empty) table; remove is add+delete", () => {
  assert.equal(renderRuleset({ interfaces: [], sets: [] }).nftables.length, 3);
  assert.deepEqual(renderRemove().nftables.map((c) => Object.keys(c)[0]), ["add", "delete"]);
});
