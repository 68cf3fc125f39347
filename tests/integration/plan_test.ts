/**
 * The pod's plan through a real plugin process (scripts/manifold) with real delegates from
 * /usr/lib/cni in real network namespaces, against the HTTPS API stand-in: checks that fail
 * the pod run before any delegate (issue 11 §1), the default-network override keeping every
 * key with `default-route` for IPv4 and IPv6 (§2 item 4), `invalidNetworkSelection` (item 5),
 * network-status `ips` from the delegates' results (item 6), and the paths item 11 names:
 * `defaultNetworks`, standalone mode (`nadDir`), STATUS through the default network's
 * delegates, and the `ErrorAddingNetwork` event reaching the API. Needs root.
 */

import assert from "node:assert/strict";
import { ipJson, isRoot, linkNames } from "../support/netns.ts";
import { k8sArgs } from "../support/plugin.ts";
import { done, expectOk, NS, POD, podStatus, type World, world } from "../support/world.ts";

const root = { ignore: !isRoot(), sanitizeResources: false, sanitizeOps: false };
const NETWORKS = "k8s.v1.cni.cncf.io/networks";
const DEFAULT_NETWORK = "v1.multus-cni.io/default-network";

/** Every entry (any depth) of the host-local data dir: empty means no delegate ever ran IPAM. */
async function ipamEntries(w: World): Promise<string[]> {
  const out: string[] = [];
  for await (const e of Deno.readDir(w.dirs.ipam)) out.push(e.name);
  return out;
}

/** The events the API stand-in stored, as `reason: message`. */
function events(w: World): { reason: string; message: string; type: string }[] {
  return w.api.events.map((e) => ({
    reason: String(e.reason),
    message: String(e.message),
    type: String(e.type),
  }));
}

/** `ip -j route show default` in the pod (family 4 or 6): `[gateway, dev]` pairs. */
async function defaultRoutes(w: World, family: 4 | 6): Promise<string[][]> {
  const routes = await ipJson<{ gateway?: string; dev: string }[]>(
    w.podNetns,
    `-${family}`,
    "route",
    "show",
    "default",
  );
  return routes.map((r) => [r.gateway ?? "", r.dev]);
}

/** A test plugin (bash) in the world's binDir, run before CNI_PATH. */
async function scriptPlugin(w: World, name: string, body: string): Promise<void> {
  const path = `${w.dirs.bin}/${name}`;
  await Deno.writeTextFile(path, `#!/bin/bash\nset -u\n${body}\n`);
  await Deno.chmod(path, 0o755);
}

/** Prints prevResult (or an empty result) like a pass-through plugin. */
const PASS_THROUGH = `python3 -c 'import json,sys
c=json.load(sys.stdin)
print(json.dumps(c.get("prevResult") or {"cniVersion": c["cniVersion"]}))' <<<"$cfg"`;

Deno.test({
  name: "a doomed ADD (capability, duplicate interface, isolation) runs no delegate at all",
  ...root,
  async fn() {
    const other = {
      cniVersion: "1.0.0",
      type: "bridge",
      bridge: "mfnone0",
      ipam: { type: "host-local", dataDir: "/nonexistent", subnet: "10.240.9.0/24" },
    };
    const cases: [string, Record<string, unknown>, RegExp][] = [
      [JSON.stringify([{ name: "bridge-net", ips: ["10.240.2.9/24"] }]), {}, /capability "ips"/],
      [JSON.stringify([{ name: "bridge-net", interface: "eth0" }]), {}, /"eth0" is already used/],
      ["other/bridge-net", { namespaceIsolation: true }, /namespace isolation/],
    ];
    for (const [annotation, conf, re] of cases) {
      const w = await world({ annotations: { [NETWORKS]: annotation }, conf });
      try {
        w.api.addNad({ namespace: "other", name: "bridge-net", config: JSON.stringify(other) });
        const add = await w.call("ADD");
        assert.equal(add.code, 1, annotation);
        const err = add.json as { code: number; msg: string };
        assert.equal(err.code, 7, add.stdout);
        assert.match(err.msg, re);
        // host-local creates <dataDir>/<network>/ on its first ADD: nothing ran.
        assert.deepEqual(await ipamEntries(w), [], `${annotation}: a delegate ran`);
        assert.deepEqual(await linkNames(w.podNetns), []);
        // The failure reached the API as a Warning event, and the runtime's DEL is a no-op.
        assert.ok(
          events(w).some((e) => e.reason === "ErrorAddingNetwork" && re.test(e.message)),
          JSON.stringify(events(w)),
        );
        expectOk(await w.call("DEL"), "DEL after the failed ADD");
        assert.deepEqual(await ipamEntries(w), []);
      } finally {
        await done(w);
      }
    }
  },
});

