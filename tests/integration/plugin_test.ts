/**
 * Manifold as a real process (scripts/manifold, env + stdin) with real delegates from
 * /usr/lib/cni in real network namespaces, against the HTTPS Kubernetes API stand-in.
 * Needs root.
 */

import assert from "node:assert/strict";
import { ipJson, isRoot, linkNames, sh } from "../support/netns.ts";
import { k8sArgs, runPlugin } from "../support/plugin.ts";
import { done, expectOk, NS, POD, podStatus, world } from "../support/world.ts";

const JSON_SELECTION = JSON.stringify([
  { name: "bridge-net" },
  { name: "macvlan-net", interface: "data0", ips: ["10.240.3.7/24"], mac: "02:00:00:0a:f0:07" },
]);

const root = { ignore: !isRoot(), sanitizeResources: false, sanitizeOps: false };

Deno.test({
  name: "ADD → CHECK → DEL → DEL: default + bridge + macvlan NADs from the API, status patched",
  ...root,
  async fn() {
    const w = await world({ annotations: { "k8s.v1.cni.cncf.io/networks": JSON_SELECTION } });
    try {
      const add = await w.call("ADD");
      expectOk(add, "ADD");
      assert.deepEqual(add.json?.cniVersion, "1.0.0");
      // The kernel holds all three interfaces with the requested MAC and IP.
      assert.deepEqual(await linkNames(w.podNetns), ["data0", "eth0", "net1"]);
      const links = await ipJson<{ ifname: string; address: string }[]>(w.podNetns, "link", "show");
      assert.deepEqual(links.find((l) => l.ifname === "data0")?.address, "02:00:00:0a:f0:07");
      const addrs = await ipJson<
        { ifname: string; addr_info: { local: string; prefixlen: number }[] }[]
      >(
        w.podNetns,
        "addr",
        "show",
      );
      const v4 = (n: string) =>
        addrs.find((a) => a.ifname === n)?.addr_info.map((i) => `${i.local}/${i.prefixlen}`) ?? [];
      assert.deepEqual(v4("data0").filter((a) => a.includes(".")), ["10.240.3.7/24"]);
      assert.match(v4("eth0").find((a) => a.includes("."))!, /^10\.240\.1\.\d+\/24$/);
      assert.match(v4("net1").find((a) => a.includes("."))!, /^10\.240\.2\.\d+\/24$/);

      // network-status: default first, names, interfaces, IPs with prefix, MAC.
      const status = podStatus(w);
      assert.deepEqual(status.map((s) => [s.name, s.interface, s.default]), [
        ["cbr0", "eth0", true],
        [`${NS}/bridge-net`, "net1", false],
        [`${NS}/macvlan-net`, "data0", false],
      ]);
      assert.deepEqual(status[2].ips, ["10.240.3.7/24"]);
      assert.deepEqual(status[2].mac, "02:00:00:0a:f0:07");
      assert.deepEqual(status[0].ips, v4("eth0").filter((a) => a.includes(".")));

      // API use: 1 pod GET, 2 NAD GETs, 1 status PATCH (+ events).
      const reqs = w.api.requests.filter((r) =>
        !r.path.endsWith("/events") && r.path !== "/version"
      );
      assert.deepEqual(
        reqs.filter((r) => r.method === "GET" && r.path.includes("/pods/")).length,
        1,
      );
      assert.deepEqual(
        reqs.filter((r) => r.path.includes("network-attachment-definitions")).length,
        2,
      );
      assert.deepEqual(reqs.filter((r) => r.method === "PATCH").length, 1);
      // A healthy ADD sends no event by default ("events": "warnings").
      assert.deepEqual(w.api.events.length, 0, "no events on a healthy ADD");

      expectOk(await w.call("CHECK"), "CHECK");

      const before = w.api.requests.length;
      expectOk(await w.call("DEL"), "DEL");
      assert.deepEqual(w.api.requests.length, before, "DEL sends no API request");
      assert.deepEqual(await linkNames(w.podNetns), []);
      assert.deepEqual(await w.leases(), []);
      // containerd's second DEL: no netns, no cached result.
      expectOk(await w.call("DEL", { netns: "" }), "second DEL");
    } finally {
      await done(w);
    }
  },
});

