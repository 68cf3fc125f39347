/**
 * The ConfigMap body `kubectl manifold explain` reads from the API is untrusted: anything but a
 * ConfigMap with string data and the `plugin-conf.json` key is a clear error, never a cast.
 */

import assert from "node:assert/strict";
import { MANIFOLD_CONFIG_MAP, pluginConfText } from "../../lib/install/mod.ts";

const SOURCE = "configmap kube-system/manifold-config";

Deno.test("pluginConfText: the key's text of a ConfigMap body", () => {
  const body = { kind: "ConfigMap", data: { [MANIFOLD_CONFIG_MAP.key]: '{"logLevel":"debug"}' } };
  assert.equal(pluginConfText(body, SOURCE), '{"logLevel":"debug"}');
});

Deno.test("pluginConfText: bodies that are not a ConfigMap with the key are refused by name", () => {
  const cases: Array<[unknown, RegExp]> = [
    [null, /configmap kube-system\/manifold-config is not a ConfigMap with string data/],
    ["text", /is not a ConfigMap with string data/],
    [{ data: { [MANIFOLD_CONFIG_MAP.key]: { logLevel: "debug" } } }, /is not a ConfigMap/],
    [{ data: [] }, /is not a ConfigMap with string data/],
    [{}, /has no data key "plugin-conf\.json"/],
    [{ data: { other: "{}" } }, /has no data key "plugin-conf\.json"/],
  ];
  for (const [body, message] of cases) {
    assert.throws(() => pluginConfText(body, SOURCE), message, JSON.stringify(body));
  }
});
