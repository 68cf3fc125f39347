/**
 * `chrootDir`: delegates run inside another root directory, as `manifold daemon` runs them in
 * the host's root mounted at /hostroot. A scratch root holds the real bridge and host-local
 * (with the dynamic loader and libc they link), its own /var/lib/cni, procfs, and the pod's
 * netns bound at a path that exists only inside the root (so kernel verification, ADD's and
 * CHECK's, must look inside the root too); the plugin runs as a real process
 * (scripts/manifold, env + stdin). Needs root.
 */

import assert from "node:assert/strict";
import { ipJson, isRoot, linkNames, Scratch, sh } from "../support/netns.ts";
import { runPlugin } from "../support/plugin.ts";
import { type DaemonProcess, startDaemon } from "../support/daemon.ts";

const rootOnly = { ignore: !isRoot(), sanitizeResources: false, sanitizeOps: false };

const DELEGATES = ["bridge", "host-local"];

/** A root directory with mounts inside; `close()` unmounts them, then removes the directory. */
interface ScratchRoot {
  dir: string;
  /** Binds `source` onto `<dir><target>` (a file or a directory, created). */
  bind(source: string, target: string): Promise<void>;
  close(): Promise<void>;
}

async function run(cmd: string, ...args: string[]): Promise<string> {
  const r = await sh(cmd, args);
  if (r.code !== 0) throw new Error(`${cmd} ${args.join(" ")}: ${r.stderr.trim()}`);
  return r.stdout;
}

/** Copies `path` (following links) to the same path under `dir`. */
async function copyInto(dir: string, path: string): Promise<void> {
  const to = `${dir}${path}`;
  await Deno.mkdir(to.slice(0, to.lastIndexOf("/")), { recursive: true });
  await Deno.copyFile(await Deno.realPath(path), to);
  await Deno.chmod(to, 0o755);
}

