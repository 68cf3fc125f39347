/**
 * The daemon container runs the delegates, so it must show them the host exactly where the
 * runtime would (issue 12: "prove with a test that every path a delegate touches is the
 * host's"). This test runs real Debian reference delegates (bridge + host-local with its
 * default dataDir, tuning, portmap, macvlan + host-local) under `strace -f`, ADD then DEL,
 * collects every file path they touch, and checks each against deploy/40-daemonset.yaml:
 *
 * - kernel file systems (`/proc`, `/dev`) come with a privileged, hostPID, hostNetwork pod;
 * - `/sys` and every other path must lie under a hostPath volume that the daemon container
 *   mounts at the same path (writable when the delegate writes), or be an ancestor of one;
 * - the only paths allowed to come from the container image are {@link IMAGE_PATHS} (the
 *   dynamic loader and libraries of Debian's dynamically linked plugins, and the iptables
 *   that portmap executes), read-only: the image must ship them (README "DaemonSet layout").
 *
 * Manifold's own paths (cache, NAD mirror, device-info, socket dir, pod-resources socket,
 * device checkpoint) are checked the same way from their defaults. Root and strace needed.
 */

import assert from "node:assert/strict";
import { parse } from "yaml";
import { DEFAULT_CNI_DIR } from "../../lib/multinet/config.ts";
import { DEFAULT_NAD_MIRROR_DIR } from "../../lib/multinet/nad/mirror.ts";
import {
  DEFAULT_DEVICE_CHECKPOINT_FILE,
  DEFAULT_DEVICE_INFO_DIR,
  DEFAULT_POD_RESOURCES_SOCKET,
  DEFAULT_SYSFS_ROOT,
} from "../../lib/devices/constants.ts";
import { ip, isRoot, Scratch, sh } from "../support/netns.ts";

const CNI_PATH = "/usr/lib/cni"; // the test's delegates; /opt/cni/bin on a node
const DS = new URL("../../deploy/40-daemonset.yaml", import.meta.url).pathname;

/** Paths the container image (not the host) provides to the delegates: read-only. */
const IMAGE_PATHS = [
  "/etc/ld.so.cache",
  "/lib/x86_64-linux-gnu/", // glibc, libmnl, libnftnl, libxtables (Debian's plugins are dynamic)
  "/lib64/",
  "/usr/lib/x86_64-linux-gnu/xtables/", // iptables extensions loaded by portmap's iptables
  "/usr/sbin/iptables",
  "/usr/sbin/ip6tables",
  "/usr/sbin/xtables-nft-multi",
  "/usr/sbin/xtables-legacy-multi",
  "/etc/alternatives/iptables",
];

interface Access {
  path: string;
  write: boolean;
  syscall: string;
}

const WRITE_CALLS = new Set([
  "mkdir",
  "mkdirat",
  "rename",
  "renameat",
  "renameat2",
  "unlink",
  "unlinkat",
  "rmdir",
  "link",
  "linkat",
  "symlink",
  "symlinkat",
  "chmod",
  "fchmodat",
  "chown",
  "fchownat",
  "truncate",
  "utimensat",
  "mknod",
  "mknodat",
  "creat",
]);

/** File accesses in an `strace -f -e trace=%file,%desc -e status=successful` log. */
function parseStrace(log: string): Access[] {
  const out: Access[] = [];
  for (const line of log.split("\n")) {
    const m = /^\d+\s+(\w+)\((.*)$/.exec(line);
    if (!m) continue;
    const [, syscall, rest] = m;
    const paths = [...rest.matchAll(/"(\/(?:[^"\\]|\\.)*)"/g)].map((x) => x[1]);
    const used = syscall === "execve" ? paths.slice(0, 1) : paths;
    const write = WRITE_CALLS.has(syscall) ||
      (/^open/.test(syscall) && /O_WRONLY|O_RDWR|O_CREAT|O_TRUNC/.test(rest));
    for (const p of used) {
      const path = p.startsWith(`${CNI_PATH}/`)
        ? `/opt/cni/bin/${p.slice(CNI_PATH.length + 1)}`
        : p;
      out.push({ path, write, syscall });
    }
  }
  return out;
}

