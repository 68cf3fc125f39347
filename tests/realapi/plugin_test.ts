/**
 * The plugin process against a real kube-apiserver: ADD → CHECK → DEL → DEL of a pod with the
 * cluster default network and 3 NADs, with the network-status PATCH read back from the
 * server; Kubernetes Events as `kubectl get events` shows them. Needs root and
 * `MANIFOLD_KUBE_APISERVER` (else skipped with one line).
 */

import assert from "node:assert/strict";
import { realApiSuite } from "../support/kube_apiserver.ts";
import { ipJson, linkNames } from "../support/netns.ts";
import { expectOk } from "../support/world.ts";
import { done, networkStatus, POD, realWorld } from "./cluster.ts";

const suite = realApiSuite({ root: true });

const SELECTION = JSON.stringify([
  { name: "bridge-net" },
  { name: "macvlan-net", interface: "data0", ips: ["10.240.3.7/24"], mac: "02:00:00:0a:f0:07" },
  { name: "ptp-net" },
]);

const DNS = { nameservers: ["10.96.0.10"], domain: "tenant.svc", search: ["tenant.svc"] };

suite.test("ADD → CHECK → DEL → DEL: default + 3 NADs, network-status read back from the server", async (api) => {
  const w = await realWorld(api, {
    annotations: { "k8s.v1.cni.cncf.io/networks": SELECTION },
    extraNads: (n) => ({
      "ptp-net": JSON.stringify({
        cniVersion: "1.0.0",
        type: "ptp",
        dns: DNS,
        ipam: { type: "host-local", dataDir: n.dirs.ipam, subnet: "10.240.4.0/24" },
      }),
    }),
  });
  try {
    const add = await w.call("ADD");
    expectOk(add, "ADD");
    assert.deepEqual(await linkNames(w.podNetns), ["data0", "eth0", "net1", "net2"]);
    const addrs = await ipJson<
      { ifname: string; address: string; addr_info: { local: string; prefixlen: number }[] }[]
    >(w.podNetns, "addr", "show");
    const v4 = (n: string) =>
      addrs.find((a) => a.ifname === n)?.addr_info.filter((i) => i.local.includes("."))
        .map((i) => `${i.local}/${i.prefixlen}`) ?? [];
    const mac = (n: string) => addrs.find((a) => a.ifname === n)?.address;

    // What the server stores, read back with a separate client.
    const pod = await w.pod();
    const status = networkStatus(pod);
    assert.ok(status, "network-status annotation on the pod in the server");
    assert.deepEqual(status.map((s) => [s.name, s.interface, s.default]), [
      ["cbr0", "eth0", true],
      [`${w.ns}/bridge-net`, "net1", false],
      [`${w.ns}/macvlan-net`, "data0", false],
      [`${w.ns}/ptp-net`, "net2", false],
    ]);
    for (const s of status) {
      assert.deepEqual(
        Object.keys(s).filter((k) => ["name", "interface", "ips", "mac", "default"].includes(k))
          .sort(),
        ["default", "interface", "ips", "mac", "name"],
        `keys of ${s.name}: ${Object.keys(s)}`,
      );
      assert.deepEqual(s.ips, v4(s.interface as string), `ips of ${s.name}`);
      assert.equal(s.mac, mac(s.interface as string), `mac of ${s.name}`);
    }
    // dns only where the delegate's result has it (NPWG v1.3 §5: optional).
    assert.deepEqual(status.map((s) => "dns" in s), [false, false, false, true]);
    assert.deepEqual(status[3].dns, DNS);
    assert.deepEqual(status[2].ips, ["10.240.3.7/24"]);
    assert.equal(status[2].mac, "02:00:00:0a:f0:07");
    // The PATCH went through pods/status and left the spec and the selection alone.
    assert.equal(
      pod.metadata.annotations["k8s.v1.cni.cncf.io/networks"],
      SELECTION,
      "selection annotation kept",
    );
    assert.equal(pod.spec.nodeName, "envtest-node");

    expectOk(await w.call("CHECK"), "CHECK");
    expectOk(await w.call("DEL"), "DEL");
    assert.deepEqual(await linkNames(w.podNetns), []);
    assert.deepEqual(await w.leases(), []);
    expectOk(await w.call("DEL", { netns: "" }), "second DEL");
  } finally {
    await done(w);
  }
});

suite.test("a failed ADD posts ErrorAddingNetwork, readable with a fieldSelector list", async (api) => {
  const w = await realWorld(api, {
    annotations: { "k8s.v1.cni.cncf.io/networks": "bridge-net, broken-net" },
    extraNads: () => ({
      "broken-net": JSON.stringify({ cniVersion: "1.0.0", type: "no-such-plugin-mft" }),
    }),
  });
  try {
    const add = await w.call("ADD");
    assert.notEqual(add.code, 0, "ADD must fail");
    assert.match(add.stdout, /no-such-plugin-mft/);
    // Rolled back: nothing left in the pod netns.
    assert.deepEqual(await linkNames(w.podNetns), []);
    assert.deepEqual(await w.leases(), []);
    const events = await api.admin.events(w.ns, POD);
    const errors = events.filter((e) => e.reason === "ErrorAddingNetwork");
    assert.equal(errors.length, 1, JSON.stringify(events.map((e) => e.reason)));
    const ev = errors[0];
    assert.equal(ev.type, "Warning");
    assert.equal(ev.involvedObject.kind, "Pod");
    assert.equal(ev.involvedObject.name, POD);
    assert.equal(ev.involvedObject.namespace, w.ns);
    assert.equal(ev.involvedObject.uid, w.uid);
    assert.match(ev.message, /broken-net/);
    assert.ok(ev.firstTimestamp && ev.lastTimestamp, "timestamps set");
    // The network's only plugin is not installed, so nothing of it ever ran: the first DEL
    // gives the attachment up at once (README "Give-up bound"), and later DELs stay clean.
    expectOk(await w.call("DEL"), "DEL after the failed ADD (nothing ran: given up at once)");
    expectOk(await w.call("DEL"), "second DEL");
  } finally {
    await done(w);
  }
});

suite.test('events "all": a healthy ADD posts AddedInterface per attachment', async (api) => {
  const w = await realWorld(api, {
    annotations: { "k8s.v1.cni.cncf.io/networks": "bridge-net" },
    conf: { events: "all" },
  });
  try {
    expectOk(await w.call("ADD"), "ADD");
    const events = await api.admin.events(w.ns, POD);
    const added = events.filter((e) => e.reason === "AddedInterface");
    assert.equal(added.length, 2, JSON.stringify(events.map((e) => [e.reason, e.message])));
    for (const e of added) {
      assert.equal(e.type, "Normal");
      assert.equal(e.involvedObject.uid, w.uid);
    }
    assert.ok(added.some((e) => /eth0/.test(e.message)), "default network's event");
    assert.ok(added.some((e) => /net1/.test(e.message) && /bridge-net/.test(e.message)));
    expectOk(await w.call("DEL"), "DEL");
  } finally {
    await done(w);
  }
});

suite.end();
