/**
 * Tests of lib/multinet/nad/source.ts. Reads tests/fixtures/multinet/nads and writes temp
 * dirs; the `yaml` package reads two env variables while parsing:
 * `deno test --allow-read --allow-write --allow-env=LOG_TOKENS,LOG_STREAM tests/multinet/nad_source_test.ts`.
 */

import assert from "node:assert/strict";
import { CniError, CniErrorCode } from "../../../lib/cni/errors.ts";
import {
  DirectoryNadSource,
  parseManifest,
  StaticNadSource,
} from "../../../lib/multinet/nad/source.ts";

const FIXTURE_DIR = new URL("../../fixtures/multinet/nads", import.meta.url).pathname;

async function assertRejects7(fn: () => Promise<unknown>, pattern: RegExp): Promise<CniError> {
  let caught: unknown;
  try {
    await fn();
  } catch (err) {
    caught = err;
  }
  assert.ok(caught instanceof CniError, `expected a CniError, got ${caught}`);
  assert.equal(caught.code, CniErrorCode.InvalidNetworkConfig);
  assert.match(caught.msg, pattern);
  return caught;
}

/** Runs `fn` with a temp dir holding `files` (name → contents), removed afterwards. */
async function withDir(
  files: Record<string, string>,
  fn: (dir: string) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "manifold-nads-" });
  try {
    for (const [name, text] of Object.entries(files)) {
      await Deno.writeTextFile(`${dir}/${name}`, text);
    }
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("DirectoryNadSource: multi-document YAML, List, typed List and JSON", async () => {
  const nads = new DirectoryNadSource(FIXTURE_DIR);
  const all = await nads.list();
  assert.deepEqual(
    all.map((n) => `${n.metadata.namespace}/${n.metadata.name}`),
    [
      "default/macvlan-conf",
      "tenant-a/macvlan-conf",
      "kube-system/from-file",
      "default/a-bridge-network",
      "tenant-b/typed-item",
    ],
  );

  const macvlan = await nads.get("default", "macvlan-conf");
  assert.ok(macvlan);
  assert.equal(
    macvlan.metadata.annotations?.["k8s.v1.cni.cncf.io/resourceName"],
    "intel.com/sriov_netdevice",
  );
  assert.equal(JSON.parse(macvlan.spec.config!).type, "macvlan");

  const tenant = await nads.get("tenant-a", "macvlan-conf");
  assert.equal(JSON.parse(tenant!.spec.config!).name, "tenant-macvlan");

  const noSpec = await nads.get("kube-system", "from-file");
  assert.deepEqual(noSpec?.spec, {});

  const typed = await nads.get("tenant-b", "typed-item");
  assert.equal(JSON.parse(typed!.spec.config!).type, "ipvlan");
});

Deno.test("DirectoryNadSource: unknown objects are undefined, other kinds ignored", async () => {
  const nads = new DirectoryNadSource(FIXTURE_DIR);
  assert.equal(await nads.get("default", "missing"), undefined);
  assert.equal(await nads.get("default", "not-a-nad"), undefined);
  assert.equal(await nads.get("kube-system", "macvlan-conf"), undefined);
});

Deno.test("DirectoryNadSource: files are read once, lazily", async () => {
  await withDir({
    "a.yaml": "kind: NetworkAttachmentDefinition\nmetadata: {name: a}\n",
  }, async (dir) => {
    const nads = new DirectoryNadSource(dir, { defaultNamespace: "ns1" });
    await Deno.writeTextFile(
      `${dir}/b.json`,
      '{"kind":"NetworkAttachmentDefinition","metadata":{"name":"b"}}',
    );
    assert.ok(await nads.get("ns1", "a"), "defaultNamespace applies");
    assert.ok(await nads.get("ns1", "b"), "written before the first get: seen");
    await Deno.writeTextFile(
      `${dir}/c.json`,
      '{"kind":"NetworkAttachmentDefinition","metadata":{"name":"c"}}',
    );
    assert.equal(await nads.get("ns1", "c"), undefined, "written after the first get: not seen");
  });
});

Deno.test("DirectoryNadSource: invalid manifests fail with code 7 naming the file", async () => {
  const cases: [Record<string, string>, RegExp][] = [
    [{ "bad.yaml": "kind: [unclosed\n" }, /^invalid manifest .*\/bad\.yaml: not valid YAML$/],
    [{ "bad.json": "{" }, /^invalid manifest .*\/bad\.json: not valid JSON$/],
    [
      { "x.yaml": "kind: NetworkAttachmentDefinition\nmetadata: {}\n" },
      /^invalid manifest .*\/x\.yaml: invalid NetworkAttachmentDefinition$/,
    ],
    [
      {
        "x.yaml":
          "kind: NetworkAttachmentDefinition\nmetadata: {name: n}\nspec: {config: {type: bridge}}\n",
      },
      /^invalid manifest .*\/x\.yaml: invalid NetworkAttachmentDefinition n$/,
    ],
    [{ "x.yaml": "a\n---\n- 1\n" }, /^invalid manifest .*\/x\.yaml \(document 1\): not an object$/],
    [{ "x.yaml": "kind: List\nitems: 3\n" }, /x\.yaml: List without an items list/],
    [{ "x.yaml": "kind: List\nitems: [3]\n" }, /x\.yaml items\[0\]: not an object/],
    [
      {
        "a.yaml": "kind: NetworkAttachmentDefinition\nmetadata: {name: n}\n",
        "b.json":
          '{"kind":"NetworkAttachmentDefinition","metadata":{"name":"n","namespace":"default"}}',
      },
      /^invalid manifest .*\/b\.json: NetworkAttachmentDefinition default\/n is already defined in .*\/a\.yaml$/,
    ],
  ];
  for (const [files, pattern] of cases) {
    await withDir(files, async (dir) => {
      await assertRejects7(() => new DirectoryNadSource(dir).get("default", "n"), pattern);
    });
  }
});

Deno.test("DirectoryNadSource: a failed load is retried on the next call", async () => {
  await withDir({ "a.yaml": "kind: [\n" }, async (dir) => {
    const nads = new DirectoryNadSource(dir);
    await assertRejects7(() => nads.get("default", "a"), /not valid YAML/);
    await Deno.writeTextFile(
      `${dir}/a.yaml`,
      "kind: NetworkAttachmentDefinition\nmetadata: {name: a}\n",
    );
    assert.ok(await nads.get("default", "a"));
  });
});

Deno.test("DirectoryNadSource: a missing directory is a code 7 error naming it", async () => {
  await assertRejects7(
    () => new DirectoryNadSource("/nonexistent/manifold-nads").get("default", "a"),
    /^NetworkAttachmentDefinition directory \/nonexistent\/manifold-nads does not exist$/,
  );
});

Deno.test("DirectoryNadSource: an empty directory has no NADs; subdirectories are not read", async () => {
  await withDir({}, async (dir) => {
    await Deno.mkdir(`${dir}/sub.yaml`);
    assert.deepEqual(await new DirectoryNadSource(dir).list(), []);
  });
});

Deno.test("parseManifest: JSON files do not need the yaml parser; kinds are exact", async () => {
  const nads = await parseManifest(
    '{"kind":"NetworkAttachmentDefinition","metadata":{"name":"a","namespace":"x"},"spec":{"config":""}}',
    { path: "a.json", defaultNamespace: "default" },
  );
  assert.equal(nads.length, 1);
  assert.deepEqual(nads[0].metadata, { name: "a", namespace: "x" });
  assert.deepEqual(nads[0].spec, { config: "" });
  assert.deepEqual(
    await parseManifest("kind: networkattachmentdefinition\nmetadata: {name: a}\n", {
      path: "a.yaml",
      defaultNamespace: "default",
    }),
    [],
  );
});

Deno.test("StaticNadSource: get by namespace and name", async () => {
  const nads = new StaticNadSource([
    { metadata: { name: "a", namespace: "x" }, spec: {} },
    { metadata: { name: "a", namespace: "y" }, spec: { config: "{}" } },
  ]);
  assert.deepEqual((await nads.get("y", "a"))?.spec, { config: "{}" });
  assert.equal(await nads.get("z", "a"), undefined);
});

Deno.test({
  name: "parseManifest: YAML without env access is a clear error, not a crash",
  permissions: { read: true, env: false },
  fn: async () => {
    let caught: unknown;
    try {
      await parseManifest("kind: NetworkAttachmentDefinition\nmetadata: {name: a}\n", {
        path: "a.yaml",
        defaultNamespace: "default",
      });
    } catch (err) {
      caught = err;
    }
    assert.ok(caught instanceof CniError, String(caught));
    assert.equal(caught.code, CniErrorCode.Internal);
    assert.match(caught.msg, /needs --allow-env=LOG_TOKENS,LOG_STREAM/);
  },
});
