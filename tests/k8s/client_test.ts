import assert from "node:assert/strict";
import { kubeErrorCode } from "../../lib/multinet/api_errors.ts";
import type { LogFields, Logger } from "../../lib/log/mod.ts";
import {
  isNotFound,
  KubeClient,
  type KubeClientOptions,
  type KubeConnection,
  KubeError,
  loadKubeconfig,
} from "../../lib/k8s/mod.ts";
import { createCa, issueCert } from "../support/certs.ts";
import { type KubeApiStandIn, startKubeApi } from "../support/kube_api.ts";

const NS = "default";
const POD = "api-sample";

interface World {
  api: KubeApiStandIn;
  conn: KubeConnection;
  client(opts?: Partial<KubeClientOptions>): KubeClient;
}

/** Starts a stand-in with one pod and one NAD, and a kubeconfig using `auth`. */
async function withApi(
  fn: (w: World) => Promise<void>,
  auth: "token" | "tokenFile" | "clientCert" = "token",
): Promise<void> {
  const api = await startKubeApi();
  const clients: KubeClient[] = [];
  try {
    api.addPod({
      namespace: NS,
      name: POD,
      annotations: { "k8s.v1.cni.cncf.io/networks": "net1" },
    });
    api.addNad({
      namespace: NS,
      name: "macvlan-conf",
      config: '{"cniVersion":"1.0.0","type":"macvlan"}',
    });
    api.addNad({ namespace: "other", name: "bridge-net", config: '{"type":"bridge"}' });
    await api.writeKubeconfig(`${api.dir}/kubeconfig`, { auth });
    const conn = await loadKubeconfig(`${api.dir}/kubeconfig`);
    await fn({
      api,
      conn,
      client: (opts = {}) => {
        const c = new KubeClient({ connection: conn, backoffMs: 10, ...opts });
        clients.push(c);
        return c;
      },
    });
  } finally {
    for (const c of clients) c.close();
    await api.stop();
  }
}

async function failure(p: Promise<unknown>): Promise<KubeError> {
  try {
    await p;
  } catch (err) {
    assert.ok(
      err instanceof KubeError && err.kind === "request",
      `expected a request KubeError, got ${err}`,
    );
    return err;
  }
  throw new Error("expected the call to fail");
}

function recordingLogger(lines: unknown[]): Logger {
  const log = (msg: string, fields?: LogFields) => lines.push({ msg, ...fields });
  const l: Logger = { debug: log, info: log, warn: log, error: log, with: () => l };
  return l;
}

Deno.test("getPod returns validated metadata and the raw object", async () => {
  await withApi(async ({ api, client }) => {
    const kube = client({ userAgent: "manifold-test" });
    const pod = await kube.getPod(NS, POD);
    assert.equal(pod.metadata.name, POD);
    assert.equal(pod.metadata.annotations?.["k8s.v1.cni.cncf.io/networks"], "net1");
    assert.equal((pod.raw.status as { phase: string }).phase, "Pending");
    assert.equal(kube.requestCount, 1);
    assert.deepEqual(
      api.requests.map((r) => [r.method, r.path, r.status, r.user]),
      [["GET", `/api/v1/namespaces/${NS}/pods/${POD}`, 200, api.tokenUser]],
    );
  });
});

Deno.test("a missing pod or NAD is a 404 KubeError, code 7, not retried", async () => {
  await withApi(async ({ client }) => {
    const kube = client();
    const e1 = await failure(kube.getPod(NS, "no-such-pod"));
    assert.ok(isNotFound(e1));
    assert.equal(kubeErrorCode(e1), 7);
    assert.equal(e1.status, 404);
    assert.equal(e1.reason, "NotFound");
    assert.equal(e1.details, 'pods "no-such-pod" not found');
    const e2 = await failure(kube.getNetworkAttachmentDefinition(NS, "no-such-nad"));
    assert.ok(isNotFound(e2));
    assert.equal(
      e2.details,
      'network-attachment-definitions.k8s.cni.cncf.io "no-such-nad" not found',
    );
    assert.equal(kube.requestCount, 2);
    assert.equal(isNotFound(new Error("x")), false);
  });
});

