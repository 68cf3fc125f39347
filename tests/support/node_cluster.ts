/**
 * A real single-node Kubernetes cluster for the node tier (tests/node/): etcd and
 * kube-apiserver (tests/support/kube_apiserver.ts), kube-controller-manager, kube-scheduler,
 * the node's own containerd (own root, state, socket and CNI dirs) and kubelet, all on
 * loopback ports in one temp dir, with Manifold installed as the node's CNI exactly as
 * `manifold install` does on a real node, per call or with `manifold daemon` as a process.
 *
 * Needs: `MANIFOLD_KUBE_APISERVER` (kubelet, kube-controller-manager and kube-scheduler next to
 * it, or in `MANIFOLD_KUBE_BIN_DIR`), `etcd`, `containerd`, `runc`, `ctr`, `gcc` on PATH, root.
 * Otherwise {@link nodeTierIgnored} is true and {@link nodeTest} prints {@link NODE_SKIP_NOTICE}
 * once and registers the test as ignored.
 *
 * Teardown ({@link NodeCluster.stop}) removes pods' sandboxes, stops every process (also the
 * shims), unmounts what containerd mounted under the temp dir, deletes the `cni-*` netns the
 * node made, the cgroups it made and the temp dir; it also runs on `unload` and SIGINT.
 *
 * @module
 */

import { type KubeApiServer, kubeApiServerBinary, startKubeApiServer } from "./kube_apiserver.ts";
import type { KubeObject, KubeRest } from "./kube_rest.ts";
import { loopbackPort } from "./ports.ts";
import { containerdToml, kubeletConfig, type NodeLayout, primaryConflist } from "./node/configs.ts";
import { importImages, NETCHECK_IMAGE, PAUSE_IMAGE } from "./node/images.ts";
import { Proc, run } from "./node/procs.ts";
import { inspectNetns, type NetnsSnapshot } from "../../lib/netlink/mod.ts";
import { findLeaks, type LeakReport } from "./leaks.ts";
import { parseAllDocuments } from "yaml";

export { NETCHECK_IMAGE, PAUSE_IMAGE } from "./node/images.ts";
export type { NodeLayout } from "./node/configs.ts";

/** Environment variable naming the dir of kubelet, kube-controller-manager, kube-scheduler. */
export const KUBE_BIN_DIR_ENV = "MANIFOLD_KUBE_BIN_DIR";

const REPO = new URL("../../", import.meta.url).pathname.replace(/\/$/, "");

/** How the plugin runs on the node. */
export type NodeMode = "per-call" | "daemon";

/** Options of {@link startNodeCluster}. */
export interface NodeClusterOptions {
  /** `per-call` (default): the binary does the work; `daemon`: `manifold daemon` does, forwarded to. */
  mode?: NodeMode;
  /** Further keys of Manifold's config (`manifold install --plugin-conf`). */
  pluginConf?: Record<string, unknown>;
  /** Subnet of the cluster default network (bridge + host-local); default `10.244.<n>.0/24`. */
  podSubnet?: string;
  /**
   * The node's CNI bin and config dirs (created, removed on stop) instead of ones in the temp
   * dir: deploy/ on the node (tests/node/overlay/) names fixed host paths.
   */
  cniDirs?: { bin: string; conf: string };
  /**
   * Install Manifold as the node's CNI (default true). false: only the cluster default
   * network's config is there; something else (the DaemonSet) installs Manifold.
   */
  installManifold?: boolean;
}

/** What is missing for the node tier, or undefined when everything is there. */
export function nodeTierMissing(): string | undefined {
  if (Deno.uid() !== 0) return "not root";
  const api = kubeApiServerBinary();
  if (!api) return "MANIFOLD_KUBE_APISERVER (kube-apiserver binary) or etcd";
  const dir = kubeBinDir();
  for (const b of ["kubelet", "kube-controller-manager", "kube-scheduler"]) {
    if (!isFile(`${dir}/${b}`)) return `${dir}/${b}`;
  }
  for (const c of ["containerd", "runc", "ctr", "gcc", "setsid"]) {
    if (!onPath(c)) return `${c} on PATH`;
  }
  if (!isFile("/usr/lib/cni/bridge")) return "/usr/lib/cni/bridge (containernetworking-plugins)";
  return undefined;
}

