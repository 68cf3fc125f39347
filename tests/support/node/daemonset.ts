/**
 * deploy/ on the node tier's test node (issue 29 §2, §3): the image built offline by
 * scripts/image.sh and imported into the node's containerd, `kubectl apply -k
 * tests/node/overlay` (deploy/ with the image and the node's two CNI directories changed), and
 * what a real node has that the test node lacks:
 *
 * - kube-proxy's one rule pods here need: the `kubernetes` Service's ClusterIP:443 reaches the
 *   API server's loopback port (an iptables `nat OUTPUT` DNAT for host-network pods, removed
 *   on {@link HostPrep.restore}; the serving certificate names that IP);
 * - `/` as a shared mount (systemd makes it so on every real node): the DaemonSet mounts the
 *   host's root with `HostToContainer` propagation, which containerd refuses from a private
 *   mount. Made rshared when it is not (not undone: other mounts may have propagated by then);
 * - cleanup of the host paths deploy/ names (`DirectoryOrCreate`): those that did not exist
 *   before are removed after.
 *
 * The node's CNI directories are fixed ({@link NODE_CNI}, the overlay names them), so one such
 * test runs at a time on a machine ({@link lockHost}).
 *
 * @module
 */

import { run } from "./procs.ts";
import { KUBERNETES_SERVICE_IP } from "../kube_apiserver.ts";
import type { NodeCluster } from "../node_cluster.ts";

const REPO = new URL("../../../", import.meta.url).pathname.replace(/\/$/, "");

/** The overlay (tests/node/overlay/). */
export const OVERLAY = `${REPO}/tests/node/overlay`;

/** The node's CNI directories, as tests/node/overlay/kustomization.yaml names them. */
export const NODE_CNI = {
  root: "/var/lib/manifold-node-test",
  bin: "/var/lib/manifold-node-test/cni/bin",
  conf: "/var/lib/manifold-node-test/cni/net.d",
} as const;

/** The image reference the overlay sets (`images:` newName:newTag). */
export const IMAGE_REF = "manifold.test/manifold:1";

/** Manifold's default `cniDir` (deploy/'s ConfigMap does not move it). */
export const HOST_CACHE_DIR = "/var/lib/cni/manifold";

/** Host paths deploy/'s DaemonSet creates (`DirectoryOrCreate`/`FileOrCreate`), removed after when new. */
const HOST_PATHS = [
  "/var/lib/cni/manifold",
  "/var/lib/cni",
  "/run/k8s.cni.cncf.io/nads",
  "/run/k8s.cni.cncf.io",
  "/run/manifold",
  "/run/cni",
  "/run/xtables.lock",
  "/var/lib/kubelet/pod-resources",
  "/var/lib/kubelet/device-plugins",
  "/var/lib/kubelet",
];

function isFile(p: string): boolean {
  try {
    return Deno.statSync(p).isFile;
  } catch {
    return false;
  }
}

function onPath(c: string): string | undefined {
  return (Deno.env.get("PATH") ?? "").split(":").map((d) => `${d}/${c}`).find(isFile);
}

/**
 * kubectl: beside kube-apiserver (`server/bin/` of the Kubernetes server tarball has it too;
 * or in `MANIFOLD_KUBE_BIN_DIR`), else on PATH.
 */
export function kubectlBinary(): string | undefined {
  const api = Deno.env.get("MANIFOLD_KUBE_APISERVER") ?? "";
  const dir = Deno.env.get("MANIFOLD_KUBE_BIN_DIR") ?? api.replace(/\/[^/]*$/, "");
  if (dir && isFile(`${dir}/kubectl`)) return `${dir}/kubectl`;
  return onPath("kubectl");
}

/** What is missing for these scenarios beyond the node tier, or undefined. */
export function daemonSetMissing(): string | undefined {
  if (!kubectlBinary()) return "kubectl (beside kube-apiserver or on PATH)";
  for (const c of ["mmdebstrap", "iptables", "git", "npm"]) {
    if (!onPath(c)) return `${c} on PATH (scripts/setup.sh installs mmdebstrap)`;
  }
  return undefined;
}

