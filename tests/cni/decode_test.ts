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