Deno.test("NADs: get one, list a namespace, list all namespaces", async () => {
  await withApi(async ({ api, client }) => {
    const kube = client();
    const nad = await kube.getNetworkAttachmentDefinition(NS, "macvlan-conf");
    assert.equal(nad.spec.config, '{"cniVersion":"1.0.0","type":"macvlan"}');
    assert.deepEqual(
      (await kube.listNetworkAttachmentDefinitions(NS)).map((n) => n.metadata.name),
      [
        "macvlan-conf",
      ],
    );
    assert.deepEqual(
      (await kube.listNetworkAttachmentDefinitions()).map((n) =>
        `${n.metadata.namespace}/${n.metadata.name}`
      ),
      ["default/macvlan-conf", "other/bridge-net"],
    );
    assert.deepEqual(api.requests.map((r) => r.path), [
      "/apis/k8s.cni.cncf.io/v1/namespaces/default/network-attachment-definitions/macvlan-conf",
      "/apis/k8s.cni.cncf.io/v1/namespaces/default/network-attachment-definitions",
      "/apis/k8s.cni.cncf.io/v1/network-attachment-definitions",
    ]);
  });
});

Deno.test("patchPodStatusAnnotations merge-patches the status subresource (never 415 or 409)", async () => {
  await withApi(async ({ api, client }) => {
    const kube = client();
    const before = api.getPod(NS, POD) as { metadata: { resourceVersion: string } };
    const pod = await kube.patchPodStatusAnnotations(NS, POD, {
      "k8s.v1.cni.cncf.io/network-status": "[]",
      "k8s.v1.cni.cncf.io/networks": null,
    });
    assert.deepEqual(pod.metadata.annotations, { "k8s.v1.cni.cncf.io/network-status": "[]" });
    assert.ok(Number(pod.metadata.resourceVersion) > Number(before.metadata.resourceVersion));
    // Someone else writes the pod in between: without a resourceVersion we never conflict.
    api.addPod({ namespace: NS, name: POD, annotations: { x: "1" } });
    const again = await kube.patchPodStatusAnnotations(NS, POD, { y: "2" });
    assert.deepEqual(again.metadata.annotations, { x: "1", y: "2" });
    const patches = api.requests.filter((r) => r.method === "PATCH");
    assert.equal(patches.length, 2);
    for (const r of patches) {
      assert.equal(r.path, `/api/v1/namespaces/${NS}/pods/${POD}/status`);
      assert.equal(r.contentType, "application/merge-patch+json");
      assert.equal(r.status, 200);
      assert.equal(JSON.parse(r.body).metadata.resourceVersion, undefined);
    }
    assert.ok(api.requests.every((r) => r.status !== 415 && r.status !== 409));
  });
});

Deno.test("createEvent posts a core/v1 Event with generateName", async () => {
  await withApi(async ({ api, client }) => {
    const kube = client();
    await kube.createEvent(NS, {
      involvedObject: { kind: "Pod", name: POD, namespace: NS, uid: "u-1" },
      reason: "AddedInterface",
      message: "Add net1 [10.1.0.5/24] from default/macvlan-conf",
      type: "Normal",
    });
    assert.equal(api.events.length, 1);
    const ev = api.events[0] as Record<string, Record<string, unknown>>;
    assert.match(String(ev.metadata.name), /^api-sample\.[bcdfghjklmnpqrstvwxz2456789]{5}$/);
    assert.equal(ev.metadata.generateName, "api-sample.");
    assert.deepEqual(ev.involvedObject, {
      apiVersion: "v1",
      kind: "Pod",
      name: POD,
      namespace: NS,
      uid: "u-1",
    });
    assert.deepEqual(ev.source, { component: "manifold" });
    assert.equal(ev.type, "Normal");
    assert.equal(api.requests[0].status, 201);
    assert.equal(api.requests[0].contentType, "application/json");
  });
});

