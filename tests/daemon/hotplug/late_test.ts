/**
 * Hot-plug edge cases. A NAD created after the selection names it: a running pod whose new selection
 * element names a NAD that does not exist yet gets it attached as soon as the NAD appears
 * (the daemon's NAD watch re-queues the pod), not at the next 60 s resync. Real daemon, real
 * netns, real bridge + host-local delegates. Needs root.
 */

import assert from "node:assert/strict";
import { expectOk, NS } from "../../support/world.ts";
import { linkNames } from "../../support/netns.ts";
import { events, hotPlugTest, setNetworks, statusInterfaces } from "../../support/hotplug_world.ts";
import { until } from "../../support/wait.ts";

hotPlugTest(
  "hot-plug: a NAD created after the selection named it is attached at once",
  async (w) => {
    setNetworks(w, "late-net");
    await until(
      () => events(w, "HotPlugRefused").length + events(w, "FailedAddingInterface").length > 0,
      "the change is refused while late-net does not exist",
    );
    assert.deepEqual(await linkNames(w.podNetns), ["eth0"]);
    const created = performance.now();
    w.api.addNad({
      namespace: NS,
      name: "late-net",
      config: JSON.stringify({
        cniVersion: "1.0.0",
        name: "late-net",
        type: "bridge",
        bridge: w.br.sec,
        ipam: { type: "host-local", dataDir: w.dirs.ipam, subnet: "10.240.7.0/24" },
      }),
    });
    // Well under the 60 s resync: the NAD watch event re-queues the pod.
    await until(async () => (await linkNames(w.podNetns)).includes("net1"), "net1", 10_000);
    const ms = performance.now() - created;
    assert.ok(ms < 10_000, `attached ${Math.round(ms)} ms after the NAD was created`);
    await until(() => statusInterfaces(w).join() === "eth0,net1", "status with net1");
    expectOk(await w.call("DEL"), "sandbox DEL");
    assert.deepEqual(await w.leases(), [], "nothing leaked");
  },
);

hotPlugTest(
  "hot-plug: a failed addition's Warning says which removals of the pass were done",
  async (w, daemon) => {
    expectOk(await w.call("ADD"), "sandbox ADD");
    assert.deepEqual((await linkNames(w.podNetns)).sort(), ["eth0", "hp0"]);
    await daemon.start();
    // One pass: hp0 is removed (done), bad-net is added (its chain fails: rolled back).
    setNetworks(w, "bad-net");
    await until(
      () => events(w, "FailedAddingInterface").length === 1,
      "FailedAddingInterface",
      20_000,
    );
    const [message] = events(w, "FailedAddingInterface");
    assert.match(message, /the additions were rolled back, the removals \(hp0\) were done/);
    // (bad-net's retries may hold a net1 for a moment; hp0 stays gone.)
    assert.ok(!(await linkNames(w.podNetns)).includes("hp0"));
    await daemon.stop();
    expectOk(await w.call("DEL"), "sandbox DEL");
    assert.deepEqual(await w.leases(), [], "nothing leaked");
  },
  { networks: "bridge-net@hp0", ready: false },
);
