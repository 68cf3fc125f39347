/**
 * Hot-plug / hot-unplug on running pods (issue 14 §1) end to end: a real `manifold daemon`
 * (`"hotPlug": true`, `--node-name`) against the API stand-in, a sandbox attached by the real
 * plugin in a real netns with real delegates (bridge + host-local), the pod's
 * `k8s.v1.cni.cncf.io/networks` annotation changed through the API. Checked: the kernel
 * (`ip -n`), host-local lease files, network-status, events. Needs root.
 */

import assert from "node:assert/strict";
import { done, expectOk, NS, POD, podStatus } from "../../support/world.ts";
import { isRoot, linkNames } from "../../support/netns.ts";
import type { DaemonProcess } from "../../support/daemon.ts";
import {
  addresses,
  events,
  hotPlugTest,
  hotPlugWorld,
  NETS,
  NODE,
  setNetworks,
  startHotPlugDaemon,
  statusInterfaces,
  stop,
} from "../../support/hotplug_world.ts";
import { k8sArgs } from "../../support/plugin.ts";
import { until } from "../../support/wait.ts";

const root = { ignore: !isRoot(), sanitizeResources: false, sanitizeOps: false };

hotPlugTest(
  "hot-plug: add a NAD to a running pod, then remove it",
  async (w, daemon) => {
    expectOk(await w.call("ADD"), "sandbox ADD");
    assert.deepEqual(await linkNames(w.podNetns), ["eth0"]);
    assert.equal((await w.leases()).length, 1);
    await daemon.start();

    setNetworks(w, "bridge-net");
    await until(async () => (await linkNames(w.podNetns)).includes("net1"), "net1 in the netns");
    await until(() => statusInterfaces(w).includes("net1"), "network-status with net1");
    assert.deepEqual(statusInterfaces(w), ["eth0", "net1"]);
    assert.match((await addresses(w, "net1"))[0], /^10\.240\.2\.\d+\/24$/);
    assert.equal((await w.leases()).length, 2);
    const added = () => events(w, "AddedInterface").filter((m) => m.startsWith("Add net1 "));
    await until(() => added().length === 1, "AddedInterface");
    assert.match(added()[0], /^Add net1 \[10\.240\.2\.\d+\/24\] from tenant-a\/bridge-net$/);

    setNetworks(w, null);
    await until(async () => !(await linkNames(w.podNetns)).includes("net1"), "net1 removed");
    await until(() => statusInterfaces(w).length === 1, "network-status without net1");
    assert.equal((await w.leases()).length, 1, "the bridge-net lease file is gone");
    await until(() => events(w, "RemovedInterface").length === 1, "RemovedInterface");
    assert.equal(events(w, "RemovedInterface")[0], "Remove net1 from tenant-a/bridge-net");

    // A renamed interface is a removal plus an addition.
    setNetworks(w, "bridge-net@hp0");
    await until(async () => (await linkNames(w.podNetns)).includes("hp0"), "hp0");
    setNetworks(w, "bridge-net@hp1");
    await until(async () => {
      const l = await linkNames(w.podNetns);
      return l.includes("hp1") && !l.includes("hp0");
    }, "hp0 renamed hp1");
    await until(() => statusInterfaces(w).join() === "eth0,hp1", "status with hp1");
    assert.equal((await w.leases()).length, 2);

    expectOk(await w.call("DEL"), "sandbox DEL");
    assert.deepEqual(await w.leases(), [], "nothing leaked");
  },
  { ready: false },
);

hotPlugTest(
  "hot-plug: a failing delegate leaves the pod as it was (+ Warning)",
  async (w, daemon) => {
    expectOk(await w.call("ADD"), "sandbox ADD");
    const before = {
      links: await linkNames(w.podNetns),
      leases: await w.leases(),
      status: podStatus(w),
      added: events(w, "AddedInterface"),
    };
    await daemon.start();
    // bridge-net@net2 attaches, then bad-net's chain fails: both are rolled back.
    setNetworks(w, "bridge-net, bridge-net@net2, bad-net");
    await until(
      () => events(w, "FailedAddingInterface").length === 1,
      "FailedAddingInterface",
      20_000,
    );
    assert.match(events(w, "FailedAddingInterface")[0], /bad-net/);
    assert.deepEqual(await linkNames(w.podNetns), before.links);
    assert.deepEqual(await w.leases(), before.leases);
    assert.deepEqual(podStatus(w), before.status);
    assert.deepEqual(events(w, "AddedInterface"), before.added, "no AddedInterface");
    // Another change of the pod retries the failed change (level-triggered) without a second
    // Warning for the same annotation value.
    w.api.patchPod(NS, POD, { metadata: { labels: { retry: "1" } } });
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(events(w, "FailedAddingInterface").length, 1, "the Warning is not repeated");
    assert.deepEqual(await linkNames(w.podNetns), before.links);
    assert.deepEqual(await w.leases(), before.leases);
    assert.deepEqual(podStatus(w), before.status);

    expectOk(await w.call("DEL"), "sandbox DEL");
    assert.deepEqual(await w.leases(), []);
  },
  { networks: "bridge-net", ready: false },
);

