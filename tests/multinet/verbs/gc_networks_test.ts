/** Tests of lib/multinet/verbs/gc_networks.ts (no permissions). */

import assert from "node:assert/strict";
import { canonicalJson, groupGcNetworks } from "../../../lib/multinet/verbs/gc_networks.ts";

const cbr0 = { cniVersion: "1.1.0", name: "cbr0", plugins: [{ type: "bridge", bridge: "cni0" }] };
// Two NADs named "blue" in two namespaces: two configs with one name.
const blueA = { cniVersion: "1.1.0", name: "blue", type: "macvlan", master: "eth1" };
const blueB = { cniVersion: "1.1.0", name: "blue", type: "bridge", bridge: "br-b" };
const red = { cniVersion: "1.1.0", name: "red", type: "bridge", bridge: "br-r" };

Deno.test("canonicalJson ignores key order at every level", () => {
  assert.equal(canonicalJson({ b: 1, a: [{ d: 2, c: 3 }] }), '{"a":[{"c":3,"d":2}],"b":1}');
  assert.equal(
    canonicalJson({ name: "n", plugins: [{ type: "t", ipam: { b: 1, a: 2 } }] }),
    canonicalJson({ plugins: [{ ipam: { a: 2, b: 1 }, type: "t" }], name: "n" }),
  );
  assert.equal(canonicalJson([null, "x", 1]), '[null,"x",1]');
});

Deno.test("one group per config; same-named configs share their valid lists", () => {
  const groups = groupGcNetworks([cbr0], [
    {
      containerId: "c1",
      attachments: [{ ifName: "eth0", conflist: cbr0 }, { ifName: "net1", conflist: blueA }],
    },
    // The same config with its keys in another order is the same network.
    {
      containerId: "c2",
      attachments: [
        { ifName: "eth0", conflist: { plugins: cbr0.plugins, name: "cbr0", cniVersion: "1.1.0" } },
        { ifName: "net1", conflist: blueB },
        { ifName: "net2", conflist: red },
      ],
    },
  ]);
  assert.deepEqual(
    groups.map((g) => [g.conflist, g.valid.map((v) => `${v.containerID}/${v.ifname}`)]),
    [
      [cbr0, ["c1/eth0", "c2/eth0"]],
      [blueA, ["c1/net1", "c2/net1"]],
      [blueB, ["c1/net1", "c2/net1"]],
      [red, ["c2/net2"]],
    ],
  );
});

Deno.test("networks without valid attachments still get GC (empty list); duplicates collapse", () => {
  const groups = groupGcNetworks([cbr0, red, cbr0], [
    { containerId: "c1", attachments: [{ ifName: "eth0", conflist: cbr0 }] },
    { containerId: "c1", attachments: [{ ifName: "eth0", conflist: cbr0 }] },
  ]);
  assert.deepEqual(groups, [
    { conflist: cbr0, valid: [{ containerID: "c1", ifname: "eth0" }] },
    { conflist: red, valid: [] },
  ]);
});
