/**
 * Tests of the JSON nesting-depth limit (lib/cni/decode.ts `jsonDepth`, `checkJsonDepth`,
 * `MAX_JSON_DEPTH`) where the CNI layer applies it: `decodeJson`, the stdin config of the
 * dispatcher (lib/cni/skel.ts) and delegate results (lib/cni/invoke.ts). Pure.
 */

import { decodeResult } from "../../lib/cni/result.ts";
import assert from "node:assert/strict";
import { z } from "zod";
import { checkJsonDepth, decodeJson, jsonDepth, MAX_JSON_DEPTH } from "../../lib/cni/decode.ts";
import { CniError, CniErrorCode } from "../../lib/cni/errors.ts";
import { invokePlugin } from "../../lib/cni/invoke.ts";
import { execResponse, RecordingPluginExec } from "../../lib/cni/exec_fake.ts";
import { dispatch, type SkelHandlers } from "../../lib/cni/skel.ts";

/** `depth` nested arrays around `inner`, as JSON text. */
function nested(depth: number, inner = ""): string {
  return "[".repeat(depth) + inner + "]".repeat(depth);
}

/** Objects nested `depth` deep: `{"a":{"a":…{}}}`. */
function nestedObjects(depth: number): string {
  return '{"a":'.repeat(depth - 1) + "{}" + "}".repeat(depth - 1);
}

function caught(fn: () => unknown): CniError {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof CniError, `expected a CniError, got ${err}`);
    return err;
  }
  assert.fail("expected a CniError");
}

Deno.test("jsonDepth: scalars are 0, each array/object level counts 1", () => {
  for (const v of ["x", 1, true, null, undefined]) assert.equal(jsonDepth(v), 0);
  assert.equal(jsonDepth({}), 1);
  assert.equal(jsonDepth([]), 1);
  assert.equal(jsonDepth([1, "a", null]), 1);
  assert.equal(jsonDepth({ a: [1, { b: {} }] }), 4);
  assert.equal(jsonDepth([[], [[[]]], {}]), 4, "the deepest branch counts");
  assert.equal(jsonDepth(JSON.parse(nestedObjects(10))), 10);
});

Deno.test("jsonDepth: any depth is measured without recursion, and it stops early", () => {
  const deep = JSON.parse(nested(200_000)); // V8's parser copes; recursive walkers do not
  assert.equal(jsonDepth(deep), 200_000);
  assert.equal(jsonDepth(deep, 64), 65, "stops at the first level over the limit");
  assert.throws(() => structuredClone(deep), RangeError, "what the limit protects against");
  const cyclic: unknown[] = [];
  cyclic.push(cyclic);
  assert.equal(jsonDepth(cyclic, 10), 11, "a cycle ends at the limit");
});

Deno.test("checkJsonDepth: 64 levels pass, 65 fail with code 7 naming what and the limit", () => {
  assert.equal(MAX_JSON_DEPTH, 64);
  checkJsonDepth(JSON.parse(nested(64)), "network config on stdin");
  checkJsonDepth(JSON.parse(nestedObjects(64)), "network config on stdin");
  const e = caught(() => checkJsonDepth(JSON.parse(nested(65)), "network config on stdin"));
  assert.equal(e.code, CniErrorCode.InvalidNetworkConfig);
  assert.equal(e.msg, "network config on stdin is nested more than 64 levels deep (limit 64)");
  assert.match(e.details, /at most 64 levels/);
});

Deno.test("checkJsonDepth: the limit and the code are options", () => {
  checkJsonDepth(JSON.parse(nested(3)), "x", { maxDepth: 3 });
  const e = caught(() =>
    checkJsonDepth(JSON.parse(nested(4)), "result of plugin p", { maxDepth: 3, code: 6 })
  );
  assert.equal(e.code, CniErrorCode.DecodingFailure);
  assert.equal(e.msg, "result of plugin p is nested more than 3 levels deep (limit 3)");
});

Deno.test("decodeJson: a document deeper than 64 levels is CNI code 6 before zod sees it", () => {
  const e = caught(() => decodeJson(nested(5_000), z.unknown(), "device-info"));
  assert.equal(e.code, CniErrorCode.DecodingFailure);
  assert.equal(e.msg, "device-info is nested more than 64 levels deep (limit 64)");
  assert.deepEqual(decodeJson(nested(64), z.unknown(), "device-info"), JSON.parse(nested(64)));
});

// ---------------------------------------------------------------- stdin (skel)

