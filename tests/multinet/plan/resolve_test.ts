/**
 * Tests of lib/multinet/plan/resolve.ts (NPWG v1.3 §3.4.1, §3.4.2, §7.4; Multus getNetDelegate).
 * Reads tests/fixtures/multinet/confdir and writes temp dirs:
 * `deno test --allow-read --allow-write tests/multinet/resolve_test.ts`.
 */

import assert from "node:assert/strict";
import { CniError, CniErrorCode } from "../../../lib/cni/errors.ts";
import type { NetworkAttachmentDefinition } from "../../../lib/k8s/types.ts";
import { type NadSource, StaticNadSource } from "../../../lib/multinet/nad/source.ts";
import {
  delegateFromInline,
  resolveClusterNetwork,
  resolveNetwork,
  type ResolveOptions,
} from "../../../lib/multinet/plan/resolve.ts";

const CONF_DIR = new URL("../../fixtures/multinet/confdir", import.meta.url).pathname;
const EMPTY_DIR = "/nonexistent/manifold-confdir";

function nad(
  namespace: string,
  name: string,
  config?: string,
  annotations?: Record<string, string>,
): NetworkAttachmentDefinition {
  const metadata: NetworkAttachmentDefinition["metadata"] = { name, namespace };
  if (annotations) metadata.annotations = annotations;
  return { metadata, spec: config === undefined ? {} : { config } };
}

function options(
  nads: NetworkAttachmentDefinition[],
  extra: Partial<ResolveOptions> = {},
): ResolveOptions {
  return {
    nads: new StaticNadSource(nads),
    confDir: CONF_DIR,
    namespaceIsolation: false,
    globalNamespaces: ["default"],
    podNamespace: "pod-ns",
    ...extra,
  };
}

async function rejects(
  fn: () => Promise<unknown>,
  code: number,
  pattern: RegExp,
): Promise<CniError> {
  let caught: unknown;
  try {
    await fn();
  } catch (err) {
    caught = err;
  }
  assert.ok(caught instanceof CniError, `expected a CniError, got ${caught}`);
  assert.equal(caught.code, code, caught.msg);
  assert.match(caught.msg, pattern);
  return caught;
}

