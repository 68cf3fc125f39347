/**
 * Issue 30: a per-call ADD or DEL reads only the modules it may run. `deno run` fetches (reads,
 * hashes and looks up in its caches) every module reachable from a loaded module through
 * string-literal imports, dynamic `import("./x.ts")` included, whether or not the branch runs;
 * lib/ and native/ therefore import their optional branches through `lazyImport`
 * (lib/util/lazy.ts), whose specifier the module graph does not follow.
 *
 * Checked two ways: the source (no string-literal dynamic import in lib/ or native/ but `node:`
 * built-ins; every `lazyImport` names one existing module in its type argument and its
 * specifier), and a real plugin ADD and DEL run as the runtime runs them (env + stdin, real
 * delegates in a scratch netns, the HTTPS API stand-in, the pod read through the API) with
 * `DENO_LOG=debug`, under which Deno logs each module it fetches: none of the other verbs'
 * modules, the mirror, chroot, device or KEP paths, the kubeconfig room's files but `load.ts`
 * and `document.ts` (not its door), nor zod or yaml, is fetched. The second test needs root.
 */

import assert from "node:assert/strict";
import { isRoot } from "../support/netns.ts";
import { NS, world } from "../support/world.ts";
import { NadMirrorWriter } from "../../lib/multinet/nad/mirror_writer.ts";
import { parseNetworkAttachmentDefinition } from "../../lib/k8s/types.ts";
import { SELECTION } from "../../scripts/bench_support.ts";

const ROOT = new URL("../../", import.meta.url);

/**
 * The plugin tests run against another tree's launcher (scripts/test.sh's pass through a pack):
 * the fetch checks below are about this tree's sources; tests/integration/pack_test.ts checks a
 * pack's.
 */
const OTHER_PLUGIN = !!Deno.env.get("MANIFOLD_TEST_PLUGIN");
if (OTHER_PLUGIN) {
  console.log(
    "lazy_import_test: the fetch checks skipped (MANIFOLD_TEST_PLUGIN: not these sources)",
  );
}

/** Every `.ts` file under lib/ and native/, as paths relative to the repository. */
async function sources(): Promise<string[]> {
  const out: string[] = [];
  const walk = async (dir: string) => {
    for await (const e of Deno.readDir(new URL(dir, ROOT))) {
      const path = `${dir}/${e.name}`;
      if (e.isDirectory) await walk(path);
      else if (e.name.endsWith(".ts")) out.push(path);
    }
  };
  await walk("lib");
  await walk("native");
  return out.sort();
}

Deno.test("lib/ and native/ import optional modules through lazyImport only", async () => {
  const literal: string[] = [];
  const mismatched: string[] = [];
  let lazyCalls = 0;
  let lazyUses = 0;
  for (const path of await sources()) {
    const text = await Deno.readTextFile(new URL(path, ROOT));
    if (path !== "lib/util/lazy.ts") lazyUses += text.match(/\blazyImport</g)?.length ?? 0;
    // A dynamic import with a string literal, not in a type position (`typeof import(…)`,
    // `import("…").Name`), not in a comment and not of a Node built-in.
    for (const m of text.matchAll(/(?<![\w.])import\(\s*"([^"]+)"\s*\)(?!\s*\.\s*[A-Z])/g)) {
      const before = text.slice(Math.max(0, m.index - 7), m.index);
      const line = text.slice(text.lastIndexOf("\n", m.index) + 1, m.index);
      if (before === "typeof " || m[1].startsWith("node:") || /^\s*(\*|\/\/)/.test(line)) continue;
      literal.push(`${path}: import("${m[1]}")`);
    }
    for (
      const m of text.matchAll(
        /lazyImport<\s*typeof import\("([^"]+)"\)\s*>\(\s*"([^"]+)"\s*(,\s*import\.meta\.url\s*)?,?\s*\)/g,
      )
    ) {
      lazyCalls++;
      const [, typed, spec, base] = m;
      const relative = spec.startsWith(".");
      if (typed !== spec || relative !== !!base) {
        mismatched.push(`${path}: lazyImport<typeof import("${typed}")>("${spec}"…)`);
        continue;
      }
      if (relative) {
        const target = new URL(spec, new URL(path, ROOT));
        await Deno.stat(target).catch(() => mismatched.push(`${path}: ${spec} does not exist`));
      }
    }
  }
  assert.deepEqual(literal, [], "string-literal dynamic imports (use lazyImport)");
  assert.deepEqual(mismatched, []);
  assert.ok(lazyCalls > 0);
  assert.equal(
    lazyCalls,
    lazyUses,
    "lazyImport calls not of the form lazyImport<typeof import(X)>(X…)",
  );
});

