/**
 * Hot-plug after a sandbox restart (issue 21 §1): kubelet tears the pod's sandbox down and
 * starts a new one (a new container ID, same pod); hot-plug's index of sandbox records still
 * names the old record, now a tombstone. The next annotation change must reach the new
 * sandbox at once, not at the 60 s resync. Real daemon, real netns, real bridge + host-local
 * delegates. Needs root.
 */

import assert from "node:assert/strict";
import { expectOk, NS, POD, UID } from "../../support/world.ts";
import { linkNames } from "../../support/netns.ts";
import { hotPlugTest, setNetworks, statusInterfaces } from "../../support/hotplug_world.ts";
import { k8sArgs } from "../../support/plugin.ts";
import { until } from "../../support/wait.ts";

hotPlugTest(
  "hot-plug: after a sandbox restart the change reaches the new sandbox",
  async (w, daemon) => {
    const second = `${w.containerId}r`;
    const callSecond = (command: "ADD" | "DEL") =>
      w.call(command, { containerId: second, args: k8sArgs(NS, POD, second, UID) });
    expectOk(await w.call("ADD"), "first sandbox ADD");
    await daemon.start();
    setNetworks(w, "bridge-net");
    await until(() => statusInterfaces(w).join() === "eth0,net1", "net1 on the first sandbox");

    // The sandbox restarts: DEL of the old one (a tombstone), ADD of a new one.
    expectOk(await w.call("DEL"), "first sandbox DEL");
    expectOk(await callSecond("ADD"), "second sandbox ADD");
    assert.deepEqual((await linkNames(w.podNetns)).sort(), ["eth0", "net1"]);

    setNetworks(w, "bridge-net, bridge-net@hp0");
    await until(async () => (await linkNames(w.podNetns)).includes("hp0"), "hp0 in the netns");
    await until(() => statusInterfaces(w).join() === "eth0,net1,hp0", "network-status with hp0");
    expectOk(await callSecond("DEL"), "second sandbox DEL");
    assert.deepEqual(await w.leases(), [], "nothing leaked");
  },
  { ready: false },
);
