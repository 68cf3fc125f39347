/**
 * The V8 heap a {@link PolicyAgent} keeps per pod of the cluster, measured in this process
 * (run it with `--v8-flags=--expose-gc`): a full collection, the agent started against the
 * kubeconfig's API (a recording applier, an empty cache: nothing is programmed), its three
 * lists taken in and its first sync run, another full collection; prints one JSON line
 * `{"pods": N, "heapBytes": B, "bytesPerPod": B/N}`.
 *
 * Usage: deno run -A --v8-flags=--expose-gc tests/policy/support/agent_heap.ts KUBECONFIG NODE
 *
 * @module
 */

import { KubeClient, loadKubeconfig } from "../../../lib/k8s/mod.ts";
import { nullLogger } from "../../../lib/log/mod.ts";
import { type NftRunner, PolicyApplier } from "../../../lib/policy/mod.ts";
import { PolicyAgent } from "../../../lib/daemon/policy_agent.ts";
import { NO_OBSERVER } from "../../../lib/daemon/observer.ts";

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error("run with --v8-flags=--expose-gc");
const heap = () => {
  gc!();
  gc!();
  return Deno.memoryUsage().heapUsed;
};

const [kubeconfig, nodeName] = Deno.args;
const runner: NftRunner = {
  name: "none",
  run: () => Promise.resolve(""),
  close: () => Promise.resolve(),
};
const kube = new KubeClient({ connection: await loadKubeconfig(kubeconfig) });
const cniDir = await Deno.makeTempDir();
let syncs = 0;
try {
  // Warm-up: the modules' lazily built schemas and the connection, not per pod.
  await kube.list("/api/v1/pods", { limit: 1 });
  const before = heap();
  const agent = PolicyAgent.start({
    kube,
    cniDir,
    nodeName,
    events: { emit() {}, flush: () => Promise.resolve() },
    observer: { ...NO_OBSERVER, policySync: () => syncs++ },
    logger: nullLogger,
    applier: new PolicyApplier(runner),
  });
  while (!agent.synced || syncs === 0) await new Promise((r) => setTimeout(r, 20));
  await agent.idle();
  const after = heap();
  const list = await kube.list("/api/v1/pods", { limit: 1 }) as {
    metadata: { remainingItemCount?: number };
  };
  const n = (list.metadata.remainingItemCount ?? 0) + 1;
  console.log(JSON.stringify({
    pods: n,
    heapBytes: after - before,
    bytesPerPod: Math.round((after - before) / n),
  }));
  await agent.stop();
} finally {
  kube.close();
  await Deno.remove(cniDir, { recursive: true });
}