Deno.test({
  name: "comma annotation with ns/name@ifname; pod annotations from the runtime need no pod GET",
  ...root,
  async fn() {
    const w = await world();
    try {
      const conf = {
        ...w.conf,
        capabilities: { "io.kubernetes.cri.pod-annotations": true },
        runtimeConfig: {
          "io.kubernetes.cri.pod-annotations": {
            "k8s.v1.cni.cncf.io/networks": `bridge-net, ${NS}/bridge-net@br9`,
          },
        },
      };
      const add = await w.call("ADD", { config: conf });
      expectOk(add, "ADD");
      assert.deepEqual(await linkNames(w.podNetns), ["br9", "eth0", "net1"]);
      const podGets = w.api.requests.filter((r) => r.method === "GET" && r.path.includes("/pods/"));
      assert.deepEqual(podGets.length, 0);
      // The same NAD twice: two attachments, one NAD GET.
      assert.deepEqual(
        w.api.requests.filter((r) => r.path.includes("network-attachment-definitions")).length,
        1,
      );
      assert.deepEqual(podStatus(w).length, 3);
      expectOk(await w.call("DEL", { config: conf }), "DEL");
      assert.deepEqual(await w.leases(), []);
    } finally {
      await done(w);
    }
  },
});

Deno.test({
  name: "a failing 2nd secondary delegate rolls everything back (no interface, no lease)",
  ...root,
  async fn() {
    const w = await world({
      annotations: {
        "k8s.v1.cni.cncf.io/networks": JSON.stringify([{ name: "bridge-net" }, { name: "broken" }]),
      },
    });
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
      const add = await w.call("ADD");
      assert.deepEqual(add.code, 1);
      const err = add.json as { code: number; msg: string };
      assert.match(err.msg, new RegExp(`\\[${NS}/${POD}:${NS}/broken\\]`));
      assert.deepEqual(await linkNames(w.podNetns), []);
      assert.deepEqual(await w.leases(), []);
      // macvlan's DEL fails as its ADD did (the rollback's DEL was the 1st failure): the
      // runtime's DEL reports it (§7.2); the next one reaches the bound and gives it up.
      const del = await w.call("DEL");
      assert.deepEqual(del.code, 1);
      assert.match((del.json as { msg: string }).msg, /tenant-a\/broken\] Link not found/);
      expectOk(await w.call("DEL"), "DEL after failed ADD, at the bound");
      assert.ok(w.api.events.some((e) => e.reason === "TeardownAbandoned"));
      expectOk(await w.call("DEL"), "DEL after the tombstone");
    } finally {
      await done(w);
    }
  },
});

Deno.test({
  name:
    "a requested capability no plugin declares fails the ADD with code 7 naming NAD and capability",
  ...root,
  async fn() {
    const w = await world({
      annotations: {
        "k8s.v1.cni.cncf.io/networks": JSON.stringify([{
          name: "bridge-net",
          ips: ["10.240.2.9/24"],
        }]),
      },
    });
    try {
      const add = await w.call("ADD");
      assert.deepEqual(add.code, 1);
      const err = add.json as { code: number; msg: string };
      assert.deepEqual(err.code, 7);
      assert.match(err.msg, /bridge-net/);
      assert.match(err.msg, /"ips"/);
      assert.deepEqual(await linkNames(w.podNetns), []);
      assert.deepEqual(await w.leases(), []);
    } finally {
      await done(w);
    }
  },
});

Deno.test({
  name: "invalid annotations fail with code 7 naming the element and key, leaving nothing",
  ...root,
  async fn() {
    const cases: [string, RegExp][] = [
      [JSON.stringify([{ name: "bridge-net", mac: "02:00:00:00:00" }]), /\[0\].*"mac"/],
      [
        JSON.stringify([{ name: "bridge-net" }, { name: "bridge-net", interface: "a/b" }]),
        /\[1\].*"interface"/,
      ],
      [
        JSON.stringify([{ name: "bridge-net", interface: "x1" }, {
          name: "bridge-net",
          interface: "x1",
        }]),
        /x1/,
      ],
      ["[{", /./],
    ];
    for (const [annotation, re] of cases) {
      const w = await world({ annotations: { "k8s.v1.cni.cncf.io/networks": annotation } });
      try {
        const add = await w.call("ADD");
        assert.deepEqual(add.code, 1, annotation);
        const err = add.json as { code: number; msg: string };
        assert.deepEqual(err.code, 7, `${annotation}: ${add.stdout}`);
        assert.match(err.msg, re);
        assert.deepEqual(await linkNames(w.podNetns), []);
        assert.deepEqual(await w.leases(), []);
      } finally {
        await done(w);
      }
    }
  },
});

