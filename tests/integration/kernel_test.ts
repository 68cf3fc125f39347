/**
 * Kernel truth in the plugin process: default-route applied with netlink in the pod netns
 * (IPv4 + IPv6, several gateways), CHECK still passing afterwards; a link removed between
 * ADD and CHECK detected by Manifold itself; a delegate whose result lies about MAC and IPs
 * reported with the kernel's values and a Warning event. Needs root.
 */

import assert from "node:assert/strict";
import { ip, ipJson, isRoot } from "../support/netns.ts";
import { done, expectOk, NS, podStatus, world } from "../support/world.ts";

const root = { ignore: !isRoot(), sanitizeResources: false, sanitizeOps: false };

interface RouteJson {
  dst: string;
  gateway?: string;
  dev: string;
  metric?: number;
}

Deno.test({
  name: "default-route on a secondary network: v4 + v6, ordered gateways, eth0 loses its default",
  ...root,
  async fn() {
    const gateways = ["10.240.8.1", "10.240.8.254", "fd00:8::1"];
    const w = await world({
      annotations: {
        "k8s.v1.cni.cncf.io/networks": JSON.stringify([{
          name: "ds-net",
          "default-route": gateways,
        }]),
      },
    });
    try {
      w.api.addNad({
        namespace: NS,
        name: "ds-net",
        config: JSON.stringify({
          cniVersion: "1.0.0",
          type: "bridge",
          bridge: w.br.sec,
          ipam: {
            type: "host-local",
            dataDir: w.dirs.ipam,
            ranges: [[{ subnet: "10.240.8.0/24" }], [{ subnet: "fd00:8::/64" }]],
          },
        }),
      });
      expectOk(await w.call("ADD"), "ADD");
      const v4 = await ipJson<RouteJson[]>(w.podNetns, "route", "show", "default");
      assert.deepEqual(
        v4.map((r) => [r.gateway, r.dev, r.metric ?? 0]),
        [["10.240.8.1", "net1", 0], ["10.240.8.254", "net1", 1]],
      );
      const v6 = await ipJson<RouteJson[]>(w.podNetns, "-6", "route", "show", "default");
      assert.deepEqual(v6.map((r) => [r.gateway, r.dev]), [["fd00:8::1", "net1"]]);
      const status = podStatus(w);
      assert.deepEqual(status[1]["default-route"], gateways);
      assert.deepEqual(status[1].gateway, gateways);
      assert.equal(status[0]["default-route"], undefined);
      // CHECK still passes after Manifold moved the default routes (the cached results are
      // edited to match; tests/multinet/kernel_test.ts proves the edit itself).
      expectOk(await w.call("CHECK"), "CHECK after default-route");
      expectOk(await w.call("DEL"), "DEL");
      assert.deepEqual(await w.leases(), []);
    } finally {
      await done(w);
    }
  },
});

Deno.test({
  name:
    "two attachments asking for default-route is an invalid annotation (code 7), nothing attached",
  ...root,
  async fn() {
    const w = await world({
      annotations: {
        "k8s.v1.cni.cncf.io/networks": JSON.stringify([
          { name: "bridge-net", "default-route": ["10.240.2.1"] },
          { name: "bridge-net", "default-route": [] },
        ]),
      },
    });
    try {
      const add = await w.call("ADD");
      assert.equal((add.json as { code: number }).code, 7);
      assert.match((add.json as { msg: string }).msg, /default-route/);
      assert.deepEqual(await w.leases(), []);
    } finally {
      await done(w);
    }
  },
});

Deno.test({
  name: "a link removed between ADD and CHECK is detected by Manifold (delegate too old for CHECK)",
  ...root,
  async fn() {
    const w = await world({ annotations: { "k8s.v1.cni.cncf.io/networks": "old-net" } });
    try {
      // cniVersion 0.3.1: the delegate gets no CHECK, so only Manifold's netlink view can notice.
      w.api.addNad({
        namespace: NS,
        name: "old-net",
        config: JSON.stringify({
          cniVersion: "0.3.1",
          type: "bridge",
          bridge: w.br.sec,
          ipam: { type: "host-local", dataDir: w.dirs.ipam, subnet: "10.240.9.0/24" },
        }),
      });
      expectOk(await w.call("ADD"), "ADD");
      expectOk(await w.call("CHECK"), "CHECK before");
      await ip("-n", w.podNetns, "link", "del", "net1");
      const check = await w.call("CHECK");
      assert.equal(check.code, 1);
      assert.match((check.json as { msg: string }).msg, /net1 is missing from the sandbox/);
      assert.match((check.json as { msg: string }).msg, /old-net/);
      expectOk(await w.call("DEL"), "DEL");
      assert.deepEqual(await w.leases(), []);
    } finally {
      await done(w);
    }
  },
});

Deno.test({
  name: "a delegate whose result lies about MAC and IPs: status shows the kernel, Warning event",
  ...root,
  async fn() {
    const w = await world({ annotations: { "k8s.v1.cni.cncf.io/networks": "liar-net" } });
    try {
      const liar = `${w.dirs.bin}/liar-bridge`;
      // Runs the real bridge plugin, then rewrites the sandbox interface's MAC (the last "mac"
      // in the result) and claims an extra address on it (interface index 2).
      await Deno.writeTextFile(
        liar,
        `#!/bin/sh
/usr/lib/cni/bridge | tr -d '\\n' | sed -E 's/(.*)"mac": *"[^"]*"/\\1"mac":"02:de:ad:be:ef:01"/; s/"ips": *\\[/"ips":[{"address":"10.99.99.99\\/24","interface":2},/'
`,
      );
      await Deno.chmod(liar, 0o755);
      w.api.addNad({
        namespace: NS,
        name: "liar-net",
        config: JSON.stringify({
          cniVersion: "1.0.0",
          type: "liar-bridge",
          bridge: w.br.sec,
          ipam: { type: "host-local", dataDir: w.dirs.ipam, subnet: "10.240.10.0/24" },
        }),
      });
      expectOk(await w.call("ADD"), "ADD");
      const links = await ipJson<{ ifname: string; address: string; mtu: number }[]>(
        w.podNetns,
        "link",
        "show",
      );
      const net1 = links.find((l) => l.ifname === "net1")!;
      const status = podStatus(w)[1];
      assert.equal(status.mac, net1.address);
      assert.notEqual(status.mac, "02:de:ad:be:ef:01");
      assert.equal(status.mtu, net1.mtu);
      assert.ok(!(status.ips as string[]).includes("10.99.99.99/24"));
      assert.match((status.ips as string[])[0], /^10\.240\.10\.\d+\/24$/);
      const warnings = w.api.events.filter((e) =>
        (e as { reason: string }).reason === "InterfaceMismatch"
      )
        .map((e) => (e as { message: string }).message);
      assert.ok(warnings.some((m) => /liar-net/.test(m) && /MAC/.test(m)), warnings.join("\n"));
      assert.ok(warnings.some((m) => /10\.99\.99\.99/.test(m)), warnings.join("\n"));
      expectOk(await w.call("DEL"), "DEL");
    } finally {
      await done(w);
    }
  },
});
