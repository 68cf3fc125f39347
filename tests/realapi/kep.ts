/**
 * Shared by the KEP-3698 real-API tests: deploy/'s CRDs and the controller's account installed
 * once per API server, `manifold controller` run in-process with that account's token, and
 * small readers of PodNetworks and their conditions.
 */

import assert from "node:assert/strict";
import { runControllerCli } from "../../lib/cli/controller.ts";
import { nullLogger } from "../../lib/log/mod.ts";
import type { KubeApiServer } from "../support/kube_apiserver.ts";
import { type KubeObject, KubeRestError } from "../support/kube_rest.ts";
import { until } from "../support/wait.ts";
import { deployObjects } from "./cluster.ts";

export const GV = "multinetwork.manifold.dev/v1alpha1";
export const FINALIZER = "multinetwork.manifold.dev/in-use";
export const KEP = "multinetwork.manifold.dev/networks";

const installed = new WeakMap<KubeApiServer, Promise<void>>();
/** deploy/'s CRDs and the controller's ServiceAccount, role and binding, applied once. */
export function install(api: KubeApiServer): Promise<void> {
  let p = installed.get(api);
  if (!p) {
    p = (async () => {
      for (const o of await deployObjects()) {
        if (o.kind === "CustomResourceDefinition") await api.admin.installCrd(o);
        else if (o.metadata?.name === "manifold-controller" && o.kind !== "Deployment") {
          await api.admin.ensure(o);
        }
      }
    })();
    installed.set(api, p);
  }
  return p;
}

/** `manifold controller` in-process with the controller ServiceAccount's token. */
export async function startController(api: KubeApiServer, dir: string, args: string[] = []) {
  const token = await api.admin.serviceAccountToken("kube-system", "manifold-controller");
  const kubeconfig = `${dir}/controller-${crypto.randomUUID().slice(0, 6)}.kubeconfig`;
  await api.writeKubeconfig(kubeconfig, { token });
  const stop = new AbortController();
  let err = "";
  const running = runControllerCli(["--kubeconfig", kubeconfig, ...args], {
    signal: stop.signal,
    logger: nullLogger,
    stdout: () => {},
    stderr: (s) => void (err += s),
    timing: { debounceMs: 10 },
  });
  return {
    async stop() {
      stop.abort();
      assert.equal(await running, 0, err);
    },
  };
}

/**
 * One controller test's world, always torn down: deploy/'s KEP CRDs installed, a fresh
 * namespace (with its `default` ServiceAccount), a scratch directory and `manifold controller`
 * running with `args` under its ServiceAccount's token; afterwards the controller is stopped
 * (exit 0 asserted), the namespace deleted and the directory removed — also when `fn` throws.
 *
 * @param api the file's kube-apiserver
 * @param args the controller's flags (e.g. `--no-default-podnetwork`)
 * @param fn the test: the namespace, the controller, the scratch directory
 */
export async function withController(
  api: KubeApiServer,
  args: string[],
  fn: (w: { ns: string; ctl: { stop(): Promise<void> }; dir: string }) => Promise<void>,
): Promise<void> {
  await install(api);
  const dir = await Deno.makeTempDir({ prefix: "mft-kep-" });
  const ns = `mfk-${crypto.randomUUID().slice(0, 8)}`;
  await api.admin.createNamespace(ns);
  const ctl = await startController(api, dir, args);
  try {
    await fn({ ns, ctl, dir });
  } finally {
    await ctl.stop();
    await api.admin.delete("v1", "Namespace", undefined, ns);
    await Deno.remove(dir, { recursive: true });
  }
}

/** A PodNetwork of Manifold's provider → one NAD. */
export const pn = (
  name: string,
  nad: { namespace: string; name: string },
  extra: KubeObject = {},
) => ({
  apiVersion: GV,
  kind: "PodNetwork",
  metadata: { name },
  spec: {
    provider: "manifold.dev/cni",
    parametersRefs: [{
      group: "k8s.cni.cncf.io",
      kind: "network-attachment-definitions",
      ...nad,
    }],
    ...extra,
  },
});

/** A PodNetwork or PodNetworkAttachment, undefined when it does not exist. */
export async function getKep(
  api: KubeApiServer,
  name: string,
  namespace?: string,
): Promise<KubeObject | undefined> {
  try {
    return await api.admin.get(
      GV,
      namespace === undefined ? "PodNetwork" : "PodNetworkAttachment",
      namespace,
      name,
    );
  } catch (e) {
    if (e instanceof KubeRestError && e.status === 404) return undefined;
    throw e;
  }
}

/** A PodNetwork, undefined when it does not exist. */
export function getPn(api: KubeApiServer, name: string): Promise<KubeObject | undefined> {
  return getKep(api, name);
}

/** `"<ParamsReady status>/<reason> <Ready status>/<reason>"` of the object now. */
export function condText(o: KubeObject | undefined): string {
  const c = (t: string) => o?.status?.conditions?.find((x: KubeObject) => x.type === t);
  const f = (t: string) => `${c(t)?.status ?? "-"}/${c(t)?.reason ?? "-"}`;
  return `${f("ParamsReady")} ${f("Ready")}`;
}

/** Waits until the PodNetwork's (or, with `namespace`, attachment's) conditions read `want`. */
export async function waitConditions(
  api: KubeApiServer,
  name: string,
  want: string,
  namespace?: string,
) {
  let last = "";
  await until(
    async () => (last = condText(await getKep(api, name, namespace))) === want,
    `${name}: ${want} (last ${last})`,
    10_000,
  );
}

/** Whether the object carries the InUse finalizer. */
export async function hasFinalizer(
  api: KubeApiServer,
  name: string,
  namespace?: string,
): Promise<boolean> {
  return ((await getKep(api, name, namespace))?.metadata.finalizers ?? []).includes(FINALIZER);
}

/** A bridge NAD config (subnet 10.240.9.0/24). */
export const NAD_CONFIG = JSON.stringify({
  cniVersion: "1.0.0",
  type: "bridge",
  bridge: "mfkep0",
  ipam: { type: "host-local", subnet: "10.240.9.0/24" },
});
