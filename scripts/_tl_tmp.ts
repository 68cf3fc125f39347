import { world, done } from "../tests/support/world.ts";
import { k8sArgs } from "../tests/support/plugin.ts";
import { exists, until } from "../tests/support/wait.ts";
const BIN = { base: "/tmp/base-plan/scripts/manifold", new: "/work/wt-plan/scripts/manifold" };
const selection = [{ name: "bridge-net" }, { name: "macvlan-net", interface: "data0", ips: ["10.240.3.7/24"], mac: "02:00:00:0a:f0:07" }];
const w = await world({ annotations: { "k8s.v1.cni.cncf.io/networks": JSON.stringify(selection) }, conf: { logLevel: "verbose", logToStderr: true } });
async function call(bin: string, command: string, cid: string, config: Record<string, unknown>) {
  const env: Record<string, string> = { PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", CNI_COMMAND: command, CNI_CONTAINERID: cid, CNI_NETNS: w.netnsPath, CNI_IFNAME: "eth0", CNI_ARGS: k8sArgs("tenant-a", "web-0", cid, "0f3a2f4c-1111-4222-8333-444455556666"), CNI_PATH: "/usr/lib/cni" };
  const child = new Deno.Command(bin, { clearEnv: true, env, stdin: "piped", stdout: "piped", stderr: "piped" }).spawn();
  const wr = child.stdin.getWriter(); await wr.write(new TextEncoder().encode(JSON.stringify(config))); await wr.close();
  const out = await child.output();
  const err = new TextDecoder().decode(out.stderr);
  return err.split("\n").find((l) => l.includes('"timeline"') && l.includes(command === "ADD" ? "ADD" : "DEL")) ?? err.slice(-500);
}
try {
  w.api.fault({ delayMs: 3, times: Infinity });
  const runtimeMode = { ...w.conf, capabilities: { "io.kubernetes.cri.pod-annotations": true }, runtimeConfig: { "io.kubernetes.cri.pod-annotations": { "k8s.v1.cni.cncf.io/networks": JSON.stringify(selection) } } };
  const mirrorDir = `${await w.scratch.dir()}/nads`;
  const mirror = new Deno.Command(BIN.new, { args: ["mirror", "--dir", mirrorDir, "--kubeconfig", String(w.conf.kubeconfig)], stdout: "null", stderr: "null" }).spawn();
  await until(() => exists(`${mirrorDir}/.mirror.json`), "mirror", 10_000);
  const modes: Record<string, Record<string, unknown>> = { api: w.conf, runtime: runtimeMode, mirror: { ...runtimeMode, nadMirrorDir: mirrorDir } };
  let i = 0;
  for (let it = 0; it < 3; it++) for (const [mode, conf] of Object.entries(modes)) for (const which of ["base", "new"] as const) {
    const cid = `tl${i++}x${crypto.randomUUID().slice(0, 8)}`;
    const tl = await call(BIN[which], "ADD", cid, conf);
    await call(BIN[which], "DEL", cid, conf);
    if (it === 2) { const o = JSON.parse(tl); delete o.ts; delete o.level; delete o.plugin; delete o.cmd; delete o.containerId; delete o.pod; delete o.epochMs; delete o.msg; console.log(mode.padEnd(8), which.padEnd(5), JSON.stringify(o)); }
  }
  mirror.kill("SIGTERM"); await mirror.status;
} finally { await done(w); }
