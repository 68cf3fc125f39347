/**
 * The daemon's request service (lib/daemon/service.ts) without a process: the plugin's
 * dispatcher with injected env/stdin/stdout, the per-request timeout (code 11), and what it
 * reports to the observer.
 */

import assert from "node:assert/strict";
import { cniService } from "../../lib/daemon/service.ts";
import type { DaemonObserver } from "../../lib/daemon/observer.ts";
import type { SkelHandlers } from "../../lib/cni/skel.ts";
import { decodeResult } from "../../lib/cni/result.ts";

function recorder() {
  const seen: [string, string][] = [];
  const observer: DaemonObserver = {
    cniRequest: (command, result) => void seen.push([command, result]),
    delegate() {},
    apiRequest() {},
    attachments() {},
  };
  return { seen, observer };
}

const ENV = {
  CNI_COMMAND: "ADD",
  CNI_CONTAINERID: "c1",
  CNI_NETNS: "/var/run/netns/x",
  CNI_IFNAME: "eth0",
  CNI_PATH: "/usr/lib/cni",
};
const STDIN = new TextEncoder().encode('{"cniVersion":"1.0.0","name":"n","type":"manifold"}');

function handlers(add: SkelHandlers["add"], seenEnv?: (e: unknown) => void): SkelHandlers {
  const none = () => Promise.resolve();
  return {
    add: (ctx) => {
      seenEnv?.(ctx.env);
      return add(ctx);
    },
    del: none,
    check: none,
    gc: none,
    status: none,
  };
}

Deno.test("service: serves through the dispatcher with the request's env over the daemon's", async () => {
  const { seen, observer } = recorder();
  let handlerEnv: Record<string, string> | undefined;
  const serve = cniService({
    baseEnv: {
      PATH: "/bin",
      CNI_COMMAND: "DEL",
      MANIFOLD_DELEGATION_DEPTH: "3",
      DENO_V8_FLAGS: "--heap-growing-percent=20",
    },
    handlers: (env) => {
      handlerEnv = env;
      return handlers(() => Promise.resolve(decodeResult({ cniVersion: "1.0.0", ips: [] })));
    },
    observer,
  });
  const answer = await serve({ env: ENV, stdin: STDIN });
  assert.equal(answer.code, 0, answer.stdout);
  assert.deepEqual(JSON.parse(answer.stdout), { cniVersion: "1.0.0", ips: [] });
  assert.equal(handlerEnv?.PATH, "/bin", "the daemon's own variables");
  assert.equal(handlerEnv?.CNI_COMMAND, "ADD", "the request's CNI_* win");
  assert.equal(handlerEnv?.MANIFOLD_DELEGATION_DEPTH, undefined, "no daemon marker leaks in");
  assert.equal(handlerEnv?.DENO_V8_FLAGS, undefined, "the daemon's V8 flags stay its own");
  assert.deepEqual(seen, [["ADD", "success"]]);
});

Deno.test("service: a request past its timeout answers code 11 and the daemon goes on", async () => {
  const { seen, observer } = recorder();
  let release!: () => void;
  const hung = new Promise<void>((r) => release = r);
  const serve = cniService({
    baseEnv: {},
    handlers: () =>
      handlers(async () => {
        await hung;
        return decodeResult({ cniVersion: "1.0.0" });
      }),
    requestTimeoutMs: 50,
    observer,
  });
  const answer = await serve({ env: ENV, stdin: STDIN });
  release();
  assert.equal(answer.code, 1);
  const err = JSON.parse(answer.stdout);
  assert.equal(err.code, 11);
  assert.match(err.msg, /within 50 ms/);
  assert.deepEqual(seen, [["ADD", "error"]]);
});
