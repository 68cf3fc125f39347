/**
 * GET pipelining (lib/k8s/http1/, RFC 9112 §9.3.2) against a real kube-apiserver (Go
 * net/http over HTTP/1.1, ALPN `http/1.1`): concurrent GETs of a per-call client
 * (`pipelineGets`) share one connection, also when they are its first requests, and each gets
 * its own object; the plugin process's ADD
 * of a pod with two NADs opens one connection. Connections are counted by a loopback TCP proxy
 * in front of the server (TLS passes through it). Needs `MANIFOLD_KUBE_APISERVER` (else
 * skipped with one line); the ADD test needs root.
 */

import assert from "node:assert/strict";
import { KubeClient } from "../../lib/k8s/client.ts";
import { realApiSuite } from "../support/kube_apiserver.ts";
import { startTcpProxy } from "../support/tcp_proxy.ts";
import { expectOk } from "../support/world.ts";
import { done, ensureNadCrd, realWorld } from "./cluster.ts";

const suite = realApiSuite({ root: true });

const NADS = ["net-a", "net-b", "net-c"];

suite.test("a per-call client's concurrent GETs share one connection and get their own objects", async (api) => {
  const ns = "pipeline-client";
  await ensureNadCrd(api.admin);
  await api.admin.createNamespace(ns);
  const proxy = startTcpProxy({ hostname: "127.0.0.1", port: api.ports.api });
  try {
    await api.admin.createPod(ns, "p");
    for (const name of NADS) {
      await api.admin.createNad(ns, name, JSON.stringify({ cniVersion: "1.0.0", type: name }));
    }
    const run = async (pipelineGets: boolean, podFirst = true) => {
      const before = proxy.accepted;
      using kube = new KubeClient({
        connection: {
          server: `https://127.0.0.1:${proxy.port}`,
          caCertPem: api.caPem,
          token: api.adminToken,
          insecureSkipTlsVerify: false,
        },
        pipelineGets,
      });
      if (podFirst) assert.equal((await kube.getPod(ns, "p")).metadata.name, "p");
      const nads = await Promise.all(
        NADS.map((n) => kube.getNetworkAttachmentDefinition(ns, n)),
      );
      assert.deepEqual(nads.map((n) => n.metadata.name), NADS);
      assert.deepEqual(nads.map((n) => JSON.parse(n.spec.config!).type), NADS);
      return proxy.accepted - before;
    };
    assert.equal(await run(true), 1, "pipelined: one connection");
    // The GETs are the first requests (runtime annotations): they wait for the one connection.
    assert.equal(await run(true, false), 1, "pipelined behind the opening one: one connection");
    assert.ok(await run(false) > 1, "without pipelining (the daemon's client): one per GET");
  } finally {
    await proxy.close();
    await api.admin.delete("v1", "Namespace", undefined, ns).catch(() => {});
  }
});

suite.test("the plugin's ADD of a pod with two NADs opens one connection", async (api) => {
  const w = await realWorld(api, {
    annotations: {
      "k8s.v1.cni.cncf.io/networks": JSON.stringify([
        { name: "bridge-net" },
        { name: "macvlan-net", interface: "data0", ips: ["10.240.3.7/24"] },
      ]),
    },
  });
  const proxy = startTcpProxy({ hostname: "127.0.0.1", port: api.ports.api });
  try {
    const text = await Deno.readTextFile(w.kubeconfig);
    await Deno.writeTextFile(
      w.kubeconfig,
      text.replaceAll(api.server, `https://127.0.0.1:${proxy.port}`),
    );
    expectOk(await w.call("ADD"), "ADD");
    assert.equal(proxy.accepted, 1, "connections the ADD opened");
    expectOk(await w.call("DEL"), "DEL");
  } finally {
    await proxy.close();
    await done(w);
  }
});

suite.end();
