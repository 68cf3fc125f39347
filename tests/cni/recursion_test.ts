/**
 * Tests of lib/cni/recursion.ts and the static and dynamic recursion guards of the CNI
 * layer: the delegation marker set by `ProcessPluginExec` (lib/cni/invoke.ts) and the
 * runtime's refusal to run Manifold's own executable (lib/cni/runtime.ts). Pure, except
 * the tests marked as needing `--allow-run`/`--allow-read`/`--allow-write` (skipped
 * without them).
 */

import assert from "node:assert/strict";
import { CniError, CniErrorCode } from "../../lib/cni/errors.ts";
import { ProcessPluginExec } from "../../lib/cni/invoke.ts";
import { execResponse, readExecRequest, RecordingPluginExec } from "../../lib/cni/exec_fake.ts";
import {
  assertNotDelegated,
  delegateEnv,
  DELEGATION_DEPTH_ENV,
  delegationDepth,
  processMarkerEnv,
  selfExecutable,
} from "../../lib/cni/recursion.ts";
import { decodeResult } from "../../lib/cni/result.ts";
import { CniRuntime, type RuntimeConf } from "../../lib/cni/runtime.ts";
import { parseNetworkConfig } from "../../lib/cni/types.ts";

Deno.test("delegationDepth: unset/empty is 0, integers are kept, anything else is 1", () => {
  assert.equal(DELEGATION_DEPTH_ENV, "MANIFOLD_DELEGATION_DEPTH");
  assert.equal(delegationDepth({}), 0);
  assert.equal(delegationDepth({ [DELEGATION_DEPTH_ENV]: "" }), 0);
  assert.equal(delegationDepth({ [DELEGATION_DEPTH_ENV]: undefined }), 0);
  assert.equal(delegationDepth({ [DELEGATION_DEPTH_ENV]: "1" }), 1);
  assert.equal(delegationDepth({ [DELEGATION_DEPTH_ENV]: " 3 " }), 3);
  for (const v of ["0", "-2", "yes", "1.5", "9".repeat(30)]) {
    assert.equal(delegationDepth({ [DELEGATION_DEPTH_ENV]: v }), 1, v);
  }
});

Deno.test("delegateEnv: adds depth + 1 and leaves the input alone", () => {
  const env = { PATH: "/bin" };
  assert.deepEqual(delegateEnv(env), { PATH: "/bin", [DELEGATION_DEPTH_ENV]: "1" });
  assert.deepEqual(env, { PATH: "/bin" });
  assert.equal(delegateEnv({ [DELEGATION_DEPTH_ENV]: "2" })[DELEGATION_DEPTH_ENV], "3");
});

Deno.test("assertNotDelegated: code 7 'recursive delegation' whenever the marker is set", () => {
  assertNotDelegated({});
  assertNotDelegated({ OTHER: "1" });
  for (const v of ["1", "7", "junk"]) {
    assert.throws(() => assertNotDelegated({ [DELEGATION_DEPTH_ENV]: v }), (e) => {
      assert.ok(e instanceof CniError);
      assert.equal(e.code, CniErrorCode.InvalidNetworkConfig);
      assert.match(e.msg, /^recursive delegation refused/);
      assert.ok(e.details.includes(`${DELEGATION_DEPTH_ENV}=${v}`));
      return true;
    });
  }
});

Deno.test("processMarkerEnv: never throws; reads only the marker", () => {
  const env = processMarkerEnv();
  assert.ok(Object.keys(env).every((k) => k === DELEGATION_DEPTH_ENV));
});

Deno.test("selfExecutable: nothing when running on the deno runtime (tests run from source)", async () => {
  assert.equal(await selfExecutable(), undefined);
});

// ---------------------------------------------------------------- the marker in delegates

const canRun = (["run", "read"] as const).every((name) =>
  Deno.permissions.querySync({ name }).state === "granted"
);

Deno.test({
  name: "ProcessPluginExec: every child gets the marker, depth + 1 of the given env",
  ignore: !canRun,
  async fn() {
    const exec = new ProcessPluginExec();
    const run = async (env: Record<string, string>) => {
      const res = await exec.exec({
        path: "/usr/bin/env",
        stdin: new Uint8Array(),
        env,
        timeoutMs: 10_000,
      });
      assert.equal(res.code, 0);
      return new TextDecoder().decode(res.stdout).trim().split("\n").sort();
    };
    assert.deepEqual(await run({ CNI_COMMAND: "ADD" }), [
      "CNI_COMMAND=ADD",
      `${DELEGATION_DEPTH_ENV}=1`,
    ]);
    assert.deepEqual(await run({ [DELEGATION_DEPTH_ENV]: "1" }), [`${DELEGATION_DEPTH_ENV}=2`]);
  },
});

