/**
 * Issue 30: a plugin ADD and DEL of well-formed input never load zod (71 modules, ≈ 460 KiB of
 * source to compile, more than half of what a call used to load). The plugin runs as the
 * runtime runs it (env + stdin, real delegates in a scratch netns, the HTTPS API stand-in, the
 * pod read through the API and a JSON selection with ips/mac, i.e. every per-call shape: config,
 * conflist, kubeconfig, Pod, NADs, selection, delegate results, cache record), with V8 logging
 * every script it compiles; no script of the zod package may appear. A malformed selection
 * still loads zod, and its error reads as zod words it. Needs root.
 */

import assert from "node:assert/strict";
import { isRoot } from "../support/netns.ts";
import { world } from "../support/world.ts";
import { SELECTION } from "../../scripts/bench_support.ts";

const root = { ignore: !isRoot(), sanitizeResources: false, sanitizeOps: false };

/** The URLs of the scripts V8 compiled, from a `--log-function-events` log. */
async function compiledScripts(log: string): Promise<string[]> {
  const text = await Deno.readTextFile(log);
  return text.split("\n").filter((l) => l.startsWith("script-details,")).map((l) =>
    l.split(",")[2]
  );
}

const logged = (file: string) => ({
  DENO_V8_FLAGS: `--log-function-events,--no-logfile-per-isolate,--logfile=${file}`,
});

Deno.test({
  name: "plugin ADD and DEL of well-formed input compile no zod module; a bad selection still does",
  ...root,
  async fn() {
    const w = await world({
      annotations: { "k8s.v1.cni.cncf.io/networks": JSON.stringify(SELECTION) },
    });
    const logs = await Deno.makeTempDir();
    try {
      for (const command of ["ADD", "DEL"] as const) {
        const file = `${logs}/${command}.log`;
        const r = await w.call(command, { env: logged(file) });
        assert.equal(r.code, 0, `${command}: ${r.stdout} ${r.stderr}`);
        const scripts = await compiledScripts(file);
        assert.ok(
          // This tree's sources, or a pack's chunks (MANIFOLD_TEST_PLUGIN, scripts/test.sh).
          scripts.some((s) => s.includes("/lib/multinet/") || /\/pack\/[^/]+\.js$/.test(s)),
          `${command}: the V8 log lists no Manifold module (${scripts.length} scripts)`,
        );
        const zod = scripts.filter((s) => /\/zod\/\d/.test(s));
        assert.deepEqual(zod, [], `${command} compiled zod modules`);
      }

      // A selection element with a key zod reports: zod is loaded for it, and words the error.
      const bad = [{ name: SELECTION[0].name, mac: "not-a-mac" }];
      const file = `${logs}/bad.log`;
      const r = await w.call("ADD", {
        containerId: "perCallZodBad",
        env: logged(file),
        config: {
          ...w.conf,
          capabilities: { "io.kubernetes.cri.pod-annotations": true },
          runtimeConfig: {
            "io.kubernetes.cri.pod-annotations": {
              "k8s.v1.cni.cncf.io/networks": JSON.stringify(bad),
            },
          },
        },
      });
      assert.notEqual(r.code, 0, r.stdout);
      const err = JSON.parse(r.stdout);
      assert.equal(err.code, 7, r.stdout);
      assert.match(err.msg, /"mac": not a 6-byte MAC address/);
      assert.match(err.details, /✖ not a 6-byte MAC address \(xx:xx:xx:xx:xx:xx\)\n {2}→ at mac/);
      const scripts = await compiledScripts(file);
      assert.ok(scripts.some((s) => /\/zod\/\d/.test(s)), "the bad selection did not load zod");
    } finally {
      await w.api.stop();
      await w.scratch.cleanup();
      await Deno.remove(logs, { recursive: true });
    }
  },
});
