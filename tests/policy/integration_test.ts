/**
 * MultiNetworkPolicy with real traffic (root): pod namespaces on a bridge in a switch
 * namespace, policies computed by the engine and programmed through libnftables; TCP
 * connects with a short timeout show what passes. Also times libnftables against the `nft`
 * process and a peer change from recompute to kernel state.
 */

import assert from "node:assert/strict";
import {
  applyPolicy,
  computeDesiredPolicies,
  libnftablesRunner,
  nftProcessRunner,
  parseMultiNetworkPolicy,
  parseNamespace,
  parsePod,
  PolicyApplier,
  PolicyReconciler,
  type PolicyWorld,
  readRules,
  removePolicy,
  renderRuleset,
} from "../../lib/policy/mod.ts";
import { ip, isRoot, sh } from "../support/netns.ts";
import { Lab, type LabPod } from "./support/lab.ts";

const root = isRoot();

function podObject(name: string, ns: string, labels: Record<string, string>, ip?: string) {
  const status = [{ name: "cbr0", interface: "eth0", ips: ["10.244.0.9"], default: true }];
  // The lab gives 10.99.0.N and fd99::N on net1.
  const v6 = ip && `fd99::${ip.split(".")[3]}`;
  if (ip) status.push({ name: "a/net1", interface: "net1", ips: [ip, v6!], default: false });
  return {
    metadata: {
      name,
      namespace: ns,
      labels,
      annotations: { "k8s.v1.cni.cncf.io/network-status": JSON.stringify(status) },
    },
    spec: { nodeName: "node1" },
  };
}

const namespaces = [
  parseNamespace({ metadata: { name: "a", labels: { team: "a" } } }),
  parseNamespace({ metadata: { name: "b", labels: { team: "b" } } }),
];

const ingressPolicy = parseMultiNetworkPolicy({
  metadata: {
    name: "db",
    namespace: "a",
    annotations: { "k8s.v1.cni.cncf.io/policy-for": "net1" },
  },
  spec: {
    podSelector: { matchLabels: { app: "db" } },
    ingress: [
      { from: [{ podSelector: { matchLabels: { app: "web" } } }], ports: [{ port: 80 }] },
      {
        from: [{ ipBlock: { cidr: "10.99.0.16/28", except: ["10.99.0.20/30"] } }],
        ports: [{ protocol: "TCP", port: 8000, endPort: 8002 }],
      },
      {
        from: [{ namespaceSelector: { matchLabels: { team: "b" } } }],
        ports: [{ port: 9000 }],
      },
      {
        from: [{ podSelector: { matchLabels: { app: "web" } } }],
        ports: [{ protocol: "UDP", port: 5353 }],
      },
    ],
  },
});

const p50 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

interface Pods {
  server: LabPod;
  web: LabPod;
  other: LabPod;
  inBlock: LabPod;
  excepted: LabPod;
  fromB: LabPod;
}

async function setup(lab: Lab): Promise<Pods> {
  await lab.init();
  const pods: Pods = {
    server: await lab.pod("srv", 10),
    web: await lab.pod("web", 11),
    other: await lab.pod("oth", 12),
    inBlock: await lab.pod("blk", 17),
    excepted: await lab.pod("exc", 21),
    fromB: await lab.pod("nsb", 13),
  };
  await pods.server.listen(80, 81, 8000, 8001, 8002, 8003, 9000);
  await pods.server.udpListen(5353, 5354);
  await pods.inBlock.listen(80);
  return pods;
}

function world(otherLabels: Record<string, string>, extra: unknown[] = []): PolicyWorld {
  return {
    policies: [ingressPolicy, ...extra.map(parseMultiNetworkPolicy)],
    namespaces,
    pods: [
      parsePod(podObject("server", "a", { app: "db" }, "10.99.0.10")),
      parsePod(podObject("web", "a", { app: "web" }, "10.99.0.11")),
      parsePod(podObject("other", "a", otherLabels, "10.99.0.12")),
      parsePod(podObject("blk", "a", {}, "10.99.0.17")),
      parsePod(podObject("exc", "a", {}, "10.99.0.21")),
      parsePod(podObject("nsb", "b", {}, "10.99.0.13")),
    ],
  };
}