Deno.test({
  name: "default-network override (JSON form) keeps interface, ips, mac, cni-args and " +
    "default-route (IPv4 + IPv6); status ips are the delegate's, not the link-local",
  ...root,
  async fn() {
    const override = [{
      name: "dual-net",
      interface: "pod0",
      ips: ["10.250.1.5/24", "fd00:250::5/64"],
      mac: "02:00:00:fa:01:05",
      "cni-args": { "x-manifold-test": "yes" },
      "default-route": ["10.250.1.1", "fd00:250::1"],
    }];
    const w = await world({
      annotations: {
        [DEFAULT_NETWORK]: JSON.stringify(override),
        [NETWORKS]: JSON.stringify([{ name: "bridge-net" }]),
      },
    });
    try {
      // The pod's own default network: bridge + static IPAM (ips) + tuning (mac), dual stack.
      w.api.addNad({
        namespace: "kube-system",
        name: "dual-net",
        config: JSON.stringify({
          cniVersion: "1.0.0",
          name: "dual-net",
          plugins: [
            {
              type: "bridge",
              bridge: w.br.def,
              ipam: { type: "static" },
              capabilities: { ips: true },
            },
            { type: "tuning", capabilities: { mac: true } },
          ],
        }),
      });
      const add = await w.call("ADD");
      expectOk(add, "ADD");
      assert.deepEqual(await linkNames(w.podNetns), ["net1", "pod0"]);
      const links = await ipJson<{ ifname: string; address: string }[]>(w.podNetns, "link");
      assert.equal(links.find((l) => l.ifname === "pod0")?.address, "02:00:00:fa:01:05");
      // default-route: both families on pod0, in the kernel.
      assert.deepEqual(await defaultRoutes(w, 4), [["10.250.1.1", "pod0"]]);
      assert.deepEqual(await defaultRoutes(w, 6), [["fd00:250::1", "pod0"]]);

      const status = podStatus(w);
      assert.equal(status[0].name, "kube-system/dual-net");
      assert.equal(status[0].interface, "pod0");
      assert.equal(status[0].default, true);
      // The delegate's two addresses; pod0's fe80:: link-local (the kernel's) is not reported.
      assert.deepEqual(status[0].ips, ["10.250.1.5/24", "fd00:250::5/64"]);
      assert.deepEqual(status[0]["default-route"], ["10.250.1.1", "fd00:250::1"]);
      assert.equal(status[0].mac, "02:00:00:fa:01:05");
      const pod0 = await ipJson<{ addr_info: { local: string; scope: string }[] }[]>(
        w.podNetns,
        "addr",
        "show",
        "dev",
        "pod0",
      );
      assert.ok(pod0[0].addr_info.some((a) => a.scope === "link"), "the kernel has a link-local");

      // cni-args reached the delegate's config (cached exactly as executed).
      const cached = await cacheText(w);
      assert.match(cached, /"x-manifold-test":"yes"/);

      expectOk(await w.call("CHECK"), "CHECK");
      expectOk(await w.call("DEL"), "DEL");
      assert.deepEqual(await linkNames(w.podNetns), []);
      assert.deepEqual(await w.leases(), []);
    } finally {
      await done(w);
    }
  },
});

