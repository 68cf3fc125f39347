/**
 * Pinned TLS trust (issue 28 §1) against a real kube-apiserver: a man in the middle whose
 * certificate chains to another CA — one the process trusts through `DENO_CERT` — is refused
 * by the per-call plugin (ADD through scripts/manifold), by `manifold daemon`, and by
 * `manifold mirror` (watch streams), because the kubeconfig names the real server's CA and
 * only that CA is trusted. The same ADD with the real server and the same `DENO_CERT`
 * attaches (the set-up is sound). Needs root and `MANIFOLD_KUBE_APISERVER` (else skipped).
 */

import assert from "node:assert/strict";
import { realApiSuite } from "../support/kube_apiserver.ts";
import { startMitm } from "../support/mitm_proxy.ts";
import { startTcpProxy } from "../support/tcp_proxy.ts";
import { linkNames } from "../support/netns.ts";
import { startDaemon } from "../support/daemon.ts";
import { k8sArgs, MANIFOLD, runPlugin } from "../support/plugin.ts";
import { expectOk } from "../support/world.ts";
import { done, ensureNadCrd, POD, realWorld } from "./cluster.ts";

const suite = realApiSuite({ root: true });

const SELECTION = JSON.stringify([{ name: "bridge-net" }]);

async function pointKubeconfig(path: string, server: string): Promise<void> {
  const doc = JSON.parse(await Deno.readTextFile(path));
  doc.clusters[0].cluster.server = server;
  await Deno.writeTextFile(path, JSON.stringify(doc));
}

suite.test("MITM with a DENO_CERT-trusted CA: per-call ADD refused, nothing attached; real server attaches", async (api) => {
  const w = await realWorld(api, { annotations: { "k8s.v1.cni.cncf.io/networks": SELECTION } });
  const mitm = await startMitm(api.server, api.caPem);
  try {
    const denoCert = `${w.dirs.kube}/mitm-ca.pem`;
    await Deno.writeTextFile(denoCert, mitm.ca.certPem);
    await pointKubeconfig(w.kubeconfig, mitm.url);
    const add = await w.call("ADD", { env: { DENO_CERT: denoCert } });
    console.log(add.stdout.trim());
    assert.notEqual(add.code, 0, `ADD through the MITM must fail: ${add.stdout}`);
    const err = add.json as { code: number; msg: string; details?: string };
    assert.match(`${err.msg} ${err.details}`, /certificate/i, add.stdout);
    assert.notEqual(err.code, 11, "a refused certificate is not a transient error");
    assert.equal(mitm.clearBytes(), 0, "no request reached the MITM in clear");
    assert.deepEqual(await linkNames(w.podNetns), [], "nothing attached");

    // The same process set-up against the real server: attaches.
    await pointKubeconfig(w.kubeconfig, api.server);
    expectOk(await w.call("ADD", { env: { DENO_CERT: denoCert } }), "ADD via the real server");
    assert.deepEqual(await linkNames(w.podNetns), ["eth0", "net1"]);
    expectOk(await w.call("DEL"), "DEL");
  } finally {
    mitm.close();
    await done(w);
  }
});

suite.test("MITM with a DENO_CERT-trusted CA: manifold daemon refuses it (ADD through the daemon fails, nothing attached)", async (api) => {
  const w = await realWorld(api, { annotations: { "k8s.v1.cni.cncf.io/networks": SELECTION } });
  const mitm = await startMitm(api.server, api.caPem);
  const denoCert = `${w.dirs.kube}/mitm-ca.pem`;
  await Deno.writeTextFile(denoCert, mitm.ca.certPem);
  await pointKubeconfig(w.kubeconfig, mitm.url);
  const dir = await Deno.makeTempDir({ prefix: "mft-trust-" });
  const d = await startDaemon(dir, w.conf, { env: { DENO_CERT: denoCert } });
  try {
    const add = await runPlugin({
      command: "ADD",
      config: d.conf,
      containerId: w.containerId,
      netns: w.netnsPath,
      args: k8sArgs(w.ns, POD, w.containerId, w.uid),
      path: "/usr/lib/cni",
    });
    console.log(add.stdout.trim());
    assert.notEqual(add.code, 0, `ADD through the daemon and the MITM must fail: ${add.stdout}`);
    assert.match(add.stdout, /certificate/i);
    assert.equal(mitm.clearBytes(), 0, "no request reached the MITM in clear");
    assert.deepEqual(await linkNames(w.podNetns), [], "nothing attached");
  } finally {
    d.kill("SIGTERM");
    await d.exited();
    mitm.close();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
    await done(w);
  }
});

