/**
 * Non-idempotent API calls (issue 28 §7): the plugin process's Event POST whose connection is
 * reset after the request reached the server (the HTTPS stand-in: a real server cannot be
 * made to drop its answer) is not sent again — a second copy would be a duplicate Event
 * (client-go retries write requests only when nothing was sent). An Event POST that could
 * not connect at all is still retried (nothing reached the server). Needs root.
 */

import assert from "node:assert/strict";
import { isRoot } from "../support/netns.ts";
import { done, expectOk, world } from "../support/world.ts";

const root = { ignore: !isRoot(), sanitizeResources: false, sanitizeOps: false };
const SELECTION = JSON.stringify([{ name: "bridge-net" }]);

Deno.test({
  name: "an Event POST reset after it reached the server is not sent again",
  ...root,
  async fn() {
    const w = await world({
      annotations: { "k8s.v1.cni.cncf.io/networks": SELECTION },
      conf: { events: "all" },
    });
    try {
      w.api.fault({ method: "POST", path: /\/events$/, reset: true, times: Infinity });
      const add = await w.call("ADD");
      expectOk(add, "ADD (an Event that fails does not fail ADD)");
      const posts = w.api.requests.filter((r) => r.method === "POST" && r.path.endsWith("/events"));
      // One AddedInterface per attachment (default + bridge-net), each POSTed once.
      assert.ok(posts.length >= 1, "the Event POSTs reached the server");
      assert.equal(posts.length, 2, `each Event POST sent once, saw ${posts.length}`);
    } finally {
      await done(w);
    }
  },
});
