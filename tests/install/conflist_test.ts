/**
 * Tests of lib/install/conflist.ts and primary.ts: the generated configuration (always
 * accepted by `parseManifoldConf`) and the primary lookup rules. Temp dirs only.
 */

import assert from "node:assert/strict";
import { parseNetworkConfig } from "../../lib/cni/types.ts";
import {
  findPrimaryConfig,
  generateManifoldConflist,
  isManifoldConfig,
  renderConfig,
  unionCapabilities,
} from "../../lib/install/mod.ts";
import { flannelConflist, parseGenerated, singleConf } from "./fixtures.ts";

const VERSIONS = ["0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"];

Deno.test("unionCapabilities: true capabilities of every plugin, false ones left out", () => {
  const list = parseNetworkConfig({
    cniVersion: "1.0.0",
    name: "n",
    plugins: [
      { type: "a", capabilities: { ips: true, mac: false } },
      { type: "b" },
      { type: "c", capabilities: { portMappings: true, ips: true } },
    ],
  });
  assert.deepEqual(unionCapabilities(list), { ips: true, portMappings: true });
});

for (const v of VERSIONS) {
  Deno.test(`generated config for a ${v} primary parses as a Manifold config`, () => {
    for (const primary of [flannelConflist(v), singleConf(v)]) {
      const conf = generateManifoldConflist(parseNetworkConfig(primary), {
        clusterNetwork: "/etc/cni/net.d/10-x.conflist",
        kubeconfig: "/etc/cni/net.d/manifold.d/manifold.kubeconfig",
      });
      const { list, conf: parsed } = parseGenerated(renderConfig(conf));
      assert.equal(list.cniVersion, v);
      assert.equal(parsed.capabilities["io.kubernetes.cri.pod-annotations"], true);
      assert.ok(isManifoldConfig(renderConfig(conf)));
    }
  });
}

Deno.test("extra keys are kept, type/name/cniVersion cannot be overridden, bad types fail", () => {
  const list = parseNetworkConfig(flannelConflist());
  const conf = generateManifoldConflist(list, {
    clusterNetwork: "/p",
    readinessIndicatorFile: "/run/ready",
    extra: { type: "other", name: "x", cniVersion: "0.1.0", multusNamespace: "net" },
  });
  assert.equal(conf.plugins[0].type, "manifold");
  assert.equal(conf.plugins[0].multusNamespace, "net");
  assert.equal(conf.plugins[0].readinessindicatorfile, "/run/ready");
  assert.equal(conf.name, "manifold-cni-network");
  assert.equal(conf.cniVersion, "1.0.0");
  assert.throws(
    () => generateManifoldConflist(list, { clusterNetwork: "/p", extra: { apiTimeoutMs: -1 } }),
    /invalid manifold configuration/,
  );
});

Deno.test("isManifoldConfig: only a list whose single plugin is manifold", () => {
  assert.equal(isManifoldConfig("{"), false);
  assert.equal(isManifoldConfig(JSON.stringify(flannelConflist())), false);
  assert.equal(isManifoldConfig('{"type":"manifold"}'), true);
  assert.equal(isManifoldConfig('{"plugins":[{"type":"manifold"},{"type":"x"}]}'), false);
});

Deno.test("findPrimaryConfig: lexical order, skips, invalid first, pinned, missing dir", async () => {
  const dir = await Deno.makeTempDir();
  try {
    assert.equal(
      (await findPrimaryConfig(`${dir}/none`, { ownFileName: "00-manifold.conflist" })).status,
      "missing",
    );
    const w = (n: string, v: unknown) => Deno.writeTextFile(`${dir}/${n}`, JSON.stringify(v));
    await w("00-manifold.conflist", {
      cniVersion: "1.0.0",
      name: "m",
      plugins: [{ type: "manifold" }],
    });
    await w("01-multus.conf", { cniVersion: "1.0.0", name: "mu", type: "multus-shim" });
    await w("02-old.conflist.bak", flannelConflist());
    await Deno.mkdir(`${dir}/03-dir.conf`);
    await w("20-b.conf", singleConf());
    await w("10-a.conflist", flannelConflist());
    const r = await findPrimaryConfig(dir, { ownFileName: "00-manifold.conflist" });
    assert.equal(r.status, "found");
    if (r.status === "found") {
      assert.equal(r.primary.fileName, "10-a.conflist");
      assert.deepEqual(r.skipped, ["01-multus.conf: a delegating plugin's own config"]);
    }
    await Deno.writeTextFile(`${dir}/05-partial.conflist`, '{"cniVersion":');
    const bad = await findPrimaryConfig(dir, { ownFileName: "00-manifold.conflist" });
    assert.equal(bad.status, "invalid");
    if (bad.status === "invalid") assert.equal(bad.fileName, "05-partial.conflist");
    const pinned = await findPrimaryConfig(dir, {
      ownFileName: "00-manifold.conflist",
      pinned: "20-b.conf",
    });
    assert.equal(pinned.status === "found" && pinned.primary.list.name, "k8s-pod-network");
    const gone = await findPrimaryConfig(dir, {
      ownFileName: "00-manifold.conflist",
      pinned: "30-c.conf",
    });
    assert.equal(gone.status, "missing");
    if (gone.status === "missing") assert.match(gone.reason, /pinned primary config 30-c\.conf/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("findPrimaryConfig: a link that does not resolve in the installer's view is waited for, not skipped", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/20-b.conflist`, JSON.stringify(flannelConflist()));
    // On the host the link resolves (an absolute target outside the mounted directories); in
    // the install container it does not. The runtime on the host loads it, so 20-b must not
    // become the primary in its place.
    await Deno.symlink("/var/lib/cni-absent-r29/10-a.conflist", `${dir}/10-a.conflist`);
    const r = await findPrimaryConfig(dir, { ownFileName: "00-manifold.conflist" });
    assert.equal(r.status, "invalid");
    if (r.status === "invalid") {
      assert.equal(r.fileName, "10-a.conflist");
      assert.match(r.reason, /symbolic link to \/var\/lib\/cni-absent-r29\/10-a\.conflist/);
      assert.match(r.reason, /mount the target's directory into the install container/);
    }
    const pinned = await findPrimaryConfig(dir, {
      ownFileName: "00-manifold.conflist",
      pinned: "10-a.conflist",
    });
    assert.equal(pinned.status, "invalid");
    // A link that resolves is read through.
    await Deno.remove(`${dir}/10-a.conflist`);
    await Deno.symlink(`${dir}/20-b.conflist`, `${dir}/10-a.conflist`);
    const ok = await findPrimaryConfig(dir, { ownFileName: "00-manifold.conflist" });
    assert.equal(ok.status === "found" && ok.primary.fileName, "10-a.conflist");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
