/**
 * Hot-plug when the NetworkAttachmentDefinition of an attached, still-selected network has been
 * deleted: the other elements' changes still happen (multus-dynamic-networks-controller diffs
 * each element on its own), the attachment stays as it was made and is DELeted from its cached
 * config once its element goes. Real daemon, real netns, real bridge + host-local delegates.
 * Needs root.
 */

import assert from "node:assert/strict";
import { expectOk, NS } from "../../support/world.ts";
import { linkNames } from "../../support/netns.ts";
import { events, hotPlugTest, setNetworks, statusInterfaces } from "../../support/hotplug_world.ts";
import { until } from "../../support/wait.ts";

hotPlugTest(
  "hot-plug: a deleted NAD of a selected network does not hold back the pod's other changes",
  async (w, daemon) => {
    w.api.addNad({
      namespace: NS,
      name: "other-net",
      config: JSON.stringify({
        cniVersion: "1.0.0",
        name: "other-net",
        type: "bridge",
        bridge: w.br.sec,
        ipam: { type: "host-local", dataDir: w.dirs.ipam, subnet: "10.240.5.0/24" },
      }),
    });
    expectOk(await w.call("ADD"), "sandbox ADD");
    await daemon.start();
    setNetworks(w, "bridge-net, other-net");
    await until(() => statusInterfaces(w).join() === "eth0,net1,net2", "net1, net2 attached");
    w.api.deleteNad(NS, "other-net");

    // bridge-net goes; other-net (NAD gone, still selected) stays as it is, on net2.
    setNetworks(w, "other-net");
    await until(() => statusInterfaces(w).join() === "eth0,net2", "net1 removed");
    assert.deepEqual(await linkNames(w.podNetns), ["eth0", "net2"]);
    await until(() => events(w, "RemovedInterface").length === 1, "RemovedInterface");
    assert.deepEqual(events(w, "HotPlugRefused"), []);

    // A new element asking for its interface is refused, naming it; another one is added.
    setNetworks(w, "other-net@net2, bridge-net@net2, bridge-net@data0");
    await until(() => statusInterfaces(w).join() === "eth0,net2,data0", "data0 added");
    await until(() => events(w, "HotPlugRefused").length === 1, "HotPlugRefused");
    assert.match(
      events(w, "HotPlugRefused")[0],
      /interface net2: the interface is held by network tenant-a\/other-net \(still selected, its NetworkAttachmentDefinition deleted\)/,
    );

    // Its element goes: DELeted with the config it was made with (its lease released).
    setNetworks(w, "bridge-net@data0");
    await until(() => statusInterfaces(w).join() === "eth0,data0", "net2 removed");
    assert.deepEqual(await linkNames(w.podNetns), ["data0", "eth0"].sort());
    expectOk(await w.call("DEL"), "sandbox DEL");
    assert.deepEqual(await w.leases(), []);
  },
  { ready: false },
);
