/**
 * Fail closed means closed (issue 21 §2), with real traffic (root): pod namespaces on a
 * bridge (tests/policy/support/lab.ts), every desired ruleset the engine computes programmed
 * through libnftables, TCP connects deciding what passes — a malformed `policy-for` opens no
 * network, the reference's inputs keep their meaning and close no namespace, an invalid rule
 * closes only its own policy's pods, MLD leaves an isolated interface (the bridge's snooping
 * table learns it).
 */

import assert from "node:assert/strict";
import {
  computeDesiredPolicies,
  parseMultiNetworkPolicy,
  parseNamespace,
  parsePod,
  PolicyApplier,
} from "../../lib/policy/mod.ts";
import { ip, sh } from "../support/netns.ts";
import { until } from "../support/wait.ts";
import { type LabPod, labTest } from "./support/lab.ts";

const namespaces = [parseNamespace({ metadata: { name: "a", labels: { team: "a" } } })];

/** A pod of namespace `a` on node1 whose `net1` interface is attached to `network`. */
function podObject(name: string, labels: Record<string, string>, pod: LabPod, network = "a/net1") {
  return parsePod({
    metadata: {
      name,
      namespace: "a",
      labels,
      annotations: {
        "k8s.v1.cni.cncf.io/network-status": JSON.stringify([
          { name: "cbr0", interface: "eth0", ips: ["10.244.0.9"], default: true },
          { name: network, interface: "net1", ips: [pod.ip4, pod.ip6] },
        ]),
      },
    },
    spec: { nodeName: "node1" },
  });
}

function policy(name: string, policyFor: string, spec: unknown) {
  return parseMultiNetworkPolicy({
    metadata: {
      name,
      namespace: "a",
      annotations: { "k8s.v1.cni.cncf.io/policy-for": policyFor },
    },
    spec,
  });
}

/** Computes and programs every local pod's ruleset (removes the table of the others). */
async function enforce(
  applier: PolicyApplier,
  pods: [ReturnType<typeof parsePod>, LabPod][],
  policies: ReturnType<typeof parseMultiNetworkPolicy>[],
) {
  const desired = computeDesiredPolicies(
    { namespaces, pods: pods.map(([p]) => p), policies },
    { nodeName: "node1" },
  );
  for (const [info, lab] of pods) {
    const want = desired.pods.get(`a/${info.name}`);
    if (want) await applier.apply(lab.path, want.ruleset);
    else await applier.remove(lab.path);
  }
  return desired;
}

labTest(
  'fail closed: a malformed policy-for opens no network (A closes net2, B says "net1,")',
  async (lab, applier) => {
    const srv = await lab.pod("srv", 10);
    const web = await lab.pod("web", 11);
    await srv.listen(80);
    // The server's net1 interface is its attachment to network a/net2.
    const pods: [ReturnType<typeof parsePod>, LabPod][] = [
      [podObject("server", { app: "db" }, srv, "a/net2"), srv],
      [podObject("web", { app: "web" }, web, "a/net2"), web],
    ];
    assert.ok(await web.connects(srv.ip4, 80, 1000), "open before any policy");
    const a = policy("a-net2", "a/net2", { podSelector: { matchLabels: { app: "db" } } });
    const b = policy("b-bad", "net1,", {
      podSelector: { matchLabels: { app: "db" } },
      ingress: [{ from: [{ ipBlock: { cidr: "0.0.0.0/0" } }] }],
    });
    await enforce(applier, pods, [a]);
    assert.ok(!(await web.connects(srv.ip4, 80)), "A alone closes net2");
    const desired = await enforce(applier, pods, [a, b]);
    assert.ok(!(await web.connects(srv.ip4, 80)), "B's allow-all does not reopen net2");
    assert.ok(
      desired.problems.some((p) => p.pod === "a/server" && p.reason === "InvalidPolicyFor"),
      "reported on the pod it selects",
    );
    // B alone still isolates what it selects (every secondary network), allowing nothing.
    await enforce(applier, pods, [b]);
    assert.ok(!(await web.connects(srv.ip4, 80)), "B alone: closed, not open");
  },
);