suite.test("MITM with a DENO_CERT-trusted CA: manifold mirror writes nothing and sends nothing in clear", async (api) => {
  await ensureNadCrd(api.admin);
  const ns = `mft-trust-${crypto.randomUUID().slice(0, 8)}`;
  await api.admin.createNamespace(ns);
  await api.admin.createNad(ns, "n1", JSON.stringify({ cniVersion: "1.0.0", type: "bridge" }));
  const mitm = await startMitm(api.server, api.caPem);
  const dir = await Deno.makeTempDir({ prefix: "mft-trust-mirror-" });
  const kubeconfig = `${dir}/kubeconfig`;
  await api.writeKubeconfig(kubeconfig);
  await pointKubeconfig(kubeconfig, mitm.url);
  await Deno.writeTextFile(`${dir}/mitm-ca.pem`, mitm.ca.certPem);
  const child = new Deno.Command(MANIFOLD, {
    args: ["mirror", "--dir", `${dir}/nads`, "--kubeconfig", kubeconfig],
    env: { DENO_CERT: `${dir}/mitm-ca.pem` },
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const output = child.output();
  try {
    // The mirror lists within a second or two when it trusts the server; give it 8 s.
    await new Promise((r) => setTimeout(r, 8000));
    assert.equal(mitm.clearBytes(), 0, "no request reached the MITM in clear");
    const written = await Deno.stat(`${dir}/nads/${ns}/n1.json`).then(() => true, () => false);
    assert.equal(written, false, "the mirror wrote a NAD read through the MITM");
  } finally {
    try {
      child.kill("SIGTERM");
    } catch { /* gone */ }
    const out = await output;
    mitm.close();
    const stderr = new TextDecoder().decode(out.stderr);
    await Deno.remove(dir, { recursive: true }).catch(() => {});
    await api.admin.delete("v1", "Namespace", undefined, ns).catch(() => {});
    console.log(stderr.split("\n").filter((l) => /certificate/i.test(l)).slice(0, 1).join(""));
  }
});

/** Mints a ServiceAccount token bound to a Secret: deleting the Secret revokes the token. */
async function boundToken(
  api: import("../support/kube_apiserver.ts").KubeApiServer,
  ns: string,
  sa: string,
  secret: string,
): Promise<string> {
  const s = await api.admin.create({
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name: secret, namespace: ns },
    stringData: { k: "v" },
  });
  const r = await api.admin.request(
    "POST",
    `/api/v1/namespaces/${ns}/serviceaccounts/${sa}/token`,
    {
      body: {
        apiVersion: "authentication.k8s.io/v1",
        kind: "TokenRequest",
        spec: {
          expirationSeconds: 3600,
          boundObjectRef: { kind: "Secret", apiVersion: "v1", name: secret, uid: s.metadata.uid },
        },
      },
    },
  );
  return r.status.token as string;
}

suite.test("exec credential revoked and replaced: a watch-only client (manifold mirror) re-runs the plugin after the 401 and recovers within 60 s", async (api) => {
  await ensureNadCrd(api.admin);
  const ns = `mft-exec-${crypto.randomUUID().slice(0, 8)}`;
  await api.admin.createNamespace(ns);
  const sa = "mirror-exec";
  await api.admin.create({
    apiVersion: "v1",
    kind: "ServiceAccount",
    metadata: { name: sa, namespace: ns },
  });
  const crb = `${ns}-mirror`;
  await api.admin.create({
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "ClusterRoleBinding",
    metadata: { name: crb },
    roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "cluster-admin" },
    subjects: [{ kind: "ServiceAccount", name: sa, namespace: ns }],
  });
  const first = await boundToken(api, ns, sa, "cred-1");
  const second = await boundToken(api, ns, sa, "cred-2");
  await api.admin.createNad(ns, "n1", JSON.stringify({ cniVersion: "1.0.0", type: "bridge" }));
  const dir = await Deno.makeTempDir({ prefix: "mft-exec-mirror-" });
  await Deno.writeTextFile(`${dir}/token`, first);
  const plugin = `${dir}/cred-plugin.sh`;
  await Deno.writeTextFile(
    plugin,
    `#!/bin/sh\necho run >> '${dir}/runs'\n` +
      `printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s"}}' "$(cat '${dir}/token')"\n`,
    { mode: 0o755 },
  );
  const kubeconfig = `${dir}/kubeconfig`;
  await api.writeKubeconfig(kubeconfig);
  const doc = JSON.parse(await Deno.readTextFile(kubeconfig));
  doc.users[0].user = {
    exec: {
      apiVersion: "client.authentication.k8s.io/v1",
      command: plugin,
      interactiveMode: "Never",
    },
  };
  await Deno.writeTextFile(kubeconfig, JSON.stringify(doc));
  const mirrorDir = `${dir}/nads`;
  const child = new Deno.Command(MANIFOLD, {
    args: ["mirror", "--dir", mirrorDir, "--kubeconfig", kubeconfig],
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const output = child.output();
  const exists = (p: string) => Deno.stat(p).then(() => true, () => false);
  const waitFor = async (p: string, ms: number) => {
    const end = Date.now() + ms;
    while (Date.now() < end) {
      if (await exists(p)) return true;
      await new Promise((r) => setTimeout(r, 250));
    }
    return false;
  };
  try {
    assert.ok(await waitFor(`${mirrorDir}/${ns}/n1.json`, 30_000), "mirrored with the first token");
    // Replace the credential the plugin hands out, then revoke the one the mirror holds.
    await Deno.writeTextFile(`${dir}/token`, second);
    await api.admin.delete("v1", "Secret", ns, "cred-1");
    // The open watch outlives the revocation; a server restart makes the mirror reopen it.
    await api.restartApiServer();
    const restarted = Date.now();
    const old = api.client(first);
    const refused = await old.raw("GET", `/api/v1/namespaces/${ns}`);
    old.close();
    assert.equal(refused.status, 401, "the first token is revoked");
    await api.admin.createNad(ns, "n2", JSON.stringify({ cniVersion: "1.0.0", type: "bridge" }));
    const got = await waitFor(`${mirrorDir}/${ns}/n2.json`, 60_000);
    assert.ok(
      got,
      "the mirror did not recover within 60 s of the restart (still on the revoked token)",
    );
    console.log(`recovered ${Date.now() - restarted} ms after the restart`);
    const runs = (await Deno.readTextFile(`${dir}/runs`)).trim().split("\n").length;
    assert.ok(runs >= 2, `the exec plugin ran ${runs} time(s)`);
  } finally {
    try {
      child.kill("SIGTERM");
    } catch { /* gone */ }
    await output;
    await Deno.remove(dir, { recursive: true }).catch(() => {});
    await api.admin.delete("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", undefined, crb)
      .catch(() => {});
    await api.admin.delete("v1", "Namespace", undefined, ns).catch(() => {});
  }
});

/** Idle bound the black-hole test runs the mirror with (the default is 60 s). */
const TEST_IDLE_MS = Number(Deno.env.get("MANIFOLD_TEST_WATCH_IDLE_MS") ?? "15000");

suite.test("a black-holed watch stream: the mirror never claims freshness it lacks, and the change arrives within 120 s", async (api) => {
  await ensureNadCrd(api.admin);
  const ns = `mft-hole-${crypto.randomUUID().slice(0, 8)}`;
  await api.admin.createNamespace(ns);
  await api.admin.createNad(ns, "n1", JSON.stringify({ cniVersion: "1.0.0", type: "bridge" }));
  const up = new URL(api.server);
  const proxy = startTcpProxy({ hostname: up.hostname, port: Number(up.port) });
  const dir = await Deno.makeTempDir({ prefix: "mft-hole-" });
  const kubeconfig = `${dir}/kubeconfig`;
  await api.writeKubeconfig(kubeconfig);
  await pointKubeconfig(kubeconfig, `https://127.0.0.1:${proxy.port}`);
  const mirrorDir = `${dir}/nads`;
  const env: Record<string, string> = TEST_IDLE_MS === 60_000
    ? {}
    : { MANIFOLD_WATCH_IDLE_TIMEOUT_MS: String(TEST_IDLE_MS) };
  const child = new Deno.Command(MANIFOLD, {
    args: ["mirror", "--dir", mirrorDir, "--kubeconfig", kubeconfig],
    env,
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const output = child.output();
  const exists = (p: string) => Deno.stat(p).then(() => true, () => false);
  const syncedAt = async () => {
    try {
      return Date.parse(JSON.parse(await Deno.readTextFile(`${mirrorDir}/.mirror.json`)).syncedAt);
    } catch {
      return 0;
    }
  };
  try {
    const t = Date.now();
    while (!(await exists(`${mirrorDir}/${ns}/n1.json`))) {
      assert.ok(Date.now() - t < 30_000, "the mirror listed");
      await new Promise((r) => setTimeout(r, 200));
    }
    await new Promise((r) => setTimeout(r, 1000)); // the watch is open
    const holed = proxy.blackhole();
    assert.ok(holed >= 1, "the open watch connection is black-holed");
    const changedAt = Date.now();
    await api.admin.createNad(ns, "n2", JSON.stringify({ cniVersion: "1.0.0", type: "bridge" }));
    // Until n2 arrives, the mirror must not write a syncedAt after the change (it would claim
    // to be current while it is not). Seen twice 0.5 s apart: not the instant of a reopen.
    let falseClaims = 0;
    let arrivedMs = -1;
    while (Date.now() - changedAt < 120_000) {
      const at = await syncedAt();
      if (await exists(`${mirrorDir}/${ns}/n2.json`)) {
        arrivedMs = Date.now() - changedAt;
        break;
      }
      falseClaims = at > changedAt ? falseClaims + 1 : 0;
      assert.ok(
        falseClaims < 2,
        `the mirror claims freshness (syncedAt ${
          new Date(at).toISOString()
        }) without the change made at ${new Date(changedAt).toISOString()}`,
      );
      await new Promise((r) => setTimeout(r, 500));
    }
    assert.ok(arrivedMs >= 0, "the change did not arrive within 120 s");
    console.log(
      `idle bound ${TEST_IDLE_MS} ms: the change arrived ${arrivedMs} ms after it was made`,
    );
    assert.ok(arrivedMs < TEST_IDLE_MS + 30_000, `arrived after ${arrivedMs} ms`);
  } finally {
    try {
      child.kill("SIGTERM");
    } catch { /* gone */ }
    await output;
    await proxy.close();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
    await api.admin.delete("v1", "Namespace", undefined, ns).catch(() => {});
  }
});

/**
 * A TCP front that relays its first `honest` connections to `upstream` untouched and every
 * later one to `mitm` (so a client lists through the real server, then opens its watch
 * through the man in the middle).
 */
function startFront(
  upstream: { hostname: string; port: number },
  mitm: { hostname: string; port: number },
  honest: number,
) {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const open = new Set<Deno.Conn>();
  let n = 0;
  const pipe = async (a: Deno.Conn, b: Deno.Conn) => {
    try {
      await a.readable.pipeTo(b.writable);
    } catch { /* a side went away */ }
  };
  (async () => {
    for await (const c of listener) {
      const target = n++ < honest ? upstream : mitm;
      open.add(c);
      Deno.connect(target).then((u) => {
        open.add(u);
        pipe(c, u);
        pipe(u, c);
      }, () => c.close());
    }
  })().catch(() => {});
  return {
    port: (listener.addr as Deno.NetAddr).port,
    close() {
      try {
        listener.close();
      } catch { /* closed */ }
      for (const c of open) {
        try {
          c.close();
        } catch { /* closed */ }
      }
    },
  };
}

suite.test("MITM with a DENO_CERT-trusted CA on the watch stream only: manifold mirror's watch sends nothing in clear", async (api) => {
  await ensureNadCrd(api.admin);
  const ns = `mft-trust-${crypto.randomUUID().slice(0, 8)}`;
  await api.admin.createNamespace(ns);
  await api.admin.createNad(ns, "n1", JSON.stringify({ cniVersion: "1.0.0", type: "bridge" }));
  const mitm = await startMitm(api.server, api.caPem);
  const up = new URL(api.server);
  const mu = new URL(mitm.url);
  // The list goes through the first connection (the real server); the watch opens another.
  const front = startFront(
    { hostname: up.hostname, port: Number(up.port) },
    { hostname: mu.hostname, port: Number(mu.port) },
    1,
  );
  const dir = await Deno.makeTempDir({ prefix: "mft-trust-watch-" });
  const kubeconfig = `${dir}/kubeconfig`;
  await api.writeKubeconfig(kubeconfig);
  await pointKubeconfig(kubeconfig, `https://127.0.0.1:${front.port}`);
  await Deno.writeTextFile(`${dir}/mitm-ca.pem`, mitm.ca.certPem);
  const child = new Deno.Command(MANIFOLD, {
    args: ["mirror", "--dir", `${dir}/nads`, "--kubeconfig", kubeconfig],
    env: { DENO_CERT: `${dir}/mitm-ca.pem` },
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const output = child.output();
  try {
    const t = Date.now();
    while (!(await Deno.stat(`${dir}/nads/${ns}/n1.json`).then(() => true, () => false))) {
      assert.ok(Date.now() - t < 30_000, "the mirror listed through the real server");
      await new Promise((r) => setTimeout(r, 200));
    }
    await new Promise((r) => setTimeout(r, 5000)); // the watch (re)opens through the MITM
    assert.equal(mitm.clearBytes(), 0, "the watch request reached the MITM in clear");
  } finally {
    try {
      child.kill("SIGTERM");
    } catch { /* gone */ }
    const out = await output;
    front.close();
    mitm.close();
    const stderr = new TextDecoder().decode(out.stderr);
    await Deno.remove(dir, { recursive: true }).catch(() => {});
    await api.admin.delete("v1", "Namespace", undefined, ns).catch(() => {});
    console.log(stderr.split("\n").filter((l) => /certificate/i.test(l)).slice(0, 1).join(""));
  }
});

suite.end();
