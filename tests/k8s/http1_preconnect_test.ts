/**
 * `Http1Transport.preconnect` (lib/k8s/http1/transport.ts) and `KubeClient.preconnect`: a
 * connection opened ahead of the next request, which that request then uses (any method), against
 * a scripted server that records which connection each request arrived on. A per-call ADD whose
 * first API request is the status PATCH opens it while its delegates run (lib/multinet/wiring.ts).
 */

import assert from "node:assert/strict";
import { Http1Transport } from "../../lib/k8s/http1/mod.ts";
import { KubeClient } from "../../lib/k8s/client.ts";
import type { Logger } from "../../lib/log/mod.ts";
import { okResponse, type ScriptedConn, withScriptedServer } from "../support/scripted_http.ts";
import { loopbackPort } from "../support/ports.ts";

/** Answers every request of every connection with its method and path. */
const echo = async (c: ScriptedConn) => {
  for (let i = 0;; i++) {
    const req = await c.request(i);
    if (!req) break;
    await c.send(okResponse(`${req.method} ${req.path}`));
  }
};

const patch = (t: Http1Transport, url: string, signal = new AbortController().signal) =>
  t.send({
    method: "PATCH",
    url,
    headers: { "content-type": "application/merge-patch+json" },
    body: "{}",
    signal,
  });

/** Waits until `n` connections were accepted (or 2 s). */
async function accepted(conns: ScriptedConn[], n: number): Promise<void> {
  const until = Date.now() + 2000;
  while (conns.length < n && Date.now() < until) await new Promise((r) => setTimeout(r, 10));
}

Deno.test("preconnect: the next request, a PATCH, goes on the connection opened ahead", async () => {
  await withScriptedServer({ script: echo }, async (server) => {
    const t = new Http1Transport({ server: server.url, insecureSkipTlsVerify: false });
    try {
      await t.preconnect(new AbortController().signal);
      await accepted(server.conns, 1);
      assert.equal(server.conns.length, 1, "preconnect opened no connection");
      assert.deepEqual(server.paths(), [[]], "preconnect sent something");
      const res = await patch(t, `${server.url}/p/1`);
      assert.equal(res.body, "PATCH /p/1");
      // Open already (idle after the PATCH): preconnect opens nothing more.
      await t.preconnect(new AbortController().signal);
      await patch(t, `${server.url}/p/2`);
      assert.deepEqual(server.paths(), [["PATCH /p/1", "PATCH /p/2"]]);
    } finally {
      t.close();
    }
  });
});

Deno.test("preconnect: a request sent while the connection is being opened takes it", async () => {
  await withScriptedServer({ script: echo }, async (server) => {
    const t = new Http1Transport({ server: server.url, insecureSkipTlsVerify: false });
    try {
      const warming = t.preconnect(new AbortController().signal);
      const res = await patch(t, `${server.url}/p/1`);
      await warming;
      assert.equal(res.body, "PATCH /p/1");
      await patch(t, `${server.url}/p/2`);
      assert.deepEqual(server.paths(), [["PATCH /p/1", "PATCH /p/2"]], "a second connection");
    } finally {
      t.close();
    }
  });
});

Deno.test("preconnect: nothing more while a request opens its own connection (any method)", async () => {
  await withScriptedServer({ script: echo }, async (server) => {
    const t = new Http1Transport({ server: server.url, insecureSkipTlsVerify: false });
    try {
      // The PATCH's connection is being opened (not yet busy nor idle) when preconnect runs.
      const sent = patch(t, `${server.url}/p/1`);
      const warming = t.preconnect(new AbortController().signal);
      assert.equal((await sent).body, "PATCH /p/1");
      await warming;
      // A connection preconnect opened anyway would be accepted by now or shortly after.
      await accepted(server.conns, 2);
      assert.deepEqual(server.paths(), [["PATCH /p/1"]], "preconnect opened a second connection");
    } finally {
      t.close();
    }
  });
});

Deno.test("preconnect: a server that cannot be reached, or an abort, leaves it to the request", async () => {
  const url = `http://127.0.0.1:${loopbackPort()}`;
  const t = new Http1Transport({ server: url, insecureSkipTlsVerify: false });
  try {
    await t.preconnect(new AbortController().signal); // resolves: nothing to keep
    await assert.rejects(patch(t, `${url}/p`), /refused|ECONNREFUSED|os error 111/i);
  } finally {
    t.close();
  }
  await withScriptedServer({ script: echo }, async (server) => {
    const t = new Http1Transport({ server: server.url, insecureSkipTlsVerify: false });
    try {
      const abort = new AbortController();
      abort.abort(new Error("gone"));
      await t.preconnect(abort.signal);
      await patch(t, `${server.url}/p/1`);
      assert.deepEqual(server.paths(), [["PATCH /p/1"]]);
    } finally {
      t.close();
    }
  });
});

Deno.test("KubeClient.preconnect: the status PATCH of a pod finds its connection open", async () => {
  await withScriptedServer({ script: echo }, async (server) => {
    const kube = new KubeClient({
      connection: { server: server.url, insecureSkipTlsVerify: false, token: "t" },
      retries: 0,
    });
    try {
      await kube.preconnect();
      await accepted(server.conns, 1);
      assert.equal(server.conns.length, 1);
      await kube.send(
        "PATCH",
        "/api/v1/namespaces/ns/pods/p/status",
        { metadata: { annotations: {} } },
        "application/merge-patch+json",
      ).catch(() => {}); // the echo is no Pod: only where it went matters
      assert.equal(server.conns.length, 1, "the PATCH opened a connection of its own");
      assert.match(server.paths()[0][0], /^PATCH \/api\/v1\/namespaces\/ns\/pods\/p\/status/);
    } finally {
      kube.close();
    }
  });
});

Deno.test("KubeClient.preconnect after a request reads no credential (a no-op on the open connection)", async () => {
  await withScriptedServer({ script: echo }, async (server) => {
    const dir = await Deno.makeTempDir({ prefix: "mf-preconnect-" });
    const warnings: string[] = [];
    const log = () => {};
    const logger: Logger = {
      debug: log,
      info: log,
      warn: (msg: string) => warnings.push(msg),
      error: log,
      with: () => logger,
    };
    const kube = new KubeClient({
      connection: { server: server.url, insecureSkipTlsVerify: false, tokenFile: `${dir}/token` },
      retries: 0,
      logger,
    });
    try {
      await Deno.writeTextFile(`${dir}/token`, "t1");
      await kube.send("GET", "/version").catch(() => {}); // the echo is no JSON: where it went
      // The token file gone: a preconnect that read the credential would warn (last good token).
      await Deno.remove(`${dir}/token`);
      await kube.preconnect();
      assert.deepEqual(warnings, []);
      assert.equal(server.conns.length, 1);
    } finally {
      kube.close();
      await Deno.remove(dir, { recursive: true });
    }
  });
});