Deno.test(
  "hot-plug: changing ips of an attached element is refused with a Warning",
  root,
  async () => {
    const sel = (ip: string) => JSON.stringify([{ name: "macvlan-net", ips: [ip] }]);
    const w = await hotPlugWorld(sel("10.9.0.5/24"));
    let d: DaemonProcess | undefined;
    try {
      expectOk(await w.call("ADD"), "sandbox ADD");
      assert.deepEqual(await addresses(w, "net1"), ["10.9.0.5/24"]);
      d = await startHotPlugDaemon(w);
      setNetworks(w, sel("10.9.0.6/24"));
      await until(() => events(w, "HotPlugRefused").length === 1, "HotPlugRefused");
      assert.match(events(w, "HotPlugRefused")[0], /changing "ips".*refused/);
      assert.deepEqual(await addresses(w, "net1"), ["10.9.0.5/24"], "the address is kept");
      // An invalid annotation changes nothing either (it would fail a sandbox ADD).
      setNetworks(w, '[{"name": "macvlan-net"');
      await until(() => events(w, "HotPlugRefused").length === 2, "HotPlugRefused (invalid)");
      assert.match(
        events(w, "HotPlugRefused")[1],
        /networks is invalid, networks left as they are/,
      );
      assert.deepEqual((await linkNames(w.podNetns)).sort(), ["eth0", "net1"]);
      expectOk(await w.call("DEL"), "sandbox DEL");
    } finally {
      await stop(d);
      await done(w);
    }
  },
);

hotPlugTest(
  "hot-plug: a pod being deleted is left alone",
  async (w) => {
    w.api.deletePod(NS, POD, { graceful: true });
    setNetworks(w, "bridge-net");
    // Hot-plug takes ≈ 0.15 s here: 1.5 s is ample time for a change that must not come.
    await new Promise((r) => setTimeout(r, 1500));
    assert.deepEqual(await linkNames(w.podNetns), ["eth0"]);
    expectOk(await w.call("DEL"), "sandbox DEL");
  },
);

hotPlugTest(
  "hot-plug: a sandbox ADD in flight wins; the change follows it",
  async (w, daemon) => {
    // `bridge` in binDir (searched first) logs and sleeps: the sandbox ADD takes ≥ 1 s.
    const log = `${w.dirs.bin}/bridge.log`;
    await Deno.writeTextFile(
      `${w.dirs.bin}/bridge`,
      `#!/bin/sh\necho "$CNI_COMMAND $CNI_IFNAME start" >>${log}\nsleep 1\n` +
        `/usr/lib/cni/bridge\nrc=$?\necho "$CNI_COMMAND $CNI_IFNAME end" >>${log}\nexit $rc\n`,
      { mode: 0o755 },
    );
    const lines = async () =>
      (await Deno.readTextFile(log).catch(() => "")).trim().split("\n").filter((l) => l);
    await daemon.start();
    const add = w.call("ADD"); // read the pod (no networks yet), then attach eth0 slowly
    await until(async () => (await lines()).includes("ADD eth0 start"), "the sandbox ADD");
    setNetworks(w, "bridge-net"); // while the sandbox ADD holds the container's lock
    expectOk(await add, "sandbox ADD");
    await until(() => statusInterfaces(w).join() === "eth0,net1", "net1 after the ADD", 20_000);
    assert.deepEqual(await lines(), [
      "ADD eth0 start",
      "ADD eth0 end",
      "ADD net1 start",
      "ADD net1 end",
    ]);
    assert.deepEqual((await linkNames(w.podNetns)).sort(), ["eth0", "net1"]);
    expectOk(await w.call("DEL"), "sandbox DEL");
    assert.deepEqual(await w.leases(), []);
  },
  { ready: false },
);

