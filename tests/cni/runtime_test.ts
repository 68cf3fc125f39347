/**
 * Tests of lib/cni/runtime.ts (the libcni role) with {@link RecordingPluginExec}:
 * config injection (name, cniVersion, prevResult, capability-filtered runtimeConfig),
 * chaining, reverse DEL, GC keys and version gating. Plugin lookup is faked, so the
 * tests are pure; one test uses the real lookup in `/usr/lib/cni` when readable.
 */

import assert from "node:assert/strict";
import { CniError } from "../../lib/cni/errors.ts";
import { type ExecRequest } from "../../lib/cni/invoke.ts";
import { execResponse, readExecRequest, RecordingPluginExec } from "../../lib/cni/exec_fake.ts";
import { decodeResult, parseResult } from "../../lib/cni/result.ts";
import { CniRuntime, type RuntimeConf } from "../../lib/cni/runtime.ts";
import { type NetworkConfigList, parseNetworkConfig } from "../../lib/cni/types.ts";
import { resultFamily, SUPPORTED_VERSIONS } from "../../lib/cni/version.ts";

const BIN = "/usr/lib/cni";
const canRead = Deno.permissions.querySync({ name: "read", path: BIN }).state === "granted";
const hasPlugins = canRead && (() => {
  try {
    return Deno.statSync(`${BIN}/bridge`).isFile;
  } catch {
    return false;
  }
})();

/** Fake lookup: every plugin but "no-such-plugin" lives in the first directory. */
function fakeFind(type: string, dirs: string[]): Promise<string> {
  if (type === "no-such-plugin") {
    return Promise.reject(
      new CniError(7, `failed to find plugin "${type}" in path [${dirs.join(" ")}]`),
    );
  }
  return Promise.resolve(`${dirs[0]}/${type}`);
}

const RT: RuntimeConf = {
  containerId: "ctr1",
  netns: "/var/run/netns/ctr1",
  ifName: "net1",
  args: [["IgnoreUnknown", "1"], ["K8S_POD_NAME", "web"]],
  capabilityArgs: {
    portMappings: [{ hostPort: 8080, containerPort: 80, protocol: "tcp" }],
    mac: "0a:58:0a:01:00:05",
    ips: ["10.1.0.5/16"],
  },
};

function list(version: string, extra: Record<string, unknown> = {}): NetworkConfigList {
  return parseNetworkConfig({
    cniVersion: version,
    name: "chain",
    plugins: [
      { type: "bridge", bridge: "br0", capabilities: { mac: true, ips: false } },
      { type: "tuning", sysctl: {} },
      { type: "portmap", capabilities: { portMappings: true, bandwidth: true } },
    ],
    ...extra,
  });
}

function resultFor(version: string, address: string): Record<string, unknown> {
  return resultFamily(version) === "legacy"
    ? { cniVersion: version, ip4: { ip: address } }
    : resultFamily(version) === "current"
    ? { cniVersion: version, ips: [{ version: "4", address }] }
    : { cniVersion: version, ips: [{ address }] };
}

function typeOf(req: ExecRequest): string {
  return String(readExecRequest(req).config.type);
}

function runtimeWith(handler: (req: ExecRequest) => ReturnType<typeof execResponse>) {
  const exec = new RecordingPluginExec(handler);
  const runtime = new CniRuntime({
    binDirs: [BIN],
    exec,
    timeoutMs: 1234,
    baseEnv: { PATH: "/usr/bin" },
    findPlugin: fakeFind,
  });
  return { exec, runtime };
}

/* ---------- buildPluginConfig (pure) ---------- */

Deno.test("buildPluginConfig: injects name, cniVersion and filtered runtimeConfig", () => {
  const l = list("1.0.0");
  const runtime = new CniRuntime({
    binDirs: [],
    exec: new RecordingPluginExec(() => execResponse()),
  });
  const before = structuredClone(l);
  const rtBefore = structuredClone(RT);

  const bridge = runtime.buildPluginConfig(l, l.plugins[0], RT);
  assert.deepEqual(bridge, {
    type: "bridge",
    bridge: "br0",
    capabilities: { mac: true, ips: false },
    name: "chain",
    cniVersion: "1.0.0",
    runtimeConfig: { mac: "0a:58:0a:01:00:05" },
  });
  // No declared capability → no runtimeConfig at all.
  assert.equal("runtimeConfig" in runtime.buildPluginConfig(l, l.plugins[1], RT), false);
  // Declared capability without a runtime value is not injected.
  const portmap = runtime.buildPluginConfig(l, l.plugins[2], RT, { cniVersion: "1.0.0" });
  assert.deepEqual(portmap.runtimeConfig, { portMappings: RT.capabilityArgs.portMappings });
  assert.deepEqual(portmap.prevResult, { cniVersion: "1.0.0" });

  // Inputs are never mutated, outputs never alias inputs.
  (portmap.runtimeConfig as Record<string, unknown[]>).portMappings.push("x");
  (bridge as Record<string, unknown>).capabilities = "changed";
  assert.deepEqual(l, before);
  assert.deepEqual(RT, rtBefore);
});

