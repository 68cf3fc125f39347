/**
 * Tests of lib/cli/doctor.ts (`manifold doctor`) on fixture nodes: a fake host root (temp
 * dir) set up by the installer against the HTTPS API stand-in, then broken one way at a
 * time (missing primary, bad kubeconfig, rejected token, missing RBAC, damaged cache,
 * missing readiness file, another config sorting first).
 */

import assert from "node:assert/strict";
import { DOCTOR_USAGE, formatDoctorReport, runDoctor } from "../../lib/cli/mod.ts";
import { runInstaller } from "../../lib/install/mod.ts";
import { AttachmentCache, CACHE_SCHEMA_VERSION } from "../../lib/multinet/cache/cache.ts";
import { type KubeApiStandIn, startKubeApi } from "../support/kube_api.ts";
import { type FakeHost, fakeHost } from "../install/fixtures.ts";

interface Node {
  h: FakeHost;
  api: KubeApiStandIn;
  cacheDir: string;
  done(): Promise<void>;
}

/** A healthy node: binary, config, primary and its plugin, kubeconfig, one cache record. */
async function healthyNode(pluginConf: Record<string, unknown> = {}): Promise<Node> {
  const h = await fakeHost();
  const api = await startKubeApi();
  try {
    await Deno.writeTextFile(`${h.binDir}/mf-fake`, "#!/bin/sh\nexit 0\n");
    await Deno.chmod(`${h.binDir}/mf-fake`, 0o755);
    await Deno.writeTextFile(
      `${h.confDir}/10-fake.conflist`,
      JSON.stringify({ cniVersion: "1.0.0", name: "fake-net", plugins: [{ type: "mf-fake" }] }),
    );
    // deploy/60-status-policy.yaml installed and bound (the stand-in has no admission API).
    const vap = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolic";
    api.fault({
      method: "GET",
      path: new RegExp(`^${vap}ies/manifold-network-status-writers$`),
      body: JSON.stringify({ kind: "ValidatingAdmissionPolicy" }),
      times: Infinity,
    });
    api.fault({
      method: "GET",
      path: new RegExp(`^${vap}ybindings/manifold-network-status-writers$`),
      body: JSON.stringify({
        spec: { policyName: "manifold-network-status-writers", validationActions: ["Deny"] },
      }),
      times: Infinity,
    });
    await Deno.writeTextFile(`${h.saDir}/token`, api.token);
    await Deno.writeTextFile(`${h.saDir}/ca.crt`, api.caCertPem);
    await runInstaller({
      hostRoot: h.root,
      binary: h.binary,
      kubeconfig: { server: api.url, serviceAccountDir: h.saDir },
      pluginConf: { cniDir: "/var/lib/cni/manifold", ...pluginConf },
      once: true,
      pollIntervalMs: 10,
    });
    const cacheDir = `${h.root}/var/lib/cni/manifold`;
    await new AttachmentCache(cacheDir).write({
      schemaVersion: CACHE_SCHEMA_VERSION,
      containerId: "c1doctor",
      netns: "/var/run/netns/x",
      ifName: "eth0",
      pod: { namespace: "default", name: "p", uid: "u" },
      cniVersion: "1.0.0",
      createdAt: new Date().toISOString(),
      attachments: [{
        statusName: "fake-net",
        isDefault: true,
        ifName: "eth0",
        conflist: { cniVersion: "1.0.0", name: "fake-net", plugins: [{ type: "mf-fake" }] },
        capabilityArgs: {},
        cniArgs: [],
        state: "added",
        result: { cniVersion: "1.0.0" },
      }],
    });
    return {
      h,
      api,
      cacheDir,
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

async function doctor(n: Node, extra: string[] = []) {
  let stdout = "";
  let stderr = "";
  const code = await runDoctor(["--host-root", n.h.root, "--api-timeout-ms", "3000", ...extra], {
    stdout: (s) => void (stdout += s),
    stderr: (s) => void (stderr += s),
  });
  return { code, stdout, stderr };
}

function line(stdout: string, name: string): string {
  const l = stdout.split("\n").find((x) => new RegExp(`^  \\S+\\s+${name}\\s{2}`).test(x));
  assert.ok(l, `a line for ${name} in:\n${stdout}`);
  return l!;
}

const TEST = { sanitizeResources: false, sanitizeOps: false };

Deno.test({
  ...TEST,
  name: "doctor: healthy node → every check ok, exit 0",
  async fn() {
    const n = await healthyNode();
    try {
      const r = await doctor(n);
      assert.equal(r.code, 0, r.stdout);
      assert.match(r.stdout, new RegExp(`^Manifold doctor \\(host root ${n.h.root}\\)`));
      for (
        const name of [
          "binary",
          "config",
          "config order",
          "primary",
          "kubeconfig",
          "api",
          "api: get pods",
          "api: patch pods/status",
          "api: create events",
          "api: list network-attachment-definitions",
          "netlink",
          "readiness",
          "cache",
        ]
      ) {
        assert.match(line(r.stdout, name.replace(/[/]/g, "\\/")), /^ {2}ok /, name);
      }
      assert.match(line(r.stdout, "cache"), /1 records, 1 live/);
      assert.match(line(r.stdout, "netlink"), /libmnl/);
      assert.match(r.stdout, /\n\d+ ok, 0 warnings, 0 failures\n$/);
      // Nothing was changed by the probes: no pod, no status patch accepted, no event stored.
      assert.equal(n.api.getPod("kube-system", "manifold-doctor-probe-0"), undefined);
      assert.equal(n.api.events.length, 0);
      const json = await doctor(n, ["--json"]);
      const report = JSON.parse(json.stdout);
      assert.ok(report.checks.every((c: { status: string }) => c.status === "ok"));
    } finally {
      await n.done();
    }
  },
});

Deno.test({
  ...TEST,
  name: "doctor: missing primary (and so no config) → FAIL, exit 1",
  async fn() {
    const n = await healthyNode();
    try {
      await Deno.remove(`${n.h.confDir}/10-fake.conflist`);
      await Deno.remove(n.h.config);
      const r = await doctor(n);
      assert.equal(r.code, 1);
      assert.match(line(r.stdout, "config"), /FAIL .*00-manifold\.conflist does not exist/);
      assert.match(
        line(r.stdout, "primary"),
        /FAIL .*no primary config \(\*\.conf or \*\.conflist\) in \/etc\/cni\/net\.d/,
      );
      assert.match(r.stdout, /hint: install or fix the cluster default network/);
      // Only the primary removed: the config now points at nothing.
      const m = await healthyNode();
      try {
        await Deno.remove(`${m.h.confDir}/10-fake.conflist`);
        const r2 = await doctor(m);
        assert.equal(r2.code, 1);
        assert.match(line(r2.stdout, "primary"), /FAIL .*10-fake\.conflist cannot be read/);
      } finally {
        await m.done();
      }
    } finally {
      await n.done();
    }
  },
});

Deno.test({
  ...TEST,
  name: "doctor: bad kubeconfig → FAIL kubeconfig, no API probes",
  async fn() {
    const n = await healthyNode();
    try {
      await Deno.writeTextFile(`${n.h.confDir}/manifold.d/manifold.kubeconfig`, "{ not: [json");
      const r = await doctor(n);
      assert.equal(r.code, 1);
      assert.match(line(r.stdout, "kubeconfig"), /FAIL .*manifold\.kubeconfig/);
      assert.doesNotMatch(r.stdout, /api: get pods/);
      await Deno.writeTextFile(`${n.h.confDir}/manifold.d/token`, "");
      await Deno.writeTextFile(
        `${n.h.confDir}/manifold.d/manifold.kubeconfig`,
        JSON.stringify({
          "current-context": "c",
          contexts: [{ name: "c", context: { cluster: "k", user: "u" } }],
          clusters: [{ name: "k", cluster: { server: n.api.url } }],
          users: [{ name: "u", user: { tokenFile: "/etc/cni/net.d/manifold.d/token" } }],
        }),
      );
      const r2 = await doctor(n);
      assert.match(line(r2.stdout, "kubeconfig"), /FAIL .*token file .* is missing or empty/);
    } finally {
      await n.done();
    }
  },
});

Deno.test({
  ...TEST,
  name: "doctor: rejected token and missing RBAC → FAIL per permission",
  async fn() {
    const n = await healthyNode();
    try {
      n.api.denyRbac(n.api.token);
      const r = await doctor(n);
      assert.equal(r.code, 1);
      assert.match(line(r.stdout, "api"), /ok .*reachable/);
      for (const p of ["get pods", "patch pods\\/status", "create events"]) {
        assert.match(line(r.stdout, `api: ${p}`), /FAIL +api: .*403 Forbidden/);
      }
      assert.match(line(r.stdout, "api: list network-attachment-definitions"), /FAIL .*403/);
      assert.match(r.stdout, /hint: apply deploy\/20-clusterrole\.yaml/);

      n.api.setTokens(["someone-else"]);
      const r2 = await doctor(n);
      assert.match(line(r2.stdout, "api: get pods"), /FAIL .*401 Unauthorized/);

      n.api.down(true);
      const r3 = await doctor(n);
      assert.match(line(r3.stdout, "api"), /FAIL .*unreachable/);
    } finally {
      await n.done();
    }
  },
});

Deno.test({
  ...TEST,
  name: "doctor: damaged cache → warning, still exit 0",
  async fn() {
    const n = await healthyNode();
    try {
      await Deno.writeTextFile(`${n.cacheDir}/c2broken.json`, '{"schemaVersion":1,"contai');
      await Deno.writeTextFile(`${n.cacheDir}/.c3.json.tmp-1-x`, "");
      const r = await doctor(n);
      assert.equal(r.code, 0, r.stdout);
      assert.match(
        line(r.stdout, "cache"),
        /warn .*2 records, 1 live; damaged: c2broken \(truncated\); 1 leftover temporary files/,
      );
      assert.match(r.stdout, /1 warning, 0 failures/);
    } finally {
      await n.done();
    }
  },
});

Deno.test({
  ...TEST,
  name: "doctor: readiness file missing and another config sorting first → FAIL",
  async fn() {
    const n = await healthyNode({ readinessindicatorfile: "/run/flannel/subnet.env" });
    try {
      let r = await doctor(n);
      assert.match(
        line(r.stdout, "readiness"),
        /FAIL .*\/run\/flannel\/subnet\.env does not exist/,
      );
      await Deno.mkdir(`${n.h.root}/run/flannel`, { recursive: true });
      await Deno.writeTextFile(`${n.h.root}/run/flannel/subnet.env`, "x");
      await Deno.writeTextFile(
        `${n.h.confDir}/00-cilium.conflist`,
        JSON.stringify({ cniVersion: "1.0.0", name: "c", plugins: [{ type: "cilium-cni" }] }),
      );
      r = await doctor(n);
      assert.match(line(r.stdout, "readiness"), /ok /);
      assert.match(line(r.stdout, "config order"), /FAIL .*loads 00-cilium\.conflist first/);
      assert.equal(r.code, 1);
    } finally {
      await n.done();
    }
  },
});

Deno.test("doctor: usage and formatting", async () => {
  let out = "";
  let err = "";
  const io = { stdout: (s: string) => void (out += s), stderr: (s: string) => void (err += s) };
  assert.equal(await runDoctor(["--help"], io), 0);
  assert.equal(out, DOCTOR_USAGE);
  assert.equal(await runDoctor(["--host-root", "relative"], io), 2);
  assert.match(err, /absolute path/);
  assert.equal(await runDoctor(["--nope"], io), 2);
  assert.equal(
    formatDoctorReport({
      hostRoot: "/",
      checks: [
        { name: "binary", status: "ok", message: "x" },
        { name: "cache", status: "warn", message: "y\u001b[31m", hint: "z" },
      ],
    }),
    "Manifold doctor (host root /)\n  ok    binary  x\n  warn  cache   y\\x1b[31m\n          " +
      "      hint: z\n\n1 ok, 1 warning, 0 failures\n",
  );
});