labTest(
  "the reference's inputs keep their meaning; an invalid rule closes only its own pods",
  async (lab, applier, t) => {
    const srv = await lab.pod("srv", 10);
    const web = await lab.pod("web", 11);
    const exc = await lab.pod("exc", 12);
    const bys = await lab.pod("bys", 13);
    await srv.listen(80, 8080);
    await bys.listen(80);
    await web.listen(80);
    const pods: [ReturnType<typeof parsePod>, LabPod][] = [
      [podObject("server", { app: "db" }, srv), srv],
      [podObject("web", { app: "web" }, web), web],
      [podObject("excepted", {}, exc), exc],
      [podObject("bystander", {}, bys), bys],
    ];

    await t.step('ipBlock + podSelector {}, bare except, tcp, "8080", [ingress]', async () => {
      const desired = await enforce(applier, pods, [policy("ref", "net1", {
        podSelector: { matchLabels: { app: "db" } },
        policyTypes: ["ingress"],
        ingress: [{
          from: [{ ipBlock: { cidr: "10.99.0.0/24", except: ["10.99.0.12"] }, podSelector: {} }],
          ports: [{ protocol: "tcp", port: "8080" }],
        }],
      })]);
      assert.deepEqual(desired.problems, []);
      assert.ok(await web.connects(srv.ip4, 8080), 'in the block, port "8080" passes');
      assert.ok(!(await web.connects(srv.ip4, 80)), "another port is dropped");
      assert.ok(!(await exc.connects(srv.ip4, 8080)), "the bare except address is dropped");
      assert.ok(
        !(await web.connects(srv.ip6, 8080)),
        "ipBlock wins: podSelector {} does not add web's IPv6 address",
      );
      assert.ok(await srv.connects(web.ip4, 80), "egress not isolated (policyTypes: ingress)");
      assert.ok(await web.connects(bys.ip4, 80), "an unselected pod stays open");
    });

    await t.step("an invalid rule: its policy's pods closed, nobody else", async () => {
      const desired = await enforce(applier, pods, [policy("broken", "net1", {
        podSelector: { matchLabels: { app: "db" } },
        ingress: [{ from: [{ podSelector: {} }], ports: [{ port: 0 }] }],
      })]);
      assert.deepEqual([...desired.pods.keys()], ["a/server"]);
      assert.ok(!(await web.connects(srv.ip4, 8080)), "the selected pod is closed");
      assert.ok(await web.connects(bys.ip4, 80), "an unselected pod stays open");
      assert.ok(await srv.connects(web.ip4, 80), "egress of an ingress policy is untouched");
    });
  },
);

labTest(
  "fail closed: an egress that is not a list (policyTypes absent) isolates egress too",
  async (lab, applier) => {
    const srv = await lab.pod("srv", 10);
    const web = await lab.pod("web", 11);
    const bys = await lab.pod("bys", 12);
    await srv.listen(80);
    await web.listen(80);
    await bys.listen(80);
    const pods: [ReturnType<typeof parsePod>, LabPod][] = [
      [podObject("server", { app: "db" }, srv), srv],
      [podObject("web", { app: "web" }, web), web],
      [podObject("bystander", {}, bys), bys],
    ];
    assert.ok(await srv.connects(web.ip4, 80, 1000), "open before any policy");
    // Written for an older CRD: `egress` an object, not a list. It may hold egress rules
    // (it does), so the policy isolates Egress as well as Ingress, with no allows.
    const desired = await enforce(applier, pods, [policy("broken", "net1", {
      podSelector: { matchLabels: { app: "db" } },
      egress: { to: [{ ipBlock: { cidr: "10.99.0.0/24" } }] },
    })]);
    assert.deepEqual(desired.problems.map((p) => [p.pod, p.reason]), [
      ["a/server", "InvalidPolicy"],
    ]);
    assert.ok(!(await web.connects(srv.ip4, 80)), "ingress of the selected pod closed");
    assert.ok(!(await srv.connects(web.ip4, 80)), "egress of the selected pod closed");
    assert.ok(await web.connects(bys.ip4, 80), "an unselected pod untouched");
    assert.ok(await bys.connects(web.ip4, 80), "an unselected pod untouched, both ways");
  },
);

labTest(
  "MLD reports (v1 131, v2 143) leave an egress-isolated interface: snooping learns them",
  async (lab, applier) => {
    const srv = await lab.pod("srv", 10);
    await enforce(applier, [[podObject("server", { app: "db" }, srv), srv]], [
      policy("closed", "net1", { podSelector: {}, policyTypes: ["Ingress", "Egress"] }),
    ]);
    const learned = async (group: string) => {
      const r = await sh("bridge", ["-n", lab.switchNetns, "-j", "mdb", "show"]);
      const tables = JSON.parse(r.stdout.trim() || "[]") as { mdb?: { grp: string }[] }[];
      return tables.flatMap((d) => d.mdb ?? []).some((e) => e.grp === group);
    };
    // A new address joins its solicited-node group: the kernel sends an MLD report.
    for (const [version, host] of [["2", "a2"], ["1", "a1"]]) {
      await ip(
        "netns",
        "exec",
        srv.netns,
        "sysctl",
        "-qw",
        `net.ipv6.conf.net1.force_mld_version=${version}`,
      );
      await ip("-n", srv.netns, "addr", "add", `fd99::${host}/64`, "dev", "net1", "nodad");
      await until(() => learned(`ff02::1:ff00:${host}`), `MLDv${version} report learned`, 3000);
    }
  },
);
