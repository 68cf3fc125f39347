/**
 * Exec credential plugins (kubeconfig `users[].user.exec`): a small shell script stands in for
 * `aws eks get-token` / `gke-gcloud-auth-plugin`, prints an ExecCredential and records how it
 * was run; the client uses its token (or client certificate) against the API stand-in.
 */
import assert from "node:assert/strict";
import {
  ExecCredentialSource,
  KubeClient,
  type KubeConnection,
  KubeError,
  loadKubeconfig,
  watchNetworkAttachmentDefinitions,
} from "../../lib/k8s/mod.ts";
import { kubeErrorCode } from "../../lib/multinet/api_errors.ts";
import { type KubeApiStandIn, startKubeApi } from "../support/kube_api.ts";
import { until } from "../support/wait.ts";

const V1 = "client.authentication.k8s.io/v1";
const V1BETA1 = "client.authentication.k8s.io/v1beta1";

/**
 * Writes `<dir>/cred.sh`: appends its args, `$GREETING` and `$KUBERNETES_EXEC_INFO` to
 * `<dir>/runs`, then prints an ExecCredential whose status is `<dir>/status.json`
 * (or fails with `<dir>/fail` as exit code and a line on stderr).
 */
async function writePlugin(dir: string, apiVersion = V1): Promise<string> {
  const path = `${dir}/cred.sh`;
  await Deno.writeTextFile(
    path,
    `#!/bin/sh
printf '%s|%s|%s\\n' "$*" "$GREETING" "$KUBERNETES_EXEC_INFO" >> "${dir}/runs"
if [ -f "${dir}/fail" ]; then echo "cred.sh: no session, run login" >&2; exit "$(cat "${dir}/fail")"; fi
printf '{"apiVersion":"${apiVersion}","kind":"ExecCredential","status":%s}\\n' "$(cat "${dir}/status.json")"
`,
    { mode: 0o755 },
  );
  return path;
}

async function runs(dir: string): Promise<string[][]> {
  const text = await Deno.readTextFile(`${dir}/runs`).catch(() => "");
  return text.split("\n").filter((l) => l).map((l) => l.split("|"));
}

/** A connection to the stand-in authenticated by `<api.dir>/cred.sh` only. */
function execConnection(api: KubeApiStandIn, apiVersion = V1): KubeConnection {
  return {
    server: api.url,
    caCertPem: api.caCertPem,
    insecureSkipTlsVerify: false,
    exec: {
      command: `${api.dir}/cred.sh`,
      args: [],
      env: {},
      apiVersion,
      provideClusterInfo: false,
      user: "u",
    },
  };
}

function kubeconfig(server: string, caFile: string, exec: Record<string, unknown>) {
  return JSON.stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name: "c", cluster: { server, "certificate-authority": caFile } }],
    users: [{ name: "eks-user", user: { exec } }],
    contexts: [{ name: "ctx", context: { cluster: "c", user: "eks-user" } }],
    "current-context": "ctx",
  });
}

Deno.test("exec: the plugin's token authenticates; args, env and KUBERNETES_EXEC_INFO are passed", async () => {
  const api = await startKubeApi();
  try {
    api.addPod({ namespace: "default", name: "p" });
    await writePlugin(api.dir);
    await Deno.writeTextFile(`${api.dir}/status.json`, JSON.stringify({ token: api.token }));
    await Deno.writeTextFile(
      `${api.dir}/kc.json`,
      kubeconfig(api.url, api.caCertPath, {
        apiVersion: V1,
        command: "./cred.sh", // relative to the kubeconfig's directory
        args: ["token", "--cluster", "demo"],
        env: [{ name: "GREETING", value: "hello" }],
        provideClusterInfo: true,
        interactiveMode: "Never",
      }),
    );
    const connection = await loadKubeconfig(`${api.dir}/kc.json`);
    assert.equal(connection.exec?.command, `${api.dir}/./cred.sh`);
    assert.equal(connection.token, undefined);
    using kube = new KubeClient({ connection });
    assert.equal((await kube.getPod("default", "p")).metadata.name, "p");
    await kube.getPod("default", "p");
    assert.deepEqual(api.requests.map((r) => r.user), [api.tokenUser, api.tokenUser]);
    const seen = await runs(api.dir);
    assert.equal(seen.length, 1, "no expiry: the credential is reused");
    assert.equal(seen[0][0], "token --cluster demo");
    assert.equal(seen[0][1], "hello");
    const info = JSON.parse(seen[0][2]);
    assert.equal(info.apiVersion, V1);
    assert.equal(info.kind, "ExecCredential");
    assert.equal(info.spec.interactive, false);
    assert.equal(info.spec.cluster.server, api.url);
    assert.equal(atob(info.spec.cluster["certificate-authority-data"]), api.caCertPem);
  } finally {
    await api.stop();
  }
});

