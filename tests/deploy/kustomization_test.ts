/**
 * deploy/Kustomization (deploy/ as a kustomize base) lists exactly the manifests
 * `kubectl apply -f deploy/` applies, and tests/node/overlay/ still patches the fields it
 * means to (its `op: test` guards) — checked with `kubectl kustomize` when kubectl is there.
 */
import assert from "node:assert/strict";
import { parse, parseAllDocuments } from "yaml";

const DEPLOY = new URL("../../deploy/", import.meta.url).pathname;
const OVERLAY = new URL("../node/overlay/", import.meta.url).pathname;

Deno.test("deploy/Kustomization lists every deploy/*.yaml and nothing else", async () => {
  const files: string[] = [];
  for await (const e of Deno.readDir(DEPLOY)) if (e.name.endsWith(".yaml")) files.push(e.name);
  const k = parse(await Deno.readTextFile(`${DEPLOY}Kustomization`));
  assert.equal(k.kind, "Kustomization");
  assert.deepEqual([...k.resources].sort(), files.sort());
});

const kubectl = (Deno.env.get("PATH") ?? "").split(":").find((d) => {
  try {
    return Deno.statSync(`${d}/kubectl`).isFile;
  } catch {
    return false;
  }
});
if (!kubectl) {
  console.log("tests/deploy/kustomization_test.ts: kubectl missing, overlay build skipped");
}

Deno.test({
  name:
    "tests/node/overlay builds: deploy/ with the image and the two CNI dirs changed, nothing else",
  ignore: !kubectl,
  fn: async () => {
    const run = async (dir: string) => {
      const out = await new Deno.Command("kubectl", { args: ["kustomize", dir] }).output();
      assert.ok(out.success, new TextDecoder().decode(out.stderr));
      return parseAllDocuments(new TextDecoder().decode(out.stdout)).map((d) => d.toJS());
    };
    const base = await run(DEPLOY);
    const over = await run(OVERLAY);
    assert.equal(over.length, base.length);
    const norm = (o: unknown) =>
      JSON.stringify(o)
        .replaceAll("ghcr.io/manifold-cni/manifold:0.1.0", "IMAGE")
        .replaceAll("manifold.test/manifold:1", "IMAGE")
        .replaceAll("/var/lib/manifold-node-test/cni/bin", "BIN")
        .replaceAll("/opt/cni/bin", "BIN")
        .replaceAll("/var/lib/manifold-node-test/cni/net.d", "CONF")
        .replaceAll("/etc/cni/net.d", "CONF");
    for (let i = 0; i < base.length; i++) assert.equal(norm(over[i]), norm(base[i]));
    assert.ok(JSON.stringify(over).includes("manifold.test/manifold:1"));
    assert.ok(!JSON.stringify(over).includes("/opt/cni/bin"));
  },
});