async function withDir(
  files: Record<string, string>,
  fn: (dir: string) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "manifold-confdir-" });
  try {
    for (const [name, text] of Object.entries(files)) {
      await Deno.writeTextFile(`${dir}/${name}`, text);
    }
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

// ---------------------------------------------------------------- §3.4.1 order

Deno.test("(1) the NAD's spec.config beats on-disk configs of the same name", async () => {
  const config = '{"cniVersion":"1.0.0","name":"from-file","type":"macvlan","master":"eth0"}';
  const d = await resolveNetwork(
    { namespace: "pod-ns", name: "from-file" },
    options([nad("pod-ns", "from-file", config)]),
  );
  assert.equal(d.list.raw, d.conflist, "parsed once: the list is the conflist's");
  const { list: _list, ...rest } = d;
  assert.deepEqual(rest, {
    statusName: "pod-ns/from-file",
    isDefault: false,
    source: "nad:pod-ns/from-file",
    conflist: {
      name: "from-file",
      cniVersion: "1.0.0",
      plugins: [{ cniVersion: "1.0.0", name: "from-file", type: "macvlan", master: "eth0" }],
    },
  });
});

Deno.test("(2) an empty spec.config falls to the *.conflist named after the NAD, before a *.conf", async () => {
  for (const config of [undefined, "", "  \n"]) {
    const d = await resolveNetwork(
      { namespace: "pod-ns", name: "from-file" },
      options([nad("pod-ns", "from-file", config)]),
    );
    assert.equal(d.source, `file:${CONF_DIR}/20-from-file.conflist`);
    assert.equal(d.statusName, "pod-ns/from-file");
    assert.equal((d.conflist.plugins as { bridge?: string }[])[0].bridge, "cni-list");
  }
});

Deno.test("(3) a *.conf or *.json named after the NAD when there is no conflist", async () => {
  await withDir({
    "10-a.conf": '{"cniVersion":"1.0.0","name":"net-a","type":"bridge","bridge":"br-a"}',
    "20-b.json": '{"cniVersion":"0.4.0","name":"net-b","type":"ipvlan"}',
    "30-a.conf": '{"cniVersion":"1.0.0","name":"net-a","type":"bridge","bridge":"later"}',
  }, async (dir) => {
    const a = await resolveNetwork(
      { namespace: "pod-ns", name: "net-a" },
      options([nad("pod-ns", "net-a")], { confDir: dir }),
    );
    assert.equal(a.source, `file:${dir}/10-a.conf`, "lexically first wins");
    assert.deepEqual(a.conflist, {
      name: "net-a",
      cniVersion: "1.0.0",
      plugins: [{ cniVersion: "1.0.0", name: "net-a", type: "bridge", bridge: "br-a" }],
    });
    const b = await resolveNetwork(
      { namespace: "pod-ns", name: "net-b" },
      options([nad("pod-ns", "net-b")], { confDir: dir }),
    );
    assert.equal(b.source, `file:${dir}/20-b.json`);
  });
});

Deno.test("(4) nothing found: code 7 naming the NAD, with the files tried in details", async () => {
  const err = await rejects(
    () =>
      resolveNetwork({ namespace: "pod-ns", name: "nowhere" }, options([nad("pod-ns", "nowhere")])),
    CniErrorCode.InvalidNetworkConfig,
    /^network attachment definition "pod-ns\/nowhere" has no spec\.config and no CNI config named "nowhere" was found in .*confdir \(NPWG v1\.3 §3\.4\.1\)$/,
  );
  assert.match(err.details, /05-broken\.conflist: skipped/);
  assert.match(err.details, /30-other\.json: name is "other-net"/);
});

Deno.test("a missing NAD fails by default, even if a file of that name exists", async () => {
  await rejects(
    () => resolveNetwork({ namespace: "pod-ns", name: "from-file" }, options([])),
    CniErrorCode.InvalidNetworkConfig,
    /^network attachment definition "pod-ns\/from-file" not found$/,
  );
  const d = await resolveNetwork(
    { namespace: "pod-ns", name: "from-file" },
    options([], { allowMissingNad: true }),
  );
  assert.equal(d.source, `file:${CONF_DIR}/20-from-file.conflist`);
  await rejects(
    () =>
      resolveNetwork({ namespace: "pod-ns", name: "nope" }, options([], { allowMissingNad: true })),
    CniErrorCode.InvalidNetworkConfig,
    /"pod-ns\/nope" does not exist and no CNI config named "nope"/,
  );
});

Deno.test("unparsable and unreadable files are skipped without a crash", async () => {
  await withDir({
    "00-garbage.conflist": "\u0000\u0001not json",
    "01-array.conflist": "[1,2]",
    "02-noplugins.conflist": '{"name":"net-x","plugins":[]}',
    "03-notype.conf": '{"name":"net-x"}',
    "04-badversion.conf": '{"cniVersion":"9.9.9","name":"net-x","type":"bridge"}',
    "05-unsafe.conf": '{"name":"net-x","type":"../../bin/sh"}',
    "06-empty.conf": "",
    "10-good.conf": '{"cniVersion":"1.0.0","name":"net-x","type":"bridge"}',
  }, async (dir) => {
    await Deno.mkdir(`${dir}/07-dir.conf`);
    const d = await resolveNetwork(
      { namespace: "pod-ns", name: "net-x" },
      options([nad("pod-ns", "net-x")], { confDir: dir }),
    );
    assert.equal(d.source, `file:${dir}/10-good.conf`);
  });
});

Deno.test("a missing confDir is like an empty one", async () => {
  const err = await rejects(
    () =>
      resolveNetwork(
        { namespace: "pod-ns", name: "a" },
        options([nad("pod-ns", "a")], { confDir: EMPTY_DIR }),
      ),
    CniErrorCode.InvalidNetworkConfig,
    /no CNI config named "a" was found/,
  );
  assert.match(err.details, /directory does not exist/);
});

// ---------------------------------------------------------------- §3.4.2 and config errors

Deno.test("§3.4.2: the NAD name is injected when spec.config omits name", async () => {
  const d = await resolveNetwork(
    { namespace: "pod-ns", name: "a-bridge-network" },
    options([nad("pod-ns", "a-bridge-network", '{"cniVersion":"0.3.0","type":"awesome-plugin"}')]),
  );
  const plugin = (d.conflist.plugins as Record<string, unknown>[])[0];
  assert.deepEqual(plugin, {
    cniVersion: "0.3.0",
    name: "a-bridge-network",
    type: "awesome-plugin",
  });
  assert.deepEqual(Object.keys(plugin), ["cniVersion", "name", "type"], "spec example key order");
  assert.equal(d.conflist.name, "a-bridge-network");

  const list = await resolveNetwork(
    { namespace: "pod-ns", name: "lst" },
    options([
      nad(
        "pod-ns",
        "lst",
        '{"cniVersion":"1.0.0","name":"","plugins":[{"type":"bridge"},{"type":"tuning"}]}',
      ),
    ]),
  );
  assert.equal(list.conflist.name, "lst");
  assert.equal((list.conflist.plugins as unknown[]).length, 2);
});

Deno.test("a config name different from the NAD name is kept (§3.4.3); statusName is ns/nad", async () => {
  const d = await resolveNetwork(
    { namespace: "pod-ns", name: "nad-name" },
    options([
      nad("pod-ns", "nad-name", '{"cniVersion":"1.0.0","name":"conf-name","type":"bridge"}'),
    ]),
  );
  assert.equal(d.conflist.name, "conf-name");
  assert.equal(d.statusName, "pod-ns/nad-name");
});

Deno.test("conflists keep every original key; the NadSource's objects are not shared", async () => {
  const config =
    '{"cniVersion":"1.0.0","name":"n","disableCheck":true,"x-extra":{"k":1},"plugins":[{"type":"bridge","capabilities":{"ips":true},"foo":[1]}]}';
  const source = nad("pod-ns", "n", config);
  const d = await resolveNetwork({ namespace: "pod-ns", name: "n" }, options([source]));
  assert.deepEqual(d.conflist, JSON.parse(config));
  assert.equal(source.spec.config, config);
});

Deno.test("resourceName comes from the NAD annotation", async () => {
  const d = await resolveNetwork(
    { namespace: "pod-ns", name: "sriov" },
    options([nad("pod-ns", "sriov", '{"cniVersion":"1.0.0","type":"sriov"}', {
      "k8s.v1.cni.cncf.io/resourceName": "intel.com/sriov_netdevice",
    })]),
  );
  assert.equal(d.resourceName, "intel.com/sriov_netdevice");
  const file = await resolveNetwork(
    { namespace: "pod-ns", name: "from-file" },
    options([nad("pod-ns", "from-file", undefined, { "k8s.v1.cni.cncf.io/resourceName": "r/x" })]),
  );
  assert.equal(file.resourceName, "r/x");
  const none = await resolveNetwork(
    { namespace: "pod-ns", name: "n" },
    options([nad("pod-ns", "n", '{"cniVersion":"1.0.0","type":"bridge"}')]),
  );
  assert.equal("resourceName" in none, false);
});

Deno.test("an invalid spec.config fails with its code, naming the NAD", async () => {
  const cases: [string, number, RegExp][] = [
    ["{not json", CniErrorCode.DecodingFailure, /"pod-ns\/bad": spec\.config is not valid JSON$/],
    ["[1]", CniErrorCode.DecodingFailure, /"pod-ns\/bad": network config must be a JSON object/],
    [
      '{"cniVersion":"1.0.0"}',
      CniErrorCode.InvalidNetworkConfig,
      /"pod-ns\/bad": network config has neither plugins nor type/,
    ],
    [
      '{"cniVersion":"1.0.0","plugins":[]}',
      CniErrorCode.InvalidNetworkConfig,
      /"pod-ns\/bad": no plugins in list/,
    ],
    [
      '{"cniVersion":"1.0.0","type":"a/b"}',
      CniErrorCode.InvalidNetworkConfig,
      /must not contain "\/"/,
    ],
    [
      '{"cniVersion":"7.0.0","type":"bridge"}',
      CniErrorCode.IncompatibleVersion,
      /"pod-ns\/bad": unsupported CNI version/,
    ],
  ];
  for (const [config, code, pattern] of cases) {
    await rejects(
      () =>
        resolveNetwork(
          { namespace: "pod-ns", name: "bad" },
          options([nad("pod-ns", "bad", config)]),
        ),
      code,
      pattern,
    );
  }
});

// ---------------------------------------------------------------- §7.4 isolation

Deno.test("namespace isolation: own namespace and globalNamespaces only", async () => {
  const config = '{"cniVersion":"1.0.0","type":"bridge"}';
  const nads = [
    nad("pod-ns", "a", config),
    nad("default", "a", config),
    nad("shared", "a", config),
    nad("other", "a", config),
  ];
  const opts = options(nads, { namespaceIsolation: true, globalNamespaces: ["default", "shared"] });
  for (const ns of ["pod-ns", "default", "shared"]) {
    assert.equal((await resolveNetwork({ namespace: ns, name: "a" }, opts)).statusName, `${ns}/a`);
  }
  const err = await rejects(
    () => resolveNetwork({ namespace: "other", name: "a" }, opts),
    CniErrorCode.InvalidNetworkConfig,
    /^namespace isolation: pods in namespace "pod-ns" may not use network attachment definition "other\/a" \(allowed namespaces: pod-ns, default, shared\)$/,
  );
  assert.equal(err.details, "");
  // Without isolation, any namespace.
  assert.ok(await resolveNetwork({ namespace: "other", name: "a" }, options(nads)));
});

Deno.test("namespace isolation is checked before the NAD is read", async () => {
  let reads = 0;
  const nads: NadSource = {
    get: () => {
      reads++;
      return Promise.resolve(undefined);
    },
  };
  await rejects(
    () =>
      resolveNetwork({ namespace: "other", name: "a" }, {
        ...options([]),
        nads,
        namespaceIsolation: true,
        globalNamespaces: [],
      }),
    CniErrorCode.InvalidNetworkConfig,
    /namespace isolation/,
  );
  assert.equal(reads, 0);
});

Deno.test("errors of the NadSource propagate unchanged", async () => {
  const boom = new CniError(CniErrorCode.TryAgainLater, "API unreachable");
  const nads: NadSource = { get: () => Promise.reject(boom) };
  let caught: unknown;
  try {
    await resolveNetwork({ namespace: "pod-ns", name: "a" }, { ...options([]), nads });
  } catch (err) {
    caught = err;
  }
  assert.equal(caught, boom);
});

Deno.test("isDefault option marks the delegate (default-network annotation)", async () => {
  const d = await resolveNetwork(
    { namespace: "pod-ns", name: "a" },
    options([nad("pod-ns", "a", '{"cniVersion":"1.0.0","type":"bridge"}')], { isDefault: true }),
  );
  assert.equal(d.isDefault, true);
});

// ---------------------------------------------------------------- clusterNetwork / defaultNetworks

const clusterOpts = (nads: NetworkAttachmentDefinition[], confDir = CONF_DIR) => ({
  nads: new StaticNadSource(nads),
  confDir,
  multusNamespace: "kube-system",
  isDefault: true,
});

Deno.test("clusterNetwork by name: NAD in multusNamespace first", async () => {
  const d = await resolveClusterNetwork(
    "from-file",
    clusterOpts([nad("kube-system", "from-file", '{"cniVersion":"1.0.0","type":"flannel"}')]),
  );
  assert.equal(d.statusName, "kube-system/from-file");
  assert.equal(d.source, "nad:kube-system/from-file");
  assert.equal(d.isDefault, true);
  // A NAD of that name elsewhere does not count.
  const file = await resolveClusterNetwork(
    "from-file",
    clusterOpts([nad("default", "from-file", "{}")]),
  );
  assert.equal(file.source, `file:${CONF_DIR}/20-from-file.conflist`);
});

Deno.test("clusterNetwork by name: then a config in confDir with that name (statusName = conf name)", async () => {
  const d = await resolveClusterNetwork("other-net", { ...clusterOpts([]), isDefault: false });
  assert.equal(d.statusName, "other-net");
  assert.equal(d.source, `file:${CONF_DIR}/30-other.json`);
  assert.equal(d.isDefault, false);
  // Conf names that are not Kubernetes names skip the NAD lookup.
  await withDir(
    { "a.conf": '{"cniVersion":"1.0.0","name":"Calico_Net","type":"calico"}' },
    async (dir) => {
      const c = await resolveClusterNetwork("Calico_Net", clusterOpts([], dir));
      assert.equal(c.statusName, "Calico_Net");
    },
  );
});

Deno.test("clusterNetwork by name: not found is code 7 listing what was tried", async () => {
  const err = await rejects(
    () => resolveClusterNetwork("nowhere", clusterOpts([])),
    CniErrorCode.InvalidNetworkConfig,
    /^cluster network "nowhere" not found: no network attachment definition "kube-system\/nowhere" and no CNI config with that name in /,
  );
  assert.match(err.details, /kube-system\/nowhere": not found/);
  await rejects(
    () => resolveClusterNetwork("  ", clusterOpts([])),
    CniErrorCode.InvalidNetworkConfig,
    /empty/,
  );
});

Deno.test("clusterNetwork as a directory: lexically first config that parses", async () => {
  await withDir({
    "00-broken.conf": "{",
    "10-flannel.conflist":
      '{"cniVersion":"1.0.0","name":"cbr0","plugins":[{"type":"flannel"},{"type":"portmap","capabilities":{"portMappings":true}}]}',
    "20-other.conf": '{"cniVersion":"1.0.0","name":"zzz","type":"bridge"}',
    "05-ignored.txt": "{}",
  }, async (dir) => {
    const d = await resolveClusterNetwork(dir, clusterOpts([]));
    assert.equal(d.statusName, "cbr0");
    assert.equal(d.source, `file:${dir}/10-flannel.conflist`);
    assert.equal(d.isDefault, true);
  });
  await withDir({ "a.conf": "{" }, async (dir) => {
    await rejects(
      () => resolveClusterNetwork(dir, clusterOpts([])),
      CniErrorCode.InvalidNetworkConfig,
      /no valid \*\.conf/,
    );
  });
});

Deno.test("clusterNetwork as a file path", async () => {
  const d = await resolveClusterNetwork(`${CONF_DIR}/10-bridge.conf`, clusterOpts([]));
  assert.equal(d.statusName, "from-file");
  assert.equal(d.source, `file:${CONF_DIR}/10-bridge.conf`);
  assert.deepEqual(d.conflist.plugins, [{
    cniVersion: "1.0.0",
    name: "from-file",
    type: "bridge",
    bridge: "cni-conf",
  }]);
  await rejects(
    () => resolveClusterNetwork(`${CONF_DIR}/missing.conf`, clusterOpts([])),
    CniErrorCode.InvalidNetworkConfig,
    /^cluster network ".*missing\.conf" not found$/,
  );
  await rejects(
    () => resolveClusterNetwork(`${CONF_DIR}/05-broken.conflist`, clusterOpts([])),
    CniErrorCode.DecodingFailure,
    /^cluster network .*05-broken\.conflist: failed to decode network config$/,
  );
});

Deno.test("clusterNetwork as ns/name: that NAD, no @interface", async () => {
  const d = await resolveClusterNetwork(
    "net-ns/flannel",
    clusterOpts([nad("net-ns", "flannel", '{"cniVersion":"1.0.0","type":"flannel"}')]),
  );
  assert.equal(d.statusName, "net-ns/flannel");
  assert.equal(d.isDefault, true);
  await rejects(
    () => resolveClusterNetwork("net-ns/missing", clusterOpts([])),
    CniErrorCode.InvalidNetworkConfig,
    /"net-ns\/missing" not found/,
  );
  await rejects(
    () => resolveClusterNetwork("net-ns/flannel@eth0", clusterOpts([])),
    CniErrorCode.InvalidNetworkConfig,
    /"@interface" suffix/,
  );
  await rejects(
    () => resolveClusterNetwork("a/b/c", clusterOpts([])),
    CniErrorCode.InvalidNetworkConfig,
    /invalid network reference/,
  );
});

// ---------------------------------------------------------------- delegates[i]

Deno.test("delegateFromInline: conf and conflist, copies, errors naming delegates[i]", () => {
  const conf = { cniVersion: "1.0.0", name: "cbr0", type: "bridge" };
  const d = delegateFromInline(conf, 0, true);
  assert.equal(d.list.raw, d.conflist);
  const { list: _list, ...rest } = d;
  assert.deepEqual(rest, {
    statusName: "cbr0",
    isDefault: true,
    source: "inline:delegates[0]",
    conflist: { name: "cbr0", cniVersion: "1.0.0", plugins: [conf] },
  });
  assert.notEqual((d.conflist.plugins as unknown[])[0], conf, "a copy");

  const list = { cniVersion: "1.0.0", name: "sec", plugins: [{ type: "macvlan" }] };
  assert.deepEqual(delegateFromInline(list, 2, false).conflist, list);

  let caught: unknown;
  try {
    delegateFromInline({ cniVersion: "1.0.0", type: "bridge" }, 3, false);
  } catch (err) {
    caught = err;
  }
  assert.ok(caught instanceof CniError);
  assert.equal(caught.code, CniErrorCode.InvalidNetworkConfig);
  assert.match(caught.msg, /^delegates\[3\]: /);
  assert.match(caught.details, /name/);
});
