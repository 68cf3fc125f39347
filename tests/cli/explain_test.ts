/**
 * Tests of lib/cli/explain.ts (`manifold explain`): the dry run is checked against what the
 * delegates really receive — the same pod is ADDed by the plugin process with recording
 * stand-in delegates (no netns or root needed) and every recorded stdin and CNI_* variable
 * must equal explain's output. Also: the annotation form, a NAD missing a capability (the
 * plugin's own error), invalid annotations, usage.
 */

import assert from "node:assert/strict";
import {
  EXPLAIN_USAGE,
  type ExplainReport,
  formatExplainText,
  runExplain,
} from "../../lib/cli/mod.ts";
import { runInstaller } from "../../lib/install/mod.ts";
import { type KubeApiStandIn, startKubeApi } from "../support/kube_api.ts";
import { k8sArgs, runPlugin } from "../support/plugin.ts";
import { type FakeHost, fakeHost, parseGenerated, readIf } from "../install/fixtures.ts";

const NS = "tenant-a";
const POD = "web-0";
const UID = "9b1c0a3e-0000-4000-8000-000000000001";
const CID = "c0explain0001";
const NETNS = "/var/run/netns/mf-none-explain";

interface Recorded {
  config: Record<string, unknown>;
  env: Record<string, string>;
}

/** A delegate that appends its stdin and CNI_* env to `log` and prints a result for ADD. */
function recorder(log: string): string {
  return `#!/bin/sh
input=$(cat)
printf '{"config":%s,"env":{"CNI_COMMAND":"%s","CNI_CONTAINERID":"%s","CNI_NETNS":"%s","CNI_IFNAME":"%s","CNI_ARGS":"%s","CNI_PATH":"%s"}}\\n' "$input" "$CNI_COMMAND" "$CNI_CONTAINERID" "$CNI_NETNS" "$CNI_IFNAME" "$CNI_ARGS" "$CNI_PATH" >> ${log}
if [ "$CNI_COMMAND" = ADD ]; then
  printf '{"cniVersion":"1.0.0","interfaces":[{"name":"%s","sandbox":"%s"}],"ips":[{"address":"10.7.0.2/24","interface":0}]}' "$CNI_IFNAME" "$CNI_NETNS"
fi
`;
}

interface Node {
  h: FakeHost;
  api: KubeApiStandIn;
  log: string;
  done(): Promise<void>;
}

async function node(annotations: Record<string, string>): Promise<Node> {
  const h = await fakeHost();
  const api = await startKubeApi();
  const log = `${h.root}/calls.jsonl`;
  try {
    for (const t of ["rec-a", "rec-b", "rec-c"]) {
      await Deno.writeTextFile(`${h.binDir}/${t}`, recorder(log));
      await Deno.chmod(`${h.binDir}/${t}`, 0o755);
    }
    await Deno.writeTextFile(
      `${h.confDir}/10-default.conflist`,
      JSON.stringify({
        cniVersion: "1.0.0",
        name: "cbr0",
        plugins: [{ type: "rec-a", mtu: 1400 }, {
          type: "rec-b",
          capabilities: { portMappings: true },
        }],
      }),
    );
    // No "name": injected from the NAD (§3.4.2); args.cni overridden by cni-args.
    api.addNad({
      namespace: NS,
      name: "sec-net",
      config: JSON.stringify({
        cniVersion: "1.0.0",
        type: "rec-a",
        args: { cni: { owner: "nad", keep: "yes" } },
        capabilities: { bandwidth: true, portMappings: true },
      }),
    });
    api.addNad({
      namespace: NS,
      name: "mv-net",
      config: JSON.stringify({
        cniVersion: "1.0.0",
        name: "mv-net",
        plugins: [{ type: "rec-c", capabilities: { ips: true } }, {
          type: "rec-b",
          capabilities: { mac: true },
        }],
      }),
    });
    api.addNad({
      namespace: NS,
      name: "nocap-net",
      config: JSON.stringify({ cniVersion: "1.0.0", type: "rec-a" }),
    });
    api.addNad({
      namespace: NS,
      name: "nobin-net",
      config: JSON.stringify({ cniVersion: "1.0.0", type: "mf-nowhere" }),
    });
    api.addPod({ namespace: NS, name: POD, uid: UID, annotations });
    await Deno.writeTextFile(`${h.saDir}/token`, api.token);
    await Deno.writeTextFile(`${h.saDir}/ca.crt`, api.caCertPem);
    await runInstaller({
      cniConfDir: h.confDir,
      kubeconfig: { server: api.url, serviceAccountDir: h.saDir },
      pluginConf: { cniDir: `${h.root}/cache`, binDir: h.binDir },
      once: true,
    });
    return {
      h,
      api,
      log,
      async done() {
        await api.stop();
        await h.cleanup();
      },
    };
  } catch (e) {
    await api.stop();
    await h.cleanup();
    throw e;
  }
}

