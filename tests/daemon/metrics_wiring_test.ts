/**
 * `manifold daemon --metrics-address`: the series fed by the daemon's own work, read back
 * through `GET /metrics` of a real daemon process against the API stand-in, with the real
 * binary forwarding ADD/DEL exactly as a runtime runs it. `manifold_api_requests_total` must
 * equal what the stand-in saw (per method and status, the watch as WATCH),
 * `manifold_attachments` must count the cache's live attachments (records made before the
 * daemon started included) and `manifold_fallback_total` the forwarder's fallbacks. Needs root.
 */

import { loopbackPort } from "../support/ports.ts";
import assert from "node:assert/strict";
import { done, expectOk, type World, world } from "../support/world.ts";
import { isRoot } from "../support/netns.ts";
import { startDaemon } from "../support/daemon.ts";
import { until } from "../support/wait.ts";

const root = { ignore: !isRoot(), sanitizeResources: false, sanitizeOps: false };
const ANNOTATIONS_CAP = "io.kubernetes.cri.pod-annotations";

/** The samples of one series name: label text (e.g. `{verb="GET",code="200"}`) → value. */
async function scrape(port: number, name: string): Promise<Map<string, number>> {
  const res = await fetch(`http://127.0.0.1:${port}/metrics`);
  assert.equal(res.status, 200);
  const out = new Map<string, number>();
  for (const line of (await res.text()).split("\n")) {
    const m = /^([a-z_]+)(\{[^}]*\})? (\S+)$/.exec(line);
    if (m && m[1] === name) out.set(m[2] ?? "", Number(m[3]));
  }
  return out;
}

/** The stand-in's requests from `from` on, as the daemon counts them: `{verb="…",code="…"}` → n. */
function seenByApi(w: World, from: number): Map<string, number> {
  const out = new Map<string, number>();
  for (const r of w.api.requests.slice(from)) {
    const verb = r.method === "GET" && /[?&]watch=/.test(r.query) ? "WATCH" : r.method;
    const k = `{verb="${verb}",code="${r.status}"}`;
    out.set(k, (out.get(k) ?? 0) + 1);
  }
  return out;
}

Deno.test(
  "daemon /metrics: API requests as the server saw them, live attachments, fallbacks",
  root,
  async () => {
    const annotations = { "k8s.v1.cni.cncf.io/networks": "bridge-net" };
    const w = await world({
      annotations,
      conf: {
        capabilities: { [ANNOTATIONS_CAP]: true },
        runtimeConfig: { [ANNOTATIONS_CAP]: annotations },
      },
    });
    // One pod attached in-process before the daemon starts: its 2 attachments are counted at start.
    const early = {
      containerId: "early0123456789",
      netns: `/var/run/netns/${await w.scratch.netns("early")}`,
    };
    expectOk(await w.call("ADD", early), "in-process ADD before the daemon");
    const port = loopbackPort();
    const before = w.api.requests.length;
    const dir = await w.scratch.dir();
    const d = await startDaemon(dir, w.conf, {
      flags: ["--metrics-address", `127.0.0.1:${port}`],
    });
    const gauge = async () => (await scrape(port, "manifold_attachments")).get("");
    try {
      await until(async () => (await gauge()) === 2, "the start-up count of 2 attachments");
      await until(() => w.api.requests.some((r) => r.query.includes("watch")), "the NAD watch");

      expectOk(await w.call("ADD", { config: d.conf }), "daemon ADD");
      await until(async () => (await gauge()) === 4, "2 + 2 live attachments after the ADD");

      // Since the daemon started, every API request was the daemon's (NAD list, watch, PATCH).
      const counted = await scrape(port, "manifold_api_requests_total");
      assert.deepEqual(counted, seenByApi(w, before));
      assert.equal(counted.get('{verb="WATCH",code="200"}'), 1, "one NAD watch");
      assert.equal(counted.get('{verb="PATCH",code="200"}'), 1, "one status PATCH");

      expectOk(await w.call("DEL", { config: d.conf }), "daemon DEL");
      await until(async () => (await gauge()) === 2, "back to 2 after the DEL");
      expectOk(await w.call("DEL", { ...early, config: d.conf }), "daemon DEL of the early pod");
      await until(async () => (await gauge()) === 0, "0 after both DELs");
      assert.deepEqual(await scrape(port, "manifold_api_requests_total"), seenByApi(w, before));

      // A forwarder whose socket is absent falls back and counts it next to the daemon's socket.
      const absent = { ...d.conf, daemonSocket: d.socket.replace(/[^/]+$/, "absent.sock") };
      const fb = {
        containerId: "fallback0123456",
        netns: `/var/run/netns/${await w.scratch.netns("fb")}`,
      };
      expectOk(await w.call("ADD", { ...fb, config: absent }), "fallback ADD");
      expectOk(await w.call("DEL", { ...fb, config: absent }), "fallback DEL");
      assert.equal((await scrape(port, "manifold_fallback_total")).get(""), 2);
    } finally {
      d.kill("SIGKILL");
      await d.exited();
      await done(w);
    }
  },
);
