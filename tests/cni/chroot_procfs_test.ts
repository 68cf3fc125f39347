/**
 * `chrootDir` with a runtime that passes `CNI_NETNS=/proc/<pid>/ns/net` (cri-dockerd, some
 * VM runtimes): the namespace file is a procfs magic link whose `readlink` is `net:[inode]`,
 * not a path. Manifold must open it where a chrooted delegate does — the root's procfs —
 * through real netlink in a real netns. Needs root (mounts procfs, creates a netns).
 */

import assert from "node:assert/strict";
import { pathInRoot } from "../../lib/cni/root.ts";
import { nullLogger } from "../../lib/log/mod.ts";
import { kernelInRoot } from "../../lib/multinet/chroot.ts";
import { netlinkKernel } from "../../lib/multinet/status/kernel.ts";
import { ip, isRoot, Scratch, sh } from "../support/netns.ts";

Deno.test({
  name: "chrootDir: /proc/<pid>/ns/net (a procfs magic link) is opened in the root's procfs",
  ignore: !isRoot(),
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const s = new Scratch();
    const root = await s.dir("mft-procroot-");
    let sleeper: Deno.ChildProcess | undefined;
    let mounted = false;
    try {
      const ns = await s.netns("pfs");
      await ip(
        "-n",
        ns,
        "link",
        "add",
        `mfpf${s.id}`,
        "type",
        "veth",
        "peer",
        "name",
        `mfpg${s.id}`,
      );
      sleeper = new Deno.Command("ip", {
        args: ["netns", "exec", ns, "sleep", "60"],
        stdout: "null",
        stderr: "null",
      }).spawn();
      const netns = `/proc/${sleeper.pid}/ns/net`;
      await Deno.mkdir(`${root}/proc`);
      const m = await sh("mount", ["-t", "proc", "proc", `${root}/proc`]);
      assert.equal(m.code, 0, m.stderr);
      mounted = true;
      // Wait for `ip netns exec` to have entered the namespace (its ns/net changes).
      const target = Deno.readLinkSync("/proc/self/ns/net");
      for (let i = 0; i < 100 && Deno.readLinkSync(netns) === target; i++) {
        await new Promise((r) => setTimeout(r, 20));
      }

      // The path inside the root is the magic link itself, not its readlink text.
      assert.equal(await pathInRoot(root, netns), `${root}${netns}`);
      const k = kernelInRoot(netlinkKernel(nullLogger), root);
      const snap = await k.inspect(netns);
      assert.ok(
        snap.interfaces.some((i) => i.name === `mfpf${s.id}`),
        `inspected: ${snap.interfaces.map((i) => i.name).join(", ")}`,
      );
    } finally {
      try {
        sleeper?.kill("SIGKILL");
        await sleeper?.status;
      } catch { /* gone */ }
      if (mounted) await sh("umount", ["-l", `${root}/proc`]);
      await s.cleanup();
    }
  },
});
