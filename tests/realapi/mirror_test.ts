/**
 * `manifold mirror` (a real process, scripts/manifold) against a real kube-apiserver:
 * it converges after its resourceVersion is compacted away in etcd (the re-watch gets
 * `410 Gone`, so it must re-list) and after kube-apiserver restarts on the same port.
 * No root needed. Needs `MANIFOLD_KUBE_APISERVER` (else skipped with one line).
 */

import assert from "node:assert/strict";
import { type KubeApiServer, realApiSuite } from "../support/kube_apiserver.ts";
import { objectPath } from "../support/kube_rest.ts";
import { exists, until } from "../support/wait.ts";
import { ensureNadCrd, startMirror } from "./cluster.ts";

const suite = realApiSuite();

const NAD = (bridge: string) =>
  JSON.stringify({ cniVersion: "1.0.0", type: "bridge", bridge, ipam: { type: "host-local" } });

/** A namespace, a kubeconfig (admin token) and a mirror dir; removed by `cleanup`. */
async function setup(api: KubeApiServer) {
  await ensureNadCrd(api.admin);
  const ns = `mfm-${crypto.randomUUID().slice(0, 8)}`;
  await api.admin.createNamespace(ns);
  const dir = await Deno.makeTempDir({ prefix: "mft-mirror-" });
  const kubeconfig = `${dir}/kubeconfig`;
  await api.writeKubeconfig(kubeconfig);
  return {
    ns,
    kubeconfig,
    mirrorDir: `${dir}/nads`,
    async cleanup() {
      await api.admin.delete("v1", "Namespace", undefined, ns).catch(() => {});
      await Deno.remove(dir, { recursive: true });
    },
  };
}

/** The mirror's state file (README: `{"resourceVersion","syncedAt","listedAt"}`). */
async function mirrorState(file: string): Promise<{ resourceVersion: string }> {
  return JSON.parse(await Deno.readTextFile(file));
}

/**
 * Opens a watch of NADs from `resourceVersion` and returns how the server refuses it: the
 * HTTP status, or the `code` of a first `ERROR` event; 200 when it accepts it.
 */
async function watchAnswer(api: KubeApiServer, resourceVersion: string): Promise<number> {
  const path = `${
    objectPath("k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition")
  }?watch=1&resourceVersion=${resourceVersion}&timeoutSeconds=2`;
  const client = Deno.createHttpClient({ caCerts: [api.caPem] });
  try {
    const res = await fetch(`${api.server}${path}`, {
      headers: { authorization: `Bearer ${api.adminToken}` },
      client,
      signal: AbortSignal.timeout(10_000),
    });
    if (res.status !== 200) {
      await res.body?.cancel();
      return res.status;
    }
    const text = await res.text(); // the server ends it after timeoutSeconds
    const first = text.split("\n").find((l) => l.trim());
    if (!first) return 200;
    const ev = JSON.parse(first);
    return ev.type === "ERROR" ? ev.object.code : 200;
  } finally {
    client.close();
  }
}

/** README: SIGTERM stops the mirror (exit 0), promptly. */
function assertStopped(out: { code: number; stderr: string; ms: number }) {
  const log = out.stderr.split("\n").slice(-40).join("\n");
  assert.equal(out.code, 0, log);
  assert.ok(out.ms < 5000, `mirror took ${out.ms} ms to stop on SIGTERM:\n${log}`);
}

suite.test(
  "mirror converges after its resourceVersion is compacted away (410) and the server restarts",
  async (api) => {
    const s = await setup(api);
    const mirror = startMirror(s.mirrorDir, s.kubeconfig);
    try {
      await api.admin.createNad(s.ns, "old-net", NAD("mfo0"));
      await until(() => exists(mirror.file(s.ns, "old-net")), "old-net mirrored", 20_000);
      await until(() => exists(mirror.stateFile), "mirror state file", 20_000);
      const { resourceVersion: seen } = await mirrorState(mirror.stateFile);

      // The mirror is frozen (SIGSTOP). The server restarts (its watch ends, nothing more
      // is in flight to it), history moves on, etcd compacts it, and the server restarts
      // again: neither its new watch cache nor etcd holds `seen`. Only a re-list can tell
      // the mirror that old-net is gone.
      mirror.child.kill("SIGSTOP");
      await api.restartApiServer();
      await api.admin.delete("k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition", s.ns, "old-net");
      await api.admin.createNad(s.ns, "new-net", NAD("mfn0"));
      await api.admin.patch(
        {
          apiVersion: "k8s.cni.cncf.io/v1",
          kind: "NetworkAttachmentDefinition",
          namespace: s.ns,
          name: "new-net",
        },
        { metadata: { labels: { rev: "2" } } },
      );
      const compacted = await api.compactEtcd();
      assert.ok(compacted > Number(seen), `compacted ${compacted} > seen ${seen}`);
      await api.restartApiServer();
      // The real server refuses a re-watch from the mirror's resourceVersion with 410 (after
      // 429s with Retry-After while the restarted server's watch cache initialises).
      let answer = 429;
      await until(
        async () => (answer = await watchAnswer(api, seen)) !== 429,
        "watch cache ready",
        30_000,
        500,
      );
      assert.equal(answer, 410, "watch from a compacted resourceVersion");

      mirror.child.kill("SIGCONT");
      await until(
        async () =>
          !await exists(mirror.file(s.ns, "old-net")) &&
          await exists(mirror.file(s.ns, "new-net")),
        "mirror re-listed (old-net gone, new-net there)",
        40_000,
        100,
      );
      const copy = JSON.parse(await Deno.readTextFile(mirror.file(s.ns, "new-net")));
      assert.equal(copy.spec.config, NAD("mfn0"));
      assert.ok(Number((await mirrorState(mirror.stateFile)).resourceVersion) >= compacted);
    } finally {
      const out = await mirror.stop();
      await s.cleanup();
      assertStopped(out);
    }
  },
);

suite.test("mirror resumes after a kube-apiserver restart: a NAD created afterwards appears", async (api) => {
  const s = await setup(api);
  const mirror = startMirror(s.mirrorDir, s.kubeconfig);
  try {
    await api.admin.createNad(s.ns, "before-net", NAD("mfb0"));
    await until(() => exists(mirror.file(s.ns, "before-net")), "before-net mirrored", 20_000);
    await api.restartApiServer({ downMs: 1000 });
    await api.admin.createNad(s.ns, "after-net", NAD("mfa0"));
    await until(() => exists(mirror.file(s.ns, "after-net")), "after-net mirrored", 40_000, 100);
    // And it keeps following: a deletion after the restart is applied too.
    await api.admin.delete("k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition", s.ns, "before-net");
    await until(async () => !await exists(mirror.file(s.ns, "before-net")), "deletion", 20_000);
  } finally {
    const out = await mirror.stop();
    await s.cleanup();
    assertStopped(out);
  }
});

suite.end();