/** Runs one delegate inside the scratch "host" netns under strace; returns stdout and accesses. */
async function traced(
  hostNs: string,
  type: string,
  env: Record<string, string>,
  config: Record<string, unknown>,
): Promise<{ stdout: string; accesses: Access[] }> {
  const log = await Deno.makeTempFile({ prefix: "mft-strace-" });
  try {
    const r = await sh("ip", [
      "netns",
      "exec",
      hostNs,
      "strace",
      "-f",
      "-qq",
      "-e",
      "trace=%file,%desc",
      "-e",
      "status=successful",
      "-o",
      log,
      `${CNI_PATH}/${type}`,
    ], {
      stdin: JSON.stringify(config),
      env: { PATH: "/usr/sbin:/usr/bin:/sbin:/bin", CNI_PATH, ...env },
    });
    assert.equal(r.code, 0, `${type} ${env.CNI_COMMAND}: ${r.stdout} ${r.stderr}`);
    return { stdout: r.stdout, accesses: parseStrace(await Deno.readTextFile(log)) };
  } finally {
    await Deno.remove(log);
  }
}

/** The daemon container's same-path hostPath mounts: container path → writable. */
function daemonMounts(): Map<string, boolean> {
  // deno-lint-ignore no-explicit-any
  const ds = parse(Deno.readTextFileSync(DS)) as any;
  const spec = ds.spec.template.spec;
  const volumes = new Map<string, string>(
    // deno-lint-ignore no-explicit-any
    spec.volumes.map((v: any) => [v.name, v.hostPath?.path]),
  );
  // deno-lint-ignore no-explicit-any
  const daemon = spec.containers.find((c: any) => c.args?.[0] === "daemon");
  assert.ok(daemon, "a daemon container");
  const out = new Map<string, boolean>();
  for (const m of daemon.volumeMounts) {
    if (volumes.get(m.name) === m.mountPath) out.set(norm(m.mountPath), m.readOnly !== true);
  }
  return out;
}

/** `/var/run` is a symlink to `/run` on the host and in Debian images. */
function norm(p: string): string {
  const s = p.replace(/\/+$/, "") || "/";
  return s === "/var/run" ? "/run" : s.startsWith("/var/run/") ? `/run${s.slice(8)}` : s;
}

/** Why a path is not seen as on the host, or undefined when it is. */
function problem(a: Access, mounts: Map<string, boolean>): string | undefined {
  const p = norm(a.path);
  if (p.startsWith("/proc/") || p.startsWith("/dev/") || p === "/proc" || p === "/dev") {
    return undefined;
  }
  for (const [m, writable] of mounts) {
    if (p === m || p.startsWith(`${m}/`)) {
      return a.write && !writable
        ? `${a.syscall} ${a.path}: written, mount ${m} read-only`
        : undefined;
    }
  }
  if (!a.write && [...mounts.keys()].some((m) => m.startsWith(`${p}/`) || p === "/")) {
    return undefined; // an ancestor of a mount point (MkdirAll's stat of /var/lib)
  }
  if (IMAGE_PATHS.some((i) => (i.endsWith("/") ? a.path.startsWith(i) : a.path === i))) {
    return a.write ? `${a.syscall} ${a.path}: written into the image` : undefined;
  }
  return `${a.syscall} ${a.path}: not a same-path host mount of the daemon container`;
}

