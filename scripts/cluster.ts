/**
 * `scripts/cluster.sh up` runs this in the background: starts a node cluster (the node tier's
 * harness, tests/support/node_cluster.ts), writes `<state>/env` (KUBECONFIG, the node's dirs)
 * and `<state>/pid`, and stops the cluster on SIGTERM/SIGINT.
 *
 * Usage: deno run -A scripts/cluster.ts STATE_DIR [per-call|daemon]
 *
 * @module
 */
import { nodeTierMissing, startNodeCluster } from "../tests/support/node_cluster.ts";

const [state, mode = "per-call"] = Deno.args;
if (!state || (mode !== "per-call" && mode !== "daemon")) {
  console.error("usage: deno run -A scripts/cluster.ts STATE_DIR [per-call|daemon]");
  Deno.exit(2);
}
const missing = nodeTierMissing();
if (missing) {
  console.error(
    `cluster.sh: cannot start a node: missing ${missing} (see docs/development.md, the node tier)`,
  );
  Deno.exit(1);
}
const node = await startNodeCluster({ mode });
const kubeconfig = `${node.layout.dir}/admin.kubeconfig`;
const env = [
  `export KUBECONFIG=${kubeconfig}`,
  `export MANIFOLD_NODE_NAME=${node.nodeName}`,
  `export MANIFOLD_NODE_DIR=${node.layout.dir}`,
  `export CONTAINERD_ADDRESS=${node.layout.containerdSocket}`,
  `export CONTAINERD_NAMESPACE=k8s.io`,
  `# started in ${node.startMs} ms, mode ${mode}; logs in ${node.layout.dir}/logs/`,
].join("\n") + "\n";
await Deno.writeTextFile(`${state}/env`, env);
const stop = async () => {
  await node.stop();
  await Deno.remove(`${state}/env`).catch(() => {});
  Deno.exit(0);
};
Deno.addSignalListener("SIGTERM", stop);
setInterval(() => {}, 1 << 30);