async function explain(n: Node, args: string[]) {
  let stdout = "";
  let stderr = "";
  const code = await runExplain(["--config", n.h.config, ...args], {
    stdout: (s) => void (stdout += s),
    stderr: (s) => void (stderr += s),
    env: {},
  });
  return { code, stdout, stderr };
}

async function pluginAdd(n: Node) {
  const text = (await readIf(n.h.config))!;
  const { list } = parseGenerated(text);
  return await runPlugin({
    command: "ADD",
    config: { ...list.plugins[0], name: list.name, cniVersion: list.cniVersion },
    containerId: CID,
    netns: NETNS,
    ifName: "eth0",
    args: k8sArgs(NS, POD, CID, UID),
    path: n.h.binDir,
  });
}

/** Runs the plugin's ADD and asserts every delegate got exactly what explain showed. */
async function assertAddRunsTheExplainedPlan(n: Node, report: ExplainReport): Promise<void> {
  const add = await pluginAdd(n);
  assert.equal(add.code, 0, `${add.stdout}\n${add.stderr.slice(-2000)}`);
  const recorded: Recorded[] = (await Deno.readTextFile(n.log)).trim().split("\n")
    .map((l) => JSON.parse(l));
  const explained = report.attachments.flatMap((a) => a.plugins);
  assert.equal(recorded.length, explained.length);
  for (const [i, rec] of recorded.entries()) {
    const ex = explained[i];
    assert.ok(ex.binary?.endsWith(`/${ex.type}`), ex.type);
    assert.equal(rec.config.type, ex.type);
    // prevResult: explain shows a placeholder; the delegate got the previous result.
    const { prevResult: realPrev, ...realStdin } = rec.config;
    const { prevResult: shownPrev, ...shownStdin } = ex.stdin;
    assert.equal(realPrev === undefined, shownPrev === undefined, `prevResult of #${i}`);
    if (shownPrev !== undefined) assert.match(String(shownPrev), /^<result of plugin \d/);
    assert.deepEqual(realStdin, shownStdin, `stdin of delegate #${i} (${ex.type})`);
    assert.deepEqual(rec.env, ex.env, `env of delegate #${i} (${ex.type})`);
  }
}

const SELECTION = JSON.stringify([
  {
    name: "sec-net",
    "cni-args": { owner: "pod", extra: 1 },
    bandwidth: { ingressRate: 100000, ingressBurst: 20000 },
  },
  { name: "mv-net", interface: "fast0", ips: ["10.7.3.9/24"], mac: "02:00:00:0a:07:09" },
]);

const TEST = { sanitizeResources: false, sanitizeOps: false };

