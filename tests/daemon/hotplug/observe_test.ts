/**
 * What an operator sees of hot-plug (issue 14 §1), through a real `manifold daemon` against
 * the API stand-in with real netns and delegates: its events under each `events` setting,
 * the refusal of every key of an attached element that would need a re-plug, and its series
 * on `GET /metrics`. Needs root.
 */

import { loopbackPort } from "../../support/ports.ts";
import assert from "node:assert/strict";
import { expectOk, NS, podStatus } from "../../support/world.ts";
import { linkNames } from "../../support/netns.ts";
import {
  addresses,
  events,
  hotPlugTest,
  setNetworks,
  statusInterfaces,
} from "../../support/hotplug_world.ts";
import { parsePrometheusText, sampleValue } from "../../support/prom_text.ts";
import { until } from "../../support/wait.ts";

async function scrape(port: number) {
  const res = await fetch(`http://127.0.0.1:${port}/metrics`);
  assert.equal(res.status, 200);
  return parsePrometheusText(await res.text());
}

/** `manifold_hotplug_changes_total{op,result}` now (0 when the series is absent). */
async function changes(port: number, op: string, result: string): Promise<number> {
  return sampleValue(await scrape(port), "manifold_hotplug_changes_total", { op, result }) ?? 0;
}

hotPlugTest(
  "hot-plug with the default events setting: AddedInterface/RemovedInterface posted, /metrics counts",
  async (w, daemon) => {
    // default: "warnings"
    const port = loopbackPort();
    expectOk(await w.call("ADD"), "sandbox ADD");
    assert.deepEqual(events(w, "AddedInterface"), [], "a sandbox ADD keeps its behaviour");
    await daemon.start({}, ["--metrics-address", `127.0.0.1:${port}`]);

    setNetworks(w, "bridge-net");
    await until(() => statusInterfaces(w).join() === "eth0,net1", "net1 in network-status");
    await until(() => events(w, "AddedInterface").length === 1, "AddedInterface");
    assert.match(events(w, "AddedInterface")[0], /^Add net1 \[10\.240\.2\.\d+\/24\] from /);
    await until(async () => await changes(port, "add", "success") === 1, "add counted");

    setNetworks(w, null);
    await until(() => events(w, "RemovedInterface").length === 1, "RemovedInterface");
    assert.equal(events(w, "RemovedInterface")[0], "Remove net1 from tenant-a/bridge-net");
    await until(async () => await changes(port, "remove", "success") === 1, "remove counted");

    // A failing delegate: one add error, the pod left as it was.
    setNetworks(w, "bad-net");
    await until(
      () => events(w, "FailedAddingInterface").length === 1,
      "FailedAddingInterface",
      20_000,
    );
    await until(async () => await changes(port, "add", "error") === 1, "add error counted");
    assert.deepEqual(await linkNames(w.podNetns), ["eth0"]);

    const fams = await scrape(port);
    const family = fams.get("manifold_hotplug_change_duration_seconds");
    assert.equal(family?.type, "histogram");
    const count = (result: string) =>
      sampleValue(fams, "manifold_hotplug_change_duration_seconds_count", { result });
    assert.equal(count("success"), 2, "the addition and the removal");
    assert.equal(count("error"), 1, "the failed addition");
    const sum = sampleValue(fams, "manifold_hotplug_change_duration_seconds_sum", {
      result: "success",
    })!;
    assert.ok(sum > 0 && sum < 20, `duration sum ${sum} s`);
    assert.equal(
      sampleValue(fams, "manifold_hotplug_changes_total", {
        op: "change",
        result: "refused",
      }) ?? 0,
      0,
    );
    expectOk(await w.call("DEL"), "sandbox DEL");
    assert.deepEqual(await w.leases(), []);
  },
  { conf: { events: undefined }, ready: false },
);