Deno.test("429 with Retry-After is honoured, then the call succeeds", async () => {
  await withApi(async ({ api, client }) => {
    api.fault({ method: "GET", status: 429, retryAfterSeconds: 1 });
    const kube = client();
    const t0 = performance.now();
    await kube.getPod(NS, POD);
    const ms = performance.now() - t0;
    assert.ok(ms >= 950, `waited ${ms} ms, Retry-After was 1 s`);
    assert.equal(kube.requestCount, 2);
    assert.deepEqual(api.requests.map((r) => r.status), [429, 200]);
  });
});

Deno.test("Retry-After is capped by maxBackoffMs", async () => {
  await withApi(async ({ api, client }) => {
    api.fault({ status: 429, retryAfterSeconds: 60 });
    const kube = client({ maxBackoffMs: 50 });
    const t0 = performance.now();
    await kube.getPod(NS, POD);
    assert.ok(performance.now() - t0 < 2000);
    assert.equal(kube.requestCount, 2);
  });
});

Deno.test("Retry-After on a 5xx is honoured too (client-go's checkWait: 429 and every 5xx)", async () => {
  await withApi(async ({ api, client }) => {
    api.fault({ method: "PATCH", status: 500, retryAfterSeconds: 1 });
    const kube = client({ deadlineMs: 10_000 });
    const t0 = performance.now();
    await kube.patchPodStatusAnnotations(NS, POD, { a: "b" });
    const ms = performance.now() - t0;
    assert.ok(ms >= 950, `waited ${ms} ms, Retry-After was 1 s`);
    assert.deepEqual(api.requests.map((r) => r.status), [500, 200]);
  });
});

Deno.test("deadlineMs: a Retry-After beyond the call's bound fails at once, transient, saying so", async () => {
  await withApi(async ({ api, client }) => {
    api.fault({ method: "PATCH", status: 429, retryAfterSeconds: 30, times: Infinity });
    const kube = client({ deadlineMs: 3000 });
    const t0 = performance.now();
    const err = await failure(kube.patchPodStatusAnnotations(NS, POD, { a: "b" }));
    const ms = performance.now() - t0;
    assert.ok(ms < 1000, `failed after ${ms} ms instead of waiting 30 s`);
    assert.equal(err.status, 429);
    assert.equal(kubeErrorCode(err), 11);
    assert.match(
      err.details,
      /the server asked to retry after 30000 ms within the call's bound of 3000 ms/,
    );
    assert.equal(api.requests.length, 1);
  });
});