async function scratchRoot(): Promise<ScratchRoot> {
  const dir = await Deno.makeTempDir({ prefix: "mft-chroot-" });
  const mounts: string[] = [];
  const root: ScratchRoot = {
    dir,
    async bind(source, target) {
      const at = `${dir}${target}`;
      if ((await Deno.stat(source)).isDirectory) await Deno.mkdir(at, { recursive: true });
      else await Deno.writeFile(at, new Uint8Array());
      await run("mount", "--bind", source, at);
      mounts.push(at);
    },
    async close() {
      for (const m of mounts.reverse()) await sh("umount", ["-l", m]);
      // Never remove a tree that still has something mounted inside.
      const info = await Deno.readTextFile("/proc/self/mountinfo");
      if (info.includes(`${dir}/`)) throw new Error(`mounts left under ${dir}; not removed`);
      await Deno.remove(dir, { recursive: true });
    },
  };
  try {
    for (const d of DELEGATES) {
      const bin = `/usr/lib/cni/${d}`;
      await Deno.mkdir(`${dir}/opt/cni/bin`, { recursive: true });
      await Deno.copyFile(bin, `${dir}/opt/cni/bin/${d}`);
      await Deno.chmod(`${dir}/opt/cni/bin/${d}`, 0o755);
      // The dynamic loader and libraries Debian's plugins link (`ldd`), at their own paths.
      for (const m of (await run("ldd", bin)).matchAll(/(\/\S+) \(0x/g)) {
        await copyInto(dir, m[1]);
      }
    }
    // As on Debian hosts: /var/run is a link to /run (followed inside the root by Manifold).
    await Deno.mkdir(`${dir}/run/netns`, { recursive: true });
    await Deno.mkdir(`${dir}/var/lib/cni`, { recursive: true });
    await Deno.symlink("/run", `${dir}/var/run`);
    await Deno.mkdir(`${dir}/proc`);
    await run("mount", "-t", "proc", "proc", `${dir}/proc`);
    mounts.push(`${dir}/proc`);
    return root;
  } catch (e) {
    await root.close().catch(() => {});
    throw e;
  }
}

for (const mode of ["in-process", "daemon"] as const) {
  Deno.test({
    name:
      `chrootDir (${mode}): ADD, CHECK, DEL run bridge + host-local inside the root; the lease is the root's`,
    ...rootOnly,
    fn: () => scenario(mode),
  });
}

Deno.test({
  name: "chrootDir: manifold daemon refuses to start when the directory is missing",
  ...rootOnly,
  async fn() {
    const s = new Scratch();
    try {
      const dir = await s.dir();
      const conf = {
        cniVersion: "1.0.0",
        name: "manifold-chroot",
        type: "manifold",
        chrootDir: `${dir}/hostroot`,
        cniDir: `${dir}/cache`,
        delegates: [{ cniVersion: "1.0.0", name: "n", type: "bridge" }],
      };
      await assert.rejects(
        startDaemon(dir, conf),
        /daemon exited 1: .*chrootDir .*hostroot: no such directory/s,
      );
    } finally {
      await s.cleanup();
    }
  },
});

async function scenario(mode: "in-process" | "daemon"): Promise<void> {
  const s = new Scratch();
  let root: ScratchRoot | undefined;
  let daemon: DaemonProcess | undefined;
  try {
    root = await scratchRoot();
    const netns = await s.netns("chr");
    // The pod's netns exists at this path only inside the root.
    const podNetns = `pod-${s.id}`;
    await root.bind(`/run/netns/${netns}`, `/run/netns/${podNetns}`);
    const cniNetns = `/var/run/netns/${podNetns}`;
    assert.equal(await exists(cniNetns), false, "the netns path is the root's only");

    const network = `mft-chroot-${s.id}`;
    const bridge = s.trackLink(`mfch${s.id}`);
    const cache = await s.dir();
    const conf = {
      cniVersion: "1.0.0",
      name: "manifold-chroot",
      type: "manifold",
      chrootDir: root.dir,
      cniDir: cache,
      binDir: "/opt/cni/bin",
      logLevel: "debug",
      delegates: [{
        cniVersion: "1.0.0",
        name: network,
        type: "bridge",
        bridge,
        ipam: { type: "host-local", subnet: "10.247.9.0/24" },
      }],
    };
    let config: Record<string, unknown> = conf;
    if (mode === "daemon") {
      daemon = await startDaemon(await s.dir(), conf, { flags: ["--log-level", "debug"] });
      // Served by the daemon or failed: never run in-process.
      config = { ...daemon.conf, daemonFallback: false };
    }
    const call = (command: "ADD" | "CHECK" | "DEL") =>
      runPlugin({
        command,
        config,
        containerId: `chroot-${s.id}`,
        netns: cniNetns,
        ifName: "eth0",
        path: "/opt/cni/bin",
      });

    const add = await call("ADD");
    assert.equal(add.code, 0, `ADD: ${add.stdout}\n${add.stderr}`);
    const ips = (add.json?.ips as { address: string }[] | undefined)?.map((i) => i.address);
    assert.equal(ips?.length, 1, add.stdout);
    const ip = ips![0].split("/")[0];
    assert.match(ip, /^10\.247\.9\.\d+$/);

    // The kernel: eth0 in the pod's netns holds the address.
    assert.deepEqual(await linkNames(netns), ["eth0"]);
    const addrs = await ipJson<{ ifname: string; addr_info: { local: string }[] }[]>(
      netns,
      "addr",
      "show",
      "eth0",
    );
    assert.ok(addrs[0].addr_info.some((a) => a.local === ip));

    // host-local wrote its lease into the root's /var/lib/cni/networks, not this process's.
    const leaseDir = `${root.dir}/var/lib/cni/networks/${network}`;
    assert.equal(
      (await Deno.readTextFile(`${leaseDir}/${ip}`)).split(/\r?\n/)[0],
      `chroot-${s.id}`,
    );
    assert.equal(await exists(`/var/lib/cni/networks/${network}`), false);
    // Manifold's cache stays in this process's view.
    assert.ok((await Array.fromAsync(Deno.readDir(cache))).length > 0, "cache written");

    // Kernel verification opened the netns where the delegates did (inside the root).
    assert.doesNotMatch(add.stderr, /cannot read the sandbox/);
    if (daemon) {
      daemon.kill("SIGTERM");
      const { stderr } = await daemon.exited();
      daemon = undefined;
      assert.doesNotMatch(stderr, /cannot read the sandbox/);
      assert.match(stderr, /chroot-/, "the daemon served the requests");
      // CHECK and DEL: the in-process path (the daemon is gone) with the same config.
      config = conf;
    }
    const check = await call("CHECK");
    assert.equal(check.code, 0, `CHECK: ${check.stdout}\n${check.stderr}`);

    const del = await call("DEL");
    assert.equal(del.code, 0, `DEL: ${del.stdout}\n${del.stderr}`);
    assert.equal(await exists(`${leaseDir}/${ip}`), false, "lease released");
    assert.deepEqual(await linkNames(netns), []);
    const again = await call("DEL");
    assert.equal(again.code, 0, `second DEL: ${again.stdout}\n${again.stderr}`);
  } finally {
    if (daemon) {
      daemon.kill("SIGTERM");
      await daemon.exited();
    }
    await root?.close();
    await s.cleanup();
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch {
    return false;
  }
}
