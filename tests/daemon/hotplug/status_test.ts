/**
 * Hot-plug when the network-status PATCH fails after a change (review of hot-plug against
 * multus-dynamic-networks-controller, which posts `AddedInterface` as each delegate returns):
 * the change's events are still posted, and the status is sent again — also after the
 * back-off's tries are used up (a PATCH runs no delegate, so nothing holds it back for good).
 * Real daemon, real netns, real bridge + host-local delegates. Needs root.
 */

import assert from "node:assert/strict";
import { expectOk, NS, POD } from "../../support/world.ts";
import { linkNames } from "../../support/netns.ts";
import { events, hotPlugTest, setNetworks, statusInterfaces } from "../../support/hotplug_world.ts";
import { until } from "../../support/wait.ts";

hotPlugTest(
  "hot-plug: a failing network-status PATCH keeps the change's events and is sent again",
  async (w, daemon) => {
    const patches = () =>
      w.api.requests.filter((r) => r.method === "PATCH" && r.path.endsWith(`/${POD}/status`));
    expectOk(await w.call("ADD"), "sandbox ADD");
    await daemon.start();
    const before = patches().length;
    // Every network-status PATCH fails until the faults are cleared.
    w.api.fault({ method: "PATCH", path: /\/status$/, status: 500, times: Infinity });
    setNetworks(w, "bridge-net");
    await until(async () => (await linkNames(w.podNetns)).includes("net1"), "net1 attached");
    await until(() => events(w, "AddedInterface").length === 2, "AddedInterface for net1");
    assert.match(events(w, "AddedInterface")[1], /^Add net1 \[10\.240\.2\.\d+\/24\] from /);
    assert.deepEqual(statusInterfaces(w), ["eth0"], "the PATCH has not got through yet");
    // The back-off's 5 tries (1, 2, 4, 8 s apart) fail; then no PATCH for longer than its
    // longest gap. Then the API answers again, and the next pod event sends the status.
    let last = { count: -1, at: Date.now() };
    await until(
      () => {
        const count = patches().length;
        if (count !== last.count) last = { count, at: Date.now() };
        return count - before >= 5 && Date.now() - last.at > 12_000;
      },
      "the tries given up",
      60_000,
      200,
    );
    w.api.clearFaults();
    w.api.patchPod(NS, POD, { metadata: { labels: { touch: "1" } } });
    await until(() => statusInterfaces(w).join() === "eth0,net1", "net1 in network-status");
    assert.equal(events(w, "AddedInterface").length, 2, "posted once");
    expectOk(await w.call("DEL"), "sandbox DEL");
    assert.deepEqual(await w.leases(), []);
  },
  { ready: false },
);
