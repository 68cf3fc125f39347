/**
 * The main job, end to end on this machine: a scratch pod network namespace, the real
 * reference delegates from /usr/lib/cni, and Manifold (scripts/manifold, the same
 * permissions as the binary) called exactly as a container runtime calls it — ADD of
 * the default network + two secondary networks (bridge and macvlan, host-local IPAM),
 * network-status, CHECK, DEL, DEL again without a netns — then a check that nothing is
 * left, and cleanup. Standalone mode: NADs from a manifest directory, pod annotations
 * from runtimeConfig (as containerd passes them), network-status to a file.
 *
 * Run: scripts/setup.sh && deno task demo   (as root)
 *
 * @module
 */

const root = new URL("..", import.meta.url).pathname;
const MANIFOLD = `${root}scripts/manifold`;
const dec = new TextDecoder();
const id = crypto.randomUUID().slice(0, 5);
const podNs = `mfdemo-${id}`;
const brDefault = `mfd0${id}`, brSecondary = `mfd1${id}`, brMaster = `mfd2${id}`;
const containerId = `demo${crypto.randomUUID().replaceAll("-", "")}`;

function step(title: string) {
  console.log(`\n\x1b[1m== ${title}\x1b[0m`);
}

async function run(
  cmd: string,
  args: string[],
  opts: { stdin?: string; env?: Record<string, string> } = {},
) {
  const child = new Deno.Command(cmd, {
    args,
    clearEnv: opts.env !== undefined,
    env: opts.env,
    stdin: opts.stdin !== undefined ? "piped" : "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (opts.stdin !== undefined) {
    const w = child.stdin.getWriter();
    await w.write(new TextEncoder().encode(opts.stdin));
    await w.close();
  }
  const o = await child.output();
  return { code: o.code, stdout: dec.decode(o.stdout), stderr: dec.decode(o.stderr) };
}

async function ip(...args: string[]) {
  const r = await run("ip", args);
  if (r.code !== 0) throw new Error(`ip ${args.join(" ")}: ${r.stderr.trim()}`);
  return r.stdout;
}

async function manifold(command: string, netns: string, config: unknown) {
  const started = performance.now();
  const r = await run(MANIFOLD, [], {
    stdin: JSON.stringify(config),
    env: {
      PATH: "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
      CNI_COMMAND: command,
      CNI_CONTAINERID: containerId,
      CNI_NETNS: netns,
      CNI_IFNAME: "eth0",
      CNI_ARGS:
        `IgnoreUnknown=1;K8S_POD_NAMESPACE=demo;K8S_POD_NAME=web-0;K8S_POD_INFRA_CONTAINER_ID=${containerId};K8S_POD_UID=6e0c4c9a-0000-4000-8000-000000000001`,
      CNI_PATH: "/usr/lib/cni",
    },
  });
  const ms = (performance.now() - started).toFixed(1);
  console.log(
    `$ CNI_COMMAND=${command} CNI_NETNS=${
      netns || '""'
    } scripts/manifold  → exit ${r.code} in ${ms} ms`,
  );
  if (r.stdout.trim()) console.log(r.stdout.trim());
  if (r.code !== 0) {
    console.error(r.stderr);
    throw new Error(`${command} failed`);
  }
  return r;
}

if (Deno.uid() !== 0) {
  console.error("demo: run as root (it creates network namespaces and links)");
  Deno.exit(1);
}

const work = await Deno.makeTempDir({ prefix: "manifold-demo-" });
let ok = false;
try {
  step("Scratch node: pod netns, macvlan master bridge");
  await ip("netns", "add", podNs);
  await ip("link", "add", brMaster, "type", "bridge");
  await ip("link", "set", brMaster, "up");
  console.log(`pod netns /var/run/netns/${podNs}; host bridge ${brMaster} (macvlan master)`);

  const ipamDir = `${work}/ipam`;
  const confDir = `${work}/net.d`, nadDir = `${work}/nads`, cniDir = `${work}/cache`;
  await Deno.mkdir(confDir);
  await Deno.mkdir(nadDir);
  const defaultConf = {
    cniVersion: "1.0.0",
    name: "demo-default",
    plugins: [
      {
        type: "bridge",
        bridge: brDefault,
        ipam: {
          type: "host-local",
          dataDir: ipamDir,
          ranges: [[{ subnet: "10.250.0.0/24" }]],
          routes: [{ dst: "0.0.0.0/0" }],
        },
      },
      { type: "tuning", sysctl: { "net.ipv4.conf.eth0.rp_filter": "2" } },
    ],
  };
  await Deno.writeTextFile(`${confDir}/10-default.conflist`, JSON.stringify(defaultConf, null, 2));
  await Deno.writeTextFile(
    `${nadDir}/networks.yaml`,
    `apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: storage-net
  namespace: demo
spec:
  config: '{"cniVersion":"1.0.0","type":"bridge","bridge":"${brSecondary}","ipam":{"type":"host-local","dataDir":"${ipamDir}","subnet":"10.251.0.0/24"}}'
---
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: data-net
  namespace: demo
spec:
  config: '{"cniVersion":"1.0.0","name":"data-net","plugins":[{"type":"macvlan","master":"${brMaster}","mode":"bridge","ipam":{"type":"static"},"capabilities":{"ips":true,"mac":true}},{"type":"tuning","capabilities":{"mac":true}}]}'
`,
  );
  const selection = [
    { name: "storage-net" },
    { name: "data-net", interface: "data0", ips: ["10.252.0.7/24"], mac: "02:00:00:0a:fc:07" },
  ];
  const conf = {
    cniVersion: "1.0.0",
    name: "manifold-demo",
    type: "manifold",
    clusterNetwork: `${confDir}/10-default.conflist`,
    nadDir,
    cniDir,
    binDir: "/usr/lib/cni",
    logLevel: "error",
    capabilities: { "io.kubernetes.cri.pod-annotations": true, portMappings: true },
    runtimeConfig: {
      "io.kubernetes.cri.pod-annotations": {
        "k8s.v1.cni.cncf.io/networks": JSON.stringify(selection),
      },
    },
  };
  console.log(`pod annotation k8s.v1.cni.cncf.io/networks: ${JSON.stringify(selection)}`);

  step("ADD (default network, then storage-net, then data-net)");
  await manifold("ADD", `/var/run/netns/${podNs}`, conf);

  step("network-status (written to a file in standalone mode)");
  const status = await Deno.readTextFile(`${cniDir}/network-status/${containerId}@eth0.json`);
  console.log(JSON.stringify(JSON.parse(status), null, 2));

  step("What the kernel holds in the pod (ip -br addr)");
  console.log((await ip("-n", podNs, "-br", "addr")).trim());

  step("CHECK");
  await manifold("CHECK", `/var/run/netns/${podNs}`, conf);

  step('DEL, then DEL again with CNI_NETNS="" (as containerd tears a sandbox down)');
  await manifold("DEL", `/var/run/netns/${podNs}`, conf);
  await manifold("DEL", "", conf);

  step("Nothing left behind");
  const links = JSON.parse(await ip("-n", podNs, "-j", "link", "show")) as { ifname: string }[];
  const leftLinks = links.map((l) => l.ifname).filter((n) => n !== "lo");
  const leases: string[] = [];
  for await (const netDir of Deno.readDir(ipamDir)) {
    for await (const f of Deno.readDir(`${ipamDir}/${netDir.name}`)) {
      if (/^[0-9a-f.:]+$/.test(f.name)) leases.push(`${netDir.name}/${f.name}`);
    }
  }
  console.log(`pod interfaces besides lo: ${leftLinks.length ? leftLinks.join(", ") : "none"}`);
  console.log(`host-local leases: ${leases.length ? leases.join(", ") : "none"}`);
  if (leftLinks.length || leases.length) throw new Error("DEL left something behind");
  ok = true;
} finally {
  step("Cleanup");
  await run("ip", ["netns", "del", podNs]);
  for (const l of [brDefault, brSecondary, brMaster]) await run("ip", ["link", "del", l]);
  await Deno.remove(work, { recursive: true }).catch(() => {});
  console.log(ok ? "demo: OK" : "demo: FAILED");
}
Deno.exit(ok ? 0 : 1);
