/**
 * What each delegate receives, recorded by a wrapper delegate that saves its stdin and
 * CNI_* environment and then execs the real reference plugin: name and cniVersion
 * injection, runtimeConfig only for declared capabilities (and the runtime's only for the
 * default network), args.cni merging, CNI_ARGS, CNI_IFNAME. Needs root.
 */

import assert from "node:assert/strict";
import { type KubeApiStandIn, startKubeApi } from "../support/kube_api.ts";
import { isRoot, linkNames, Scratch } from "../support/netns.ts";
import { k8sArgs, runPlugin } from "../support/plugin.ts";

const NS = "tenant-b";
const POD = "db-0";

interface Recorded {
  config: Record<string, unknown>;
  env: Record<string, string>;
}

/** Writes `rec-<real>` into binDir: records stdin/env as JSON lines, then runs /usr/lib/cni/<real>. */
async function recorder(binDir: string, real: string, logFile: string) {
  const path = `${binDir}/rec-${real}`;
  await Deno.writeTextFile(
    path,
    `#!/bin/sh
input=$(cat)
printf '{"config":%s,"env":{"CNI_COMMAND":"%s","CNI_IFNAME":"%s","CNI_ARGS":"%s","CNI_NETNS":"%s","CNI_CONTAINERID":"%s"}}\\n' "$input" "$CNI_COMMAND" "$CNI_IFNAME" "$CNI_ARGS" "$CNI_NETNS" "$CNI_CONTAINERID" >> ${logFile}
printf '%s' "$input" | exec /usr/lib/cni/${real}
`,
  );
  await Deno.chmod(path, 0o755);
}

async function readRecords(logFile: string): Promise<Recorded[]> {
  const text = await Deno.readTextFile(logFile).catch(() => "");
  return text.trim().split("\n").filter(Boolean).map((l) => JSON.parse(l));
}

