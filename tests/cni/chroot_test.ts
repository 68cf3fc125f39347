/**
 * Tests of the `chrootDir` pieces of lib/cni: {@link pathInRoot} (lib/cni/root.ts),
 * `findPlugin` inside a root, `isPluginNotFound`, and {@link ProcessPluginExec} through
 * chroot(8) (its own failures mapped like spawn failures; ETXTBSY retried). The exec tests
 * need root (CAP_SYS_CHROOT).
 */

import assert from "node:assert/strict";
import { CniError } from "../../lib/cni/errors.ts";
import { findPlugin, isPluginNotFound, ProcessPluginExec } from "../../lib/cni/invoke.ts";
import { pathInRoot } from "../../lib/cni/root.ts";

const rootOnly = { ignore: Deno.uid() !== 0 };

async function tree(): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "mft-root-" });
  await Deno.mkdir(`${dir}/run/netns`, { recursive: true });
  await Deno.mkdir(`${dir}/usr/libexec/cni`, { recursive: true });
  await Deno.mkdir(`${dir}/opt/cni/bin`, { recursive: true });
  await Deno.mkdir(`${dir}/var`, { recursive: true });
  await Deno.symlink("/run", `${dir}/var/run`); // absolute: restarts at the root
  await Deno.symlink("../../../usr/libexec/cni/bridge", `${dir}/opt/cni/bin/bridge`); // relative
  await Deno.symlink("/usr/libexec/cni/tuning", `${dir}/opt/cni/bin/tuning`); // absolute
  await Deno.symlink("loop", `${dir}/loop`);
  for (const p of ["bridge", "tuning"]) {
    await Deno.writeTextFile(`${dir}/usr/libexec/cni/${p}`, "#!/bin/sh\n");
    await Deno.chmod(`${dir}/usr/libexec/cni/${p}`, 0o755);
  }
  return dir;
}

