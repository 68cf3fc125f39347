/**
 * The V8 heap a {@link PolicyAgent} keeps per pod of the cluster, measured in this process
 * (run it with `--v8-flags=--expose-gc`): an agent is started against the kubeconfig's API
 * (an applier that programs nothing, an empty cache), its three lists taken in and its first
 * sync run; after a full collection a second agent is started beside it, and after its first
 * sync another full collection: the growth is what one agent keeps (what is built once per
 * process — schemas, connections, code — went to the first). Prints one JSON line
 * `{"pods": N, "heapBytes": B, "bytesPerPod": B/N}`.
 *
 * Usage: deno run -A --v8-flags=--expose-gc tests/policy/support/agent_heap.ts KUBECONFIG NODE
 *
 * @module
 */

import { KubeClient, loadKubeconfig } from "../../../lib/k8s/mod.ts";
import { nullLogger } from "../../../lib/log/mod.ts";
import { type NftRunner, PolicyApplier } from "../../../lib/policy/mod.ts";
import { PolicyAgent } from "../../../lib/daemon/policy/mod.ts";
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
const start = () => {
  const agent = PolicyAgent.start({
    kube,
    cniDir,
    nodeName,
    events: { emit() {}, flush: () => Promise.resolve() },
    observer: { ...NO_OBSERVER, policySync: () => synced.add(agent) },
    logger: nullLogger,
    applier: new PolicyApplier(runner),
  });
  return agent;
};
const synced = new Set<PolicyAgent>();
const ready = async (agent: PolicyAgent) => {
  while (!synced.has(agent)) await new Promise((r) => setTimeout(r, 20));
  await agent.idle();
};
try {
  // The first agent pays for what is built once per process (schemas, connections, code);
  // the second one, started beside it, only for what an agent keeps.
  const first = start();
  await ready(first);
  const before = heap();
  const second = start();
  await ready(second);
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
  await Promise.all([first.stop(), second.stop()]);
} finally {
  kube.close();
  await Deno.remove(cniDir, { recursive: true });
}