hotPlugTest(
  "hot-plug: a slow change of one pod does not hold up another pod's",
  async (w, daemon) => {
    // A second pod on the node, in its own netns, attached by the plugin as a runtime does.
    const other = { name: "web-1", uid: crypto.randomUUID(), id: `${w.containerId}b` };
    const otherNetns = await w.scratch.netns("pod1");
    const callOther = (command: "ADD" | "DEL") =>
      w.call(command, {
        containerId: other.id,
        netns: `/var/run/netns/${otherNetns}`,
        args: k8sArgs(NS, other.name, other.id, other.uid),
      });
    w.api.addPod({ namespace: NS, name: other.name, uid: other.uid, nodeName: NODE });
    await Deno.writeTextFile(
      `${w.dirs.bin}/slow-plugin`,
      `#!/bin/sh\ncat >/dev/null\nsleep 3\necho '{"cniVersion":"1.0.0"}'\n`,
      { mode: 0o755 },
    );
    w.api.addNad({
      namespace: NS,
      name: "slow-net",
      config: JSON.stringify({
        cniVersion: "1.0.0",
        name: "slow-net",
        plugins: [{ type: "slow-plugin" }],
      }),
    });
    expectOk(await w.call("ADD"), "sandbox ADD of web-0");
    expectOk(await callOther("ADD"), "sandbox ADD of web-1");
    await daemon.start();
    const started = performance.now();
    setNetworks(w, "slow-net"); // web-0's change takes ≥ 3 s
    await new Promise((r) => setTimeout(r, 200));
    w.api.patchPod(NS, other.name, { metadata: { annotations: { [NETS]: "bridge-net" } } });
    await until(async () => (await linkNames(otherNetns)).includes("net1"), "web-1's net1");
    assert.ok(
      performance.now() - started < 2500,
      "web-1's change waited for web-0's slow delegate",
    );
    await until(() => statusInterfaces(w).join() === "eth0,net1", "web-0's slow change", 20_000);
    expectOk(await callOther("DEL"), "sandbox DEL of web-1");
    expectOk(await w.call("DEL"), "sandbox DEL of web-0");
    assert.deepEqual(await w.leases(), []);
  },
  { ready: false },
);

hotPlugTest(
  "hot-plug: a network-status PATCH that failed is sent at the next pass",
  async (w) => {
    w.api.fault({ method: "PATCH", path: /\/pods\/web-0\/status$/, status: 403 });
    setNetworks(w, "bridge-net");
    await until(async () => (await linkNames(w.podNetns)).includes("net1"), "net1 in the netns");
    await until(
      () => w.api.requests.some((r) => r.method === "PATCH" && r.status === 403),
      "the refused PATCH",
    );
    assert.deepEqual(statusInterfaces(w), ["eth0"], "not published yet");
    w.api.patchPod(NS, POD, { metadata: { labels: { touch: "1" } } }); // any change of the pod
    await until(() => statusInterfaces(w).join() === "eth0,net1", "published at the next pass");
    assert.equal((await w.leases()).length, 2, "attached once");
    expectOk(await w.call("DEL"), "sandbox DEL");
    assert.deepEqual(await w.leases(), []);
  },
);

hotPlugTest(
  "hot-plug: a daemon killed mid-change converges after its restart",
  async (w, daemon) => {
    expectOk(await w.call("ADD"), "sandbox ADD");
    await daemon.start({ MANIFOLD_TEST_CRASHPOINT: "add:after-delegate" });
    setNetworks(w, "bridge-net");
    const end = await daemon.process!.exited();
    assert.equal(end.signal, "SIGKILL", "died right after the delegate ADD");
    assert.equal((await w.leases()).length, 2, "the new lease was taken");
    assert.deepEqual(statusInterfaces(w), ["eth0"], "status not yet written");

    await daemon.start();
    await until(() => statusInterfaces(w).join() === "eth0,net1", "converged status", 20_000);
    assert.deepEqual((await linkNames(w.podNetns)).sort(), ["eth0", "net1"]);
    assert.equal((await w.leases()).length, 2, "no leaked lease");
    expectOk(await w.call("DEL"), "sandbox DEL");
    assert.deepEqual(await w.leases(), []);
  },
  { ready: false },
);
