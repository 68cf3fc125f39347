/**
 * Hot-plug's event reasons are multus-dynamic-networks-controller's for the same meaning
 * (issue 21 §1), so alerts written for it keep working: `FailedAddingInterface`,
 * `FailedRemovingInterface`, and `InterfaceAddRejected` (once per annotation value) for a
 * host-network pod that asks for networks. Real daemon, real netns, real bridge + host-local
 * delegates. Needs root.
 */

import assert from "node:assert/strict";
import { expectOk, NS } from "../../support/world.ts";
import { linkNames } from "../../support/netns.ts";
import {
  events,
  hotPlugTest,
  NETS,
  NODE,
  setNetworks,
  statusInterfaces,
} from "../../support/hotplug_world.ts";
import { until } from "../../support/wait.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

hotPlugTest(
  "hot-plug: a host-network pod asking for networks gets InterfaceAddRejected once",
  async (w, daemon) => {
    w.api.addPod({
      namespace: NS,
      name: "host-0",
      uid: crypto.randomUUID(),
      nodeName: NODE,
      spec: { hostNetwork: true },
      annotations: { [NETS]: "bridge-net" },
    });
    await daemon.start();
    const rejected = () => events(w, "InterfaceAddRejected");
    await until(() => rejected().length === 1, "InterfaceAddRejected");
    assert.equal(
      rejected()[0],
      "pod [tenant-a/host-0]: will not add interface to host networked pod",
    );
    const event = w.api.events.find((e) => e.reason === "InterfaceAddRejected") as Record<
      string,
      unknown
    >;
    assert.equal(event.type, "Warning");
    assert.equal((event.involvedObject as Record<string, unknown>).name, "host-0");
    // Not repeated for another change of the pod, nor for the same value; a new value: again.
    w.api.patchPod(NS, "host-0", { metadata: { labels: { touch: "1" } } });
    await sleep(1500);
    assert.equal(rejected().length, 1);
    w.api.patchPod(NS, "host-0", {
      metadata: { annotations: { [NETS]: "bridge-net, macvlan-net" } },
    });
    await until(() => rejected().length === 2, "InterfaceAddRejected for the new value");
  },
  { ready: false },
);

hotPlugTest(
  "hot-plug: a failed removal is FailedRemovingInterface",
  async (w, daemon) => {
    const refuseDel = `${w.dirs.bin}/refuse-del`;
    // Chained after bridge: passes prevResult on, fails its DEL while refuse-del exists.
    await Deno.writeTextFile(
      `${w.dirs.bin}/del-failing`,
      `#!/bin/sh\nin=$(cat)\nif [ "$CNI_COMMAND" = DEL ] && [ -e ${refuseDel} ]; then\n` +
        `  echo '{"cniVersion":"1.0.0","code":11,"msg":"del-failing refuses DEL"}'\n  exit 1\nfi\n` +
        `if [ "$CNI_COMMAND" = ADD ]; then echo "$in" | /usr/bin/jq -c .prevResult; fi\n`,
      { mode: 0o755 },
    );
    w.api.addNad({
      namespace: NS,
      name: "sticky-net",
      config: JSON.stringify({
        cniVersion: "1.0.0",
        name: "sticky-net",
        plugins: [
          {
            type: "bridge",
            bridge: w.br.sec,
            ipam: { type: "host-local", dataDir: w.dirs.ipam, subnet: "10.240.4.0/24" },
          },
          { type: "del-failing" },
        ],
      }),
    });
    expectOk(await w.call("ADD"), "sandbox ADD");
    await daemon.start();
    setNetworks(w, "sticky-net");
    await until(() => statusInterfaces(w).join() === "eth0,net1", "net1 attached");
    await Deno.writeTextFile(refuseDel, "");
    setNetworks(w, null);
    await until(() => events(w, "FailedRemovingInterface").length === 1, "FailedRemovingInterface");
    // Like multus-dynamic-networks-controller's message, it names the network and interface.
    assert.match(
      events(w, "FailedRemovingInterface")[0],
      /^\[tenant-a\/web-0:tenant-a\/sticky-net\] .*del-failing refuses DEL \(interface net1\)$/,
    );
    assert.ok((await linkNames(w.podNetns)).includes("net1"), "net1 kept for the next try");
    // The retry (1 s later) succeeds once the delegate lets it.
    await Deno.remove(refuseDel);
    await until(
      async () => !(await linkNames(w.podNetns)).includes("net1"),
      "net1 removed",
      10_000,
    );
    await until(() => events(w, "RemovedInterface").length === 1, "RemovedInterface");
    expectOk(await w.call("DEL"), "sandbox DEL");
    assert.deepEqual(await w.leases(), []);
  },
  { ready: false },
);