Deno.test("exec: an expired credential runs the plugin again; a 401 renews it once", async () => {
  const api = await startKubeApi();
  try {
    api.addPod({ namespace: "default", name: "p" });
    await writePlugin(api.dir, V1BETA1);
    const status = (token: string, expires: string) =>
      Deno.writeTextFile(
        `${api.dir}/status.json`,
        JSON.stringify({ token, expirationTimestamp: expires }),
      );
    const connection = execConnection(api, V1BETA1);
    // Expiry, with a controlled clock.
    let now = Date.parse("2030-01-01T00:00:00Z");
    const source = new ExecCredentialSource(connection.exec!, {
      cluster: connection,
      now: () => now,
    });
    await status("t1", "2030-01-01T00:10:00Z");
    assert.equal((await source.get()).token, "t1");
    assert.equal((await source.get()).expiresAt, Date.parse("2030-01-01T00:10:00Z"));
    assert.equal((await runs(api.dir)).length, 1);
    now = Date.parse("2030-01-01T00:10:00Z");
    await status("t2", "2030-01-01T00:20:00Z");
    assert.equal((await source.get()).token, "t2", "expired: run again");
    assert.equal((await runs(api.dir)).length, 2);
    assert.equal(JSON.parse((await runs(api.dir))[0][2]).spec.cluster, undefined);

    // The client, with the real clock: an already expired credential is renewed before
    // every request (two requests, two runs); a credential without expiry is kept.
    await Deno.remove(`${api.dir}/runs`);
    await status(api.token, "2000-01-01T00:00:00Z");
    using kube = new KubeClient({ connection });
    await kube.getPod("default", "p");
    await kube.getPod("default", "p");
    assert.deepEqual(api.requests.map((r) => r.status), [200, 200]);
    assert.equal((await runs(api.dir)).length, 2);
  } finally {
    await api.stop();
  }
});

Deno.test("exec: a 401 runs the plugin again and retries once with the new token", async () => {
  const api = await startKubeApi();
  try {
    api.addPod({ namespace: "default", name: "p" });
    await writePlugin(api.dir);
    await Deno.writeTextFile(`${api.dir}/status.json`, JSON.stringify({ token: api.token }));
    const connection = execConnection(api);
    using kube = new KubeClient({ connection });
    await kube.getPod("default", "p");
    // The token is revoked server-side; the plugin now hands out a new one.
    api.setTokens(["rotated"]);
    await Deno.writeTextFile(`${api.dir}/status.json`, JSON.stringify({ token: "rotated" }));
    await kube.getPod("default", "p");
    assert.deepEqual(api.requests.map((r) => r.status), [200, 401, 200]);
    assert.equal((await runs(api.dir)).length, 2);
  } finally {
    await api.stop();
  }
});

Deno.test("exec: a client certificate from the plugin is used for mTLS", async () => {
  const api = await startKubeApi();
  try {
    api.addPod({ namespace: "default", name: "p" });
    await writePlugin(api.dir);
    await Deno.writeTextFile(
      `${api.dir}/status.json`,
      JSON.stringify({
        clientCertificateData: await Deno.readTextFile(api.clientCertPath),
        clientKeyData: await Deno.readTextFile(api.clientKeyPath),
      }),
    );
    using kube = new KubeClient({ connection: execConnection(api) });
    await kube.getPod("default", "p");
    assert.deepEqual(api.requests.map((r) => r.user), [api.clientCertUser]);
  } finally {
    await api.stop();
  }
});

