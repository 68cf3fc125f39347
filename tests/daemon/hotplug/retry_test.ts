/**
 * Hot-plug's retries of a failed change (issue 21 §1): each retry of a failed ADD is a
 * delegate ADD plus its rollback, so a change that keeps failing is tried again after 1 s,
 * 2 s, 4 s, 8 s, then not any more until the annotation changes; its Warning is posted once.
 * Real daemon, real netns, real bridge + host-local delegates and a chained plugin that fails
 * its ADD. Needs root.
 */

import assert from "node:assert/strict";
import { expectOk, NS, POD } from "../../support/world.ts";
import { linkNames } from "../../support/netns.ts";
import { events, failedAdds, hotPlugTest, setNetworks } from "../../support/hotplug_world.ts";
import { until } from "../../support/wait.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

hotPlugTest(
  "hot-plug: a failing change backs off 1, 2, 4, 8 s, then waits for the next annotation",
  async (w, daemon) => {
    expectOk(await w.call("ADD"), "sandbox ADD");
    const leases = await w.leases();
    await daemon.start();
    setNetworks(w, "bad-net");
    await until(async () => (await failedAdds(w)).length >= 5, "5 tries", 50_000, 100);
    const tries = await failedAdds(w);
    const gaps = tries.slice(1).map((t, i) => t - tries[i]);
    // Never sooner than the back-off; later only by the pass's own time (a loaded machine's
    // fsyncs and rollbacks can take seconds).
    [1, 2, 4, 8].forEach((want, i) => {
      assert.ok(
        gaps[i] >= want * 0.95 && gaps[i] < want + 15,
        `retry ${i + 1} after ${gaps[i].toFixed(2)} s, not ≈ ${want} s (${gaps})`,
      );
    });
    assert.equal(events(w, "FailedAddingInterface").length, 1, "one Warning for the change");
    assert.match(
      events(w, "FailedAddingInterface")[0],
      /^\[tenant-a\/web-0:tenant-a\/bad-net\] failing-plugin refuses ADD \(interface net1\); /,
    );

    // Given up: neither another change of the pod nor time brings a 6th try.
    w.api.patchPod(NS, POD, { metadata: { labels: { touch: "1" } } });
    await sleep(3000);
    assert.equal((await failedAdds(w)).length, 5, "no 6th try after the 5th failure");
    assert.deepEqual(await linkNames(w.podNetns), ["eth0"], "every try rolled back");
    assert.deepEqual(await w.leases(), leases, "no lease left by the tries");

    // The next annotation value is tried at once.
    setNetworks(w, "bad-net@data0");
    await until(async () => (await failedAdds(w)).length === 6, "the new change's try");
    expectOk(await w.call("DEL"), "sandbox DEL");
    assert.deepEqual(await w.leases(), []);
  },
  { ready: false },
);