async function exists(p: string): Promise<boolean> {
  try {
    await Deno.lstat(p);
    return true;
  } catch {
    return false;
  }
}

/** An exclusive lock on the fixed host paths; released by closing the file. */
export async function lockHost(): Promise<Deno.FsFile> {
  await Deno.mkdir("/run/lock", { recursive: true });
  const f = await Deno.open("/run/lock/manifold-node-daemonset.lock", {
    write: true,
    create: true,
  });
  await f.lock(true);
  return f;
}

/** Host changes made by {@link prepareHost}, undone by {@link HostPrep.restore}. */
export interface HostPrep {
  /** The DNAT rule's arguments (for `-D`). */
  rule: string[];
  /** Host paths that did not exist before. */
  fresh: string[];
  /** Undo: the rule, the fresh host paths, the node's CNI root. Never throws. */
  restore(): Promise<void>;
}

/**
 * Prepares the host for deploy/ on `node` (see the module documentation).
 *
 * @param node the started node (its API server's loopback port is the DNAT target)
 * @returns the undo handle
 */
export async function prepareHost(node: NodeCluster): Promise<HostPrep> {
  const fresh: string[] = [];
  for (const p of HOST_PATHS) if (!await exists(p)) fresh.push(p);
  const port = new URL(node.api.server).port;
  const rule = [
    "-t",
    "nat",
    "OUTPUT",
    "-d",
    `${KUBERNETES_SERVICE_IP}/32`,
    "-p",
    "tcp",
    "--dport",
    "443",
    "-m",
    "comment",
    "--comment",
    `manifold-node-test ${node.nodeName}`,
    "-j",
    "DNAT",
    "--to-destination",
    `127.0.0.1:${port}`,
  ];
  const [t, nat, chain, ...rest] = rule;
  await run("iptables", [t, nat, "-I", chain, ...rest]);
  const mounts = await Deno.readTextFile("/proc/self/mountinfo");
  const rootLine = mounts.split("\n").find((l) => l.split(" ")[4] === "/");
  if (rootLine && !/ shared:\d+/.test(rootLine.split(" - ")[0])) {
    console.log("daemonset: making / a shared mount (as on systemd hosts) for HostToContainer");
    await run("mount", ["--make-rshared", "/"]);
  }
  return {
    rule,
    fresh,
    restore: async () => {
      await run("iptables", [t, nat, "-D", chain, ...rest]).catch(() => {});
      for (const p of fresh) {
        await Deno.remove(p, { recursive: !p.startsWith("/var/lib/kubelet") }).catch(() => {});
      }
      await Deno.remove(NODE_CNI.root, { recursive: true }).catch(() => {});
    },
  };
}

/** `kubectl --kubeconfig <admin> args…` against the node's API server; stdout. */
export async function kubectl(node: NodeCluster, ...args: string[]): Promise<string> {
  const bin = kubectlBinary() ?? "kubectl";
  return (await run(bin, ["--kubeconfig", `${node.layout.dir}/admin.kubeconfig`, ...args])).stdout;
}

/** Image archives built once per test run (keyed by tag). */
const built = new Map<string, Promise<{ archive: string; ms: number; bytes: number }>>();
let buildDir: string | undefined;
let buildQueue: Promise<unknown> = Promise.resolve();

/**
 * The image archive of this tree (`scripts/image.sh -t <ref>`), built once per test run; with
 * `variant`, built from a copy of the tree whose main.ts ends with that comment, so its
 * bundle differs (a real upgrade).
 *
 * @returns the archive path, how long the build took (ms) and its size (bytes)
 */