Deno.test("exec: failures are clear KubeErrors naming the command and the user (CNI code 5)", async (t) => {
  const dir = await Deno.makeTempDir({ prefix: "manifold-exec-test-" });
  try {
    const exec = {
      command: await writePlugin(dir),
      args: [],
      env: {},
      apiVersion: V1,
      provideClusterInfo: false,
      user: "eks-user",
    };
    const get = (e: typeof exec & { installHint?: string }) =>
      new ExecCredentialSource(e, {
        cluster: { server: "https://127.0.0.1:1", insecureSkipTlsVerify: false },
      }).get();
    const fails = async (p: Promise<unknown>, includes: string, command = exec.command) => {
      const err = await p.then(() => undefined, (e) => e);
      assert.ok(err instanceof KubeError, `expected a KubeError, got ${err}`);
      assert.equal(err.kind, "credentials");
      assert.equal(kubeErrorCode(err), 5);
      assert.ok(err.message.includes(`"${command}"`), err.message);
      assert.ok(err.message.includes(`user "eks-user"`), err.message);
      assert.ok(err.message.includes(includes), `"${err.message}" should include "${includes}"`);
    };
    await t.step("non-zero exit", async () => {
      await Deno.writeTextFile(`${dir}/fail`, "3");
      await fails(get(exec), "exited with code 3");
      await Deno.remove(`${dir}/fail`);
    });
    await t.step("command not found, with the install hint", async () => {
      await fails(
        get({ ...exec, command: "manifold-no-such-plugin", installHint: "install it with apt" }),
        "install it with apt",
        "manifold-no-such-plugin",
      );
    });
    await t.step("no token nor certificate", async () => {
      await Deno.writeTextFile(`${dir}/status.json`, "{}");
      await fails(get(exec), "neither a token nor a client certificate");
    });
    await t.step("another apiVersion", async () => {
      await Deno.writeTextFile(`${dir}/status.json`, `{"token":"x"}`);
      await fails(get({ ...exec, apiVersion: V1BETA1 }), `answered with apiVersion ${V1}`);
    });
    await t.step("not JSON", async () => {
      await Deno.writeTextFile(`${dir}/status.json`, "{");
      await fails(get(exec), "did not print JSON");
    });
    await t.step("through the client: no request is sent", async () => {
      await Deno.writeTextFile(`${dir}/fail`, "1");
      using kube = new KubeClient({
        connection: { server: "https://127.0.0.1:1", insecureSkipTlsVerify: false, exec },
      });
      await fails(kube.getPod("default", "p"), "exited with code 1");
      assert.equal(kube.requestCount, 0);
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("exec: a watch-only client renews a revoked credential at the watch's 401, once per credential", async () => {
  const api = await startKubeApi();
  const stop = new AbortController();
  try {
    await writePlugin(api.dir);
    await Deno.writeTextFile(`${api.dir}/status.json`, JSON.stringify({ token: api.token }));
    using kube = new KubeClient({ connection: execConnection(api) });
    let lists = 0;
    const done = watchNetworkAttachmentDefinitions(kube, {
      replace: () => Promise.resolve(lists++),
      apply: () => Promise.resolve(),
      progress: () => Promise.resolve(),
    }, { signal: stop.signal, minBackoffMs: 20, maxBackoffMs: 50 });
    await until(() => api.nadWatchCount === 1, "the first watch");
    assert.equal((await runs(api.dir)).length, 1);

    // The token is revoked server-side; the plugin now hands out a new one. Only watches
    // follow: nothing else would notice.
    api.setTokens(["rotated"]);
    await Deno.writeTextFile(`${api.dir}/status.json`, JSON.stringify({ token: "rotated" }));
    api.endNadWatches({ clean: false });
    await until(
      () => api.nadWatchCount === 1,
      "watching again with the renewed credential",
      10_000,
    );
    const watches = api.requests.filter((r) => r.query.includes("watch"));
    assert.deepEqual(watches.map((r) => r.status), [200, 401, 200]);
    assert.equal((await runs(api.dir)).length, 2, "the plugin ran once more, not per attempt");
    assert.equal(lists, 1, "resumed from the kept resourceVersion, no re-list");
    stop.abort();
    await done;
  } finally {
    stop.abort();
    await api.stop();
  }
});
