/**
 * The node harness's configuration files: containerd's `config.toml`, kubelet's
 * KubeletConfiguration, and the cluster default network (bridge + host-local). The settings
 * this machine kind needs (cgroup v1, no lowering of oom_score_adj, no registry) are the ones
 * the kube binaries' README lists; each is commented where it is set.
 *
 * @module
 */

/** Paths and ports one node uses; all under the node's temp dir. */
export interface NodeLayout {
  /** The node's temp dir. */
  dir: string;
  /** containerd's socket. */
  containerdSocket: string;
  /** CNI binary dir (delegates + manifold). */
  cniBinDir: string;
  /** CNI config dir (the primary config + Manifold's `00-manifold.conflist`). */
  cniConfDir: string;
  /** Manifold's `cniDir` (cache records). */
  cacheDir: string;
  /** host-local `dataDir` of every network on this node. */
  ipamDir: string;
  /** kubelet's ports. */
  kubeletPort: number;
  kubeletHealthzPort: number;
}

/** containerd 1.6 config (version 2) for the node; `sandboxImage` must be imported locally. */
export function containerdToml(l: NodeLayout, sandboxImage: string): string {
  return `version = 2
root = "${l.dir}/containerd/root"
state = "${l.dir}/containerd/state"
[grpc]
  address = "${l.containerdSocket}"
[ttrpc]
  address = "${l.containerdSocket}.ttrpc"
[debug]
  level = "info"
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${sandboxImage}"
  # This sandbox may not lower oom_score_adj: runc init fails otherwise.
  restrict_oom_score_adj = true
  enable_cdi = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "${l.cniBinDir}"
    conf_dir = "${l.cniConfDir}"
    # The lexically first config is the node's network (00-manifold.conflist once installed).
    max_conf_num = 1
[plugins."io.containerd.internal.v1.opt"]
  path = "${l.dir}/containerd/opt"
`;
}

/** The KubeletConfiguration (YAML is a JSON superset: written as JSON). */
export function kubeletConfig(l: NodeLayout): Record<string, unknown> {
  return {
    apiVersion: "kubelet.config.k8s.io/v1beta1",
    kind: "KubeletConfiguration",
    address: "127.0.0.1",
    port: l.kubeletPort,
    healthzBindAddress: "127.0.0.1",
    healthzPort: l.kubeletHealthzPort,
    readOnlyPort: 0,
    containerRuntimeEndpoint: `unix://${l.containerdSocket}`,
    // cgroup v1 with cgroupfs, no per-QoS hierarchy, nothing enforced: runs in this sandbox.
    cgroupDriver: "cgroupfs",
    cgroupsPerQOS: false,
    enforceNodeAllocatable: [],
    failSwapOn: false,
    failCgroupV1: false,
    localStorageCapacityIsolation: false,
    // The eviction manager cannot stat the root device here: never evict, never GC images.
    evictionHard: { "memory.available": "0%", "nodefs.available": "0%", "imagefs.available": "0%" },
    imageGCHighThresholdPercent: 100,
    imageGCLowThresholdPercent: 99,
    authentication: { anonymous: { enabled: false }, webhook: { enabled: false } },
    authorization: { mode: "AlwaysAllow" },
    staticPodPath: "",
    serializeImagePulls: false,
    // Fast status: the scenarios wait on pod phases.
    nodeStatusUpdateFrequency: "4s",
    syncFrequency: "10s",
    fileCheckFrequency: "10s",
    resolvConf: "",
  };
}

/** The cluster default network: a bridge with host-local IPAM, the node's primary conflist. */
export function primaryConflist(
  l: NodeLayout,
  bridge: string,
  subnet: string,
): Record<string, unknown> {
  return {
    cniVersion: "1.0.0",
    name: "cluster",
    plugins: [{
      type: "bridge",
      bridge,
      isGateway: true,
      ipMasq: false,
      ipam: { type: "host-local", subnet, dataDir: l.ipamDir, routes: [{ dst: "0.0.0.0/0" }] },
    }],
  };
}