Deno.test({
  name: "every path a reference delegate touches is a same-path host mount of the daemon",
  ignore: !isRoot(),
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const mounts = daemonMounts();
    const s = new Scratch();
    const net = `mfpath${s.id}`;
    const net2 = `mfpath2${s.id}`;
    try {
      const hostNs = await s.netns("phost");
      const podNs = await s.netns("ppod");
      await ip("-n", hostNs, "link", "add", `mfm${s.id}`, "type", "bridge");
      await ip("-n", hostNs, "link", "set", `mfm${s.id}`, "up");
      const env = (command: string, ifName: string) => ({
        CNI_COMMAND: command,
        CNI_CONTAINERID: `c${s.id}`,
        CNI_NETNS: `/var/run/netns/${podNs}`,
        CNI_IFNAME: ifName,
      });
      const bridge = {
        cniVersion: "1.0.0",
        name: net,
        type: "bridge",
        bridge: `mfb${s.id}`,
        isGateway: true,
        ipam: { type: "host-local", subnet: "10.251.7.0/24" }, // default dataDir
      };
      const macvlan = {
        cniVersion: "1.0.0",
        name: net2,
        type: "macvlan",
        master: `mfm${s.id}`,
        ipam: { type: "host-local", subnet: "10.251.8.0/24" },
      };
      const all: Access[] = [];
      const add = await traced(hostNs, "bridge", env("ADD", "eth0"), bridge);
      all.push(...add.accesses);
      const prevResult = JSON.parse(add.stdout);
      const tuning = {
        cniVersion: "1.0.0",
        name: net,
        type: "tuning",
        sysctl: { "net.core.somaxconn": "500" },
        prevResult,
      };
      const portmap = {
        cniVersion: "1.0.0",
        name: net,
        type: "portmap",
        capabilities: { portMappings: true },
        runtimeConfig: { portMappings: [{ hostPort: 18080, containerPort: 80, protocol: "tcp" }] },
        prevResult,
      };
      all.push(...(await traced(hostNs, "tuning", env("ADD", "eth0"), tuning)).accesses);
      all.push(...(await traced(hostNs, "portmap", env("ADD", "eth0"), portmap)).accesses);
      all.push(...(await traced(hostNs, "macvlan", env("ADD", "net1"), macvlan)).accesses);
      all.push(...(await traced(hostNs, "macvlan", env("DEL", "net1"), macvlan)).accesses);
      all.push(...(await traced(hostNs, "portmap", env("DEL", "eth0"), portmap)).accesses);
      all.push(...(await traced(hostNs, "tuning", env("DEL", "eth0"), tuning)).accesses);
      all.push(...(await traced(hostNs, "bridge", env("DEL", "eth0"), bridge)).accesses);

      // The trace saw what matters: the leases in host-local's default dataDir, the netns.
      assert.ok(all.some((a) => a.write && a.path.startsWith(`/var/lib/cni/networks/${net}/`)));
      assert.ok(all.some((a) => a.write && a.path.startsWith(`/var/lib/cni/networks/${net2}/`)));
      assert.ok(all.some((a) => a.path === `/var/run/netns/${podNs}`));
      assert.ok(
        all.some((a) => a.path === "/opt/cni/bin/host-local"),
        "delegates from the bin dir",
      );

      const problems = [...new Set(all.map((a) => problem(a, mounts)).filter((x) => x))];
      assert.deepEqual(problems, []);
      // The checker is not vacuous: a lease outside the mounts, or a write to a read-only one.
      const probe = (path: string, write: boolean) =>
        problem({ path, write, syscall: "openat" }, mounts);
      assert.match(probe("/var/lib/other/lease", true)!, /not a same-path host mount/);
      assert.match(probe("/opt/cni/bin/x", true)!, /read-only/);
      assert.match(probe("/etc/ld.so.cache", true)!, /written into the image/);
    } finally {
      await Deno.remove(`/var/lib/cni/networks/${net}`, { recursive: true }).catch(() => {});
      await Deno.remove(`/var/lib/cni/networks/${net2}`, { recursive: true }).catch(() => {});
      await s.cleanup();
    }
  },
});

Deno.test("Manifold's own host paths are same-path host mounts of the daemon (writable ones rw)", () => {
  const mounts = daemonMounts();
  const written = [
    `${DEFAULT_CNI_DIR}/record.json`, // the attachment cache
    `${DEFAULT_NAD_MIRROR_DIR}/default/nad.json`, // the NAD mirror the fallback path reads
    `${DEFAULT_DEVICE_INFO_DIR}/cni/x`, // device-info files (Device Information Spec v1.1)
    "/run/manifold/manifold.sock", // the daemon's socket and the forwarder's fallbacks file
    "/run/manifold/fallbacks",
    "/var/lib/cni/cache/results/x", // libcni-style caches
    "/run/cni/dhcp.sock", // the dhcp delegate's daemon socket
    "/run/xtables.lock", // legacy iptables' lock, shared with kube-proxy
    "/var/run/netns/cni-1234", // the runtime's netns files
    "/run/netns/cni-1234",
  ];
  const read = [
    DEFAULT_POD_RESOURCES_SOCKET,
    DEFAULT_DEVICE_CHECKPOINT_FILE,
    `${DEFAULT_SYSFS_ROOT}/class/net/eth0/device`,
    "/opt/cni/bin/bridge",
    "/etc/cni/net.d/00-manifold.conflist",
  ];
  const problems = [
    ...written.map((path) => problem({ path, write: true, syscall: "write" }, mounts)),
    ...read.map((path) => problem({ path, write: false, syscall: "read" }, mounts)),
  ].filter((x) => x);
  assert.deepEqual(problems, []);
});