Deno.test({
  name: "MultiNetworkPolicy enforced with real traffic on a bridge",
  ignore: !root,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn(t) {
    const lab = new Lab();
    try {
      const p = await setup(lab);
      const srv = p.server.ip4;
      // Before any policy everything passes.
      assert.ok(await p.other.connects(srv, 80, 1000), "open before policy");

      const desired = computeDesiredPolicies(world({ app: "other" }), { nodeName: "node1" });
      assert.deepEqual([...desired.pods.keys()], ["a/server"]);
      assert.deepEqual(desired.problems, []);
      const applier = new PolicyApplier(libnftablesRunner());
      assert.equal(
        await applier.apply(p.server.path, desired.pods.get("a/server")!.ruleset),
        "full",
      );

      await t.step("allowed peer passes, denied peer and other ports are dropped", async () => {
        assert.ok(await p.web.connects(srv, 80), "web → 80");
        assert.ok(!(await p.web.connects(srv, 81)), "web → 81 dropped");
        assert.ok(!(await p.other.connects(srv, 80)), "other → 80 dropped");
      });
      await t.step("IPv6: peers by address family, neighbour discovery passes", async () => {
        const srv6 = p.server.ip6;
        assert.ok(await p.web.connects(srv6, 80, 1000), "web → [fd99::10]:80");
        assert.ok(!(await p.other.connects(srv6, 80)), "other → [fd99::10]:80 dropped");
        assert.ok(!(await p.web.connects(srv6, 81)), "web → [fd99::10]:81 dropped");
      });

      await t.step("ipBlock with except; endPort range", async () => {
        for (const port of [8000, 8001, 8002]) {
          assert.ok(await p.inBlock.connects(srv, port), `${port}`);
        }
        assert.ok(!(await p.inBlock.connects(srv, 8003)), "8003 is past endPort");
        assert.ok(!(await p.excepted.connects(srv, 8000)), "10.99.0.21 is in except");
      });
      await t.step("namespaceSelector peer", async () => {
        assert.ok(await p.fromB.connects(srv, 9000), "ns b → 9000");
        assert.ok(!(await p.web.connects(srv, 9000)), "ns a web → 9000 dropped");
      });
      await t.step("the server's own egress is not isolated (replies and new flows)", async () => {
        assert.ok(await p.server.connects(p.inBlock.ip4, 80));
      });
      await t.step(
        "UDP: the allowed port answers, another port and another peer are dropped",
        async () => {
          assert.ok(await p.web.udpEchoes(srv, 5353), "web → udp 5353");
          assert.ok(!(await p.web.udpEchoes(srv, 5354)), "web → udp 5354 dropped");
          assert.ok(!(await p.other.udpEchoes(srv, 5353)), "other → udp 5353 dropped");
        },
      );
      await t.step(
        "Ingress+Egress isolation: replies of allowed connections still pass",
        async () => {
          const both = {
            metadata: {
              name: "db-out",
              namespace: "a",
              annotations: { "k8s.v1.cni.cncf.io/policy-for": "net1" },
            },
            spec: { podSelector: { matchLabels: { app: "db" } }, policyTypes: ["Egress"] },
          };
          const d = computeDesiredPolicies(world({ app: "other" }, [both]), { nodeName: "node1" });
          const rs = d.pods.get("a/server")!.ruleset;
          assert.deepEqual(rs.interfaces[0].egress, []);
          await applyPolicy(p.server.path, rs);
          assert.ok(await p.web.connects(srv, 80), "web → 80: SYN-ACK leaves as established");
          assert.ok(await p.web.udpEchoes(srv, 5353), "UDP reply leaves as established");
          assert.ok(!(await p.server.connects(p.inBlock.ip4, 80)), "server's new flows dropped");
          // Back to the ingress-only policy the applier remembers.
          await applyPolicy(p.server.path, desired.pods.get("a/server")!.ruleset);
        },
      );

      await t.step("label change moves a peer in and out; time recompute → kernel", async () => {
        const times: number[] = [];
        for (let i = 0; i < 20; i++) {
          const labels = i % 2 === 0 ? { app: "web" } : { app: "other" };
          const t0 = performance.now();
          const d = computeDesiredPolicies(world(labels), { nodeName: "node1" });
          const mode = await applier.apply(p.server.path, d.pods.get("a/server")!.ruleset);
          times.push(performance.now() - t0);
          assert.equal(mode, "sets", "a peer change refills sets only");
          if (i < 4) {
            assert.equal(await p.other.connects(srv, 80), i % 2 === 0, `flip ${i}`);
          }
        }
        console.log(`peer change, recompute → kernel (sets only): p50 ${p50(times).toFixed(2)} ms`);
        const rules = await readRules(p.server.path);
        const set = rules!.find((o) => (o.set as { name?: string })?.name === "in_net1_0_v4");
        assert.deepEqual((set!.set as { elem: unknown[] }).elem, ["10.99.0.11"]);
      });

      await t.step("namespace label change moves a namespace's pods out and back", async () => {
        const w = world({ app: "other" });
        const relabelled = [namespaces[0], parseNamespace({ metadata: { name: "b", labels: {} } })];
        const d = computeDesiredPolicies({ ...w, namespaces: relabelled }, { nodeName: "node1" });
        assert.equal(await applier.apply(p.server.path, d.pods.get("a/server")!.ruleset), "sets");
        assert.ok(!(await p.fromB.connects(srv, 9000)), "ns b no longer team=b");
        const back = computeDesiredPolicies(w, { nodeName: "node1" });
        assert.equal(
          await applier.apply(p.server.path, back.pods.get("a/server")!.ruleset),
          "sets",
        );
        assert.ok(await p.fromB.connects(srv, 9000), "back in");
      });

      await t.step("egress policy: only the allowed destination", async () => {
        const egress = {
          metadata: {
            name: "web-out",
            namespace: "a",
            annotations: { "k8s.v1.cni.cncf.io/policy-for": "a/net1" },
          },
          spec: {
            podSelector: { matchLabels: { app: "web" } },
            policyTypes: ["Egress"],
            egress: [{ to: [{ ipBlock: { cidr: "10.99.0.10/32" } }], ports: [{ port: 80 }] }],
          },
        };
        const d = computeDesiredPolicies(world({ app: "other" }, [egress]));
        await applyPolicy(p.web.path, d.pods.get("a/web")!.ruleset);
        assert.ok(await p.web.connects(srv, 80), "web → server:80");
        assert.ok(!(await p.web.connects(p.inBlock.ip4, 80)), "web → blk:80 dropped");
        await removePolicy(p.web.path);
        assert.ok(await p.web.connects(p.inBlock.ip4, 80), "open again");
      });

      await t.step("fail closed: unreadable network-status drops net1", async () => {
        const w = world({ app: "other" });
        const broken = parsePod({
          metadata: {
            name: "web",
            namespace: "a",
            labels: { app: "web" },
            annotations: { "k8s.v1.cni.cncf.io/network-status": "[{not json" },
          },
        });
        const egress = parseMultiNetworkPolicy({
          metadata: {
            name: "all",
            namespace: "a",
            annotations: { "k8s.v1.cni.cncf.io/policy-for": "net1" },
          },
          spec: { podSelector: {} },
        });
        const d = computeDesiredPolicies({
          ...w,
          policies: [egress],
          pods: [...w.pods.filter((x) => x.name !== "web"), broken],
        });
        assert.ok(d.problems.some((x) => x.reason === "UnreadableNetworkStatus"));
        await applyPolicy(p.web.path, d.pods.get("a/web")!.ruleset);
        assert.ok(!(await p.web.connects(p.inBlock.ip4, 80)), "net1 closed");
        await removePolicy(p.web.path);
      });

      await t.step("reconciler: policy changes → kernel, p50 over 20 syncs", async () => {
        const netns = new Map([
          ["a/server", p.server.path],
          ["a/web", p.web.path],
          ["a/other", p.other.path],
        ]);
        const runner = libnftablesRunner();
        const r = new PolicyReconciler({
          nodeName: "node1",
          applier: new PolicyApplier(runner),
          netnsOf: (x) => netns.get(`${x.namespace}/${x.name}`),
        });
        try {
          for (const n of ["a", "b"]) {
            r.upsertNamespace({ metadata: { name: n, labels: { team: n } } });
          }
          r.upsertPod(podObject("server", "a", { app: "db" }, "10.99.0.10"));
          r.upsertPod(podObject("web", "a", { app: "web" }, "10.99.0.11"));
          r.upsertPod(podObject("other", "a", { app: "other" }, "10.99.0.12"));
          const policyWithPort = (port: number) => ({
            metadata: {
              name: "srv",
              namespace: "a",
              annotations: { "k8s.v1.cni.cncf.io/policy-for": "net1" },
            },
            spec: {
              podSelector: { matchLabels: { app: "db" } },
              ingress: [{
                from: [{ podSelector: { matchLabels: { app: "web" } } }],
                ports: [{ port }],
              }],
            },
          });
          const times: number[] = [];
          for (let i = 0; i < 20; i++) {
            const port = i % 2 ? 81 : 80;
            r.upsertPolicy(policyWithPort(port));
            const rep = await r.sync();
            times.push(rep.durationMs);
            assert.deepEqual(rep.problems, []);
            assert.equal(rep.applied[0].mode, "full", "a port change rewrites the rules");
            if (i < 2) {
              assert.ok(await p.web.connects(srv, port), `web → ${port}`);
              assert.ok(
                !(await p.web.connects(srv, port === 80 ? 81 : 80)),
                "the other port closed",
              );
            }
          }
          console.log(
            `policy change → kernel (reconciler sync, full batch): p50 ${p50(times).toFixed(2)} ms`,
          );
          r.deletePolicy("a", "srv");
          const rep = await r.sync();
          assert.deepEqual(rep.removed.map((x) => x.pod), ["a/server"]);
          assert.ok(await p.other.connects(srv, 80, 1000), "open again");
        } finally {
          await runner.close();
        }
      });

      await t.step("policy removal restores traffic", async () => {
        await applier.remove(p.server.path);
        assert.equal(await readRules(p.server.path), null);
        assert.ok(await p.other.connects(srv, 80, 1000), "other → 80 after removal");
        await removePolicy(p.server.path); // idempotent
      });

      await t.step("apply timing: libnftables FFI vs nft -j -f - (full batch)", async () => {
        const rs = desired.pods.get("a/server")!.ruleset;
        const batch = JSON.stringify(renderRuleset(rs));
        const lib = libnftablesRunner();
        const runners = [lib, nftProcessRunner()];
        for (const r of runners) {
          const times: number[] = [];
          for (let i = 0; i < 25; i++) {
            const t0 = performance.now();
            await r.run(p.server.path, batch);
            times.push(performance.now() - t0);
          }
          console.log(
            `apply via ${r.name}: p50 ${
              p50(times).toFixed(2)
            } ms (25 applies, ${batch.length} bytes)`,
          );
        }
        const tFresh: number[] = [];
        for (let i = 0; i < 21; i++) {
          const fresh = libnftablesRunner();
          const t0 = performance.now();
          await fresh.run(p.server.path, batch);
          tFresh.push(performance.now() - t0);
          await fresh.close();
        }
        console.log(
          `apply via libnftables, new context each time: p50 ${p50(tFresh).toFixed(2)} ms`,
        );
        await lib.close();
        const tr: number[] = [];
        for (let i = 0; i < 25; i++) {
          const t0 = performance.now();
          const d = computeDesiredPolicies(world({ app: "web" }));
          for (const { ruleset } of d.pods.values()) JSON.stringify(renderRuleset(ruleset));
          tr.push(performance.now() - t0);
        }
        console.log(
          `translation (parse-free engine + render, 6 pods): p50 ${p50(tr).toFixed(3)} ms`,
        );
        // Same state whichever runner applied it.
        assert.equal(
          (await readRules(p.server.path, { runner: nftProcessRunner() }))?.length,
          (await readRules(p.server.path))?.length,
        );
        await removePolicy(p.server.path, { runner: nftProcessRunner() });
        assert.equal(await readRules(p.server.path), null);
      });
    } finally {
      await lab.cleanup();
    }
  },
});

Deno.test({
  name: "libnftables runner: a netns path reused by a new namespace gets a new context",
  ignore: !root,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const name = `mft-reuse-${crypto.randomUUID().slice(0, 6)}`;
    const runner = libnftablesRunner();
    const rs = { interfaces: [], sets: [] };
    try {
      await ip("netns", "add", name);
      await applyPolicy(name, rs, { runner });
      assert.equal(runner.openContexts, 1);
      assert.ok(await readRules(name, { runner }));
      await ip("netns", "del", name);
      await ip("netns", "add", name);
      // Same path, new namespace: the table must be absent (not read from the old one)…
      assert.equal(await readRules(name, { runner }), null);
      // …and an apply lands in the new namespace.
      await applyPolicy(name, rs, { runner });
      const listed = await sh("ip", ["netns", "exec", name, "nft", "list", "tables"]);
      assert.match(listed.stdout, /table inet manifold_mnp/);
      await removePolicy(name, { runner });
      assert.equal(runner.openContexts, 0, "released on removal");
    } finally {
      await runner.close();
      await sh("ip", ["netns", "del", name]);
    }
  },
});
