/**
 * `--kubeconfig`, `--context` and `KUBECONFIG` for the subcommands people run, through a real
 * process (scripts/manifold, as a person types it) against the API stand-in. The kubeconfig's
 * current-context points at a server that does not answer: a subcommand that ignored
 * `--context` fails, and one that ignored `--kubeconfig` has no API at all.
 */

import assert from "node:assert/strict";
import { MANIFOLD } from "../support/plugin.ts";
import { type KubeApiStandIn, startKubeApi } from "../support/kube_api.ts";
import {
  AttachmentCache,
  CACHE_SCHEMA_VERSION,
  type CacheRecord,
} from "../../lib/multinet/cache/cache.ts";

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

async function manifold(args: string[], env: Record<string, string> = {}): Promise<Run> {
  const out = await new Deno.Command(MANIFOLD, {
    args,
    clearEnv: true,
    env: { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin", ...env },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

/**
 * A kubeconfig whose current-context `dead` points at a closed port, and whose context
 * `stand-in` reaches the stand-in with its token.
 */
async function writeKubeconfig(api: KubeApiStandIn, path: string): Promise<void> {
  await Deno.writeTextFile(
    path,
    JSON.stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [
        { name: "dead", cluster: { server: "https://127.0.0.1:9" } },
        { name: "si", cluster: { server: api.url, "certificate-authority": api.caCertPath } },
      ],
      users: [{ name: "person", user: { token: api.token } }],
      contexts: [
        { name: "dead", context: { cluster: "dead", user: "person" } },
        { name: "stand-in", context: { cluster: "si", user: "person" } },
      ],
      "current-context": "dead",
    }),
  );
}

async function withApi(fn: (api: KubeApiStandIn, kc: string) => Promise<void>): Promise<void> {
  const api = await startKubeApi();
  try {
    api.addPod({ namespace: "default", name: "web", uid: "uid-web-1" });
    api.addNad({
      namespace: "default",
      name: "net-a",
      config: '{"cniVersion":"1.0.0","type":"bridge"}',
    });
    const kc = `${api.dir}/people.kubeconfig`;
    await writeKubeconfig(api, kc);
    await fn(api, kc);
  } finally {
    await api.stop();
  }
}

const apiCalls = (api: KubeApiStandIn) =>
  api.requests.filter((r) => r.user === api.tokenUser).map((r) => `${r.method} ${r.path}`);

Deno.test("explain --kubeconfig --context reads the pod from that cluster", async () => {
  await withApi(async (api, kc) => {
    const conf = `${api.dir}/00-manifold.conflist`;
    await Deno.writeTextFile(
      conf,
      JSON.stringify({
        cniVersion: "1.0.0",
        name: "manifold",
        plugins: [{
          type: "manifold",
          delegates: [{ cniVersion: "1.0.0", name: "cbr0", type: "bridge" }],
        }],
      }),
    );
    const args = ["explain", "--config", conf, "--pod", "default/web", "--json"];
    const r = await manifold([...args, "--kubeconfig", kc, "--context", "stand-in"]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(JSON.parse(r.stdout).pod.uid, "uid-web-1");
    assert.deepEqual(apiCalls(api), ["GET /api/v1/namespaces/default/pods/web"]);
    // KUBECONFIG (a list with a missing file) and --context.
    const viaEnv = await manifold([...args, "--context", "stand-in"], {
      KUBECONFIG: `${api.dir}/missing:${kc}`,
    });
    assert.equal(viaEnv.code, 0, viaEnv.stderr);
    // Without --context, the current-context's dead server is used: the flag matters.
    const dead = await manifold([...args, "--kubeconfig", kc]);
    assert.equal(dead.code, 1);
    assert.match(dead.stderr, /127\.0\.0\.1:9|connection/);
    // --context without a kubeconfig is refused with a clear message.
    const lone = await manifold([...args, "--context", "stand-in"]);
    assert.equal(lone.code, 1);
    assert.match(lone.stderr, /--context needs a kubeconfig/);
  });
});

Deno.test("doctor --kubeconfig --context checks that cluster's API and permissions", async () => {
  await withApi(async (api, kc) => {
    const root = await Deno.makeTempDir({ prefix: "manifold-doctor-root-" });
    try {
      const r = await manifold([
        "doctor",
        "--host-root",
        root,
        "--json",
        "--kubeconfig",
        kc,
        "--context",
        "stand-in",
        "--libmnl",
        "/nonexistent/libmnl.so",
      ]);
      const checks = JSON.parse(r.stdout).checks as { name: string; status: string }[];
      const byName = Object.fromEntries(checks.map((c) => [c.name, c.status]));
      assert.equal(byName["kubeconfig"], "ok", r.stdout);
      assert.equal(byName["api"], "ok", r.stdout);
      assert.ok(apiCalls(api).includes("GET /version"), JSON.stringify(apiCalls(api)));
    } finally {
      await Deno.remove(root, { recursive: true });
    }
  });
});

Deno.test("mirror --kubeconfig --context (and KUBECONFIG) lists that cluster's NADs", async () => {
  await withApi(async (api, kc) => {
    const dir = `${api.dir}/nads`;
    const r = await manifold([
      "mirror",
      "--once",
      "--dir",
      dir,
      "--kubeconfig",
      kc,
      "--context",
      "stand-in",
    ]);
    assert.equal(r.code, 0, r.stderr);
    assert.ok(await Deno.stat(`${dir}/default/net-a.json`));
    const viaEnv = await manifold(["mirror", "--once", "--dir", dir, "--context", "stand-in"], {
      KUBECONFIG: kc,
    });
    assert.equal(viaEnv.code, 0, viaEnv.stderr);
    assert.equal(
      apiCalls(api).filter((c) => c.endsWith("/network-attachment-definitions")).length,
      2,
    );
    const unknown = await manifold(["mirror", "--once", "--dir", dir, "--context", "nope"], {
      KUBECONFIG: kc,
    });
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /no context named "nope"/);
  });
});

Deno.test("inspect --pod --kubeconfig --context shows the live pod's sandbox (its UID)", async () => {
  await withApi(async (api, kc) => {
    const record = (containerId: string, uid: string, createdAt: string, netns: string) =>
      ({
        schemaVersion: CACHE_SCHEMA_VERSION,
        containerId,
        netns,
        ifName: "eth0",
        pod: { namespace: "default", name: "web", uid },
        cniVersion: "1.1.0",
        createdAt,
        attachments: [],
      }) as CacheRecord;
    const dir = `${api.dir}/cache`;
    const cache = new AttachmentCache(dir);
    // The newest record is a leftover of an earlier pod "web" (its netns is gone); the live
    // pod (uid-web-1) has the older one, in this process's own network namespace.
    await cache.write(
      record("c-old", "uid-web-0", "2026-03-02T00:00:00.000Z", "/run/netns/mfk-gone"),
    );
    await cache.write(
      record("c-live", "uid-web-1", "2026-03-01T00:00:00.000Z", "/proc/self/ns/net"),
    );
    const args = ["inspect", "--pod", "default/web", "--cni-dir", dir, "--json"];
    const newest = await manifold(args);
    assert.equal(newest.code, 1, "without an API: the newest sandbox, whose netns is gone");
    assert.match(newest.stderr, /sandbox c-old/);
    const r = await manifold([...args, "--kubeconfig", kc, "--context", "stand-in"]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(JSON.parse(r.stdout).sandbox.containerId, "c-live");
    assert.deepEqual(apiCalls(api), ["GET /api/v1/namespaces/default/pods/web"]);
    const viaEnv = await manifold([...args, "--context", "stand-in"], { KUBECONFIG: kc });
    assert.equal(viaEnv.code, 0, viaEnv.stderr);
    // Only the earlier pod's sandbox is cached: said so, naming the live UID.
    await cache.remove("c-live", "eth0");
    const stale = await manifold([...args, "--kubeconfig", kc, "--context", "stand-in"]);
    assert.equal(stale.code, 1);
    assert.match(stale.stderr, /no sandbox of the live pod default\/web \(uid uid-web-1\)/);
    // --kubeconfig does not go with --netns.
    const usage = await manifold(["inspect", "--netns", "x", "--kubeconfig", kc]);
    assert.equal(usage.code, 2);
    assert.match(usage.stderr, /--kubeconfig only goes with --pod/);
  });
});