async function dispatchStdin(stdin: string, maxJsonDepth?: number) {
  const calls: string[] = [];
  const handler = (op: string) => () => {
    calls.push(op);
    return Promise.resolve();
  };
  const handlers: SkelHandlers = {
    add: () => {
      calls.push("add");
      return Promise.resolve(decodeResult({ cniVersion: "1.0.0" }));
    },
    del: handler("del"),
    check: handler("check"),
    gc: handler("gc"),
    status: handler("status"),
  };
  const out: string[] = [];
  const code = await dispatch(handlers, {
    env: {
      CNI_COMMAND: "ADD",
      CNI_CONTAINERID: "ctr1",
      CNI_NETNS: "/var/run/netns/x",
      CNI_IFNAME: "eth0",
      CNI_PATH: "/opt/cni/bin",
    },
    readStdin: (max) => Promise.resolve(new TextEncoder().encode(stdin).subarray(0, max + 1)),
    writeStdout: (t) => void out.push(t),
  }, { maxJsonDepth });
  return { code, calls, json: out.length ? JSON.parse(out[0]) : undefined };
}

function stdinConf(deep: string): string {
  return `{"cniVersion":"1.0.0","name":"m","type":"manifold","x":${deep}}`;
}

Deno.test("dispatch: stdin nested deeper than 64 levels is code 7, no handler runs", async () => {
  // The config object is level 1, so "x" may hold 63 levels.
  const ok = await dispatchStdin(stdinConf(nested(63)));
  assert.equal(ok.code, 0, JSON.stringify(ok.json));
  assert.deepEqual(ok.calls, ["add"]);
  for (const depth of [64, 2_000, 100_000]) {
    const r = await dispatchStdin(stdinConf(nested(depth)));
    assert.equal(r.code, 1);
    assert.deepEqual(r.calls, [], "nothing runs");
    assert.equal(r.json.code, 7);
    assert.equal(
      r.json.msg,
      "network config on stdin is nested more than 64 levels deep (limit 64)",
    );
  }
});

Deno.test("dispatch: the stdin depth limit is an option", async () => {
  const r = await dispatchStdin(stdinConf(nested(3)), 3);
  assert.equal(r.json.code, 7);
  assert.match(r.json.msg, /limit 3\)$/);
  assert.equal((await dispatchStdin(stdinConf(nested(2)), 3)).code, 0);
});

// ---------------------------------------------------------------- delegate results (invoke)

const OPTS = { command: "ADD" as const, path: ["/x"], timeoutMs: 1000 };

Deno.test("invokePlugin: a result nested deeper than 64 levels is code 6 naming the plugin", async () => {
  for (const depth of [64, 5_000]) {
    const stdout = `{"cniVersion":"1.0.0","ips":[],"x":${nested(depth)}}`;
    const exec = new RecordingPluginExec(() => execResponse({ stdout }));
    await assert.rejects(invokePlugin(exec, "/x/deep", {}, OPTS), (e) => {
      assert.ok(e instanceof CniError);
      assert.equal(e.code, CniErrorCode.DecodingFailure);
      assert.equal(e.msg, "result of plugin deep is nested more than 64 levels deep (limit 64)");
      return true;
    });
  }
  const fine = `{"cniVersion":"1.0.0","x":${nested(63)}}`;
  const exec = new RecordingPluginExec(() => execResponse({ stdout: fine }));
  assert.deepEqual(await invokePlugin(exec, "/x/deep", {}, OPTS), JSON.parse(fine));
});

Deno.test("invokePlugin: a too-deep error object is kept as raw text, never re-encoded", async () => {
  const stdout = `{"code":7,"msg":"bad","details":${nested(5_000)}}`;
  const exec = new RecordingPluginExec(() => execResponse({ code: 1, stdout }));
  await assert.rejects(invokePlugin(exec, "/x/deep", {}, OPTS), (e) => {
    assert.ok(e instanceof CniError);
    assert.equal(e.code, CniErrorCode.Internal);
    assert.equal(e.msg, "plugin deep failed");
    assert.match(e.details, /^exited with code 1; stdout: \{"code":7/);
    return true;
  });
  const shallow = `{"code":7,"msg":"bad","details":{"a":[1]}}`;
  const exec2 = new RecordingPluginExec(() => execResponse({ code: 1, stdout: shallow }));
  await assert.rejects(invokePlugin(exec2, "/x/p", {}, OPTS), (e) => {
    assert.ok(e instanceof CniError);
    assert.equal(e.code, 7);
    assert.equal(e.details, '{"a":[1]}');
    return true;
  });
});