/** Every cache file's text for the world's container (whatever the cache's file layout). */
async function cacheText(w: World): Promise<string> {
  const out: string[] = [];
  const walk = async (dir: string) => {
    for await (const e of Deno.readDir(dir)) {
      const path = `${dir}/${e.name}`;
      if (e.isDirectory) await walk(path);
      else if (e.isFile) {
        const text = await Deno.readTextFile(path);
        if (text.includes(w.containerId)) out.push(JSON.stringify(JSON.parse(text)));
      }
    }
  };
  await walk(w.dirs.cache);
  return out.join("\n");
}

Deno.test({
  name: "default-route for one family (IPv6) moves only that family off the cluster network",
  ...root,
  async fn() {
    const w = await world();
    try {
      // Cluster default network: dual-stack host-local with both default routes.
      const conflist = `${w.dirs.conf}/20-dual.conflist`;
      await Deno.writeTextFile(
        conflist,
        JSON.stringify({
          cniVersion: "1.0.0",
          name: "dual0",
          plugins: [{
            type: "bridge",
            bridge: w.br.def,
            isDefaultGateway: true,
            ipam: {
              type: "host-local",
              dataDir: w.dirs.ipam,
              ranges: [[{ subnet: "10.251.0.0/24" }], [{ subnet: "fd00:251::/64" }]],
            },
          }],
        }),
      );
      w.api.addNad({
        namespace: NS,
        name: "v6-net",
        config: JSON.stringify({
          cniVersion: "1.0.0",
          type: "bridge",
          bridge: w.br.sec,
          ipam: {
            type: "host-local",
            dataDir: w.dirs.ipam,
            ranges: [[{ subnet: "fd00:252::/64", gateway: "fd00:252::1" }]],
          },
        }),
      });
      const conf = {
        ...w.conf,
        clusterNetwork: conflist,
        capabilities: { "io.kubernetes.cri.pod-annotations": true },
        runtimeConfig: {
          "io.kubernetes.cri.pod-annotations": {
            [NETWORKS]: JSON.stringify([{ name: "v6-net", "default-route": ["fd00:252::1"] }]),
          },
        },
      };
      expectOk(await w.call("ADD", { config: conf }), "ADD");
      assert.deepEqual(await defaultRoutes(w, 4), [["10.251.0.1", "eth0"]]);
      assert.deepEqual(await defaultRoutes(w, 6), [["fd00:252::1", "net1"]]);
      assert.deepEqual(podStatus(w)[1]["default-route"], ["fd00:252::1"]);
      expectOk(await w.call("CHECK", { config: conf }), "CHECK after the route change");
      expectOk(await w.call("DEL", { config: conf }), "DEL");
      assert.deepEqual(await w.leases(), []);
    } finally {
      await done(w);
    }
  },
});

Deno.test({
  name: "network-status ips are the delegate's: addresses only the kernel holds are left out",
  ...root,
  async fn() {
    const w = await world();
    try {
      // A chained plugin that adds addresses behind the delegate's back (as SLAAC would)
      // and passes the previous result on unchanged.
      await scriptPlugin(
        w,
        "extra-addr",
        `cfg=$(cat)
case "$CNI_COMMAND" in
ADD)
  nsenter --net="$CNI_NETNS" ip addr add 192.0.2.77/32 dev "$CNI_IFNAME" >&2
  nsenter --net="$CNI_NETNS" ip addr add 2001:db8:77::77/64 dev "$CNI_IFNAME" nodad >&2
  ${PASS_THROUGH};;
VERSION) echo '{"cniVersion":"1.0.0","supportedVersions":["0.4.0","1.0.0"]}';;
esac`,
      );
      const conflist = `${w.dirs.conf}/20-extra.conflist`;
      await Deno.writeTextFile(
        conflist,
        JSON.stringify({
          cniVersion: "1.0.0",
          name: "cbr0",
          plugins: [
            {
              type: "bridge",
              bridge: w.br.def,
              ipam: {
                type: "host-local",
                dataDir: w.dirs.ipam,
                ranges: [[{ subnet: "10.240.1.0/24" }]],
              },
            },
            { type: "extra-addr" },
          ],
        }),
      );
      expectOk(await w.call("ADD", { config: { ...w.conf, clusterNetwork: conflist } }), "ADD");
      const addrs = await ipJson<{ addr_info: { local: string; prefixlen: number }[] }[]>(
        w.podNetns,
        "addr",
        "show",
        "dev",
        "eth0",
      );
      const held = addrs[0].addr_info.map((a) => `${a.local}/${a.prefixlen}`);
      assert.ok(held.includes("192.0.2.77/32") && held.includes("2001:db8:77::77/64"), `${held}`);
      const status = podStatus(w);
      const ips = status[0].ips as string[];
      assert.equal(ips.length, 1, JSON.stringify(ips));
      assert.match(ips[0], /^10\.240\.1\.\d+\/24$/);
      expectOk(await w.call("DEL", { config: { ...w.conf, clusterNetwork: conflist } }), "DEL");
    } finally {
      await done(w);
    }
  },
});

