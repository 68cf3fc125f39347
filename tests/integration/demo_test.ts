/**
 * README's first command, `deno task demo` (scripts/demo.sh → scripts/demo.ts): the main job end
 * to end must keep working — ADD, network-status, kernel view, CHECK, DEL, DEL, nothing left.
 * Run as a real process exactly as README says; needs root.
 */

import assert from "node:assert/strict";
import { isRoot } from "../support/netns.ts";

const root = new URL("../..", import.meta.url).pathname;

Deno.test({
  name: "deno task demo ends with 'demo: OK' and exit 0",
  ignore: !isRoot(),
  async fn() {
    const out = await new Deno.Command("bash", {
      args: [`${root}scripts/demo.sh`],
      cwd: root,
      stdout: "piped",
      stderr: "piped",
    }).output();
    const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
    assert.equal(out.code, 0, text);
    assert.match(text, /demo: OK/);
    assert.match(text, /"interface": "net1"/, "the network-status was printed");
  },
});
