/**
 * Tests of the recursion guards of lib/multinet: delegates whose plugin type is Manifold
 * itself are refused at resolution (lib/multinet/plan/resolve.ts `selfTypes`), and a Manifold
 * started as a delegate of Manifold does no work (lib/multinet/plugin.ts
 * `manifoldHandlers`). Pure, except the file-based test (`--allow-read --allow-write`,
 * skipped without).
 */

import assert from "node:assert/strict";
import { CniError, CniErrorCode } from "../../lib/cni/errors.ts";
import { DELEGATION_DEPTH_ENV } from "../../lib/cni/recursion.ts";
import type { SkelContext } from "../../lib/cni/skel.ts";
import type { NetworkAttachmentDefinition } from "../../lib/k8s/types.ts";
import { StaticNadSource } from "../../lib/multinet/nad/source.ts";
import { manifoldHandlers } from "../../lib/multinet/plugin.ts";
import {
  DEFAULT_SELF_TYPES,
  delegateFromInline,
  resolveClusterNetwork,
  resolveNetwork,
  type ResolveOptions,
} from "../../lib/multinet/plan/resolve.ts";

function nad(name: string, config: unknown): NetworkAttachmentDefinition {
  return { metadata: { name, namespace: "pod-ns" }, spec: { config: JSON.stringify(config) } };
}

function options(nads: NetworkAttachmentDefinition[], extra: Partial<ResolveOptions> = {}) {
  return {
    nads: new StaticNadSource(nads),
    confDir: "/nonexistent/manifold-confdir",
    namespaceIsolation: false,
    globalNamespaces: ["default"],
    podNamespace: "pod-ns",
    ...extra,
  };
}

async function rejected(p: Promise<unknown>): Promise<CniError> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof CniError, `expected a CniError, got ${err}`);
    return err;
  }
  assert.fail("expected a CniError");
}

const SELF = { cniVersion: "1.0.0", type: "manifold", delegates: [] };
const CHAIN = {
  cniVersion: "1.0.0",
  plugins: [{ type: "bridge" }, { type: "manifold" }],
};

Deno.test("resolve: a NAD whose plugin type is Manifold is code 7 naming the NAD", async () => {
  assert.deepEqual(DEFAULT_SELF_TYPES, ["manifold"]);
  for (const [config, at] of [[SELF, 0], [CHAIN, 1]] as const) {
    const e = await rejected(
      resolveNetwork({ namespace: "pod-ns", name: "evil" }, options([nad("evil", config)])),
    );
    assert.equal(e.code, CniErrorCode.InvalidNetworkConfig);
    assert.equal(
      e.msg,
      `network attachment definition "pod-ns/evil": plugin type "manifold" (plugins[${at}]) is Manifold itself: recursive delegation refused`,
    );
  }
});

Deno.test("resolve: Manifold's configured type is refused too (selfTypes)", async () => {
  const config = { cniVersion: "1.0.0", type: "mfd" };
  const ok = await resolveNetwork(
    { namespace: "pod-ns", name: "n" },
    options([nad("n", config)]),
  );
  assert.equal(ok.statusName, "pod-ns/n");
  const e = await rejected(resolveNetwork(
    { namespace: "pod-ns", name: "n" },
    options([nad("n", config)], { selfTypes: ["manifold", "mfd"] }),
  ));
  assert.match(e.msg, /plugin type "mfd" \(plugins\[0\]\) is Manifold itself/);
});

Deno.test("resolve: inline delegates and clusterNetwork NADs are checked", async () => {
  assert.throws(
    () => delegateFromInline({ cniVersion: "1.0.0", name: "x", type: "manifold" }, 1, false),
    (e) => {
      assert.ok(e instanceof CniError);
      assert.equal(e.code, 7);
      assert.match(e.msg, /^delegates\[1\]: plugin type "manifold" \(plugins\[0\]\) is Manifold/);
      return true;
    },
  );
  const e = await rejected(resolveClusterNetwork("evil", {
    nads: new StaticNadSource([{
      metadata: { name: "evil", namespace: "kube-system" },
      spec: { config: JSON.stringify(SELF) },
    }]),
    confDir: "/nonexistent/manifold-confdir",
    multusNamespace: "kube-system",
    isDefault: true,
  }));
  assert.match(e.msg, /^network attachment definition "kube-system\/evil": plugin type "manifold"/);
});

