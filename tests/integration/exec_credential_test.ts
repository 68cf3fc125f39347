/**
 * The plugin process with a kubeconfig whose user is an exec credential plugin (what managed
 * clusters use): ADD reads the pod and NADs and publishes network-status with the plugin's
 * token; a failing exec plugin fails ADD with code 5 naming the command and the user entry,
 * before any delegate runs. Real delegates, real netns; needs root.
 */

import assert from "node:assert/strict";
import { done, expectOk, podStatus, world } from "../support/world.ts";

async function execKubeconfig(
  dir: string,
  server: string,
  caFile: string,
  script: string,
): Promise<string> {
  await Deno.writeTextFile(`${dir}/cred.sh`, script, { mode: 0o755 });
  const path = `${dir}/exec.kubeconfig`;
  await Deno.writeTextFile(
    path,
    JSON.stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [{ name: "c", cluster: { server, "certificate-authority": caFile } }],
      users: [{
        name: "cloud-user",
        user: {
          exec: {
            apiVersion: "client.authentication.k8s.io/v1",
            command: "./cred.sh",
            interactiveMode: "Never",
          },
        },
      }],
      contexts: [{ name: "x", context: { cluster: "c", user: "cloud-user" } }],
      "current-context": "x",
    }),
  );
  return path;
}

Deno.test("plugin: an exec credential kubeconfig authenticates ADD; a failing one is code 5", async () => {
  const w = await world({ annotations: { "k8s.v1.cni.cncf.io/networks": "bridge-net" } });
  try {
    const kc = await execKubeconfig(
      w.dirs.kube,
      w.api.url,
      w.api.caCertPath,
      `#!/bin/sh
echo run >> "${w.dirs.kube}/runs"
if [ -f "${w.dirs.kube}/fail" ]; then echo "cred.sh: session expired" >&2; exit 2; fi
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s"}}' "${w.api.token}"
`,
    );
    w.conf.kubeconfig = kc;
    const add = await w.call("ADD");
    expectOk(add, "ADD");
    assert.equal(podStatus(w).length, 2);
    const seen = w.api.requests.filter((r) => r.status < 300);
    assert.ok(seen.some((r) => r.method === "PATCH" && r.user === w.api.tokenUser));
    assert.ok(
      w.api.requests.every((r) => r.user === w.api.tokenUser),
      "every request authenticated",
    );
    assert.equal((await Deno.readTextFile(`${w.dirs.kube}/runs`)).trim().split("\n").length, 1);
    expectOk(await w.call("DEL"), "DEL");

    await Deno.writeTextFile(`${w.dirs.kube}/fail`, "");
    const before = w.api.requests.length;
    const failed = await w.call("ADD", { containerId: `${w.containerId}x` });
    assert.notEqual(failed.code, 0);
    const err = JSON.parse(failed.stdout);
    assert.equal(err.code, 5, failed.stdout);
    assert.match(
      err.msg,
      /Exec credential plugin ".*cred\.sh" of kubeconfig user "cloud-user" exited with code 2/,
    );
    assert.match(failed.stderr, /cred\.sh: session expired/, "the plugin's stderr passes through");
    assert.equal(w.api.requests.length, before, "no request without a credential");
    assert.deepEqual(await w.leases(), [], "no delegate ran");
  } finally {
    await done(w);
  }
});