// ---------------------------------------------------------------- the runtime's static check

const RT: RuntimeConf = {
  containerId: "ctr1",
  netns: "/var/run/netns/ctr1",
  ifName: "net1",
  args: [],
  capabilityArgs: {},
};

function list(type: string) {
  return parseNetworkConfig({
    cniVersion: "1.1.0",
    name: "evil-net",
    plugins: [{ type: "bridge" }, { type }],
  });
}

function runtime(selfPath: string | null | undefined, exec: RecordingPluginExec) {
  return new CniRuntime({
    binDirs: ["/opt/cni/bin"],
    exec,
    selfPath,
    findPlugin: (type, dirs) => Promise.resolve(`${dirs[0]}/${type}`),
  });
}

const ok = () => execResponse({ stdout: { cniVersion: "1.1.0" } });

Deno.test("runtime: ADD, CHECK and STATUS refuse a plugin that is Manifold's executable", async () => {
  for (const op of ["ADD", "CHECK", "STATUS"] as const) {
    const exec = new RecordingPluginExec(ok);
    const rt = runtime("/opt/cni/bin/manifold", exec);
    const p = op === "ADD"
      ? rt.addNetworkList(list("manifold"), RT)
      : op === "CHECK"
      ? rt.checkNetworkList(list("manifold"), RT, decodeResult({ cniVersion: "1.1.0" }))
      : rt.statusNetworkList(list("manifold"));
    await assert.rejects(p, (e) => {
      assert.ok(e instanceof CniError, String(e));
      assert.equal(e.code, CniErrorCode.InvalidNetworkConfig);
      assert.equal(
        e.msg,
        'network "evil-net": plugin "manifold" is Manifold itself: recursive delegation refused',
      );
      assert.match(e.details, /\/opt\/cni\/bin\/manifold resolves to the running Manifold/);
      return true;
    }, op);
    assert.deepEqual(exec.calls.map((c) => readExecRequest(c).config.type), ["bridge"], op);
  }
});

Deno.test("runtime: DEL and GC skip Manifold's executable and run the other plugins", async () => {
  const exec = new RecordingPluginExec(() => execResponse());
  const rt = runtime("/opt/cni/bin/manifold", exec);
  await rt.delNetworkList(list("manifold"), RT);
  await rt.gcNetworkList(list("manifold"), []);
  assert.deepEqual(
    exec.calls.map((c) => [c.env.CNI_COMMAND, readExecRequest(c).config.type]),
    [["DEL", "bridge"], ["GC", "bridge"]],
  );
});

Deno.test("runtime: other plugins, no self path (from source) or null run as before", async () => {
  for (const selfPath of ["/opt/cni/bin/manifold", undefined, null]) {
    const exec = new RecordingPluginExec(ok);
    await runtime(selfPath, exec).addNetworkList(list(selfPath ? "tuning" : "manifold"), RT);
    assert.equal(exec.calls.length, 2);
  }
});

const canFs = (["read", "write"] as const).every((name) =>
  Deno.permissions.querySync({ name }).state === "granted"
);

Deno.test({
  name: "runtime: a symlink to the executable is recognised by its real path",
  ignore: !canFs,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "mft-self-" });
    try {
      await Deno.mkdir(`${dir}/bin`);
      await Deno.writeTextFile(`${dir}/manifold`, "#!/bin/sh\n", { mode: 0o755 });
      await Deno.symlink(`${dir}/manifold`, `${dir}/bin/evil`);
      await Deno.writeTextFile(`${dir}/bin/copy`, "#!/bin/sh\n", { mode: 0o755 });
      const exec = new RecordingPluginExec(ok);
      const rt = new CniRuntime({
        binDirs: [`${dir}/bin`],
        exec,
        selfPath: `${dir}/./manifold`,
        findPlugin: (type, dirs) => Promise.resolve(`${dirs[0]}/${type}`),
      });
      await assert.rejects(rt.addNetworkList(list("evil"), RT), /plugin "evil" is Manifold itself/);
      exec.calls.length = 0;
      // A renamed copy is a different file: only the dynamic guard can catch it.
      await rt.addNetworkList(list("copy"), RT);
      assert.equal(exec.calls.length, 2);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