export function imageArchive(
  ref: string,
  variant?: string,
): Promise<{ archive: string; ms: number; bytes: number }> {
  const key = `${ref} ${variant ?? ""}`;
  let p = built.get(key);
  if (!p) {
    // One build at a time: scripts/image.sh's first build fills the shared root file system
    // cache under a fixed partial name, which two concurrent cold builds would race on.
    p = buildQueue.then(() => buildImage(ref, variant));
    buildQueue = p.catch(() => {});
    built.set(key, p);
  }
  return p;
}

async function buildImage(ref: string, variant?: string) {
  buildDir ??= await Deno.makeTempDir({ prefix: "manifold-image-test-" });
  let tree = REPO;
  if (variant) {
    tree = `${buildDir}/tree-${crypto.randomUUID().slice(0, 6)}`;
    const files = (await run("git", [
      "-C",
      REPO,
      "ls-files",
      "-z",
      "--cached",
      "--others",
      "--exclude-standard",
    ]))
      .stdout.split("\0").filter((f) =>
        f && /^(main\.ts|deno\.json|deno\.lock|Containerfile|lib\/|native\/|scripts\/)/.test(f)
      );
    for (const f of files) {
      if (!await exists(`${REPO}/${f}`)) continue;
      await Deno.mkdir(`${tree}/${f.slice(0, f.lastIndexOf("/") + 1)}`, { recursive: true });
      await Deno.copyFile(`${REPO}/${f}`, `${tree}/${f}`);
      await Deno.chmod(`${tree}/${f}`, (await Deno.stat(`${REPO}/${f}`)).mode! & 0o777);
    }
    await Deno.writeTextFile(`${tree}/main.ts`, `\n// ${variant}\n`, { append: true });
    await run("git", ["-C", tree, "init", "-q"]);
    await run("git", ["-C", tree, "add", "-A"]);
  }
  const archive = `${buildDir}/${ref.replace(/[^a-z0-9]+/gi, "_")}.tar`;
  const began = performance.now();
  await run("bash", [`${tree}/scripts/image.sh`, "-t", ref, "-o", archive]);
  const ms = Math.round(performance.now() - began);
  return { archive, ms, bytes: (await Deno.stat(archive)).size };
}

/** Removes the archives {@link imageArchive} built in this run (call in the test's `finally`). */
export async function removeImageArchives(): Promise<void> {
  await buildQueue;
  if (buildDir) await Deno.remove(buildDir, { recursive: true }).catch(() => {});
  buildDir = undefined;
  built.clear();
}

/** Imports an image archive into the node's containerd (`k8s.io` namespace). */
export async function importImage(node: NodeCluster, archive: string): Promise<void> {
  await node.ctr("images", "import", archive);
}

/**
 * The id of the running container `container` of pod `podName` (containerd labels), for
 * `ctr task exec`.
 *
 * @throws Error when there is none
 */
export async function containerId(
  node: NodeCluster,
  podName: string,
  container: string,
): Promise<string> {
  const out = await node.ctr(
    "containers",
    "ls",
    "-q",
    `labels."io.kubernetes.pod.name"==${podName},labels."io.kubernetes.container.name"==${container}`,
  );
  const tasks = await node.ctr("tasks", "ls");
  const id = out.split("\n").filter(Boolean).find((i) =>
    tasks.split("\n").some((l) => l.startsWith(i) && /RUNNING/.test(l))
  );
  if (!id) throw new Error(`no running container ${container} in pod ${podName}`);
  return id;
}

/** `ctr task exec` of `args` in a running container; stdout, stderr and exit code. */
export async function execIn(
  node: NodeCluster,
  id: string,
  args: string[],
): Promise<{ code: number; stdout: string; stderr: string }> {
  const out = await new Deno.Command("ctr", {
    args: [
      "--address",
      node.layout.containerdSocket,
      "-n",
      "k8s.io",
      "tasks",
      "exec",
      "--exec-id",
      `t${crypto.randomUUID().slice(0, 8)}`,
      id,
      ...args,
    ],
    stdin: "null",
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}