/**
 * The project modules Deno fetched, from a `DENO_LOG=debug` stderr, relative to the repo, and the
 * npm packages it resolved (`npm:zod`).
 */
function fetched(stderr: string): string[] {
  const out = new Set<string>();
  for (const m of stderr.matchAll(/fetch_no_follow - specifier: (\S+)/g)) {
    out.add(m[1].startsWith(ROOT.href) ? m[1].slice(ROOT.href.length) : m[1]);
  }
  // npm packages are not fetched that way: Deno logs resolving each one's folder.
  for (const m of stderr.matchAll(/Resolved package folder of (\S+)@[^@\s]+ to/g)) {
    out.add(`npm:${m[1]}`);
  }
  return [...out];
}

/** Modules an ADD or DEL of a pod on plain networks never runs. */
const NEVER = [
  /^lib\/multinet\/verbs\/(check|gc|gc_networks|rebuild)\.ts$/,
  /^lib\/multinet\/nad\/(mirror|source|mirror_reader|mirror_writer)\.ts$/,
  /^lib\/multinet\/chroot\.ts$/,
  /^lib\/multinet\/status\/pod_network_status\.ts$/,
  /^lib\/multinet\/plan\/(pod_networks|pod_network_plan|selection_schema)\.ts$/,
  /^lib\/devices\/(?!constants\.ts)/,
  /^lib\/(daemon|cli|policy|install|hotplug)\//,
  /^lib\/k8s\/(watch_stream|exec_credential|stream|multinetwork)\.ts$/,
  /^lib\/k8s\/kubeconfig\/(?!load\.ts$|document\.ts$)/,
  /zod|yaml|grpc/,
];

Deno.test({
  name: "a plugin ADD and DEL fetch no module of a branch they do not run",
  ignore: !isRoot() || OTHER_PLUGIN,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const w = await world({
      annotations: { "k8s.v1.cni.cncf.io/networks": JSON.stringify(SELECTION) },
    });
    try {
      for (const command of ["ADD", "DEL"] as const) {
        const r = await w.call(command, { env: { DENO_LOG: "debug" } });
        assert.equal(r.code, 0, `${command}: ${r.stdout} ${r.stderr.slice(-2000)}`);
        const modules = fetched(r.stderr);
        assert.ok(
          modules.includes(`lib/multinet/verbs/${command.toLowerCase()}.ts`),
          `${command}: no fetch of its own verb in the debug log (${modules.length} modules)`,
        );
        const extra = modules.filter((m) => NEVER.some((re) => re.test(m)));
        assert.deepEqual(extra, [], `${command} fetched modules of branches it did not run`);
        console.log(`${command}: ${modules.length} modules fetched`);
      }
    } finally {
      await w.api.stop();
      await w.scratch.cleanup();
    }
  },
});

Deno.test({
  name: "a plugin ADD with the pod's annotations from the runtime and NADs from the mirror " +
    "fetches no zod or yaml module",
  ignore: !isRoot() || OTHER_PLUGIN,
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const w = await world({});
    try {
      // The mirror as `manifold mirror` writes it: the NAD files and the state file.
      const dir = `${await w.scratch.dir()}/nads`;
      const nads = Object.entries(w.nadConfigs).map(([name, config], i) =>
        parseNetworkAttachmentDefinition({
          apiVersion: "k8s.cni.cncf.io/v1",
          kind: "NetworkAttachmentDefinition",
          metadata: { name, namespace: NS, uid: `uid-${name}`, resourceVersion: `${i + 1}` },
          spec: { config },
        })
      );
      await new NadMirrorWriter(dir).replace(nads, "9");
      const config = {
        ...w.conf,
        nadMirrorDir: dir,
        capabilities: { "io.kubernetes.cri.pod-annotations": true },
        runtimeConfig: {
          "io.kubernetes.cri.pod-annotations": {
            "k8s.v1.cni.cncf.io/networks": JSON.stringify(SELECTION),
          },
        },
      };
      const r = await w.call("ADD", { config, env: { DENO_LOG: "debug" } });
      assert.equal(r.code, 0, `ADD: ${r.stdout} ${r.stderr.slice(-2000)}`);
      assert.equal(JSON.parse(r.stdout).interfaces?.length > 0, true, r.stdout);
      const modules = fetched(r.stderr);
      assert.ok(modules.includes("lib/multinet/nad/mirror_format.ts"), "the mirror was not read");
      assert.deepEqual(modules.filter((m) => /zod|yaml/.test(m)), [], "ADD fetched zod or yaml");
      console.log(`ADD (runtime annotations + NAD mirror): ${modules.length} modules fetched`);
      const del = await w.call("DEL", { config });
      assert.equal(del.code, 0, del.stdout);
    } finally {
      await w.api.stop();
      await w.scratch.cleanup();
    }
  },
});