Deno.test("deadlineMs bounds a call against a slow API: timeout within the bound, code 11", async () => {
  await withApi(async ({ api, client }) => {
    api.fault({ method: "PATCH", delayMs: 4000, times: Infinity });
    const kube = client({ timeoutMs: 5000, deadlineMs: 1500 });
    const t0 = performance.now();
    const err = await failure(kube.patchPodStatusAnnotations(NS, POD, { a: "b" }));
    const ms = performance.now() - t0;
    assert.ok(ms >= 1400 && ms < 2500, `failed after ${ms} ms, bound 1500 ms`);
    assert.equal(err.reason, "Timeout");
    assert.equal(kubeErrorCode(err), 11);
    assert.match(err.details, /what was left of the call's bound of 1500 ms/);
  });
});

Deno.test("deadlineMs: answers with Retry-After are retried up to 10 times within the bound", async () => {
  await withApi(async ({ api, client }) => {
    api.fault({ method: "PATCH", status: 429, retryAfterSeconds: 0, times: 6 });
    const kube = client({ deadlineMs: 10_000, retries: 2 });
    await kube.patchPodStatusAnnotations(NS, POD, { a: "b" });
    assert.deepEqual(api.requests.map((r) => r.status), [429, 429, 429, 429, 429, 429, 200]);
  });
  await withApi(async ({ api, client }) => {
    api.fault({ method: "PATCH", status: 429, retryAfterSeconds: 0, times: Infinity });
    const kube = client({ deadlineMs: 10_000, retries: 2 });
    const err = await failure(kube.patchPodStatusAnnotations(NS, POD, { a: "b" }));
    assert.equal(err.attempts, 11);
    assert.equal(kubeErrorCode(err), 11);
  });
});

Deno.test("5xx is retried, then fails with code 11", async () => {
  await withApi(async ({ api, client }) => {
    api.fault({ status: 503, times: Infinity });
    const kube = client({ retries: 2 });
    const err = await failure(kube.getPod(NS, POD));
    assert.equal(kubeErrorCode(err), 11);
    assert.equal(err.status, 503);
    assert.equal(err.reason, "ServiceUnavailable");
    assert.equal(err.attempts, 3);
    assert.equal(kube.requestCount, 3);
  });
  await withApi(async ({ api, client }) => {
    api.fault({ method: "PATCH", status: 500, times: 2 });
    const kube = client();
    await kube.patchPodStatusAnnotations(NS, POD, { a: "b" });
    assert.deepEqual(api.requests.map((r) => r.status), [500, 500, 200]);
  });
});

Deno.test("a slow answer times out, is retried, then fails with code 11 in bounded time", async () => {
  await withApi(async ({ api, client }) => {
    api.fault({ delayMs: 2000, times: Infinity });
    const kube = client({ timeoutMs: 150, retries: 1 });
    const t0 = performance.now();
    const err = await failure(kube.getPod(NS, POD));
    const ms = performance.now() - t0;
    assert.equal(kubeErrorCode(err), 11);
    assert.equal(err.status, 0);
    assert.equal(err.reason, "Timeout");
    assert.equal(kube.requestCount, 2);
    assert.ok(ms < 1000, `took ${ms} ms`);
  });
  await withApi(async ({ api, client }) => {
    api.fault({ delayMs: 2000 });
    const kube = client({ timeoutMs: 150 });
    assert.equal((await kube.getPod(NS, POD)).metadata.name, POD);
    assert.equal(kube.requestCount, 2);
  });
});

Deno.test("an unreachable API fails with code 11 after the retries", async () => {
  await withApi(async ({ api, client }) => {
    api.down(true);
    const kube = client({ retries: 2 });
    const err = await failure(kube.getPod(NS, POD));
    assert.equal(kubeErrorCode(err), 11);
    assert.equal(err.status, 0);
    assert.equal(err.reason, "ConnectionFailed");
    assert.equal(kube.requestCount, 3);
    api.down(false);
    assert.equal((await kube.getPod(NS, POD)).metadata.name, POD);
  });
  await withApi(async ({ api, client }) => {
    api.fault({ reset: true });
    const kube = client();
    assert.equal((await kube.getPod(NS, POD)).metadata.name, POD);
    assert.equal(kube.requestCount, 2);
  });
});

Deno.test("the token file is re-read on every request (rotation)", async () => {
  await withApi(async ({ api, conn, client }) => {
    const file = conn.tokenFile!;
    const kube = client();
    await Deno.writeTextFile(file, "token-a\n");
    api.setTokens(["token-a"]);
    await kube.getPod(NS, POD);
    await Deno.writeTextFile(file, "token-b\n");
    api.setTokens(["token-b"]);
    await kube.getPod(NS, POD);
    assert.equal(kube.requestCount, 2);
    assert.deepEqual(api.requests.map((r) => r.status), [200, 200]);
  }, "tokenFile");
});

Deno.test("401: the token file is re-read and the request retried once, then code 11", async () => {
  await withApi(async ({ api, client }) => {
    api.fault({ status: 401 });
    const kube = client();
    await kube.getPod(NS, POD);
    assert.deepEqual(api.requests.map((r) => r.status), [401, 200]);
  }, "tokenFile");
  await withApi(async ({ api, client }) => {
    api.setTokens(["something-else"]);
    const kube = client();
    const err = await failure(kube.getPod(NS, POD));
    assert.equal(kubeErrorCode(err), 11);
    assert.equal(err.status, 401);
    assert.equal(err.reason, "Unauthorized");
    assert.equal(kube.requestCount, 2);
  }, "tokenFile");
  await withApi(async ({ api, client }) => {
    api.setTokens([]);
    const kube = client();
    const err = await failure(kube.getPod(NS, POD));
    assert.equal(kubeErrorCode(err), 11);
    assert.equal(kube.requestCount, 1, "a static token is not retried");
  }, "token");
});

Deno.test("403 (no RBAC) is code 7 and not retried", async () => {
  await withApi(async ({ api, client }) => {
    api.denyRbac(api.token);
    const kube = client();
    const err = await failure(kube.patchPodStatusAnnotations(NS, POD, { a: "b" }));
    assert.equal(kubeErrorCode(err), 7);
    assert.equal(err.status, 403);
    assert.equal(err.reason, "Forbidden");
    assert.match(err.details, /cannot patch resource "pods\/status" in API group ""/);
    assert.equal(kube.requestCount, 1);
  });
});

Deno.test("client-certificate authentication", async () => {
  await withApi(async ({ api, client }) => {
    const kube = client();
    await kube.getPod(NS, POD);
    assert.equal(api.requests[0].user, api.clientCertUser);
    api.denyRbac(api.clientCertUser);
    assert.equal((await failure(kube.getPod(NS, POD))).status, 403);
  }, "clientCert");
});

Deno.test("a client certificate from another CA is rejected", async () => {
  await withApi(async ({ api, conn, client }) => {
    const rogueCa = await createCa("rogue-ca");
    const rogue = await issueCert(rogueCa, {
      cn: "intruder",
      org: "system:masters",
      usage: "clientAuth",
    });
    const kube = client({
      connection: { ...conn, clientCertPem: rogue.certPem, clientKeyPem: rogue.keyPem },
      retries: 1,
    });
    const err = await failure(kube.getPod(NS, POD));
    assert.equal(err.status, 0);
    assert.equal(api.requests.length, 0, "no request got through");
    assert.ok(api.tlsRejections.length >= 1);
    assert.match(api.tlsRejections[0].subject, /intruder/);
  }, "clientCert");
});

Deno.test("a server certificate the CA does not vouch for is code 7, not retried", async () => {
  await withApi(async ({ conn, client }) => {
    const other = await createCa("other-ca");
    const kube = client({ connection: { ...conn, caCertPem: other.certPem } });
    const err = await failure(kube.getPod(NS, POD));
    assert.equal(kubeErrorCode(err), 7);
    assert.equal(err.reason, "TlsVerification");
    assert.equal(kube.requestCount, 1);
  });
});

Deno.test("insecure-skip-tls-verify connects without a CA (node:https transport)", async () => {
  await withApi(async ({ api, conn, client }) => {
    const kube = client({
      connection: { ...conn, caCertPem: undefined, insecureSkipTlsVerify: true },
    });
    assert.equal((await kube.getPod(NS, POD)).metadata.name, POD);
    await kube.patchPodStatusAnnotations(NS, POD, { a: "b" });
    assert.equal(api.requests.at(-1)?.user, api.clientCertUser);
    assert.equal(api.connectionCount, 1, "kept alive");
    api.fault({ delayMs: 2000 });
    const slow = client({
      connection: { ...conn, caCertPem: undefined, insecureSkipTlsVerify: true },
      timeoutMs: 100,
      retries: 0,
    });
    assert.equal((await failure(slow.getPod(NS, POD))).reason, "Timeout");
  }, "clientCert");
});

Deno.test("malformed answers are code 6; invalid names are code 7 without a request", async () => {
  await withApi(async ({ api, client }) => {
    const kube = client();
    api.fault({ body: "{not json" });
    await assert.rejects(
      kube.getPod(NS, POD),
      (e) => e instanceof KubeError && kubeErrorCode(e) === 6,
    );
    api.fault({ body: '{"metadata":{"name":"x"}}' });
    await assert.rejects(
      kube.getPod(NS, POD),
      (e) => e instanceof KubeError && kubeErrorCode(e) === 6,
    );
    api.fault({
      status: 502,
      body: "<html>bad gateway</html>",
      contentType: "text/html",
      times: Infinity,
    });
    const err = await failure(client({ retries: 1 }).getPod(NS, POD));
    assert.equal(kubeErrorCode(err), 11);
    assert.match(err.details, /bad gateway/);
    const before = api.requests.length;
    for (const bad of ["", ".", "..", "a/b", "a%2f"]) {
      await assert.rejects(
        kube.getPod(NS, bad),
        (e) => e instanceof KubeError && kubeErrorCode(e) === 7,
      );
      await assert.rejects(
        kube.getPod(bad, POD),
        (e) => e instanceof KubeError && kubeErrorCode(e) === 7,
      );
    }
    assert.equal(api.requests.length, before);
  });
});

Deno.test("close() is idempotent and cancels in-flight requests; a caller signal aborts", async () => {
  await withApi(async ({ api, client }) => {
    api.fault({ delayMs: 3000, times: Infinity });
    const kube = client();
    const pending = failure(kube.getPod(NS, POD));
    await new Promise((r) => setTimeout(r, 50));
    const t0 = performance.now();
    kube.close();
    kube.close();
    const err = await pending;
    assert.equal(err.reason, "Aborted");
    assert.ok(performance.now() - t0 < 500);

    const ac = new AbortController();
    const other = client({ signal: ac.signal });
    setTimeout(() => ac.abort(), 50);
    assert.equal((await failure(other.getPod(NS, POD))).reason, "Aborted");
  });
});

Deno.test("tokens never reach the log", async () => {
  await withApi(async ({ api, client }) => {
    const lines: unknown[] = [];
    api.fault({ status: 503 });
    api.fault({ status: 401 });
    const kube = client({ logger: recordingLogger(lines) });
    await kube.getPod(NS, POD);
    assert.ok(lines.length >= 3);
    const text = JSON.stringify(lines);
    assert.ok(!text.includes(api.token));
  }, "tokenFile");
});

Deno.test("onRequest sees every attempt with its method and status (0: no answer), watches as WATCH", async () => {
  await withApi(async ({ api, client }) => {
    const seen: [string, number][] = [];
    const kube = client({ onRequest: (m, s) => seen.push([m, s]), timeoutMs: 150 });
    api.fault({ method: "PATCH", status: 500 });
    await kube.patchPodStatusAnnotations(NS, POD, { a: "b" });
    await failure(kube.getPod(NS, "absent"));
    const it = kube.watch("/apis/k8s.cni.cncf.io/v1/network-attachment-definitions", {
      resourceVersion: String(api.resourceVersion),
    });
    const first = it.next();
    await new Promise((r) => setTimeout(r, 50));
    kube.close();
    await first.catch(() => {});
    api.fault({ delayMs: 1000 });
    const timedOut = client({ onRequest: (m, s) => seen.push([m, s]), timeoutMs: 100, retries: 0 });
    await failure(timedOut.getPod(NS, POD));
    assert.deepEqual(seen, [["PATCH", 500], ["PATCH", 200], ["GET", 404], ["WATCH", 200], [
      "GET",
      0,
    ]]);
    assert.equal(kube.requestCount, 4, "one hook call per request sent");
  });
});