Deno.test({
  name: "namespace isolation refuses a NAD of another namespace; global namespaces are allowed",
  ...root,
  async fn() {
    const w = await world({
      annotations: { "k8s.v1.cni.cncf.io/networks": "other/bridge-net" },
      conf: { namespaceIsolation: true },
    });
    try {
      const nad = {
        cniVersion: "1.0.0",
        type: "bridge",
        bridge: w.br.sec,
        ipam: { type: "host-local", dataDir: w.dirs.ipam, subnet: "10.240.5.0/24" },
      };
      w.api.addNad({ namespace: "other", name: "bridge-net", config: JSON.stringify(nad) });
      const add = await w.call("ADD");
      assert.deepEqual((add.json as { code: number }).code, 7);
      assert.match(
        (add.json as { msg: string }).msg,
        /namespace isolation: pods in namespace "tenant-a" may not use network attachment definition "other\/bridge-net"/,
      );
      assert.deepEqual(await linkNames(w.podNetns), []);
      const ok = await w.call("ADD", { config: { ...w.conf, globalNamespaces: "other" } });
      expectOk(ok, "ADD with other as global namespace");
      expectOk(await w.call("DEL"), "DEL");
    } finally {
      await done(w);
    }
  },
});

Deno.test({
  name: "NAD without spec.config uses the conflist in confDir whose name matches; name injection",
  ...root,
  async fn() {
    const w = await world({
      annotations: { "k8s.v1.cni.cncf.io/networks": "disk-net,noname-net" },
    });
    try {
      w.api.addNad({ namespace: NS, name: "disk-net" });
      await Deno.writeTextFile(
        `${w.dirs.conf}/20-disk.conflist`,
        JSON.stringify({
          cniVersion: "1.0.0",
          name: "disk-net",
          plugins: [{
            type: "bridge",
            bridge: w.br.sec,
            ipam: { type: "host-local", dataDir: w.dirs.ipam, subnet: "10.240.6.0/24" },
          }],
        }),
      );
      w.api.addNad({
        namespace: NS,
        name: "noname-net",
        config: JSON.stringify({
          cniVersion: "1.0.0",
          type: "bridge",
          bridge: w.br.sec,
          ipam: { type: "host-local", dataDir: w.dirs.ipam, subnet: "10.240.7.0/24" },
        }),
      });
      expectOk(await w.call("ADD"), "ADD");
      const status = podStatus(w);
      assert.deepEqual(status.map((s) => s.name), ["cbr0", `${NS}/disk-net`, `${NS}/noname-net`]);
      // host-local keys its store by network name: the injected name is "noname-net".
      const nets = [];
      for await (const e of Deno.readDir(w.dirs.ipam)) nets.push(e.name);
      assert.ok(nets.includes("noname-net"), `host-local networks: ${nets}`);
      assert.ok(nets.includes("disk-net"));
      expectOk(await w.call("DEL"), "DEL");
    } finally {
      await done(w);
    }
  },
});

Deno.test({
  name: "DEL works from the cache with the netns gone, the API down and the pod deleted",
  ...root,
  async fn() {
    const w = await world({ annotations: { "k8s.v1.cni.cncf.io/networks": JSON_SELECTION } });
    try {
      expectOk(await w.call("ADD"), "ADD");
      await sh("ip", ["netns", "del", w.podNetns]);
      w.api.deletePod(NS, POD);
      w.api.down(true);
      const del = await w.call("DEL");
      expectOk(del, "DEL");
      assert.ok(del.ms < 3000, `DEL took ${del.ms} ms`);
      assert.deepEqual(await w.leases(), []);
      expectOk(await w.call("DEL", { netns: "" }), "second DEL");
    } finally {
      await done(w);
    }
  },
});

Deno.test({
  name: "DEL with a corrupt cache rebuilds the attachments from the API and releases every lease",
  ...root,
  async fn() {
    const w = await world({
      annotations: { "k8s.v1.cni.cncf.io/networks": JSON.stringify([{ name: "bridge-net" }]) },
    });
    try {
      expectOk(await w.call("ADD"), "ADD");
      assert.deepEqual((await w.leases()).length, 2);
      for await (const e of Deno.readDir(w.dirs.cache)) {
        if (e.isFile && e.name.startsWith(w.containerId)) {
          await Deno.writeTextFile(`${w.dirs.cache}/${e.name}`, '{"schemaVersion":1,"contai');
        }
      }
      expectOk(await w.call("DEL"), "DEL");
      assert.deepEqual(await w.leases(), []);
      assert.deepEqual(await linkNames(w.podNetns), []);
    } finally {
      await done(w);
    }
  },
});

