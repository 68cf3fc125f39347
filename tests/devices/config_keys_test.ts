/** The device keys of Manifold's configuration (lib/multinet/config.ts): defaults and overrides. */

import assert from "node:assert/strict";
import { CniError } from "../../lib/cni/errors.ts";
import { parseManifoldConf } from "../../lib/multinet/config.ts";

const base = { cniVersion: "1.0.0", type: "manifold", clusterNetwork: "/etc/cni/net.d/10.conf" };

Deno.test("device keys default to kubelet's and the spec's paths", () => {
  const c = parseManifoldConf(base);
  assert.equal(c.podResourcesSocket, "/var/lib/kubelet/pod-resources/kubelet.sock");
  assert.equal(c.podResourcesTimeoutMs, 5000);
  assert.equal(
    c.deviceCheckpointFile,
    "/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint",
  );
  assert.equal(c.sysfsRoot, "/sys");
  assert.equal(c.deviceInfoDir, "/var/run/k8s.cni.cncf.io/devinfo");
});

Deno.test("device keys can point elsewhere (tests use temp dirs); bad values are code 7", () => {
  const c = parseManifoldConf({
    ...base,
    podResourcesSocket: "/tmp/k.sock",
    podResourcesTimeoutMs: 250,
    deviceCheckpointFile: "/tmp/cp",
    sysfsRoot: "/tmp/sys",
    deviceInfoDir: "/tmp/devinfo",
  });
  assert.deepEqual(
    [
      c.podResourcesSocket,
      c.podResourcesTimeoutMs,
      c.deviceCheckpointFile,
      c.sysfsRoot,
      c.deviceInfoDir,
    ],
    ["/tmp/k.sock", 250, "/tmp/cp", "/tmp/sys", "/tmp/devinfo"],
  );
  for (const bad of [{ sysfsRoot: "" }, { podResourcesTimeoutMs: 0 }, { deviceInfoDir: 3 }]) {
    assert.throws(() => parseManifoldConf({ ...base, ...bad }), (e: CniError) => e.code === 7);
  }
});