const canFs = (["read", "write"] as const).every((name) =>
  Deno.permissions.querySync({ name }).state === "granted"
);

Deno.test({
  name: "resolve: an on-disk config of Manifold is refused by name and by path",
  ignore: !canFs,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "mft-self-" });
    try {
      const file = `${dir}/10-self.conf`;
      await Deno.writeTextFile(file, JSON.stringify({ ...SELF, name: "self-net" }));
      const byName = await rejected(resolveClusterNetwork("self-net", {
        nads: new StaticNadSource([]),
        confDir: dir,
        multusNamespace: "kube-system",
        isDefault: true,
      }));
      assert.equal(byName.code, 7);
      assert.match(
        byName.msg,
        /^cluster network "self-net" \(config .*10-self\.conf\): plugin type/,
      );
      const byPath = await rejected(resolveClusterNetwork(file, {
        nads: new StaticNadSource([]),
        confDir: dir,
        multusNamespace: "kube-system",
        isDefault: true,
      }));
      assert.match(byPath.msg, /^cluster network .*10-self\.conf: plugin type "manifold"/);
      // A NAD without spec.config that names the on-disk config.
      const viaNad = await rejected(resolveNetwork(
        { namespace: "pod-ns", name: "self-net" },
        {
          ...options([{ metadata: { name: "self-net", namespace: "pod-ns" }, spec: {} }]),
          confDir: dir,
        },
      ));
      assert.match(viaNad.msg, /^network attachment definition "pod-ns\/self-net" \(config /);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

// ---------------------------------------------------------------- the plugin's guard

const CTX = {
  env: { command: "ADD", containerId: "c", netns: "/x", ifName: "eth0", args: "", path: [] },
  stdin: new Uint8Array(),
  config: { cniVersion: "1.0.0", name: "m", type: "manifold" },
  cniVersion: "1.0.0",
} as SkelContext;

Deno.test("plugin: started with the marker, ADD/CHECK/STATUS fail with code 7 before any work", async () => {
  let built = 0;
  const handlers = manifoldHandlers(() => {
    built++;
    return Promise.reject(new Error("must not be reached"));
  }, { processEnv: { [DELEGATION_DEPTH_ENV]: "1" } });
  for (const op of ["add", "check", "status"] as const) {
    await assert.rejects(handlers[op](CTX), (e) => {
      assert.ok(e instanceof CniError, String(e));
      assert.equal(e.code, CniErrorCode.InvalidNetworkConfig);
      assert.match(e.msg, /^recursive delegation refused/);
      return true;
    }, op);
  }
  assert.equal(built, 0, "no dependency was built");
});

Deno.test("plugin: started with the marker, DEL and GC succeed doing nothing", async () => {
  let built = 0;
  const handlers = manifoldHandlers(() => {
    built++;
    return Promise.reject(new Error("must not be reached"));
  }, { processEnv: { [DELEGATION_DEPTH_ENV]: "1" } });
  await handlers.del(CTX);
  await handlers.gc(CTX);
  assert.equal(built, 0);
});

Deno.test("plugin: without the marker the handlers build their dependencies", async () => {
  let built = 0;
  const handlers = manifoldHandlers(() => {
    built++;
    return Promise.reject(new CniError(7, "stop here"));
  }, { processEnv: {} });
  for (const op of ["add", "del", "check", "gc", "status"] as const) {
    await assert.rejects(handlers[op](CTX), /stop here/);
  }
  assert.equal(built, 5);
});
