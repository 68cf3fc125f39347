/**
 * Tests of lib/install/kubeconfig.ts, and the end-to-end token rotation (Multus #852): the
 * installer writes the plugin's kubeconfig against the API stand-in, the projected token
 * rotates between two plugin ADDs (run as processes, with a stand-in delegate so no netns
 * or root is needed), and both succeed.
 */

import assert from "node:assert/strict";
import { buildPluginKubeconfig, runInstaller, serverFromEnv } from "../../lib/install/mod.ts";
import { loadKubeconfig } from "../../lib/k8s/kubeconfig/mod.ts";
import { startKubeApi } from "../support/kube_api.ts";
import { k8sArgs, runPlugin } from "../support/plugin.ts";
import { fakeHost, parseGenerated, readIf, waitFor } from "./fixtures.ts";

Deno.test("serverFromEnv: in-cluster URL, IPv6 bracketed, undefined outside a pod", () => {
  assert.equal(
    serverFromEnv({ KUBERNETES_SERVICE_HOST: "10.96.0.1", KUBERNETES_SERVICE_PORT: "443" }),
    "https://10.96.0.1:443",
  );
  assert.equal(
    serverFromEnv({ KUBERNETES_SERVICE_HOST: "fd00::1", KUBERNETES_SERVICE_PORT: "6443" }),
    "https://[fd00::1]:6443",
  );
  assert.equal(serverFromEnv({ KUBERNETES_SERVICE_HOST: "10.96.0.1" }), undefined);
  assert.equal(serverFromEnv({}), undefined);
});

Deno.test("buildPluginKubeconfig: tokenFile and CA by path, loadable by the plugin", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(
      `${dir}/ca.crt`,
      "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n",
    );
    const kc = buildPluginKubeconfig({
      server: "https://10.96.0.1:443",
      tokenFile: `${dir}/token`,
      certificateAuthority: `${dir}/ca.crt`,
    });
    await Deno.writeTextFile(`${dir}/kubeconfig`, JSON.stringify(kc));
    const conn = await loadKubeconfig(`${dir}/kubeconfig`);
    assert.equal(conn.server, "https://10.96.0.1:443");
    assert.equal(conn.tokenFile, `${dir}/token`);
    assert.equal(conn.token, undefined);
    assert.match(conn.caCertPem!, /BEGIN CERTIFICATE/);
    const noCa = buildPluginKubeconfig({ server: "https://s:1", tokenFile: "/t" });
    assert.deepEqual((noCa.clusters as { cluster: unknown }[])[0].cluster, {
      server: "https://s:1",
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/** A delegate that needs no netns: prints a 1.0.0 result for ADD, nothing otherwise. */
const FAKE_DELEGATE = `#!/bin/sh
cat >/dev/null
if [ "$CNI_COMMAND" = ADD ]; then
  printf '{"cniVersion":"1.0.0","interfaces":[{"name":"%s","mac":"02:00:00:00:00:01","sandbox":"%s"}],"ips":[{"address":"10.9.0.2/24","interface":0}]}' "$CNI_IFNAME" "$CNI_NETNS"
fi
`;

Deno.test({
  name: "token rotation between two plugin calls: both succeed (Multus #852)",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const h = await fakeHost();
    const api = await startKubeApi();
    const ac = new AbortController();
    let installer: Promise<unknown> | undefined;
    try {
      await Deno.writeTextFile(`${h.binDir}/mf-fake`, FAKE_DELEGATE);
      await Deno.chmod(`${h.binDir}/mf-fake`, 0o755);
      await Deno.writeTextFile(
        `${h.confDir}/10-fake.conflist`,
        JSON.stringify({ cniVersion: "1.0.0", name: "fake-net", plugins: [{ type: "mf-fake" }] }),
      );
      await Deno.writeTextFile(`${h.saDir}/token`, api.token);
      await Deno.writeTextFile(`${h.saDir}/ca.crt`, api.caCertPem);
      api.addPod({ namespace: "tenant-a", name: "web-0", uid: "uid-1" });

      // The installer keeps running (as in the DaemonSet) so it mirrors the rotated token.
      installer = runInstaller({
        cniConfDir: h.confDir,
        kubeconfig: { server: api.url, serviceAccountDir: h.saDir },
        pluginConf: { cniDir: `${h.root}/cache`, binDir: h.binDir, logLevel: "debug" },
        pollIntervalMs: 20,
        signal: ac.signal,
      });
      installer.catch(() => {});
      const { list } = parseGenerated(await waitFor("config", () => readIf(h.config)));

      const add = (containerId: string) =>
        runPlugin({
          command: "ADD",
          config: { ...list.plugins[0], name: list.name, cniVersion: list.cniVersion },
          containerId,
          netns: "/var/run/netns/mf-none-rotation",
          ifName: "eth0",
          args: k8sArgs("tenant-a", "web-0", containerId, "uid-1"),
          path: h.binDir,
        });

      const first = await add("c1rotation0001");
      assert.equal(first.code, 0, `${first.stdout}\n${first.stderr.slice(-2000)}`);

      // kubelet rotates the projected token; the old one stops being accepted.
      const rotated = "rotated-token-" + crypto.randomUUID();
      api.setTokens([rotated]);
      await Deno.writeTextFile(`${h.saDir}/.token.new`, rotated);
      await Deno.rename(`${h.saDir}/.token.new`, `${h.saDir}/token`);
      await waitFor(
        "rotated token mirrored to the host",
        async () => (await readIf(`${h.confDir}/manifold.d/token`)) === rotated,
      );

      const before = api.requests.length;
      const second = await add("c2rotation0002");
      assert.equal(second.code, 0, `${second.stdout}\n${second.stderr.slice(-2000)}`);
      const later = api.requests.slice(before);
      assert.ok(later.length > 0, "the second call used the API");
      assert.ok(later.every((r) => r.status !== 401), "no request was rejected");
      assert.ok(
        later.some((r) =>
          r.method === "PATCH" && r.path.endsWith("/pods/web-0/status") &&
          r.status === 200
        ),
        "network-status written with the rotated token",
      );
      const pod = api.getPod("tenant-a", "web-0") as {
        metadata: { annotations?: Record<string, string> };
      };
      assert.ok(pod.metadata.annotations?.["k8s.v1.cni.cncf.io/network-status"]);
    } finally {
      ac.abort();
      await installer?.catch(() => {});
      await api.stop();
      await h.cleanup();
    }
  },
});
