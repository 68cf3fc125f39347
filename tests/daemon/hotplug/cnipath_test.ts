/**
 * Hot-plug in `manifold daemon` as deploy/40-daemonset.yaml runs it: no `CNI_PATH` in the
 * daemon's environment (the runtime sends it with each forwarded request; a hot-plug change has
 * no request). The change must still run, its delegates found in `binDir` as a sandbox ADD's
 * are. Real daemon, real netns, real bridge + host-local. Needs root.
 */

import { done, expectOk } from "../../support/world.ts";
import { isRoot, linkNames } from "../../support/netns.ts";
import { type DaemonProcess, startDaemon } from "../../support/daemon.ts";
import {
  hotPlugWorld,
  NODE,
  setNetworks,
  statusInterfaces,
  stop,
} from "../../support/hotplug_world.ts";
import { until } from "../../support/wait.ts";

const root = { ignore: !isRoot(), sanitizeResources: false, sanitizeOps: false };

Deno.test("hot-plug: a daemon without CNI_PATH in its environment still plugs", root, async () => {
  const w = await hotPlugWorld();
  let d: DaemonProcess | undefined;
  try {
    // binDir holds the delegates, as /opt/cni/bin does on a node.
    for (const p of ["bridge", "host-local"]) {
      await Deno.symlink(`/usr/lib/cni/${p}`, `${w.dirs.bin}/${p}`);
    }
    expectOk(await w.call("ADD"), "sandbox ADD");
    d = await startDaemon(await w.scratch.dir(), w.conf, { flags: ["--node-name", NODE] });
    await until(
      () => w.api.requests.some((r) => r.path === "/api/v1/pods" && r.query.includes("watch")),
      "the pod watch",
    );
    setNetworks(w, "bridge-net");
    await until(async () => (await linkNames(w.podNetns)).includes("net1"), "net1 in the netns");
    await until(() => statusInterfaces(w).includes("net1"), "network-status with net1");
    expectOk(await w.call("DEL"), "sandbox DEL");
  } finally {
    const stderr = await stop(d);
    if (Deno.env.get("HOTPLUG_TEST_DEBUG")) console.error(stderr);
    await done(w);
  }
});
