/**
 * Secrets never reach the logs: ADD/DEL through the real plugin process with
 * `logLevel: "debug"`, a `logFile` and stderr logging, with secrets everywhere Manifold
 * sees them — the bearer token of the kubeconfig's token file, `token`/`password`/PEM
 * client key/kubeconfig content in the stdin config, `token`/`password`/`client-key-data`
 * in NAD configs, a secret in the selection's `cni-args`, a delegate that echoes its whole
 * config in its error (stdout JSON and stderr), and API calls failing with 401. The log
 * file and every stderr are grepped for each secret value: none may appear, and
 * `[redacted]` must. The CNI error on stdout and the pod's events are checked too. Needs
 * root.
 */

import assert from "node:assert/strict";
import { assertNoLeaks } from "../support/leaks.ts";
import { isRoot } from "../support/netns.ts";
import type { PluginOutcome } from "../support/plugin.ts";
import { done, expectOk, NS, world } from "../support/world.ts";

const root = { ignore: !isRoot(), sanitizeResources: false, sanitizeOps: false };

/** A unique secret value per place, so a leak says where it came from. */
function secret(where: string): string {
  return `s3cr3t-${where}-${crypto.randomUUID().slice(0, 8)}`;
}

const PEM_BODY = "MIIEowIBAAKCAQEA7yn3bRHQ5FHMQ8sUiHW9ZsJ5vXtJkZ1e0wQfakeKeyBodyXy";
const PEM = `-----BEGIN RSA PRIVATE KEY-----\n${PEM_BODY}\n-----END RSA PRIVATE KEY-----\n`;

Deno.test({
  name: "debug logs (file and stderr) hold no token, password, key or kubeconfig content",
  ...root,
  async fn() {
    const s = {
      stdinToken: secret("stdin-token"),
      stdinPassword: secret("stdin-password"),
      kubeconfigToken: secret("kubeconfig-token"),
      kubeconfigKey: btoa(secret("kubeconfig-key")),
      nadToken: secret("nad-token"),
      nadPassword: secret("nad-password"),
      nadKey: btoa(secret("nad-key")),
      leakyToken: secret("leaky-token"),
      argsPassword: secret("cni-args-password"),
    };
    const kubeconfigContent = [
      "apiVersion: v1",
      "kind: Config",
      "users:",
      "- name: manifold",
      "  user:",
      `    token: ${s.kubeconfigToken}`,
      `    client-key-data: ${s.kubeconfigKey}`,
    ].join("\n");
    const w = await world({
      conf: {
        logLevel: "debug",
        logToStderr: true,
        token: s.stdinToken,
        password: s.stdinPassword,
        "client-key": PEM,
        kubeconfigData: kubeconfigContent,
        capabilities: { "io.kubernetes.cri.pod-annotations": true },
      },
    });
    const outcomes: PluginOutcome[] = [];
    try {
      const logFile = `${w.dirs.kube}/manifold.log`;
      w.conf.logFile = logFile;
      const bridge = JSON.parse(w.nadConfigs["bridge-net"]);
      w.api.addNad({
        namespace: NS,
        name: "secret-net",
        config: JSON.stringify({
          ...bridge,
          token: s.nadToken,
          password: s.nadPassword,
          ipam: { ...bridge.ipam, "client-key-data": s.nadKey },
        }),
      });
      // A delegate that echoes its whole config: as a CNI error JSON on ADD, as plain
      // stderr on DEL (Go plugins often quote the config they could not use).
      await Deno.writeTextFile(
        `${w.dirs.bin}/leaky`,
        [
          "#!/bin/sh",
          "conf=$(cat)",
          'if [ "$CNI_COMMAND" = ADD ]; then',
          `  esc=$(printf '%s' "$conf" | sed 's/\\\\/\\\\\\\\/g; s/"/\\\\"/g')`,
          `  printf '{"code":7,"msg":"invalid config %s","details":"%s"}' "$esc" "$esc"`,
          "else",
          '  echo "leaky: cannot use config $conf" >&2',
          "fi",
          "exit 1",
        ].join("\n") + "\n",
        { mode: 0o755 },
      );
      w.api.addNad({
        namespace: NS,
        name: "leaky-net",
        config: JSON.stringify({ cniVersion: "1.0.0", type: "leaky", token: s.leakyToken }),
      });

      const call = async (cmd: "ADD" | "DEL", networks?: unknown[]) => {
        const config = networks === undefined ? { ...w.conf, capabilities: {} } : {
          ...w.conf,
          runtimeConfig: {
            "io.kubernetes.cri.pod-annotations": {
              "k8s.v1.cni.cncf.io/networks": JSON.stringify(networks),
            },
          },
        };
        const r = await w.call(cmd, { config });
        outcomes.push(r);
        return r;
      };

      // 1. A healthy ADD/DEL with secrets in the stdin config and in a NAD.
      expectOk(await call("ADD", [{ name: "secret-net" }]), "ADD");
      expectOk(await call("DEL", [{ name: "secret-net" }]), "DEL");

      // 2. A delegate echoing its config (NAD secret + cni-args secret) fails the ADD.
      const leaky = [
        { name: "secret-net" },
        { name: "leaky-net", "cni-args": { password: s.argsPassword } },
      ];
      const failed = await call("ADD", leaky);
      assert.equal(failed.code, 1, failed.stdout);
      assert.equal(failed.json?.code, 7);
      assert.match(String(failed.json?.msg), /invalid config/);
      // Its DEL fails as its ADD did: reported once (§7.2), then given up at the bound
      // (lib/multinet/verbs/teardown.ts) with a TeardownAbandoned event carrying the error.
      assert.equal((await call("DEL", leaky)).code, 1, "DEL after the failed ADD");
      expectOk(await call("DEL", leaky), "DEL after the failed ADD, at the bound");
      assert.ok(w.api.events.some((e) => e.reason === "TeardownAbandoned"));

      // 3. The API refuses the token (401): the pod GET fails after the token file re-read.
      w.api.setTokens(["not-the-token"]);
      const unauthorized = await call("ADD");
      assert.notEqual(unauthorized.code, 0, "ADD without a valid token fails");
      w.api.setTokens([w.api.token]);
      expectOk(await call("DEL"), "DEL");

      await assertNoLeaks({
        containerIds: [w.containerId],
        podNetns: w.podNetns,
        ipamDir: w.dirs.ipam,
        cacheDir: w.dirs.cache,
      });

      const log = await Deno.readTextFile(logFile);
      const stderr = outcomes.map((o) => o.stderr).join("\n");
      const stdout = outcomes.map((o) => o.stdout).join("\n");
      const events = JSON.stringify(w.api.events);
      assert.ok(log.length > 1000, "the debug log was written");
      assert.ok(log.includes('"level":"debug"'), "debug lines are there");
      assert.ok(log.includes("[redacted]"), "redacted values are marked");
      assert.match(log, /invalid config/, "the leaky delegate's error was logged");
      assert.match(log, /kube api request.*"status":401/, "the 401 was logged");

      const secrets: Record<string, string> = {
        "bearer token (token file)": w.api.token,
        "PEM client key": PEM_BODY,
        ...s,
      };
      for (const [where, value] of Object.entries(secrets)) {
        for (const [sink, text] of [["log file", log], ["stderr", stderr]]) {
          assert.ok(!text.includes(value), `${where} leaked into the ${sink}`);
        }
        assert.ok(!stdout.includes(value), `${where} leaked into a CNI error on stdout`);
        assert.ok(!events.includes(value), `${where} leaked into an event`);
      }
    } finally {
      await done(w);
    }
  },
});