hotPlugTest(
  'hot-plug with "events": "none" posts no event',
  async (w, daemon) => {
    setNetworks(w, "bridge-net");
    await until(() => statusInterfaces(w).join() === "eth0,net1", "net1 in network-status");
    setNetworks(w, "bad-net");
    await until(async () => {
      const l = await linkNames(w.podNetns);
      return !l.includes("net1");
    }, "net1 removed");
    // The failed addition of bad-net runs right after the removal; give its Warning time.
    await new Promise((r) => setTimeout(r, 1000));
    const log = await daemon.stop();
    assert.match(log, /FailedAddingInterface/, "the failure was logged");
    assert.deepEqual(w.api.events, [], "no event at all");
    expectOk(await w.call("DEL"), "sandbox DEL");
  },
  { conf: { events: "none" } },
);

hotPlugTest(
  "hot-plug: changing cni-args, bandwidth, portMappings, default-route, infiniband-guid, ipam-claim-reference of an attached element is refused",
  async (w, daemon) => {
    w.api.addNad({
      namespace: NS,
      name: "caps-net",
      config: JSON.stringify({
        cniVersion: "1.0.0",
        name: "caps-net",
        plugins: [
          {
            type: "bridge",
            bridge: w.br.sec,
            ipam: { type: "host-local", dataDir: w.dirs.ipam, subnet: "10.240.4.0/24" },
            capabilities: { infinibandGUID: true },
          },
          { type: "bandwidth", capabilities: { bandwidth: true } },
          { type: "portmap", capabilities: { portMappings: true }, snat: false },
        ],
      }),
    });
    const port = loopbackPort();
    expectOk(await w.call("ADD"), "sandbox ADD");
    await daemon.start({}, ["--metrics-address", `127.0.0.1:${port}`]);
    setNetworks(w, '[{"name": "caps-net", "cni-args": {"role": "a"}}]');
    await until(() => statusInterfaces(w).join() === "eth0,net1", "net1 in network-status");
    const before = { addr: await addresses(w, "net1"), status: podStatus(w) };

    setNetworks(
      w,
      JSON.stringify([{
        name: "caps-net",
        "cni-args": { role: "b" },
        bandwidth: { ingressRate: 1_000_000, ingressBurst: 100_000 },
        portMappings: [{ hostPort: 8080, containerPort: 80, protocol: "tcp" }],
        "default-route": ["10.240.4.1"],
        "infiniband-guid": "c2:11:22:33:44:55:66:77",
        "ipam-claim-reference": "claim-1",
      }]),
    );
    await until(() => events(w, "HotPlugRefused").length === 1, "HotPlugRefused");
    assert.match(
      events(w, "HotPlugRefused")[0],
      /network tenant-a\/caps-net interface net1: changing "infiniband-guid", "portMappings", "bandwidth", "default-route", "cni-args", "ipam-claim-reference" of an attached network needs a re-plug and was refused/,
    );
    await until(async () => await changes(port, "change", "refused") === 1, "refusal counted");
    assert.deepEqual(await addresses(w, "net1"), before.addr, "net1 not re-plugged");
    assert.deepEqual(podStatus(w), before.status);
    assert.deepEqual(await linkNames(w.podNetns), ["eth0", "net1"]);

    // Only cni-args removed: refused as well (a removed key is a change), counted once more.
    setNetworks(w, '[{"name": "caps-net"}]');
    await until(() => events(w, "HotPlugRefused").length === 2, "second HotPlugRefused");
    assert.match(events(w, "HotPlugRefused")[1], /changing "cni-args" of an attached/);
    await until(async () => await changes(port, "change", "refused") === 2, "counted");

    // Back to what was attached: nothing refused, nothing changed.
    setNetworks(w, '[{"name": "caps-net", "cni-args": {"role": "a"}}]');
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(events(w, "HotPlugRefused").length, 2);
    assert.equal(await changes(port, "add", "success"), 1, "only the first addition");
    assert.deepEqual(await addresses(w, "net1"), before.addr);
    expectOk(await w.call("DEL"), "sandbox DEL");
    assert.deepEqual(await w.leases(), []);
  },
  { ready: false },
);
