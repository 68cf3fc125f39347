/**
 * The per-call plugin's TLS to the API through OpenSSL (lib/k8s/http1/native_tls.ts), seen from
 * outside: a real ADD (scripts/manifold, real delegates, a real netns) whose pod is read from
 * the HTTPS stand-in runs under `strace -f`, and never initialises AWS-LC, the crypto of Deno's
 * own TLS, whose first use in a process costs ≈ 25 ms of CPU Jitter Entropy. AWS-LC's random
 * generator announces its start with two syscalls and no user-space code of the plugin or its
 * Go delegates makes them: the VM-snapshot probe `stat("/dev/sysgenid")` and the fork-safety
 * page `madvise(…, MADV_WIPEONFORK)`. With `MANIFOLD_NATIVE_TLS=0` (Deno's TLS) both appear,
 * so the test can see the difference. Needs root and strace.
 */

import assert from "node:assert/strict";
import { isRoot } from "../support/netns.ts";
import { done, expectOk, NS, POD, world } from "../support/world.ts";

const hasStrace = (() => {
  try {
    return new Deno.Command("strace", { args: ["-V"], stdout: "null", stderr: "null" })
      .outputSync().success;
  } catch {
    return false;
  }
})();
if (!hasStrace) console.log("native TLS plugin test skipped: strace is not installed");

/** AWS-LC's start in an `strace -f` log (module doc), and libssl.so.3 being opened. */
function markers(log: string): { awsLc: string[]; libssl: boolean } {
  const lines = log.split("\n");
  return {
    awsLc: lines.filter((l) => /"\/dev\/sysgenid"|MADV_WIPEONFORK/.test(l)),
    libssl: lines.some((l) => /open\w*\(.*libssl\.so\.3/.test(l) && !/ENOENT/.test(l)),
  };
}

Deno.test({
  name:
    "native TLS: a plugin ADD reading its pod from the API never starts AWS-LC (MANIFOLD_NATIVE_TLS=0 does)",
  ignore: !isRoot() || !hasStrace,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const w = await world({ annotations: { "k8s.v1.cni.cncf.io/networks": "bridge-net" } });
    try {
      const seen: Record<string, { awsLc: string[]; libssl: boolean }> = {};
      for (const [name, env] of [["native", {}], ["deno", { MANIFOLD_NATIVE_TLS: "0" }]] as const) {
        const log = `${w.dirs.kube}/strace-${name}.log`;
        const before = w.api.requests.length;
        const add = await w.call("ADD", {
          env,
          launcher: ["strace", "-f", "-qq", "-e", "trace=%file,madvise", "-o", log],
        });
        expectOk(add, `ADD (${name})`);
        const reqs = w.api.requests.slice(before);
        assert.ok(
          reqs.some((r) => r.method === "GET" && r.path === `/api/v1/namespaces/${NS}/pods/${POD}`),
          `the pod was read from the API (${name})`,
        );
        assert.ok(reqs.every((r) => r.status < 400), JSON.stringify(reqs));
        seen[name] = markers(await Deno.readTextFile(log));
        expectOk(await w.call("DEL"), `DEL (${name})`);
      }
      assert.deepEqual(seen.native.awsLc, [], "AWS-LC never started with OpenSSL's TLS");
      assert.ok(seen.native.libssl, "libssl.so.3 was opened");
      assert.ok(
        seen.deno.awsLc.some((l) => l.includes("/dev/sysgenid")) &&
          seen.deno.awsLc.some((l) => l.includes("MADV_WIPEONFORK")),
        `AWS-LC's start is visible with Deno's TLS: ${JSON.stringify(seen.deno.awsLc)}`,
      );
    } finally {
      await done(w);
    }
  },
});
