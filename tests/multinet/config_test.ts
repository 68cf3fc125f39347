import assert from "node:assert/strict";
import { CniError } from "../../lib/cni/errors.ts";
import { DEFAULT_CNI_DIR, DEFAULT_CONF_DIR, parseManifoldConf } from "../../lib/multinet/config.ts";

Deno.test("a Multus 00-multus.conf parses with only the type changed, keys keep their meaning", () => {
  const multus = {
    cniVersion: "0.3.1",
    name: "multus-cni-network",
    type: "manifold",
    kubeconfig: "/etc/cni/net.d/multus.d/multus.kubeconfig",
    confDir: "/etc/cni/multus/net.d",
    cniDir: "/var/lib/cni/multus",
    binDir: "/opt/cni/bin",
    logFile: "/var/log/multus.log",
    logLevel: "debug",
    logToStderr: false,
    capabilities: { portMappings: true },
    namespaceIsolation: true,
    globalNamespaces: "shared,infra",
    clusterNetwork: "/etc/cni/net.d/10-flannel.conflist",
    defaultNetworks: ["sidecar"],
    systemNamespaces: ["kube-system", "openshift"],
    multusNamespace: "multus",
    readinessindicatorfile: "/run/flannel/subnet.env",
    retryDeleteOnError: true,
  };
  const c = parseManifoldConf(multus);
  assert.equal(c.cniDir, "/var/lib/cni/multus");
  assert.deepEqual(c.globalNamespaces, ["default", "shared", "infra"]);
  assert.deepEqual(c.defaultNetworks, ["sidecar"]);
  assert.deepEqual(c.systemNamespaces, ["kube-system", "openshift"]);
  assert.equal(c.multusNamespace, "multus");
  assert.equal(c.readinessindicatorfile, "/run/flannel/subnet.env");
  assert.equal(c.logToStderr, false);
  assert.equal(c.raw, multus);
});

Deno.test("defaults apply where keys are absent", () => {
  const c = parseManifoldConf({ cniVersion: "1.0.0", type: "manifold", clusterNetwork: "cbr0" });
  assert.equal(c.cniDir, DEFAULT_CNI_DIR);
  assert.equal(c.confDir, DEFAULT_CONF_DIR);
  assert.equal(c.binDir, "/opt/cni/bin");
  assert.equal(c.namespaceIsolation, false);
  assert.deepEqual(c.globalNamespaces, ["default"]);
  assert.deepEqual(c.systemNamespaces, ["kube-system"]);
  assert.equal(c.multusNamespace, "kube-system");
  assert.equal(c.delegateTimeoutMs, 60_000);
  assert.equal(c.apiTimeoutMs, 5_000);
  assert.equal(c.apiDeadlineMs, 15_000);
  assert.equal(c.statusPublish, "sync");
  assert.deepEqual(c.runtimeConfig, {});
});

Deno.test("inline delegates name the default network when clusterNetwork is absent", () => {
  const c = parseManifoldConf({
    cniVersion: "1.0.0",
    type: "manifold",
    delegates: [{ type: "bridge", name: "cbr0" }],
  });
  assert.equal(c.delegates?.length, 1);
  assert.equal(c.clusterNetwork, undefined);
});

Deno.test("bad keys give code 7 with the zod issues; no default network gives code 7", () => {
  for (
    const bad of [
      { cniVersion: "1.0.0", type: "manifold", clusterNetwork: "x", namespaceIsolation: "yes" },
      { cniVersion: "1.0.0", type: "manifold", clusterNetwork: "x", capabilities: { ips: 1 } },
      { cniVersion: "1.0.0", type: "manifold", clusterNetwork: "x", delegateTimeoutMs: -5 },
      { cniVersion: "1.0.0", type: "manifold" },
      { cniVersion: "1.0.0", type: "manifold", delegates: [] },
      { type: "manifold", clusterNetwork: "x" },
    ]
  ) {
    assert.throws(() => parseManifoldConf(bad as Record<string, unknown>), (e) => {
      assert.ok(e instanceof CniError);
      assert.equal(e.code, 7);
      assert.ok(e.details.length > 0, "details explain the problem");
      return true;
    });
  }
});

Deno.test("events defaults to warnings; bounds and empty paths name the key in details", () => {
  const base = { cniVersion: "1.0.0", type: "manifold", clusterNetwork: "x" };
  assert.equal(parseManifoldConf(base).events, "warnings");
  assert.equal(parseManifoldConf({ ...base, events: "all" }).events, "all");
  assert.equal(parseManifoldConf({ ...base, statusPublish: "async" }).statusPublish, "async");
  assert.equal(parseManifoldConf({ ...base, apiDeadlineMs: 2000 }).apiDeadlineMs, 2000);
  assert.equal(parseManifoldConf({ ...base, nadMirrorDir: "/run/m" }).nadMirrorDir, "/run/m");
  for (
    const [bad, key] of [
      [{ events: "some" }, "events"],
      [{ delegateTimeoutMs: 1.5 }, "delegateTimeoutMs"],
      [{ apiTimeoutMs: 0 }, "apiTimeoutMs"],
      [{ apiDeadlineMs: 600_001 }, "apiDeadlineMs"],
      [{ statusPublish: "later" }, "statusPublish"],
      [{ readinessTimeoutMs: 600_001 }, "readinessTimeoutMs"],
      [{ cniDir: "" }, "cniDir"],
    ] as const
  ) {
    assert.throws(() => parseManifoldConf({ ...base, ...bad }), (e) => {
      assert.ok(e instanceof CniError);
      assert.equal(e.code, 7);
      assert.match(e.details, new RegExp(`at ${key}`));
      return true;
    });
  }
  assert.deepEqual(
    parseManifoldConf({ ...base, globalNamespaces: "a, b,", systemNamespaces: [] })
      .globalNamespaces,
    ["default", "a", "b"],
  );
});
