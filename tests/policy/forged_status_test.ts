/**
 * Issue 28 §2 through a real `manifold daemon` (root; tests/policy/support/daemon_lab.ts: pods
 * attached through the plugin binary → daemon, real bridge + host-local, nftables, TCP between
 * the pods' netns): a local pod's addresses come from the daemon's attachment cache, not from its
 * network-status annotation, which anyone allowed to patch the pod can overwrite. Against the API
 * stand-in and the real kube-apiserver (its own server: one per test file).
 */

import assert from "node:assert/strict";
import { realApiSuite } from "../support/kube_apiserver.ts";
import { DaemonLab, daemonLabTest, reaches, WEB_TO_DB_80 } from "./support/daemon_lab.ts";

/**
 * A third party allowed to patch pods writes another pod's address into a local pod's
 * network-status (issue 28 §2): the pod keeps its access by its real address, the forged one
 * gets none.
 */
async function forgedStatus(lab: DaemonLab): Promise<void> {
  const srv = await lab.pod("a", "server", { app: "db" }, 10);
  const web = await lab.pod("a", "web", { app: "web" }, 11);
  const oth = await lab.pod("a", "other", {}, 12);
  const probe = await lab.pod("a", "probe", {}, 14);
  await srv.agent.listen(80);
  await lab.api.createPolicy(WEB_TO_DB_80);
  await reaches(oth, srv, 80, false);
  assert.equal(await web.agent.connects(srv.ip, 80), true, "web passes before the forgery");

  // A third party allowed to patch pods claims `other`'s address for `web` (a local pod).
  await lab.api.setPodAnnotation(
    "a",
    "web",
    "k8s.v1.cni.cncf.io/network-status",
    JSON.stringify([{ name: "a/net1", interface: "net1", ips: [`${oth.ip}/24`] }]),
  );
  // A later change of the same pod watch: once it is in force, the forgery was seen too.
  await lab.api.setPodLabels("a", "probe", { app: "web" });
  await reaches(probe, srv, 80, true, 5000);
  assert.equal(
    await oth.agent.connects(srv.ip, 80),
    false,
    "the forged address gets no access",
  );
  assert.equal(
    await web.agent.connects(srv.ip, 80),
    true,
    "web is policed by its real address",
  );
}

daemonLabTest(
  "manifold daemon: a local pod's forged network-status neither moves its access nor gives the forged address any (issue 28 §2)",
  forgedStatus,
);

const real = realApiSuite({ root: true });
real.test(
  "real kube-apiserver: a local pod's forged network-status gives the forged address no access",
  async (server) => {
    const lab = new DaemonLab();
    try {
      await lab.start({ server });
      await forgedStatus(lab);
    } finally {
      await lab.cleanup();
    }
  },
);
real.end();
