/**
 * `ManifoldDaemon.start` failing at its socket (in use by a file, a directory it cannot create)
 * after its watches started: nothing it started may keep running — the pod informer, the NAD
 * watch and the MultiNetworkPolicy agent are stopped before the error is thrown (an embedder
 * keeping its process, e.g. a test, would otherwise keep them forever). API stand-in, no root.
 */

import assert from "node:assert/strict";
import { ManifoldDaemon } from "../../lib/daemon/daemon.ts";
import { NO_OBSERVER } from "../../lib/daemon/observer.ts";
import { KubeClient, loadKubeconfig } from "../../lib/k8s/mod.ts";
import { nullLogger } from "../../lib/log/mod.ts";
import { parseManifoldConf } from "../../lib/multinet/config.ts";
import { startKubeApi } from "../support/kube_api.ts";

Deno.test("daemon: a socket that cannot be created leaves no watch or timer running", async () => {
  const api = await startKubeApi({ clientCertAuth: false });
  const dir = await Deno.makeTempDir();
  let kube: KubeClient | undefined;
  try {
    await api.writeKubeconfig(`${dir}/kc`);
    kube = new KubeClient({ connection: await loadKubeconfig(`${dir}/kc`) });
    await Deno.writeTextFile(`${dir}/file`, "");
    await assert.rejects(
      ManifoldDaemon.start({
        conf: parseManifoldConf({
          cniVersion: "1.0.0",
          name: "manifold",
          type: "manifold",
          cniDir: `${dir}/cache`,
          multiNetworkPolicy: true,
          delegates: [{ cniVersion: "1.0.0", name: "default", type: "bridge" }],
        }),
        socketPath: `${dir}/file/manifold.sock`, // under a regular file: cannot be created
        kube,
        env: {},
        nodeName: "n1",
        observer: NO_OBSERVER,
        logger: nullLogger,
      }),
      /manifold\.sock|file/,
    );
    // Whatever it started would go on watching: end every watch and see none reopened.
    const watches = () => api.requests.filter((r) => r.query.includes("watch")).length;
    await new Promise((r) => setTimeout(r, 500));
    const before = watches();
    api.endPodWatches({ clean: true });
    api.endNadWatches({ clean: true });
    api.endPolicyWatches({ clean: true });
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(watches(), before, "no watch reopened after start failed");
  } finally {
    kube?.close();
    await api.stop();
    await Deno.remove(dir, { recursive: true });
  }
});