Deno.test({
  name: "delegates get name, cniVersion, runtimeConfig by capability, merged args.cni, CNI_ARGS",
  ignore: !isRoot(),
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const scratch = new Scratch();
    let api: KubeApiStandIn | undefined;
    try {
      api = await startKubeApi();
      const podNetns = await scratch.netns("inj");
      const base = await scratch.dir();
      const bin = `${base}/bin`, ipam = `${base}/ipam`, log = `${base}/calls.jsonl`;
      await Deno.mkdir(bin);
      for (const p of ["bridge", "macvlan", "tuning"]) await recorder(bin, p, log);
      const brDef = scratch.trackLink(`mfi${scratch.id}`);
      const brSec = scratch.trackLink(`mfj${scratch.id}`);
      const master = await scratch.bridge("k");
      await Deno.writeTextFile(
        `${base}/default.conflist`,
        JSON.stringify({
          cniVersion: "0.4.0",
          name: "k8s-pod-network",
          plugins: [
            {
              type: "rec-bridge",
              bridge: brDef,
              ipam: { type: "host-local", dataDir: ipam, subnet: "10.241.1.0/24" },
            },
            { type: "rec-tuning", capabilities: { portMappings: true, mac: true } },
          ],
        }),
      );
      // No "name": injected from the NAD (§3.4.2). args.cni from the NAD is overridden by cni-args.
      api.addNad({
        namespace: NS,
        name: "sec-net",
        config: JSON.stringify({
          cniVersion: "1.0.0",
          type: "rec-bridge",
          bridge: brSec,
          args: { cni: { owner: "nad", keep: "yes" } },
          capabilities: { bandwidth: true, portMappings: true },
          ipam: { type: "host-local", dataDir: ipam, subnet: "10.241.2.0/24" },
        }),
      });
      api.addNad({
        namespace: NS,
        name: "mv-net",
        config: JSON.stringify({
          cniVersion: "1.0.0",
          name: "mv-net",
          plugins: [
            {
              type: "rec-macvlan",
              master,
              ipam: { type: "static" },
              capabilities: { ips: true },
            },
            { type: "rec-tuning", capabilities: { mac: true } },
          ],
        }),
      });
      const selection = [
        {
          name: "sec-net",
          "cni-args": { owner: "pod", extra: 1 },
          bandwidth: { ingressRate: 100000, ingressBurst: 20000 },
          portMappings: [{ hostPort: 8080, containerPort: 80, protocol: "UDP" }],
          "ipam-claim-reference": "vm-a.sec-net",
        },
        { name: "mv-net", interface: "fast0", ips: ["10.241.3.9/24"], mac: "02:00:00:0a:f1:09" },
      ];
      api.addPod({
        namespace: NS,
        name: POD,
        uid: "u-1",
        annotations: { "k8s.v1.cni.cncf.io/networks": JSON.stringify(selection) },
      });
      const kubeconfig = `${base}/kubeconfig`;
      await api.writeKubeconfig(kubeconfig, { auth: "token" });
      const containerId = `inj${scratch.id}`;
      const conf = {
        cniVersion: "1.0.0",
        name: "manifold-net",
        type: "manifold",
        clusterNetwork: `${base}/default.conflist`,
        kubeconfig,
        cniDir: `${base}/cache`,
        binDir: bin,
        capabilities: { portMappings: true },
        runtimeConfig: { portMappings: [{ hostPort: 9999, containerPort: 99, protocol: "tcp" }] },
      };
      const call = (command: "ADD" | "DEL") =>
        runPlugin({
          command,
          config: conf,
          containerId,
          netns: `/var/run/netns/${podNetns}`,
          ifName: "eth0",
          args: `${k8sArgs(NS, POD, containerId, "u-1")};RUNTIME_EXTRA=x`,
        });

      const add = await call("ADD");
      assert.equal(add.code, 0, add.stdout + add.stderr.slice(-2000));
      assert.equal((add.json as { cniVersion: string }).cniVersion, "1.0.0");
      assert.deepEqual(await linkNames(podNetns), ["eth0", "fast0", "net1"]);
      const calls = await readRecords(log);
      const adds = calls.filter((c) => c.env.CNI_COMMAND === "ADD");
      assert.deepEqual(adds.map((c) => [c.config.type, c.env.CNI_IFNAME]), [
        ["rec-bridge", "eth0"],
        ["rec-tuning", "eth0"],
        ["rec-bridge", "net1"],
        ["rec-macvlan", "fast0"],
        ["rec-tuning", "fast0"],
      ]);
      const [defBridge, defTuning, sec, mv, mvTuning] = adds;

      // Default network: its conflist's name/cniVersion; the runtime's runtimeConfig only to
      // the plugin declaring the capability; prevResult chained.
      assert.equal(defBridge.config.name, "k8s-pod-network");
      assert.equal(defBridge.config.cniVersion, "0.4.0");
      assert.equal(defBridge.config.runtimeConfig, undefined);
      assert.deepEqual(defTuning.config.runtimeConfig, {
        portMappings: [{ hostPort: 9999, containerPort: 99, protocol: "tcp" }],
      });
      assert.ok(defTuning.config.prevResult, "prevResult chained to the 2nd plugin");
      assert.equal(defBridge.config.prevResult, undefined);

      // Secondary: injected name; annotation's runtimeConfig keys only (never the runtime's,
      // §7.5); args.cni merged with the annotation winning; ipam-claim-reference forwarded.
      assert.equal(sec.config.name, "sec-net");
      assert.deepEqual(sec.config.runtimeConfig, {
        bandwidth: { ingressRate: 100000, ingressBurst: 20000 },
        portMappings: [{ hostPort: 8080, containerPort: 80, protocol: "udp" }],
      });
      assert.deepEqual(sec.config.args, {
        cni: { owner: "pod", keep: "yes", extra: 1, "ipam-claim-reference": "vm-a.sec-net" },
      });
      // CNI_ARGS: pod identity plus the runtime's own pairs.
      for (
        const kv of [
          `K8S_POD_NAMESPACE=${NS}`,
          `K8S_POD_NAME=${POD}`,
          "K8S_POD_UID=u-1",
          "RUNTIME_EXTRA=x",
        ]
      ) {
        assert.ok(sec.env.CNI_ARGS.split(";").includes(kv), `${kv} in ${sec.env.CNI_ARGS}`);
      }
      // macvlan NAD: ips to the plugin with the capability, mac to tuning; MAC=/IP= in CNI_ARGS.
      assert.deepEqual(mv.config.runtimeConfig, { ips: ["10.241.3.9/24"] });
      assert.deepEqual(mvTuning.config.runtimeConfig, { mac: "02:00:00:0a:f1:09" });
      assert.ok(mv.env.CNI_ARGS.includes("MAC=02:00:00:0a:f1:09"));
      assert.ok(mv.env.CNI_ARGS.includes("IP=10.241.3.9/24"));

      // DEL: reverse order, same tuples, prevResult for ≥ 0.4.0, same runtimeConfig.
      await Deno.writeTextFile(log, "");
      const del = await call("DEL");
      assert.equal(del.code, 0, del.stdout + del.stderr.slice(-2000));
      const dels = (await readRecords(log)).filter((c) => c.env.CNI_COMMAND === "DEL");
      assert.deepEqual(dels.map((c) => [c.config.type, c.env.CNI_IFNAME]), [
        ["rec-tuning", "fast0"],
        ["rec-macvlan", "fast0"],
        ["rec-bridge", "net1"],
        ["rec-tuning", "eth0"],
        ["rec-bridge", "eth0"],
      ]);
      assert.deepEqual(dels[2].config.runtimeConfig, sec.config.runtimeConfig);
      assert.ok(dels[2].config.prevResult, "DEL gets the cached result as prevResult");
      assert.deepEqual(await linkNames(podNetns), []);
    } finally {
      await api?.stop();
      await scratch.cleanup();
    }
  },
});