/** The one line printed when the node tier is skipped. */
export const NODE_SKIP_NOTICE = "node tier (tests/node/) skipped: needs root, " +
  "MANIFOLD_KUBE_APISERVER with kubelet, kube-controller-manager, kube-scheduler beside it " +
  `(or in ${KUBE_BIN_DIR_ENV}; the official kubernetes-server-linux-amd64.tar.gz server/bin/), ` +
  "etcd, containerd, runc, gcc (scripts/setup.sh installs them)";

/** True when the node tier cannot run here. */
export function nodeTierIgnored(): boolean {
  return nodeTierMissing() !== undefined;
}

let noticeShown = false;

/**
 * Registers a node-tier test: ignored (with {@link NODE_SKIP_NOTICE} printed once, naming what
 * is missing) when the tier cannot run. No sanitizers: the cluster outlives single awaits.
 */
export function nodeTest(name: string, fn: (t: Deno.TestContext) => Promise<void>): void {
  const missing = nodeTierMissing();
  if (missing && !noticeShown) {
    noticeShown = true;
    console.log(`${NODE_SKIP_NOTICE} (missing: ${missing})`);
  }
  Deno.test({
    name,
    ignore: missing !== undefined,
    sanitizeOps: false,
    sanitizeResources: false,
    fn,
  });
}

function kubeBinDir(): string {
  const d = Deno.env.get(KUBE_BIN_DIR_ENV);
  if (d) return d;
  const api = Deno.env.get("MANIFOLD_KUBE_APISERVER") ?? "";
  return api.replace(/\/[^/]*$/, "") || ".";
}

function isFile(p: string): boolean {
  try {
    return Deno.statSync(p).isFile;
  } catch {
    return false;
  }
}

function onPath(cmd: string): boolean {
  return (Deno.env.get("PATH") ?? "").split(":").some((d) => isFile(`${d}/${cmd}`));
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/**
 * Polls `fn` until it returns a value other than undefined/false.
 *
 * @throws Error `timed out after MS ms: what` (with the last error of `fn`, if any)
 */
export async function poll<T>(
  what: string,
  fn: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 60_000,
  everyMs = 250,
): Promise<T> {
  const end = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined && v !== false) return v as T;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) {
      throw new Error(
        `timed out after ${timeoutMs} ms: ${what}${last ? ` (last error: ${last})` : ""}`,
      );
    }
    await sleep(everyMs);
  }
}

const live = new Set<NodeCluster>();
let hooked = false;
function hookExit() {
  if (hooked) return;
  hooked = true;
  globalThis.addEventListener("unload", () => {
    for (const c of live) c.killNow();
  });
  Deno.addSignalListener("SIGINT", () => {
    Promise.all([...live].map((c) => c.stop())).finally(() => Deno.exit(130));
  });
}

let subnetSeq = 0;

/** One running node cluster. Always {@link NodeCluster.stop} it (in `finally`). */
export class NodeCluster {
  /** The API server (admin client, certificates, tokens). */
  readonly api: KubeApiServer;
  /** Admin client. */
  readonly admin: KubeRest;
  /** The node's name. */
  readonly nodeName: string;
  /** The node's paths and ports. */
  readonly layout: NodeLayout;
  /** Per call or daemon. */
  readonly mode: NodeMode;
  /** From call to node Ready with Manifold installed, ms. */
  startMs = 0;
  /** The daemon's socket (daemon mode). */
  readonly daemonSocket?: string;
  #containerd?: Proc;
  #kubelet?: Proc;
  #kcm?: Proc;
  #scheduler?: Proc;
  #daemon?: Proc;
  #stopped = false;
  #bridge: string;
  #cgroupsBefore = new Set<string>();

  /** @internal use {@link startNodeCluster}. */
  constructor(api: KubeApiServer, layout: NodeLayout, mode: NodeMode, bridge: string) {
    this.api = api;
    this.admin = api.admin;
    this.layout = layout;
    this.mode = mode;
    this.#bridge = bridge;
    this.nodeName = `manifold-node-${crypto.randomUUID().slice(0, 6)}`;
    if (mode === "daemon") this.daemonSocket = `${layout.dir}/manifold/manifold.sock`;
  }

  /** Path of Manifold's generated config (`00-manifold.conflist`). */
  get manifoldConfig(): string {
    return `${this.layout.cniConfDir}/00-manifold.conflist`;
  }

