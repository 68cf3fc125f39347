/**
 * PolicyReconciler with a recording runner (no kernel): which namespaces get which batches
 * as watched objects change, the first-sync sweep, removal, set-only peer changes, and
 * fail-closed fallback when a batch is refused.
 */

import assert from "node:assert/strict";
import {
  NftablesError,
  type NftRunner,
  PolicyApplier,
  PolicyReconciler,
} from "../../lib/policy/mod.ts";

class FakeRunner implements NftRunner {
  readonly name = "fake";
  log: { netns: string; kind: string; batch: Record<string, unknown>[] }[] = [];
  refuse: (netns: string, batch: Record<string, unknown>[]) => boolean = () => false;
  run(netns: string, text: string): Promise<string> {
    const batch = JSON.parse(text).nftables as Record<string, unknown>[];
    if (this.refuse(netns, batch)) {
      return Promise.reject(new NftablesError("refused", "Invalid argument"));
    }
    const kinds = batch.map((c) => Object.keys(c)[0]);
    const kind = kinds[0] === "flush" ? "sets" : kinds.length === 2 ? "remove" : "full";
    this.log.push({ netns, kind, batch });
    return Promise.resolve("");
  }
  take(): string[] {
    const out = this.log.map((l) => `${l.kind} ${l.netns}`);
    this.log = [];
    return out;
  }
}

function pod(name: string, labels: Record<string, string>, ip: string, node = "n1") {
  return {
    metadata: {
      name,
      namespace: "a",
      labels,
      annotations: {
        "k8s.v1.cni.cncf.io/network-status": JSON.stringify([
          { name: "cbr0", interface: "eth0", ips: ["10.244.0.1"], default: true },
          { name: "a/net1", interface: "net1", ips: [ip] },
        ]),
      },
    },
    spec: { nodeName: node },
  };
}

const dbPolicy = {
  metadata: {
    name: "db",
    namespace: "a",
    annotations: { "k8s.v1.cni.cncf.io/policy-for": "net1" },
  },
  spec: {
    podSelector: { matchLabels: { app: "db" } },
    ingress: [{ from: [{ podSelector: { matchLabels: { app: "web" } } }] }],
  },
};

function setup() {
  const runner = new FakeRunner();
  const netns = new Map([["a/db", "/ns/db"], ["a/web", "/ns/web"], ["a/other", "/ns/other"]]);
  const r = new PolicyReconciler({
    nodeName: "n1",
    applier: new PolicyApplier(runner),
    netnsOf: (p) => netns.get(`${p.namespace}/${p.name}`),
  });
  r.upsertNamespace({ metadata: { name: "a" } });
  r.upsertPod(pod("db", { app: "db" }, "10.1.0.1"));
  r.upsertPod(pod("web", { app: "web" }, "10.1.0.2"));
  r.upsertPod(pod("other", { app: "other" }, "10.1.0.3"));
  r.upsertPod(pod("remote", { app: "db" }, "10.1.0.4", "n2"));
  r.upsertPolicy(dbPolicy);
  return { runner, r, netns };
}

Deno.test("first sync: selected local pods programmed, the others swept clean once", async () => {
  const { runner, r } = setup();
  const rep = await r.sync();
  assert.deepEqual(rep.applied.map((a) => [a.pod, a.mode]), [["a/db", "full"]]);
  assert.deepEqual(runner.take().sort(), ["full /ns/db", "remove /ns/other", "remove /ns/web"]);
  assert.deepEqual(rep.problems, []);
  // Nothing changed: no batch at all.
  const again = await r.sync();
  assert.deepEqual(again.applied.map((a) => a.mode), ["unchanged"]);
  assert.deepEqual(runner.take(), []);
});

Deno.test("a peer's label change is a set-only batch; a policy delete removes the table", async () => {
  const { runner, r } = setup();
  await r.sync();
  runner.take();
  r.upsertPod(pod("other", { app: "web" }, "10.1.0.3"));
  const rep = await r.sync();
  assert.deepEqual(rep.applied.map((a) => a.mode), ["sets"]);
  const elem =
    (runner.log[0].batch[1] as { add: { element: { elem: string[] } } }).add.element.elem;
  assert.deepEqual(elem, ["10.1.0.2", "10.1.0.3"]);
  runner.take();
  r.deletePolicy("a", "db");
  const gone = await r.sync();
  assert.deepEqual(gone.removed, [{ pod: "a/db", netns: "/ns/db" }]);
  assert.deepEqual(runner.take(), ["remove /ns/db"]);
});

