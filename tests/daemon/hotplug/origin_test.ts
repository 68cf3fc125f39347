/**
 * Hot-plug never removes what the pod's selection did not add (issue 21 §1): a Multus
 * `defaultNetworks` attachment keeps its interface when the selection asks for that
 * interface name; the element is refused (`HotPlugRefused`, naming the holder). Real daemon,
 * real netns, real bridge + host-local and macvlan + static delegates. Needs root.
 */

import assert from "node:assert/strict";
import { expectOk, NS } from "../../support/world.ts";
import { linkNames } from "../../support/netns.ts";
import {
  addresses,
  events,
  hotPlugTest,
  setNetworks,
  statusInterfaces,
} from "../../support/hotplug_world.ts";
import { until } from "../../support/wait.ts";

const macvlan = (extra: Record<string, unknown> = {}) =>
  JSON.stringify([{ name: "macvlan-net", ips: ["10.9.0.5/24"], ...extra }]);

hotPlugTest(
  "hot-plug: a defaultNetworks attachment keeps its interface; the element asking for it is refused",
  async (w, daemon) => {
    expectOk(await w.call("ADD"), "sandbox ADD");
    assert.deepEqual(statusInterfaces(w), ["eth0", "net1", "net2"]);
    assert.match((await addresses(w, "net1"))[0], /^10\.240\.2\.\d+\/24$/, "net1: bridge-net");
    assert.deepEqual(await addresses(w, "net2"), ["10.9.0.5/24"], "net2: macvlan-net");
    const leases = await w.leases();
    await daemon.start();

    setNetworks(w, macvlan({ interface: "net1" }));
    await until(() => events(w, "HotPlugRefused").length === 1, "HotPlugRefused");
    assert.match(
      events(w, "HotPlugRefused")[0],
      /interface net1: .*held by network tenant-a\/bridge-net \(defaultNetworks\)/,
    );
    // The macvlan element on net2 left the selection: it alone is removed.
    await until(async () => !(await linkNames(w.podNetns)).includes("net2"), "net2 removed");
    await until(() => statusInterfaces(w).join() === "eth0,net1", "status eth0,net1");
    assert.match((await addresses(w, "net1"))[0], /^10\.240\.2\.\d+\/24$/, "net1 kept");
    assert.deepEqual(await w.leases(), leases, "the bridge-net lease is kept");

    // An element without an interface gets a name no defaultNetworks attachment holds.
    setNetworks(w, "bridge-net");
    await until(() => statusInterfaces(w).join() === "eth0,net1,net2", "bridge-net on net2");
    assert.match((await addresses(w, "net1"))[0], /^10\.240\.2\.\d+\/24$/);
    assert.match((await addresses(w, "net2"))[0], /^10\.240\.2\.\d+\/24$/);

    // Emptying the selection removes the selection's attachments only.
    setNetworks(w, null);
    await until(() => statusInterfaces(w).join() === "eth0,net1", "only the selection removed");
    assert.deepEqual((await linkNames(w.podNetns)).sort(), ["eth0", "net1"]);
    assert.deepEqual(await w.leases(), leases.filter((l) => !l.includes("10.9.")));
    expectOk(await w.call("DEL"), "sandbox DEL");
    assert.deepEqual(await w.leases(), []);
  },
  { networks: macvlan(), conf: { defaultNetworks: [`${NS}/bridge-net`] }, ready: false },
);