Deno.test("buildPluginConfig: list name and version override the plugin's own", () => {
  const l = parseNetworkConfig({
    cniVersion: "0.4.0",
    name: "outer",
    plugins: [{ type: "bridge", name: "inner", cniVersion: "9.9.9" }],
  });
  const runtime = new CniRuntime({
    binDirs: [],
    exec: new RecordingPluginExec(() => execResponse()),
  });
  const conf = runtime.buildPluginConfig(l, l.plugins[0], { ...RT, capabilityArgs: {} });
  assert.equal(conf.name, "outer");
  assert.equal(conf.cniVersion, "0.4.0");
  assert.equal("prevResult" in conf, false);
});

/* ---------- ADD ---------- */

for (const v of SUPPORTED_VERSIONS) {
  Deno.test({
    name: `addNetworkList ${v}: plugins in order, prevResult chaining, result in ${v}`,
    async fn() {
      const { exec, runtime } = runtimeWith((req) => {
        const t = typeOf(req);
        if (t === "bridge") return execResponse({ stdout: resultFor("1.0.0", "10.1.0.5/16") });
        if (t === "tuning") return execResponse(); // prints nothing: keeps prevResult
        return execResponse({
          stdout: readExecRequest(req).config.prevResult as Record<string, unknown>,
        });
      });
      const result = await runtime.addNetworkList(list(v), RT);
      assert.deepEqual(exec.calls.map(typeOf), ["bridge", "tuning", "portmap"]);
      assert.deepEqual(result.raw, resultFor(v, "10.1.0.5/16"));
      // Decoded once, in the list's version: the normalized value matches the raw one.
      assert.deepEqual(result.result, parseResult(result.raw));

      const [bridge, tuning, portmap] = exec.calls.map((c) => readExecRequest(c).config);
      assert.equal("prevResult" in bridge, false);
      // The bridge's 1.0.0 result reaches the next plugins converted to the list version.
      assert.deepEqual(tuning.prevResult, resultFor(v, "10.1.0.5/16"));
      assert.deepEqual(portmap.prevResult, resultFor(v, "10.1.0.5/16"));
      for (const c of [bridge, tuning, portmap]) {
        assert.equal(c.name, "chain");
        assert.equal(c.cniVersion, v);
      }
      assert.deepEqual(bridge.runtimeConfig, { mac: RT.capabilityArgs.mac });
      assert.deepEqual(portmap.runtimeConfig, { portMappings: RT.capabilityArgs.portMappings });

      const call = exec.calls[0];
      assert.equal(call.path, `${BIN}/bridge`);
      assert.equal(call.timeoutMs, 1234);
      assert.deepEqual(call.env, {
        PATH: "/usr/bin",
        CNI_COMMAND: "ADD",
        CNI_CONTAINERID: "ctr1",
        CNI_NETNS: "/var/run/netns/ctr1",
        CNI_IFNAME: "net1",
        CNI_ARGS: "IgnoreUnknown=1;K8S_POD_NAME=web",
        CNI_PATH: BIN,
      });
    },
  });
}

Deno.test({
  name: "addNetworkList: a failing plugin stops the chain with its error preserved",
  async fn() {
    const { exec, runtime } = runtimeWith((req) =>
      typeOf(req) === "tuning"
        ? execResponse({ code: 1, stdout: { code: 7, msg: "bad sysctl", details: "x" } })
        : execResponse({ stdout: resultFor("1.0.0", "10.1.0.5/16") })
    );
    await assert.rejects(
      runtime.addNetworkList(list("1.0.0"), RT),
      (e) => e instanceof CniError && e.code === 7 && e.msg === "bad sysctl",
    );
    assert.deepEqual(exec.calls.map(typeOf), ["bridge", "tuning"]);
  },
});

