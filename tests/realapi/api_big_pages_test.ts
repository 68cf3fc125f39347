/**
 * Big list pages (issue 28 §5) against a real kube-apiserver (root): 520 pods of 70 KB
 * (≈ 36 MB, over the 32 MiB body cap at the default page of 500) listed by the policy agent
 * of a real `manifold daemon`. The page over the cap is a final error for that request; the
 * lister halves `limit` and continues, the daemon becomes ready, logs one line per halving,
 * counts them in `manifold_api_list_page_shrunk_total`, and its peak RSS stays bounded.
 */

import assert from "node:assert/strict";
import { realApiSuite } from "../support/kube_apiserver.ts";
import { DaemonLab } from "../policy/support/daemon_lab.ts";

const suite = realApiSuite({ root: true });

const PODS = 520;
const ANNOTATION_BYTES = 70_000;
/** Peak RSS the daemon may reach while listing ≈ 36 MB of pods, bytes. */
const MAX_RSS = 600 * 1024 * 1024;

suite.test("520 pods of 70 KB: the policy agent lists with smaller pages and becomes ready, RSS bounded", async (server) => {
  const lab = new DaemonLab();
  const ns = "big-pages";
  try {
    await lab.start({
      server,
      readyTimeoutMs: 120_000,
      beforeDaemon: async () => {
        await server.admin.createNamespace(ns);
        const filler = "x".repeat(ANNOTATION_BYTES);
        for (let i = 0; i < PODS; i += 20) {
          await Promise.all(
            Array.from(
              { length: Math.min(20, PODS - i) },
              (_, j) =>
                server.admin.createPod(ns, `big-${i + j}`, {
                  annotations: { "example.com/filler": filler },
                }),
            ),
          );
        }
      },
    });
    const metrics = (await lab.http("/metrics")).text;
    const shrunk = metrics.split("\n").find((l) =>
      l.startsWith('manifold_api_list_page_shrunk_total{resource="pods"}')
    );
    assert.ok(shrunk && Number(shrunk.split(" ").pop()) >= 1, `metric: ${shrunk}`);
    const status = await Deno.readTextFile(`/proc/${lab.daemon.child.pid}/status`);
    const hwm = Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? "0") * 1024;
    console.log(`${shrunk}; daemon peak RSS ${(hwm / 1048576).toFixed(0)} MiB`);
    assert.ok(hwm > 0 && hwm < MAX_RSS, `peak RSS ${hwm}`);
  } finally {
    await lab.cleanup();
    await server.admin.delete("v1", "Namespace", undefined, ns).catch(() => {});
  }
});

suite.end();