Deno.test({
  ...TEST,
  name: "explain --pod with a default-network override (JSON form) shows the plan ADD runs",
  async fn() {
    const n = await node({
      "v1.multus-cni.io/default-network": JSON.stringify([{
        name: "mv-net",
        namespace: NS,
        interface: "pod0",
        ips: ["10.7.5.5/24"],
        mac: "02:00:00:0a:07:05",
        "cni-args": { owner: "override" },
      }]),
      "k8s.v1.cni.cncf.io/networks": "sec-net",
    });
    try {
      const r = await explain(n, [
        "--pod",
        `${NS}/${POD}`,
        "--container-id",
        CID,
        "--netns",
        NETNS,
        "--cni-path",
        n.h.binDir,
        "--json",
      ]);
      assert.equal(r.code, 0, r.stderr);
      const report: ExplainReport = JSON.parse(r.stdout);
      assert.deepEqual(
        report.attachments.map((a) => [a.network, a.ifName, a.isDefault]),
        [[`${NS}/mv-net`, "pod0", true], [`${NS}/sec-net`, "net1", false]],
      );
      const [a, b] = report.attachments[0].plugins;
      assert.deepEqual(a.stdin.runtimeConfig, { ips: ["10.7.5.5/24"] });
      assert.deepEqual(b.stdin.runtimeConfig, { mac: "02:00:00:0a:07:05" });
      assert.deepEqual(a.stdin.args, { cni: { owner: "override" } });
      await assertAddRunsTheExplainedPlan(n, report);
    } finally {
      await n.done();
    }
  },
});