Deno.test({
  name: "addNetworkList: invalid runtime arguments and missing plugins",
  async fn() {
    const { exec, runtime } = runtimeWith(() => execResponse());
    await assert.rejects(
      runtime.addNetworkList(list("1.0.0"), { ...RT, ifName: "bad/name" }),
      (e) => e instanceof CniError && e.code === 4,
    );
    await assert.rejects(
      runtime.addNetworkList(list("1.0.0"), { ...RT, containerId: "bad id" }),
      (e) => e instanceof CniError && e.code === 4,
    );
    const missing = parseNetworkConfig({
      cniVersion: "1.0.0",
      name: "n",
      plugins: [{ type: "no-such-plugin" }],
    });
    await assert.rejects(
      runtime.addNetworkList(missing, RT),
      (e) =>
        e instanceof CniError && e.code === 7 &&
        e.msg === `failed to find plugin "no-such-plugin" in path [${BIN}]`,
    );
    assert.equal(exec.calls.length, 0);
  },
});

Deno.test({
  name: "addNetworkList: a result that cannot be expressed in the list version → code 1",
  async fn() {
    const { runtime } = runtimeWith(() =>
      execResponse({
        stdout: {
          cniVersion: "1.0.0",
          ips: [{ address: "10.0.0.2/24" }, { address: "10.0.1.2/24" }],
        },
      })
    );
    await assert.rejects(
      runtime.addNetworkList(list("0.2.0"), RT),
      (e) => e instanceof CniError && e.code === 1,
    );
  },
});

/* ---------- CHECK ---------- */

for (const v of SUPPORTED_VERSIONS) {
  Deno.test({
    name: `checkNetworkList ${v}: gated at 0.4.0, plugins in order with prevResult`,
    async fn() {
      const { exec, runtime } = runtimeWith(() => execResponse());
      const prev = decodeResult(resultFor("1.0.0", "10.1.0.5/16"));
      if (v === "0.1.0" || v === "0.2.0" || v.startsWith("0.3")) {
        await assert.rejects(
          runtime.checkNetworkList(list(v), RT, prev),
          (e) => e instanceof CniError && e.code === 1 && /does not support the CHECK/.test(e.msg),
        );
        assert.equal(exec.calls.length, 0);
        return;
      }
      await runtime.checkNetworkList(list(v), RT, prev);
      assert.deepEqual(exec.calls.map(typeOf), ["bridge", "tuning", "portmap"]);
      for (const c of exec.calls) {
        assert.equal(c.env.CNI_COMMAND, "CHECK");
        assert.deepEqual(readExecRequest(c).config.prevResult, resultFor(v, "10.1.0.5/16"));
      }
    },
  });
}

Deno.test({
  name: "checkNetworkList: disableCheck is a no-op",
  async fn() {
    const { exec, runtime } = runtimeWith(() => execResponse());
    await runtime.checkNetworkList(list("1.0.0", { disableCheck: true }), RT, undefined);
    assert.equal(exec.calls.length, 0);
  },
});

/* ---------- DEL ---------- */

for (const v of SUPPORTED_VERSIONS) {
  Deno.test({
    name: `delNetworkList ${v}: reverse order, prevResult only from 0.4.0`,
    async fn() {
      const { exec, runtime } = runtimeWith(() => execResponse());
      await runtime.delNetworkList(
        list(v),
        { ...RT, netns: "" },
        resultFor("1.1.0", "10.1.0.5/16"),
      );
      assert.deepEqual(exec.calls.map(typeOf), ["portmap", "tuning", "bridge"]);
      const withPrev = v === "0.4.0" || v.startsWith("1.");
      for (const c of exec.calls) {
        assert.equal(c.env.CNI_COMMAND, "DEL");
        assert.equal(c.env.CNI_NETNS, "");
        const conf = readExecRequest(c).config;
        if (withPrev) assert.deepEqual(conf.prevResult, resultFor(v, "10.1.0.5/16"));
        else assert.equal("prevResult" in conf, false);
      }
    },
  });
}

Deno.test({
  name: "delNetworkList: an unusable prevResult is dropped; the first failure stops DEL",
  async fn() {
    const { exec, runtime } = runtimeWith((req) =>
      typeOf(req) === "tuning" ? execResponse({ code: 1, stderr: "gone" }) : execResponse()
    );
    await assert.rejects(
      runtime.delNetworkList(list("1.0.0"), RT, { cniVersion: "1.0.0", ips: "garbage" }),
      (e) => e instanceof CniError && e.code === 999 && /gone/.test(e.msg),
    );
    assert.deepEqual(exec.calls.map(typeOf), ["portmap", "tuning"]);
    assert.equal("prevResult" in readExecRequest(exec.calls[0]).config, false);
  },
});

/* ---------- GC ---------- */