Deno.test({
  name: 'invalidNetworkSelection "ignore": an invalid annotation gives the default network only ' +
    "and an InvalidNetworkSelection Warning event",
  ...root,
  async fn() {
    const w = await world({
      annotations: { [NETWORKS]: '[{"name":"bridge-net","mac":"nope"}]' },
      conf: { invalidNetworkSelection: "ignore" },
    });
    try {
      const add = await w.call("ADD");
      expectOk(add, "ADD");
      assert.deepEqual(await linkNames(w.podNetns), ["eth0"]);
      assert.deepEqual(podStatus(w).map((s) => s.name), ["cbr0"]);
      const warning = events(w).find((e) => e.reason === "InvalidNetworkSelection");
      assert.ok(warning, JSON.stringify(events(w)));
      assert.equal(warning.type, "Warning");
      assert.match(warning.message, /"mac"/);
      assert.match(add.stderr, /InvalidNetworkSelection/);
      expectOk(await w.call("DEL"), "DEL");
      assert.deepEqual(await w.leases(), []);

      // The default stays Multus's: the same annotation fails the ADD.
      const fail = await w.call("ADD", { config: { ...w.conf, invalidNetworkSelection: "fail" } });
      assert.equal((fail.json as { code: number }).code, 7);
    } finally {
      await done(w);
    }
  },
});

Deno.test({
  name: "defaultNetworks: every pod gets them after the default network, before its selection",
  ...root,
  async fn() {
    const w = await world({ annotations: { [NETWORKS]: "bridge-net" } });
    try {
      w.api.addNad({
        namespace: "kube-system",
        name: "extra-net",
        config: JSON.stringify({
          cniVersion: "1.0.0",
          type: "bridge",
          bridge: w.br.sec,
          ipam: { type: "host-local", dataDir: w.dirs.ipam, subnet: "10.240.8.0/24" },
        }),
      });
      const conf = { ...w.conf, defaultNetworks: ["extra-net"] };
      expectOk(await w.call("ADD", { config: conf }), "ADD");
      assert.deepEqual(await linkNames(w.podNetns), ["eth0", "net1", "net2"]);
      const status = podStatus(w);
      assert.deepEqual(status.map((s) => [s.name, s.interface]), [
        ["cbr0", "eth0"],
        ["kube-system/extra-net", "net1"],
        [`${NS}/bridge-net`, "net2"],
      ]);
      assert.match((status[1].ips as string[])[0], /^10\.240\.8\.\d+\/24$/);
      expectOk(await w.call("DEL", { config: conf }), "DEL");
      assert.deepEqual(await w.leases(), []);
    } finally {
      await done(w);
    }
  },
});