Deno.test("pathInRoot: links are followed inside the root, never out of it", async () => {
  const dir = await tree();
  try {
    assert.equal(await pathInRoot("/", "/var/run/netns/x"), "/var/run/netns/x");
    assert.equal(await pathInRoot("", "/a"), "/a");
    assert.equal(await pathInRoot(dir, "/var/run/netns/x"), `${dir}/run/netns/x`);
    assert.equal(await pathInRoot(`${dir}/`, "/var/run/netns/x"), `${dir}/run/netns/x`);
    assert.equal(
      await pathInRoot(dir, "/opt/cni/bin/tuning"),
      `${dir}/usr/libexec/cni/tuning`,
    );
    assert.equal(
      await pathInRoot(dir, "/opt/cni/bin/bridge"),
      `${dir}/usr/libexec/cni/bridge`,
    );
    assert.equal(await pathInRoot(dir, "/../../../etc/passwd"), `${dir}/etc/passwd`);
    assert.equal(await pathInRoot(dir, "/opt/./cni/../cni/bin"), `${dir}/opt/cni/bin`);
    assert.equal(await pathInRoot(dir, "/missing/a/b"), `${dir}/missing/a/b`);
    await assert.rejects(pathInRoot(dir, "/loop/x"), /too many levels of symbolic links/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("findPlugin with a root: looks inside it, returns the path inside it", async () => {
  const dir = await tree();
  try {
    // The root's /opt/cni/bin/tuning links to /usr/libexec/cni/tuning: the root's, not ours.
    assert.equal(
      await findPlugin("tuning", ["/opt/cni/bin"], { root: dir }),
      "/opt/cni/bin/tuning",
    );
    assert.equal(
      await findPlugin("bridge", ["/nowhere", "/opt/cni/bin/"], { root: dir }),
      "/opt/cni/bin/bridge",
    );
    const err = await findPlugin("macvlan", ["/opt/cni/bin"], { root: dir }).catch((e) => e);
    assert.ok(err instanceof CniError && err.code === 7, String(err));
    assert.equal(err.msg, 'failed to find plugin "macvlan" in path [/opt/cni/bin]');
    assert.equal(isPluginNotFound(err), true);
    assert.equal(isPluginNotFound(err.withContext("[ns/pod:net]")), true);
    // A delegate's own message about its IPAM (code 999 from Go's skel) is not ours.
    assert.equal(isPluginNotFound(new CniError(999, err.msg)), false);
    assert.equal(isPluginNotFound(new CniError(7, `bridge: ${err.msg}`)), false);
    assert.equal(isPluginNotFound(new Error(err.msg)), false);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

const VERSION_ENV = {
  CNI_COMMAND: "VERSION",
  CNI_CONTAINERID: "",
  CNI_NETNS: "",
  CNI_IFNAME: "",
  CNI_ARGS: "",
  CNI_PATH: "/opt/cni/bin",
};
const stdin = new TextEncoder().encode('{"cniVersion":"1.0.0","name":"n","type":"x"}');

Deno.test({
  name: "ProcessPluginExec with chrootDir: chroot(8) failures are spawn errors, ETXTBSY retried",
  ...rootOnly,
  async fn() {
    const dir = await tree();
    try {
      const exec = new ProcessPluginExec({ chrootDir: dir, spawnRetries: 2, retryDelayMs: 1 });
      // The script's interpreter (/bin/sh) is not in the root: chroot cannot run it (127).
      const missing = await exec.exec({
        path: "/opt/cni/bin/bridge",
        stdin,
        env: VERSION_ENV,
        timeoutMs: 5000,
      }).catch((e) => e);
      assert.ok(missing instanceof CniError, String(missing));
      assert.equal(missing.code, 999);
      assert.equal(missing.msg, "failed to execute plugin bridge");
      assert.match(missing.details, /^chroot: failed to run command/);

      const noRoot = await new ProcessPluginExec({ chrootDir: `${dir}/absent` }).exec({
        path: "/opt/cni/bin/bridge",
        stdin,
        env: VERSION_ENV,
        timeoutMs: 5000,
      }).catch((e) => e);
      assert.ok(noRoot instanceof CniError && noRoot.code === 999, String(noRoot));
      assert.match(noRoot.details, /^chroot: cannot change root directory/);

      // Open for writing: execve fails with ETXTBSY inside the root, every attempt.
      const busy = await Deno.open(`${dir}/usr/libexec/cni/tuning`, { write: true });
      try {
        const err = await exec.exec({
          path: "/opt/cni/bin/tuning",
          stdin,
          env: VERSION_ENV,
          timeoutMs: 5000,
        }).catch((e) => e);
        assert.ok(err instanceof CniError, String(err));
        assert.equal(err.code, 11);
        assert.equal(err.msg, "plugin tuning is busy");
        assert.match(err.details, /Text file busy \(after 3 attempts\)$/);
      } finally {
        busy.close();
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

/** Copies a dynamically linked binary and what `ldd` lists into `dir`, at the same paths. */
async function copyWithLibs(dir: string, bin: string, as: string): Promise<void> {
  const out = await new Deno.Command("ldd", { args: [bin], stdout: "piped" }).output();
  const libs = [...new TextDecoder().decode(out.stdout).matchAll(/(\/\S+) \(0x/g)].map((m) => m[1]);
  for (const [from, to] of [[bin, as], ...libs.map((l) => [l, l])]) {
    await Deno.mkdir(`${dir}${to.slice(0, to.lastIndexOf("/"))}`, { recursive: true });
    await Deno.copyFile(await Deno.realPath(from), `${dir}${to}`);
    await Deno.chmod(`${dir}${to}`, 0o755);
  }
}

Deno.test({
  name: "ProcessPluginExec with chrootDir: the plugin's own exit code is kept",
  ...rootOnly,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "mft-root-" });
    try {
      // A plugin exiting 126 (chroot's "cannot execute" code) with its own message.
      await copyWithLibs(dir, "/bin/sh", "/bin/sh");
      await Deno.writeTextFile(`${dir}/bin/p`, "#!/bin/sh\necho oops >&2\nexit 126\n");
      await Deno.chmod(`${dir}/bin/p`, 0o755);
      const res = await new ProcessPluginExec({ chrootDir: dir }).exec({
        path: "/bin/p",
        stdin,
        env: VERSION_ENV,
        timeoutMs: 5000,
      });
      assert.equal(res.code, 126);
      assert.equal(new TextDecoder().decode(res.stderr).trim(), "oops");
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