  #log(name: string): string {
    return `${this.layout.dir}/logs/${name}.log`;
  }

  /** Starts (or restarts) containerd and waits until `ctr version` answers. */
  async startContainerd(): Promise<void> {
    this.#containerd = new Proc(
      "containerd",
      "containerd",
      ["--config", `${this.layout.dir}/containerd.toml`],
      this.#log("containerd"),
    );
    await poll(
      "containerd answers",
      async () => {
        if (this.#containerd?.exited) {
          throw new Error(
            `containerd exited:\n${await this.#containerd.tail()}`,
          );
        }
        await this.ctr("version");
        return true;
      },
      30_000,
      100,
    );
  }

  /** Starts (or restarts) kubelet; {@link waitNodeReady} waits for it. */
  startKubelet(): void {
    const d = this.layout.dir;
    this.#kubelet = new Proc("kubelet", `${kubeBinDir()}/kubelet`, [
      `--config=${d}/kubelet.json`,
      `--kubeconfig=${d}/admin.kubeconfig`,
      `--hostname-override=${this.nodeName}`,
      `--root-dir=${d}/kubelet`,
      `--cert-dir=${d}/kubelet/pki`,
      "--v=1",
    ], this.#log("kubelet"));
  }

  /** Starts (or restarts) `manifold daemon` (daemon mode) and waits for its socket. */
  async startDaemon(): Promise<void> {
    if (!this.daemonSocket) throw new Error("not in daemon mode");
    this.#daemon = new Proc("manifold-daemon", `${REPO}/scripts/manifold`, [
      "daemon",
      "--config",
      this.manifoldConfig,
      "--socket",
      this.daemonSocket,
      "--node-name",
      this.nodeName,
    ], this.#log("daemon"));
    await poll(
      "manifold daemon socket",
      async () => {
        if (this.#daemon?.exited) {
          throw new Error(
            `manifold daemon exited:\n${await this.#daemon.tail()}`,
          );
        }
        return (await Deno.stat(this.daemonSocket!)).isSocket;
      },
      30_000,
      100,
    );
  }

  /** Stops the daemon (SIGTERM; `kill`: SIGKILL). */
  async stopDaemon(kill = false): Promise<void> {
    if (kill) await this.#daemon?.kill();
    else await this.#daemon?.stop();
  }

  /** Waits until the node is Ready (its `Ready` condition True). */
  async waitNodeReady(timeoutMs = 60_000): Promise<void> {
    await poll(
      `node ${this.nodeName} Ready`,
      async () => {
        if (this.#kubelet?.exited) {
          throw new Error(`kubelet exited:\n${await this.#kubelet.tail()}`);
        }
        const n = await this.admin.request("GET", `/api/v1/nodes/${this.nodeName}`);
        // deno-lint-ignore no-explicit-any
        return n.status?.conditions?.some((c: any) => c.type === "Ready" && c.status === "True");
      },
      timeoutMs,
      250,
    );
  }

  /** kubelet stopped (SIGTERM, or SIGKILL with `kill`). */
  async stopKubelet(kill = false): Promise<void> {
    if (kill) await this.#kubelet?.kill();
    else await this.#kubelet?.stop();
  }

  /** containerd stopped (SIGTERM, or SIGKILL with `kill`); the shims keep the containers running. */
  async stopContainerd(kill = false): Promise<void> {
    if (kill) await this.#containerd?.kill();
    else await this.#containerd?.stop();
  }

  /** Restarts kubelet (SIGTERM or SIGKILL) and waits for the node Ready again. */
  async restartKubelet(kill = false): Promise<void> {
    await this.stopKubelet(kill);
    this.startKubelet();
    await this.waitNodeReady();
  }

  /** Restarts containerd (SIGTERM or SIGKILL); the shims and pods keep running. */
  async restartContainerd(kill = false): Promise<void> {
    await this.stopContainerd(kill);
    await this.startContainerd();
  }

  /**
   * A power cut and boot: kubelet and containerd SIGKILLed, every shim and container process
   * killed, every netns the node made unmounted and deleted, containerd's state dir emptied
   * (it is a tmpfs on a real node); the daemon (daemon mode) killed too. Then containerd,
   * the daemon and kubelet start again and the node becomes Ready. The cache dir and the
   * host-local leases survive, as on a disk.
   */
  async reboot(): Promise<void> {
    await this.trackNetns();
    await this.stopKubelet(true);
    await this.stopContainerd(true);
    if (this.#daemon) await this.stopDaemon(true);
    await this.#killShims();
    await this.#removeNetns();
    await this.#unmountUnder(`${this.layout.dir}/containerd/state`);
    await Deno.remove(`${this.layout.dir}/containerd/state`, { recursive: true }).catch(() => {});
    await this.startContainerd();
    if (this.mode === "daemon") await this.startDaemon();
    this.startKubelet();
    await this.waitNodeReady();
  }

  /** `ctr --address <socket> -n k8s.io args…`; stdout. */
  async ctr(...args: string[]): Promise<string> {
    return (await run("ctr", ["--address", this.layout.containerdSocket, "-n", "k8s.io", ...args]))
      .stdout;
  }

  /** Creates `obj` (server-side: POST; an existing object is left as it is). */
  apply(obj: KubeObject): Promise<KubeObject> {
    return this.admin.ensure(obj);
  }

  /** Creates a namespace; the controller-manager gives it its `default` ServiceAccount. */
  async createNamespace(name: string): Promise<void> {
    await this.apply({ apiVersion: "v1", kind: "Namespace", metadata: { name } });
    await poll(
      `ServiceAccount default in ${name}`,
      () => this.admin.get("v1", "ServiceAccount", name, "default").then(() => true),
      30_000,
    );
  }

  /** Creates a NetworkAttachmentDefinition (`config`: the CNI config JSON text). */
  createNad(namespace: string, name: string, config: Record<string, unknown>): Promise<KubeObject> {
    return this.admin.createNad(namespace, name, JSON.stringify(config));
  }

  /** The pods of `namespace` matching `labelSelector` (`k=v,…`). */
  async listPods(namespace: string, labelSelector = ""): Promise<KubeObject[]> {
    const q = labelSelector ? `?labelSelector=${encodeURIComponent(labelSelector)}` : "";
    const r = await this.admin.request("GET", `/api/v1/namespaces/${namespace}/pods${q}`);
    return r.items ?? [];
  }

  /**
   * Waits until exactly `count` pods match (none being deleted) and all are Running and Ready.
   *
   * @returns the pods
   * @throws Error on timeout, with the pods' phases and the kubelet log's tail
   */
  async waitPodsRunning(
    namespace: string,
    labelSelector: string,
    count: number,
    timeoutMs = 120_000,
  ): Promise<KubeObject[]> {
    let last: KubeObject[] = [];
    try {
      return await poll(
        `${count} pods ${labelSelector} Running in ${namespace}`,
        async () => {
          const pods = await this.listPods(namespace, labelSelector);
          last = pods;
          if (pods.length !== count) return undefined;
          const ok = pods.every((p) =>
            !p.metadata.deletionTimestamp && p.status?.phase === "Running" &&
            // deno-lint-ignore no-explicit-any
            p.status?.conditions?.some((c: any) => c.type === "Ready" && c.status === "True")
          );
          return ok ? pods : undefined;
        },
        timeoutMs,
        500,
      );
    } catch (e) {
      const phases = last.map((p) => `${p.metadata.name}:${p.status?.phase}`).join(" ");
      throw new Error(
        `${(e as Error).message}\npods: ${phases}\nkubelet:\n${await this.#kubelet?.tail(15)}`,
      );
    }
  }

  /** Waits until no pod matches `labelSelector` in `namespace`. */
  async waitPodsGone(namespace: string, labelSelector: string, timeoutMs = 120_000): Promise<void> {
    await poll(
      `pods ${labelSelector} gone from ${namespace}`,
      async () => (await this.listPods(namespace, labelSelector)).length === 0,
      timeoutMs,
      500,
    );
  }

  /** Sets a Deployment's replicas. */
  async scale(namespace: string, deployment: string, replicas: number): Promise<void> {
    await this.admin.patch(
      { apiVersion: "apps/v1", kind: "Deployment", namespace, name: deployment },
      { spec: { replicas } },
    );
  }

  /** The containerd sandbox ids of every live pod sandbox on the node (any state). */
  async sandboxes(): Promise<{ id: string; podUid: string; podName: string; namespace: string }[]> {
    const out = await this.ctr("containers", "ls", "-q");
    const res = [];
    for (const id of out.split("\n").filter(Boolean)) {
      const info = await this.#containerInfo(id).catch(() => undefined);
      const l = info?.Labels ?? {};
      if (l["io.cri-containerd.kind"] !== "sandbox") continue;
      res.push({
        id,
        podUid: l["io.kubernetes.pod.uid"],
        podName: l["io.kubernetes.pod.name"],
        namespace: l["io.kubernetes.pod.namespace"],
      });
    }
    return res;
  }

  // deno-lint-ignore no-explicit-any
  async #containerInfo(id: string): Promise<any> {
    return JSON.parse(await this.ctr("containers", "info", id));
  }

  /**
   * The pod's current sandbox and its netns path, from containerd (the sandbox container's
   * OCI spec: `linux.namespaces[type=network].path`, the `CNI_NETNS` the CNI calls got).
   *
   * @throws Error when the pod has no sandbox on the node
   */
  async podSandbox(pod: KubeObject): Promise<{ id: string; netns: string }> {
    const uid = pod.metadata.uid;
    const out = await this.ctr(
      "containers",
      "ls",
      "-q",
      `labels."io.kubernetes.pod.uid"==${uid},labels."io.cri-containerd.kind"==sandbox`,
    );
    const ids = out.split("\n").filter(Boolean);
    for (const id of ids) {
      const info = await this.#containerInfo(id);
      const ns = (info.Spec?.linux?.namespaces ?? [])
        // deno-lint-ignore no-explicit-any
        .find((n: any) => n.type === "network")?.path;
      // The live one: its task runs.
      const task = await this.ctr("tasks", "ls").then((t) => t.includes(id)).catch(() => false);
      if (ns && task) return { id, netns: ns };
    }
    throw new Error(
      `no running sandbox for pod ${pod.metadata.namespace}/${pod.metadata.name} (${uid}): ${ids}`,
    );
  }

  /** What the kernel holds in the pod's netns, read with Manifold's netlink. */
  async podNetns(pod: KubeObject): Promise<NetnsSnapshot> {
    const { netns } = await this.podSandbox(pod);
    return inspectNetns(netns);
  }

  /** The pod's `k8s.v1.cni.cncf.io/network-status`, parsed (`[]` when absent). */
  // deno-lint-ignore no-explicit-any
  networkStatus(pod: KubeObject): any[] {
    const text = pod.metadata.annotations?.["k8s.v1.cni.cncf.io/network-status"];
    return text ? JSON.parse(text) : [];
  }

  /**
   * What the node still holds of the sandboxes `containerIds` (tests/support/leaks.ts): host-local
   * leases in the node's ipam dir, live cache records in Manifold's cache dir.
   */
  leaks(containerIds: string[]): Promise<LeakReport> {
    return findLeaks({
      containerIds,
      ipamDir: this.layout.ipamDir,
      cacheDir: this.layout.cacheDir,
    });
  }

  /** The log of a component: `containerd`, `kubelet`, `daemon`, `kube-controller-manager`, … */
  logPath(component: string): string {
    return this.#log(component);
  }

  /** Stops everything and removes everything the node made. Idempotent; never throws. */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    live.delete(this);
    const step = async (f: () => Promise<unknown>) => {
      try {
        await f();
      } catch (e) {
        console.error(`node harness teardown: ${e}`);
      }
    };
    await step(() => this.trackNetns());
    await step(() => this.#kubelet?.stop(5000) ?? Promise.resolve());
    await step(() => this.#scheduler?.stop(3000) ?? Promise.resolve());
    await step(() => this.#kcm?.stop(3000) ?? Promise.resolve());
    await step(() => this.#containerd?.stop(5000) ?? Promise.resolve());
    await step(() => this.#daemon?.stop(5000) ?? Promise.resolve());
    await step(() => this.#killShims());
    await step(() => this.#removeNetns());
    await step(() => this.#unmountUnder(this.layout.dir));
    await step(() => this.#removeCgroups());
    await step(() => run("ip", ["link", "del", this.#bridge]).catch(() => {}));
    await step(() => this.api.stop());
    await step(() => Deno.remove(this.layout.dir, { recursive: true }));
    for (const d of [this.layout.cniBinDir, this.layout.cniConfDir]) {
      if (!d.startsWith(`${this.layout.dir}/`)) {
        await step(() => Deno.remove(d, { recursive: true }).catch(() => {}));
      }
    }
  }

  /** The `unload` safety net: SIGKILL every process (no waiting). */
  killNow(): void {
    for (const p of [this.#kubelet, this.#scheduler, this.#kcm, this.#containerd, this.#daemon]) {
      if (p && !p.exited) {
        try {
          Deno.kill(-p.pid, "SIGKILL");
        } catch { /* gone */ }
      }
    }
  }

  /** Every process whose command line names this node's dir (shims, containers' inits). */
  async #killShims(): Promise<void> {
    const mine: number[] = [];
    for await (const e of Deno.readDir("/proc")) {
      if (!/^\d+$/.test(e.name)) continue;
      const cmd = await Deno.readTextFile(`/proc/${e.name}/cmdline`).catch(() => "");
      if (cmd.includes(this.layout.dir) || cmd.includes(this.layout.containerdSocket)) {
        mine.push(Number(e.name));
      }
    }
    // Containers' processes: children of the shims (their PIDs are in the shims' cgroups/tasks).
    const pids = new Set(mine);
    for (const pid of mine) {
      const kids = await run("pgrep", ["-P", String(pid)]).then((r) => r.stdout).catch(() => "");
      for (const k of kids.split("\n").filter(Boolean)) {
        pids.add(Number(k));
        const grand = await run("pgrep", ["-P", k]).then((r) => r.stdout).catch(() => "");
        for (const g of grand.split("\n").filter(Boolean)) pids.add(Number(g));
      }
    }
    for (const pid of pids) {
      if (pid === Deno.pid) continue;
      try {
        Deno.kill(pid, "SIGKILL");
      } catch { /* gone */ }
    }
    await poll(
      "node processes gone",
      () =>
        [...pids].every((p) => {
          try {
            const s = Deno.readTextFileSync(`/proc/${p}/stat`);
            return / Z /.test(s);
          } catch {
            return true;
          }
        }),
      10_000,
      100,
    ).catch(() => {});
  }

  /** Unmounts and deletes the netns this node's CNI calls used (`cni-*` bind mounts). */
  async #removeNetns(): Promise<void> {
    const mounts = await Deno.readTextFile("/proc/self/mountinfo");
    for (const line of mounts.split("\n")) {
      const target = line.split(" ")[4];
      if (!target || !/^\/(var\/)?run\/netns\/cni-/.test(target)) continue;
      // Only ours: a netns made for one of our sandboxes is named in containerd's state/root.
      if (!this.#netnsOwned.has(target.replace(/^\/var/, ""))) continue;
      await run("umount", ["-l", target]).catch(() => {});
      await Deno.remove(target).catch(() => {});
    }
  }

  /** netns paths (`/run/netns/cni-…`) seen in this node's sandboxes; kept fresh by {@link trackNetns}. */
  #netnsOwned = new Set<string>();

  /** Records the netns of every sandbox now on the node (teardown removes only those). */
  async trackNetns(): Promise<void> {
    for (const s of await this.sandboxes().catch(() => [])) {
      const info = await this.#containerInfo(s.id).catch(() => undefined);
      // deno-lint-ignore no-explicit-any
      const p = (info?.Spec?.linux?.namespaces ?? []).find((n: any) => n.type === "network")?.path;
      if (p) this.#netnsOwned.add(p.replace(/^\/var/, ""));
    }
  }

  async #unmountUnder(dir: string): Promise<void> {
    const mounts = await Deno.readTextFile("/proc/self/mountinfo");
    const targets = mounts.split("\n").map((l) => l.split(" ")[4]).filter((t) =>
      t && t.startsWith(dir + "/")
    ).sort((a, b) => b.length - a.length);
    for (const t of targets) await run("umount", ["-l", t]).catch(() => {});
  }

  /** Cgroups that did not exist before start: every dir new under each v1 controller's root. */
  async #removeCgroups(): Promise<void> {
    // Deepest first: a container's cgroup before containerd's namespace level.
    const dirs = (await cgroupDirs()).sort((a, b) => b.length - a.length);
    for (const dir of dirs) {
      if (this.#cgroupsBefore.has(dir)) continue;
      await rmdirDeep(dir);
    }
  }

  /** @internal */
  async recordCgroups(): Promise<void> {
    this.#cgroupsBefore = new Set(await cgroupDirs());
  }

  /** @internal starts controller-manager and scheduler. */
  startControlPlane(): void {
    const d = this.layout.dir;
    const bin = kubeBinDir();
    this.#kcm = new Proc("kube-controller-manager", `${bin}/kube-controller-manager`, [
      `--kubeconfig=${d}/admin.kubeconfig`,
      `--service-account-private-key-file=${this.api.dir}/sa.key`,
      `--root-ca-file=${this.api.dir}/ca.crt`,
      "--use-service-account-credentials",
      "--leader-elect=false",
      "--bind-address=127.0.0.1",
      `--secure-port=${loopbackPort()}`,
      "--controllers=*,-nodeipam,-cloud-node-lifecycle,-route,-service,-persistentvolume-binder,-attachdetach",
      "--node-monitor-grace-period=60s",
    ], this.#log("kube-controller-manager"));
    this.#scheduler = new Proc("kube-scheduler", `${bin}/kube-scheduler`, [
      `--kubeconfig=${d}/admin.kubeconfig`,
      "--leader-elect=false",
      "--bind-address=127.0.0.1",
      `--secure-port=${loopbackPort()}`,
    ], this.#log("kube-scheduler"));
  }

  /** @internal registers for the exit hooks. */
  track(): void {
    hookExit();
    live.add(this);
  }
}

async function cgroupDirs(): Promise<string[]> {
  const res: string[] = [];
  try {
    for await (const c of Deno.readDir("/sys/fs/cgroup")) {
      if (!c.isDirectory) continue;
      for await (const e of Deno.readDir(`/sys/fs/cgroup/${c.name}`)) {
        if (!e.isDirectory) continue;
        res.push(`/sys/fs/cgroup/${c.name}/${e.name}`);
        // containerd's namespace level (shared by nodes running at once): its children too.
        if (e.name !== "k8s.io") continue;
        for await (const k of Deno.readDir(`/sys/fs/cgroup/${c.name}/k8s.io`)) {
          if (k.isDirectory) res.push(`/sys/fs/cgroup/${c.name}/k8s.io/${k.name}`);
        }
      }
    }
  } catch { /* no cgroup fs */ }
  return res;
}

async function rmdirDeep(dir: string): Promise<void> {
  try {
    for await (const e of Deno.readDir(dir)) if (e.isDirectory) await rmdirDeep(`${dir}/${e.name}`);
    await Deno.remove(dir);
  } catch { /* busy or gone */ }
}

/**
 * Starts a node cluster: API server, controller-manager, scheduler, containerd (test images
 * imported), Manifold installed as the node's CNI (`manifold install --once` with the
 * cluster default network as primary; in daemon mode also `manifold daemon`), kubelet; waits
 * until the node is Ready and untainted.
 *
 * @throws Error when the tier cannot run ({@link NODE_SKIP_NOTICE}) or a component fails to
 *   start (the tail of its log in the message); everything started is stopped first
 */
export async function startNodeCluster(opts: NodeClusterOptions = {}): Promise<NodeCluster> {
  const missing = nodeTierMissing();
  if (missing) throw new Error(`${NODE_SKIP_NOTICE} (missing: ${missing})`);
  const began = performance.now();
  const mode = opts.mode ?? "per-call";
  const dir = await Deno.makeTempDir({ prefix: "manifold-node-" });
  const layout: NodeLayout = {
    dir,
    containerdSocket: `${dir}/containerd/containerd.sock`,
    cniBinDir: opts.cniDirs?.bin ?? `${dir}/cni/bin`,
    cniConfDir: opts.cniDirs?.conf ?? `${dir}/cni/net.d`,
    cacheDir: `${dir}/cni/manifold`,
    ipamDir: `${dir}/cni/ipam`,
    kubeletPort: loopbackPort(),
    kubeletHealthzPort: loopbackPort(),
  };
  const bridge = `mfn${crypto.randomUUID().slice(0, 6)}`;
  let api: KubeApiServer | undefined;
  let node: NodeCluster | undefined;
  try {
    for (
      const d of [
        "logs",
        "containerd",
        "cni/bin",
        "cni/net.d",
        "cni/manifold",
        "cni/ipam",
        "kubelet/pki",
        "manifold",
        "sa",
      ]
    ) {
      await Deno.mkdir(`${dir}/${d}`, { recursive: true });
    }
    for (const d of [layout.cniBinDir, layout.cniConfDir]) {
      await Deno.mkdir(d, { recursive: true, mode: 0o755 });
    }
    const apiStart = startKubeApiServer({
      extraArgs: ["--endpoint-reconciler-type=none", "--allow-privileged=true"],
    });
    // Meanwhile: the node's files, containerd, images.
    for await (const e of Deno.readDir("/usr/lib/cni")) {
      await Deno.symlink(`/usr/lib/cni/${e.name}`, `${layout.cniBinDir}/${e.name}`);
    }
    const install = opts.installManifold ?? true;
    if (install) await Deno.symlink(`${REPO}/scripts/manifold`, `${layout.cniBinDir}/manifold`);
    await Deno.writeTextFile(`${dir}/containerd.toml`, containerdToml(layout, PAUSE_IMAGE.ref));
    await Deno.writeTextFile(`${dir}/kubelet.json`, JSON.stringify(kubeletConfig(layout), null, 2));
    const subnet = opts.podSubnet ?? `10.244.${(Deno.pid + subnetSeq++) % 250}.0/24`;
    await Deno.writeTextFile(
      `${layout.cniConfDir}/10-cluster.conflist`,
      JSON.stringify(primaryConflist(layout, bridge, subnet), null, 2),
    );
    api = await apiStart;
    node = new NodeCluster(api, layout, mode, bridge);
    node.track();
    await node.recordCgroups();
    await api.writeKubeconfig(`${dir}/admin.kubeconfig`);
    node.startControlPlane();
    const images = node.startContainerd().then(() =>
      importImages(layout.containerdSocket, [PAUSE_IMAGE, NETCHECK_IMAGE])
    );
    // The plugin's credentials, as a DaemonSet's service account would mount them.
    // deploy/'s CRDs (NetworkAttachmentDefinition, MultiNetworkPolicy, PodNetwork), as a cluster has them.
    for (const f of ["00-crd.yaml", "01-crd-multinetworkpolicy.yaml", "02-crd-multinetwork.yaml"]) {
      for (const doc of parseAllDocuments(await Deno.readTextFile(`${REPO}/deploy/${f}`))) {
        const o = doc.toJS();
        if (o?.kind === "CustomResourceDefinition") await api.admin.installCrd(o);
      }
    }
    await Deno.writeTextFile(`${dir}/sa/token`, api.adminToken, { mode: 0o600 });
    await Deno.writeTextFile(`${dir}/sa/ca.crt`, api.caPem);
    if (install) await installManifold(node, opts.pluginConf ?? {});
    await images;
    if (mode === "daemon") await node.startDaemon();
    node.startKubelet();
    await node.waitNodeReady();
    // The node-lifecycle controller clears not-ready taints; make sure none blocks scheduling.
    await poll(
      "node untainted",
      async () => {
        const n = await api!.admin.request("GET", `/api/v1/nodes/${node!.nodeName}`);
        const taints = n.spec?.taints ?? [];
        if (taints.length) {
          await api!.admin.request("PATCH", `/api/v1/nodes/${node!.nodeName}`, {
            body: { spec: { taints: null } },
            contentType: "application/merge-patch+json",
          });
        }
        return taints.length === 0;
      },
      30_000,
      250,
    );
    node.startMs = Math.round(performance.now() - began);
    return node;
  } catch (e) {
    if (node) await node.stop();
    else {
      await api?.stop();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    }
    throw e;
  }
}

/** `manifold install --once` with the node's dirs, exactly as the DaemonSet's container runs it. */
async function installManifold(
  node: NodeCluster,
  pluginConf: Record<string, unknown>,
): Promise<void> {
  const l = node.layout;
  const args = [
    "install",
    "--once",
    "--skip-binary-copy",
    "--cni-conf-dir",
    l.cniConfDir,
    "--cni-bin-dir",
    l.cniBinDir,
    "--cni-dir",
    l.cacheDir,
    "--kube-server",
    node.api.server,
    "--service-account-dir",
    `${l.dir}/sa`,
    "--log-file",
    `${l.dir}/logs/manifold.log`,
    "--log-level",
    "verbose",
    "--primary-timeout-ms",
    "10000",
    "--plugin-conf",
    JSON.stringify(pluginConf),
  ];
  if (node.daemonSocket) args.push("--daemon-socket", node.daemonSocket);
  await run(`${REPO}/scripts/manifold`, args);
}