Deno.test({
  name: "standalone mode: NADs from nadDir, annotations from runtimeConfig, status in a file",
  ...root,
  async fn() {
    const w = await world();
    try {
      const nadDir = `${w.dirs.kube}/nads`;
      await Deno.mkdir(nadDir);
      await Deno.writeTextFile(
        `${nadDir}/bridge.yaml`,
        [
          "apiVersion: k8s.cni.cncf.io/v1",
          "kind: NetworkAttachmentDefinition",
          "metadata:",
          "  name: bridge-net",
          `  namespace: ${NS}`,
          "spec:",
          `  config: '${w.nadConfigs["bridge-net"]}'`,
        ].join("\n"),
      );
      const { kubeconfig: _k, ...rest } = w.conf;
      const conf = {
        ...rest,
        nadDir,
        capabilities: { "io.kubernetes.cri.pod-annotations": true },
        runtimeConfig: {
          "io.kubernetes.cri.pod-annotations": { [NETWORKS]: "bridge-net@lan0" },
        },
      };
      const before = w.api.requests.length;
      expectOk(await w.call("ADD", { config: conf }), "ADD");
      assert.deepEqual(await linkNames(w.podNetns), ["eth0", "lan0"]);
      const status = JSON.parse(
        await Deno.readTextFile(`${w.dirs.cache}/network-status/${w.containerId}@eth0.json`),
      ) as Record<string, unknown>[];
      assert.deepEqual(status.map((s) => [s.name, s.interface]), [
        ["cbr0", "eth0"],
        [`${NS}/bridge-net`, "lan0"],
      ]);
      expectOk(await w.call("DEL", { config: conf }), "DEL");
      assert.deepEqual(await w.leases(), []);
      assert.equal(w.api.requests.length, before, "standalone mode never calls the API");
    } finally {
      await done(w);
    }
  },
});

Deno.test({
  name: "STATUS runs the default network's delegates (CNI 1.1) and reports their failure",
  ...root,
  async fn() {
    const w = await world({ cniVersion: "1.1.0" });
    try {
      const log = `${w.dirs.kube}/status.log`;
      const down = `${w.dirs.kube}/down`;
      await scriptPlugin(
        w,
        "status-probe",
        `cfg=$(cat)
echo "$CNI_COMMAND" >> ${log}
case "$CNI_COMMAND" in
STATUS)
  if [ -e ${down} ]; then
    echo '{"cniVersion":"1.1.0","code":50,"msg":"probe: network not ready"}'; exit 1
  fi;;
VERSION) echo '{"cniVersion":"1.1.0","supportedVersions":["1.0.0","1.1.0"]}';;
esac`,
      );
      const conflist = `${w.dirs.conf}/20-probe.conflist`;
      await Deno.writeTextFile(
        conflist,
        JSON.stringify({ cniVersion: "1.1.0", name: "probe", plugins: [{ type: "status-probe" }] }),
      );
      const conf = { ...w.conf, clusterNetwork: conflist, defaultNetworks: ["missing-net"] };
      expectOk(await w.call("STATUS", { config: conf }), "STATUS");
      assert.deepEqual((await Deno.readTextFile(log)).trim().split("\n"), ["STATUS"]);
      await Deno.writeTextFile(down, "");
      const st = await w.call("STATUS", { config: conf });
      assert.equal(st.code, 1);
      assert.equal((st.json as { code: number }).code, 50);
      assert.match((st.json as { msg: string }).msg, /probe: network not ready/);
    } finally {
      await done(w);
    }
  },
});

Deno.test({
  name: "a delegate failing ADD sends ErrorAddingNetwork to the API, naming the attachment",
  ...root,
  async fn() {
    const w = await world({ annotations: { [NETWORKS]: "broken" } });
    try {
      w.api.addNad({
        namespace: NS,
        name: "broken",
        config: JSON.stringify({
          cniVersion: "1.0.0",
          type: "macvlan",
          master: "mf-no-such-if",
          ipam: { type: "host-local", dataDir: w.dirs.ipam, subnet: "10.240.4.0/24" },
        }),
      });
      const add = await w.call("ADD", { args: k8sArgs(NS, POD, w.containerId) });
      assert.equal(add.code, 1);
      const posted = w.api.requests.filter((r) =>
        r.method === "POST" && r.path.endsWith("/events")
      );
      assert.ok(posted.length >= 1, "an event was POSTed");
      const ev = events(w).find((e) => e.reason === "ErrorAddingNetwork");
      assert.ok(ev, JSON.stringify(events(w)));
      assert.equal(ev.type, "Warning");
      assert.match(ev.message, new RegExp(`\\[${NS}/${POD}:${NS}/broken\\]`));
      assert.deepEqual(await w.leases(), []);
    } finally {
      await done(w);
    }
  },
});