Deno.test({
  ...TEST,
  name: "explain --pod shows exactly what each delegate receives at ADD",
  async fn() {
    const n = await node({ "k8s.v1.cni.cncf.io/networks": SELECTION });
    try {
      const r = await explain(n, [
        "--pod",
        `${NS}/${POD}`,
        "--container-id",
        CID,
        "--netns",
        NETNS,
        "--cni-path",
        n.h.binDir,
        "--json",
      ]);
      assert.equal(r.code, 0, r.stderr);
      const report: ExplainReport = JSON.parse(r.stdout);
      assert.deepEqual(
        report.attachments.map((a) => [a.network, a.ifName, a.source]),
        [
          ["cbr0", "eth0", `file:${n.h.confDir}/10-default.conflist`],
          [`${NS}/sec-net`, "net1", `nad:${NS}/sec-net`],
          [`${NS}/mv-net`, "fast0", `nad:${NS}/mv-net`],
        ],
      );
      // Nothing ran yet.
      assert.equal(await readIf(n.log), undefined);

      await assertAddRunsTheExplainedPlan(n, report);
      // Spot checks of what the comparison covered.
      const sec = report.attachments[1].plugins[0].stdin;
      assert.equal(sec.name, "sec-net");
      assert.deepEqual(sec.args, { cni: { owner: "pod", keep: "yes", extra: 1 } });
      assert.deepEqual(sec.runtimeConfig, {
        bandwidth: { ingressRate: 100000, ingressBurst: 20000 },
      });
      const [mvA, mvB] = report.attachments[2].plugins;
      assert.deepEqual(mvA.stdin.runtimeConfig, { ips: ["10.7.3.9/24"] });
      assert.deepEqual(mvB.stdin.runtimeConfig, { mac: "02:00:00:0a:07:09" });
      assert.match(mvA.env.CNI_ARGS, /;MAC=02:00:00:0a:07:09;IP=10\.7\.3\.9\/24$/);

      // The text form carries the same facts.
      const t = await explain(n, ["--pod", `${NS}/${POD}`, "--cni-path", n.h.binDir]);
      assert.equal(t.code, 0, t.stderr);
      assert.match(t.stdout, /^Pod tenant-a\/web-0 \(uid 9b1c0a3e/);
      assert.match(t.stdout, /Attachment 3: fast0 <- tenant-a\/mv-net\n/);
      assert.match(t.stdout, /CNI_IFNAME=net1\n/);
      assert.match(t.stdout, /CNI_CONTAINERID=<container-id>\n/);
      assert.match(
        t.stdout,
        /"prevResult": "<result of plugin 1 \(rec-c\) at ADD, cniVersion 1\.0\.0>"/,
      );
    } finally {
      await n.done();
    }
  },
});

Deno.test({
  ...TEST,
  name: "explain --annotation --namespace: a selection without a pod",
  async fn() {
    const n = await node({});
    try {
      const r = await explain(n, [
        "--annotation",
        "sec-net@blue,mv-net",
        "--namespace",
        NS,
        "--runtime-config",
        '{"portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"tcp"}]}',
        "--json",
      ]);
      assert.equal(r.code, 0, r.stderr);
      const report: ExplainReport = JSON.parse(r.stdout);
      assert.deepEqual(report.pod, { namespace: NS, name: "explain", uid: "" });
      assert.deepEqual(report.attachments.map((a) => a.ifName), ["eth0", "blue", "net1"]);
      // runtimeConfig from the runtime reaches only the default network's declaring plugin (§7.5).
      const def = report.attachments[0].plugins;
      assert.equal(def[0].stdin.runtimeConfig, undefined);
      assert.deepEqual(def[1].stdin.runtimeConfig, {
        portMappings: [{ hostPort: 8080, containerPort: 80, protocol: "tcp" }],
      });
      assert.equal(report.attachments[1].plugins[0].stdin.runtimeConfig, undefined);
      // A binary that is not found is reported, not fatal.
      const missing = await explain(n, ["--annotation", "nobin-net", "--namespace", NS]);
      assert.equal(missing.code, 0);
      assert.match(missing.stdout, /mf-nowhere -> NOT FOUND \(failed to find plugin "mf-nowhere"/);
    } finally {
      await n.done();
    }
  },
});

Deno.test({
  ...TEST,
  name: "explain: a NAD missing a capability fails with the plugin's own error",
  async fn() {
    const n = await node({
      "k8s.v1.cni.cncf.io/networks": JSON.stringify([{ name: "nocap-net", ips: ["10.7.9.9/24"] }]),
    });
    try {
      const r = await explain(n, ["--pod", `${NS}/${POD}`, "--cni-path", n.h.binDir]);
      assert.equal(r.code, 1);
      const expected =
        `network "${NS}/nocap-net": "ips" was requested but no plugin declares capability "ips"`;
      assert.ok(r.stderr.startsWith(`manifold explain: ${expected}\n`), r.stderr);
      assert.match(r.stderr, /NPWG v1\.3 §4\.1\.2\.1 requires/);
      assert.equal(r.stdout, "");
      const add = await pluginAdd(n);
      assert.notEqual(add.code, 0);
      assert.equal(add.json?.msg, expected);
    } finally {
      await n.done();
    }
  },
});

Deno.test({
  ...TEST,
  name: "explain: invalid annotation, missing NAD, missing pod → exit 1 with the reason",
  async fn() {
    const n = await node({});
    try {
      let r = await explain(n, [
        "--annotation",
        '[{"name":"sec-net","interface":7}]',
        "--namespace",
        NS,
      ]);
      assert.equal(r.code, 1);
      assert.match(r.stderr, /^manifold explain: .*interface/);
      r = await explain(n, ["--annotation", "ghost-net", "--namespace", NS]);
      assert.equal(r.code, 1);
      assert.match(r.stderr, /network attachment definition "tenant-a\/ghost-net" not found/);
      r = await explain(n, ["--pod", `${NS}/nobody`]);
      assert.equal(r.code, 1);
      assert.match(r.stderr, /pod tenant-a\/nobody not found/);
    } finally {
      await n.done();
    }
  },
});

Deno.test({
  ...TEST,
  name:
    "explain --pod follows KEP-3698 PodNetworks like ADD (interfaceName, refusal of a disabled one)",
  async fn() {
    const n = await node({
      "multinetwork.manifold.dev/networks": JSON.stringify([
        { name: "default" },
        { name: "dataplane", interfaceName: "dp0" },
      ]),
    });
    try {
      n.api.putObject({
        kind: "PodNetwork",
        metadata: { name: "default" },
        spec: { enabled: true, provider: "manifold.dev/cni" },
        status: { conditions: [{ type: "Ready", status: "True", reason: "Ready", message: "" }] },
      });
      const pn = (enabled: boolean) =>
        n.api.putObject({
          kind: "PodNetwork",
          metadata: { name: "dataplane" },
          spec: {
            enabled,
            provider: "manifold.dev/cni",
            parametersRefs: [{
              group: "k8s.cni.cncf.io",
              kind: "network-attachment-definitions",
              name: "sec-net",
              namespace: NS,
            }],
          },
          status: { conditions: [{ type: "Ready", status: "True", reason: "Ready", message: "" }] },
        });
      pn(true);
      const r = await explain(n, ["--pod", `${NS}/${POD}`, "--cni-path", n.h.binDir, "--json"]);
      assert.equal(r.code, 0, r.stderr);
      const report: ExplainReport = JSON.parse(r.stdout);
      // kubectl's habits give the same report: POD -n NAMESPACE, -o json / -o yaml.
      const asKubectl = await explain(n, [POD, "-n", NS, "--cni-path", n.h.binDir, "-o", "json"]);
      assert.deepEqual(JSON.parse(asKubectl.stdout), report);
      const yaml = await explain(n, [POD, "-n", NS, "--cni-path", n.h.binDir, "-o", "yaml"]);
      assert.equal(yaml.code, 0, yaml.stderr);
      assert.deepEqual((await import("yaml")).parse(yaml.stdout), report);
      assert.deepEqual(report.attachments.map((a) => [a.network, a.ifName]), [
        ["cbr0", "eth0"],
        [`${NS}/sec-net`, "dp0"],
      ]);
      pn(false);
      const refused = await explain(n, ["--pod", `${NS}/${POD}`]);
      assert.notEqual(refused.code, 0);
      assert.match(refused.stderr + refused.stdout, /PodNetwork "dataplane" is disabled/);
    } finally {
      await n.done();
    }
  },
});

Deno.test("explain: usage errors and help", async () => {
  let out = "";
  let err = "";
  const io = { stdout: (s: string) => void (out += s), stderr: (s: string) => void (err += s) };
  assert.equal(await runExplain(["--help"], io), 0);
  assert.equal(out, EXPLAIN_USAGE);
  for (
    const [args, re] of [
      [[], /a pod \(POD -n NAMESPACE, or --pod\) or --annotation is required/],
      [["web-0", "--pod", "a/b"], /NAME -n NAMESPACE or as --pod/],
      [["a/b"], /a pod name has no "\/"/],
      [["web-0", "web-1"], /one pod name expected/],
      [["web-0", "-o", "xml"], /must be json or yaml, got "xml"/],
      [["web-0", "--json", "-o", "yaml"], /--json cannot be used with -o yaml/],
      [["web-0", "--annotation", "x"], /cannot be used with --annotation/],
      [["--pod", "x"], /namespace\/name/],
      [["--annotation", "a"], /needs --namespace/],
      [["--pod", "a/b", "--namespace", "x"], /cannot be used with/],
      [["--pod", "a/b", "--runtime-config", "1"], /JSON object/],
      [["--pod", "a/b", "--config", "rel"], /absolute path/],
    ] as [string[], RegExp][]
  ) {
    err = "";
    assert.equal(await runExplain(args, io), 2, args.join(" "));
    assert.match(err, re);
  }
  err = "";
  assert.equal(await runExplain(["--pod", "a/b", "--config", "/nonexistent/x.conflist"], io), 1);
  assert.match(err, /No such file|not found/i);
  assert.equal(
    formatExplainText({
      version: 1,
      pod: { namespace: "n", name: "p", uid: "" },
      config: "/c",
      cniVersion: "1.0.0",
      attachments: [],
      warnings: [],
    }),
    "Pod n/p\nConfig /c (cniVersion 1.0.0)\nDry run of ADD: nothing is attached and no delegate runs.\n",
  );
});

Deno.test("explain with neither a node config nor a kubeconfig says what to pass, not a readfile error", async () => {
  const home = await Deno.makeTempDir({ prefix: "mft-explain-none-" });
  try {
    let stdout = "";
    let stderr = "";
    const code = await runExplain(["web", "-n", NS, "--cni-conf-dir", `${home}/net.d`], {
      stdout: (s) => void (stdout += s),
      stderr: (s) => void (stderr += s),
      env: { HOME: home },
    });
    assert.equal(code, 1, stderr);
    assert.equal(stdout, "");
    assert.match(stderr, /no \S+\/net\.d\/00-manifold\.conflist on this machine and no kubeconfig/);
    assert.match(stderr, /pass --config PATH or a kubeconfig/);
    assert.doesNotMatch(stderr, /readfile/i);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});