Deno.test({
  name: "pod UID mismatch fails ADD; a deleted pod fails ADD; both leave nothing",
  ...root,
  async fn() {
    const w = await world();
    try {
      const add = await w.call("ADD", {
        args: k8sArgs(NS, POD, w.containerId, "ffffffff-0000-4000-8000-000000000000"),
      });
      assert.deepEqual(add.code, 1);
      assert.match((add.json as { msg: string }).msg, /UID/);
      assert.deepEqual(await linkNames(w.podNetns), []);
      w.api.deletePod(NS, POD);
      const gone = await w.call("ADD");
      assert.deepEqual(gone.code, 1);
      assert.deepEqual(await linkNames(w.podNetns), []);
    } finally {
      await done(w);
    }
  },
});

Deno.test({
  name: "API 5xx/429 during ADD: retried; persistent 503 fails with code 11 and rolls back",
  ...root,
  async fn() {
    const w = await world({ annotations: { "k8s.v1.cni.cncf.io/networks": "bridge-net" } });
    try {
      w.api.fault({ method: "GET", path: /network-attachment-definitions/, status: 503, times: 1 });
      w.api.fault({ method: "PATCH", status: 429, times: 1 });
      expectOk(await w.call("ADD"), "ADD with transient faults");
      expectOk(await w.call("DEL"), "DEL");
      w.api.fault({ method: "PATCH", status: 503, times: Infinity });
      const add = await w.call("ADD");
      assert.deepEqual(add.code, 1);
      assert.deepEqual((add.json as { code: number }).code, 11);
      assert.deepEqual(await linkNames(w.podNetns), []);
      assert.deepEqual(await w.leases(), []);
    } finally {
      await done(w);
    }
  },
});

Deno.test({
  name: "GC tears down cached containers missing from cni.dev/valid-attachments",
  ...root,
  async fn() {
    const w = await world({
      annotations: { "k8s.v1.cni.cncf.io/networks": "bridge-net" },
      cniVersion: "1.1.0",
    });
    try {
      expectOk(await w.call("ADD"), "ADD");
      assert.deepEqual((await w.leases()).length, 2);
      const keep = await w.call("GC", {
        config: {
          ...w.conf,
          "cni.dev/valid-attachments": [{ containerID: w.containerId, ifname: "eth0" }],
        },
      });
      expectOk(keep, "GC keeping the container");
      assert.deepEqual((await w.leases()).length, 2);
      const gc = await w.call("GC", { config: { ...w.conf, "cni.dev/valid-attachments": [] } });
      expectOk(gc, "GC");
      assert.deepEqual(await w.leases(), []);
      assert.deepEqual(await linkNames(w.podNetns), []);
    } finally {
      await done(w);
    }
  },
});

Deno.test({
  name: "STATUS: code 50 while the readiness file is missing, 0 once it exists",
  ...root,
  async fn() {
    const w = await world({ cniVersion: "1.1.0" });
    try {
      const file = `${w.dirs.conf}/ready`;
      const conf = { ...w.conf, readinessindicatorfile: file };
      const st = await w.call("STATUS", { config: conf });
      assert.deepEqual(st.code, 1);
      assert.deepEqual((st.json as { code: number }).code, 50);
      await Deno.writeTextFile(file, "");
      expectOk(await w.call("STATUS", { config: conf }), "STATUS");
    } finally {
      await done(w);
    }
  },
});

Deno.test({
  name: "VERSION and environment validation (every missing variable named once)",
  ...root,
  async fn() {
    const v = await runPlugin({ command: "VERSION", config: { cniVersion: "1.1.0" } });
    expectOk(v, "VERSION");
    assert.deepEqual((v.json as { supportedVersions: string[] }).supportedVersions, [
      "0.1.0",
      "0.2.0",
      "0.3.0",
      "0.3.1",
      "0.4.0",
      "1.0.0",
      "1.1.0",
    ]);
    const bad = await runPlugin({
      command: "ADD",
      config: { cniVersion: "1.0.0", type: "manifold", clusterNetwork: "x" },
      omit: ["CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME"],
    });
    assert.deepEqual(bad.code, 1);
    const err = bad.json as { code: number; msg: string; details?: string };
    assert.deepEqual(err.code, 4);
    const text = `${err.msg} ${err.details ?? ""}`;
    for (const v of ["CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME"]) {
      assert.match(text, new RegExp(v));
    }
    assert.deepEqual(bad.stdout.trim().split("\n").length, 1, "only the error JSON on stdout");
  },
});

