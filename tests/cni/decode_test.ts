import assert from "node:assert/strict";
import { z } from "zod";
import { decodeJson } from "../../lib/cni/decode.ts";
import { CniError } from "../../lib/cni/errors.ts";

const schema = z.object({ a: z.number() });

Deno.test("decodeJson returns the validated value", () => {
  assert.deepEqual(decodeJson('{"a":1}', schema, "thing"), { a: 1 });
});

Deno.test("decodeJson: bad JSON and bad shape are CNI code 6 naming the content", () => {
  for (const [text, msg] of [["{", "thing is not valid JSON"], ['{"a":"x"}', "thing is invalid"]]) {
    assert.throws(() => decodeJson(text, schema, "thing"), (e) => {
      assert.ok(e instanceof CniError);
      assert.equal(e.code, 6);
      assert.equal(e.msg, msg);
      assert.ok(e.details.length > 0);
      return true;
    });
  }
});

Deno.test("a plugin process validates without zod's JIT; the daemon keeps it", async () => {
  // In a fresh process each: the setting is process-wide. The plugin's modules no longer load
  // zod (issue 30): the setting must reach zod whether a module that imports zod is loaded
  // before realDeps (lib/cni/types.ts here) or after it.
  const root = new URL("../../", import.meta.url);
  const plugin = new URL("lib/multinet/plugin.ts", root).href;
  const zodModule = new URL("lib/cni/types.ts", root).href;
  const cases: [string, string, string][] = [
    ["{}", "before", "true"],
    ["{}", "after", "true"],
    ["{ api: {} }", "before", "undefined"],
    ["{ api: {} }", "after", "undefined"],
  ];
  for (const [opts, order, want] of cases) {
    const load = `await import(${JSON.stringify(zodModule)});`;
    const script = `import { z } from "zod";
import { realDeps } from ${JSON.stringify(plugin)};
const before = String(z.config().jitless);
${order === "before" ? load : ""}
// deno-lint-ignore no-explicit-any
realDeps({}, ${opts} as any);
${order === "after" ? load : ""}
const loose = z.object({ a: z.number() });
console.log(before, String(z.config().jitless), JSON.stringify(loose.parse({ a: 1, b: 2 })));`;
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["eval", "--config", new URL("deno.json", root).pathname, script],
      env: { NO_COLOR: "1" },
      stderr: "piped",
    }).output();
    const text = new TextDecoder();
    assert.equal(out.code, 0, text.decode(out.stderr));
    assert.equal(text.decode(out.stdout).trim(), `undefined ${want} {"a":1}`, `${opts} ${order}`);
  }
});
