/**
 * The daemon's trusted configuration (lib/daemon/daemon_conf.ts) and the request environment
 * allowlist (lib/daemon/protocol.ts `forwardedEnv`), without a daemon process.
 */

import assert from "node:assert/strict";
import { DaemonConf, requestConfig } from "../../lib/daemon/daemon_conf.ts";
import { forwardedEnv } from "../../lib/daemon/protocol.ts";
import { CniError } from "../../lib/cni/errors.ts";
import { nullLogger } from "../../lib/log/mod.ts";

const enc = new TextEncoder();
const TRUSTED = {
  cniVersion: "1.0.0",
  name: "net",
  type: "manifold",
  binDir: "/opt/cni/bin",
  clusterNetwork: "/etc/cni/net.d/10-default.conflist",
};

function merged(req: Record<string, unknown>): Record<string, unknown> {
  return JSON.parse(
    new TextDecoder().decode(requestConfig(TRUSTED, enc.encode(JSON.stringify(req)))),
  );
}

Deno.test("requestConfig: the daemon's keys, the request's per-invocation fields only", () => {
  const out = merged({
    cniVersion: "0.4.0",
    name: "net",
    type: "manifold",
    binDir: "/tmp/evil",
    logFile: "/etc/shadow",
    chrootDir: "/tmp",
    runtimeConfig: { portMappings: [] },
    args: { cni: { ips: ["10.0.0.1/24"] } },
    prevResult: { cniVersion: "0.4.0", interfaces: [] },
    "cni.dev/valid-attachments": [],
  });
  assert.deepEqual(out, {
    ...TRUSTED,
    cniVersion: "0.4.0",
    runtimeConfig: { portMappings: [] },
    args: { cni: { ips: ["10.0.0.1/24"] } },
    prevResult: { cniVersion: "0.4.0", interfaces: [] },
    "cni.dev/valid-attachments": [],
  });
});

Deno.test("requestConfig: another name or type is code 7 naming both; not JSON is code 6", () => {
  const code = (req: unknown) => {
    try {
      requestConfig(TRUSTED, enc.encode(typeof req === "string" ? req : JSON.stringify(req)));
      return undefined;
    } catch (e) {
      assert.ok(e instanceof CniError);
      return [e.code, e.msg];
    }
  };
  assert.deepEqual(code({ ...TRUSTED, name: "x" }), [
    7,
    `the request's network name "x" is not the daemon's "net"`,
  ]);
  assert.deepEqual(code({ ...TRUSTED, type: "bridge" })?.[0], 7);
  assert.deepEqual(code({ cniVersion: "1.0.0", type: "manifold" })?.[0], 7, "no name");
  assert.deepEqual(code("{nope")?.[0], 6);
  assert.deepEqual(code("[1]")?.[0], 6);
});

Deno.test("forwardedEnv: the CNI per-invocation variables and the recursion marker only", () => {
  assert.deepEqual(
    forwardedEnv({
      CNI_COMMAND: "ADD",
      CNI_CONTAINERID: "c",
      CNI_NETNS: "/n",
      CNI_IFNAME: "eth0",
      CNI_ARGS: "a=b",
      CNI_PATH: "/tmp",
      LD_PRELOAD: "/x.so",
      PATH: "/tmp",
      MANIFOLD_DELEGATION_DEPTH: "1",
      MANIFOLD_TEST_CRASHPOINT: "add:after-delegate",
      toString: "x",
    }),
    {
      CNI_COMMAND: "ADD",
      CNI_CONTAINERID: "c",
      CNI_NETNS: "/n",
      CNI_IFNAME: "eth0",
      CNI_ARGS: "a=b",
      MANIFOLD_DELEGATION_DEPTH: "1",
    },
  );
  assert.deepEqual(forwardedEnv({ CNI_COMMAND: 7 as unknown as string }), {});
});

Deno.test("DaemonConf: a rewrite is read at the next call; an invalid one keeps the last good; restart keys stay", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/00-manifold.conflist`;
    const list = (entry: Record<string, unknown>) =>
      JSON.stringify({
        cniVersion: "1.0.0",
        name: "net",
        plugins: [{ type: "manifold", ...entry }],
      });
    await Deno.writeTextFile(path, list({ clusterNetwork: "a", cniDir: `${dir}/c1` }));
    const c = await DaemonConf.load(path, nullLogger);
    assert.equal(c.conf.clusterNetwork, "a");
    assert.equal(c.conf.name, "net", "the list's name");

    await Deno.writeTextFile(
      path,
      list({ clusterNetwork: "b", defaultNetworks: ["x"], cniDir: `${dir}/c2` }),
    );
    const next = await c.current();
    assert.equal(next.clusterNetwork, "b");
    assert.deepEqual(next.defaultNetworks, ["x"]);
    assert.equal(next.cniDir, `${dir}/c1`, "cniDir takes effect at a restart");

    await Deno.writeTextFile(path, "{ half written");
    assert.equal((await c.current()).clusterNetwork, "b", "the last good one");
    await Deno.writeTextFile(path, list({ clusterNetwork: "d" }));
    assert.equal((await c.current()).clusterNetwork, "d");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
