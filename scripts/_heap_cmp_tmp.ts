import { startKubeApiServer } from "../tests/support/kube_apiserver.ts";
import { fillCluster } from "../tests/policy/support/scale.ts";
import { deployObjects, ensureNadCrd } from "../tests/realapi/cluster.ts";
const n = Number(Deno.args[0] ?? 500);
const server = await startKubeApiServer();
try {
  await ensureNadCrd(server.admin);
  const crd = (await deployObjects()).find((o) => o.metadata?.name === "multi-networkpolicies.k8s.cni.cncf.io");
  await server.admin.installCrd(crd!);
  await fillCluster(server, { pods: n, policies: 40, nodes: 10, node: "node1", concurrency: 16 });
  const dir = await Deno.makeTempDir();
  await server.writeKubeconfig(`${dir}/kc`, {});
  for (const root of ["/work/wt/scale", "/tmp/scale-base"]) {
    for (let k = 0; k < 2; k++) {
      const out = await new Deno.Command(Deno.execPath(), { args: ["run", "-A", "--config", `${root}/deno.json`, "--v8-flags=--expose-gc", `${root}/tests/policy/support/agent_heap.ts`, `${dir}/kc`, "node1"], stderr: "inherit" }).output();
      console.log(root, new TextDecoder().decode(out.stdout).trim());
    }
  }
} finally {
  await server.stop();
}