Deno.test("a deleted pod is forgotten without a batch; a pod without netns waits", async () => {
  const { runner, r, netns } = setup();
  netns.delete("a/db");
  assert.deepEqual((await r.sync()).applied, []);
  netns.set("a/db", "/ns/db");
  assert.deepEqual((await r.sync()).applied.map((a) => a.mode), ["full"]);
  runner.take();
  r.deletePod("a", "db");
  const rep = await r.sync();
  assert.deepEqual([rep.applied, rep.removed], [[], []]);
  assert.deepEqual(runner.take(), []);
});

Deno.test("a new sandbox (new netns) for the same pod gets a full batch", async () => {
  const { runner, r, netns } = setup();
  await r.sync();
  runner.take();
  netns.set("a/db", "/ns/db2");
  assert.deepEqual((await r.sync()).applied.map((a) => [a.netns, a.mode]), [["/ns/db2", "full"]]);
  assert.deepEqual(runner.take(), ["full /ns/db2"]);
});

Deno.test("fail closed: a refused ruleset falls back to drop-only, reported", async () => {
  const { runner, r } = setup();
  runner.refuse = (_n, batch) => batch.some((c) => "add" in c && "set" in (c.add as object));
  const rep = await r.sync();
  assert.deepEqual(rep.applied.map((a) => a.mode), ["closed"]);
  assert.deepEqual(rep.problems.map((p) => [p.pod, p.reason]), [["a/db", "ApplyFailed"]]);
  const full = runner.log.find((l) => l.netns === "/ns/db")!.batch;
  assert.ok(!full.some((c) => "add" in c && "set" in (c.add as object)), "no sets, no allows");
  const rules = full.filter((c) => "add" in c && "rule" in (c.add as object)).map((c) =>
    JSON.stringify(c)
  );
  assert.ok(rules.some((x) => x.includes('"drop":null')));
  assert.ok(!rules.some((x) => x.includes("@in_net1")));
  // Nothing accepted at all: the batch is refused as a whole.
  runner.refuse = (n) => n === "/ns/db";
  r.upsertPod(pod("db", { app: "db", v: "2" }, "10.1.0.9"));
  const rep2 = await r.sync({ full: true });
  assert.deepEqual(rep2.applied.map((a) => a.mode), ["failed"]);
  assert.match(rep2.problems[0].message, /nor close the interfaces/);
});

Deno.test("syncs are serialised", async () => {
  const { r } = setup();
  const order: number[] = [];
  await Promise.all([1, 2, 3].map((i) => r.sync().then(() => order.push(i))));
  assert.deepEqual(order, [1, 2, 3]);
});

Deno.test("localAttachmentsOf: a local pod's addresses are the node's, its annotation's only for remote pods", async () => {
  const runner = new FakeRunner();
  const r = new PolicyReconciler({
    nodeName: "n1",
    applier: new PolicyApplier(runner),
    netnsOf: (p) => (p.name === "db" ? "/ns/db" : undefined),
    localAttachmentsOf: (p) =>
      p.nodeName !== "n1"
        ? undefined
        : p.name === "web"
        ? [{ network: "a/net1", ifName: "net1", ips: ["10.1.0.2"], isDefault: false }]
        : p.attachments ?? undefined,
  });
  r.upsertNamespace({ metadata: { name: "a" } });
  r.upsertPod(pod("db", { app: "db" }, "10.1.0.1"));
  r.upsertPod(pod("web", { app: "web" }, "10.1.0.66")); // forged annotation
  r.upsertPod(pod("remote", { app: "web" }, "10.1.0.4", "n2"));
  r.upsertPolicy(dbPolicy);
  await r.sync();
  const batch = JSON.stringify(runner.log.find((l) => l.kind === "full")!.batch);
  assert.ok(batch.includes('"10.1.0.2"'), "the local peer's own address");
  assert.ok(batch.includes('"10.1.0.4"'), "the remote peer's annotation address");
  assert.ok(!batch.includes("10.1.0.66"), "the local peer's forged annotation address");
});