for (const v of ["0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"]) {
  Deno.test({
    name: `cniVersion ${v}: ADD → CHECK → DEL → DEL with delegates of that version`,
    ...root,
    async fn() {
      const w = await world({
        cniVersion: v,
        annotations: { "k8s.v1.cni.cncf.io/networks": "bridge-net" },
      });
      try {
        const add = await w.call("ADD");
        expectOk(add, "ADD");
        const result = add.json!;
        assert.equal(result.cniVersion, v);
        if (v === "0.1.0" || v === "0.2.0") {
          assert.match((result.ip4 as { ip: string }).ip, /^10\.240\.1\.\d+\/24$/);
        } else {
          const ips = result.ips as { address: string }[];
          assert.match(ips[0].address, /^10\.240\.1\.\d+\/24$/);
        }
        assert.deepEqual(await linkNames(w.podNetns), ["eth0", "net1"]);
        const status = podStatus(w);
        assert.equal(status[0].interface, "eth0");
        assert.match((status[1].ips as string[])[0], /^10\.240\.2\.\d+\/24$/);
        const check = await w.call("CHECK");
        if (v === "0.4.0" || v.startsWith("1.")) expectOk(check, "CHECK");
        else assert.equal((check.json as { code: number }).code, 1, "CHECK needs ≥ 0.4.0");
        expectOk(await w.call("DEL"), "DEL");
        expectOk(await w.call("DEL", { netns: "" }), "second DEL");
        assert.deepEqual(await linkNames(w.podNetns), []);
        assert.deepEqual(await w.leases(), []);
      } finally {
        await done(w);
      }
    },
  });
}

Deno.test({
  name: "client-certificate kubeconfig (YAML) works end to end",
  ...root,
  async fn() {
    const w = await world({ annotations: { "k8s.v1.cni.cncf.io/networks": "bridge-net" } });
    try {
      const kubeconfig = `${w.dirs.kube}/cert.kubeconfig`;
      await w.api.writeKubeconfig(kubeconfig, { auth: "clientCert", yaml: true });
      const conf = { ...w.conf, kubeconfig };
      expectOk(await w.call("ADD", { config: conf }), "ADD with a client certificate");
      assert.equal(podStatus(w).length, 2);
      assert.ok(w.api.requests.some((r) => r.method === "PATCH" && r.status === 200));
      expectOk(await w.call("DEL", { config: conf }), "DEL");
    } finally {
      await done(w);
    }
  },
});

Deno.test({
  name: "malformed stdin configs get typed CNI errors and touch nothing",
  ...root,
  async fn() {
    const w = await world({ annotations: { "k8s.v1.cni.cncf.io/networks": "bridge-net" } });
    try {
      const cases: [string | Record<string, unknown>, number][] = [
        ["{not json", 6],
        [{ ...w.conf, cniVersion: "9.9.9" }, 1],
        [{ ...w.conf, clusterNetwork: undefined }, 7],
        [{ ...w.conf, clusterNetwork: `${w.dirs.conf}/missing.conflist` }, 7],
        [{ ...w.conf, namespaceIsolation: "yes" }, 7],
        [{ ...w.conf, kubeconfig: `${w.dirs.kube}/nope` }, 7],
        ["x".repeat(1024 * 1024 + 10), 7],
      ];
      for (const [config, code] of cases) {
        const r = await w.call("ADD", { config });
        assert.equal(r.code, 1, `${String(config).slice(0, 60)}: ${r.stdout}`);
        const err = r.json as { code: number; msg: string };
        assert.equal(err.code, code, `${JSON.stringify(config).slice(0, 80)} → ${r.stdout}`);
        assert.ok(err.msg.length > 0);
        assert.equal(r.stdout.trim().split("\n").length, 1);
      }
      assert.deepEqual(await linkNames(w.podNetns), []);
      assert.deepEqual(await w.leases(), []);
      assert.equal(w.api.requests.filter((r) => r.method === "PATCH").length, 0);
    } finally {
      await done(w);
    }
  },
});