for (const v of SUPPORTED_VERSIONS) {
  Deno.test({
    name: `gcNetworkList ${v}: only from 1.1.0, both attachment keys`,
    async fn() {
      const { exec, runtime } = runtimeWith(() => execResponse());
      const valid = [{ containerID: "ctr1", ifname: "net1" }, {
        containerID: "ctr2",
        ifname: "eth0",
      }];
      await runtime.gcNetworkList(list(v), valid);
      if (v !== "1.1.0") {
        assert.equal(exec.calls.length, 0);
        return;
      }
      assert.deepEqual(exec.calls.map(typeOf), ["bridge", "tuning", "portmap"]);
      for (const c of exec.calls) {
        assert.deepEqual(c.env, {
          PATH: "/usr/bin",
          CNI_COMMAND: "GC",
          CNI_CONTAINERID: "",
          CNI_NETNS: "",
          CNI_IFNAME: "",
          CNI_ARGS: "",
          CNI_PATH: BIN,
        });
        const conf = readExecRequest(c).config;
        assert.deepEqual(conf["cni.dev/valid-attachments"], valid);
        assert.deepEqual(conf["cni.dev/attachments"], valid);
        assert.equal(conf.name, "chain");
        assert.equal(conf.cniVersion, "1.1.0");
        assert.equal("runtimeConfig" in conf, false);
      }
    },
  });
}

Deno.test({
  name: "gcNetworkList: disableGC is a no-op; every plugin is tried and errors aggregated",
  async fn() {
    const off = runtimeWith(() => execResponse());
    await off.runtime.gcNetworkList(list("1.1.0", { disableGC: true }), []);
    assert.equal(off.exec.calls.length, 0);

    const one = runtimeWith((req) =>
      typeOf(req) === "tuning"
        ? execResponse({ code: 1, stdout: { code: 11, msg: "locked" } })
        : execResponse()
    );
    await assert.rejects(
      one.runtime.gcNetworkList(list("1.1.0"), []),
      (e) => e instanceof CniError && e.code === 11 && e.msg === "locked",
    );
    assert.equal(one.exec.calls.length, 3);

    const two = runtimeWith((req) =>
      typeOf(req) === "bridge"
        ? execResponse()
        : execResponse({ code: 1, stdout: { code: 5, msg: typeOf(req) } })
    );
    await assert.rejects(
      two.runtime.gcNetworkList(list("1.1.0"), []),
      (e) =>
        e instanceof CniError && e.code === 5 && /2 plugins/.test(e.msg) &&
        /portmap/.test(e.details),
    );
  },
});

/* ---------- STATUS ---------- */

for (const v of SUPPORTED_VERSIONS) {
  Deno.test({
    name: `statusNetworkList ${v}: only from 1.1.0, delegate error preserved`,
    async fn() {
      const { exec, runtime } = runtimeWith((req) =>
        typeOf(req) === "tuning"
          ? execResponse({
            code: 1,
            stdout: { code: 50, msg: "not available", details: "no leases" },
          })
          : execResponse()
      );
      if (v !== "1.1.0") {
        await runtime.statusNetworkList(list(v));
        assert.equal(exec.calls.length, 0);
        return;
      }
      await assert.rejects(
        runtime.statusNetworkList(list(v)),
        (e) =>
          e instanceof CniError && e.code === 50 && e.msg === "not available" &&
          e.details === "no leases",
      );
      assert.deepEqual(exec.calls.map(typeOf), ["bridge", "tuning"]);
      assert.equal(exec.calls[0].env.CNI_COMMAND, "STATUS");
      assert.equal(exec.calls[0].env.CNI_CONTAINERID, "");
    },
  });
}

Deno.test({
  name: "CniRuntime: the default lookup finds real plugins in binDirs",
  ignore: !hasPlugins,
  async fn() {
    const exec = new RecordingPluginExec(() => execResponse());
    const runtime = new CniRuntime({ binDirs: ["/nonexistent", BIN], exec });
    await runtime.delNetworkList(list("1.0.0"), RT);
    assert.deepEqual(exec.calls.map((c) => c.path), [
      `${BIN}/portmap`,
      `${BIN}/tuning`,
      `${BIN}/bridge`,
    ]);
    const missing = parseNetworkConfig({ cniVersion: "1.0.0", name: "n", type: "no-such-plugin" });
    await assert.rejects(
      runtime.addNetworkList(missing, RT),
      (e) =>
        e instanceof CniError && e.code === 7 &&
        e.msg === `failed to find plugin "no-such-plugin" in path [/nonexistent ${BIN}]`,
    );
  },
});
