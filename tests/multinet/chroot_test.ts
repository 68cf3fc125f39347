/** Tests of lib/multinet/chroot.ts and the `chrootDir` key of lib/multinet/config.ts. */

import assert from "node:assert/strict";
import { CniError } from "../../lib/cni/errors.ts";
import { assertChrootDir, delegateRoot, kernelInRoot } from "../../lib/multinet/chroot.ts";
import { parseManifoldConf } from "../../lib/multinet/config.ts";
import type { KernelAccess } from "../../lib/multinet/status/kernel.ts";
import { nullLogger } from "../../lib/log/mod.ts";

const base = { cniVersion: "1.0.0", type: "manifold", clusterNetwork: "/etc/cni/net.d/x.conf" };

Deno.test("config: chrootDir is an absolute path; empty means unset", () => {
  assert.equal(parseManifoldConf(base).chrootDir, undefined);
  assert.equal(parseManifoldConf({ ...base, chrootDir: "" }).chrootDir, undefined);
  assert.equal(parseManifoldConf({ ...base, chrootDir: "/hostroot" }).chrootDir, "/hostroot");
  for (const bad of ["hostroot", 7]) {
    assert.throws(
      () => parseManifoldConf({ ...base, chrootDir: bad }),
      (e) => e instanceof CniError && e.code === 7 && /chrootDir/.test(e.details),
    );
  }
});

Deno.test("delegateRoot: a directory applies; missing, unset or / does not", async () => {
  const dir = await Deno.makeTempDir({ prefix: "mft-root-" });
  try {
    assert.equal(await delegateRoot(dir, nullLogger), dir);
    assert.equal(await delegateRoot(`${dir}/absent`, nullLogger), undefined);
    assert.equal(await delegateRoot(undefined, nullLogger), undefined);
    assert.equal(await delegateRoot("/", nullLogger), undefined);
    await assertChrootDir(dir);
    await assertChrootDir(undefined);
    await assert.rejects(assertChrootDir(`${dir}/absent`), /chrootDir .*absent: no such directory/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("kernelInRoot: netns paths are opened inside the root", async () => {
  const dir = await Deno.makeTempDir({ prefix: "mft-root-" });
  try {
    await Deno.mkdir(`${dir}/run/netns`, { recursive: true });
    await Deno.mkdir(`${dir}/var`);
    await Deno.symlink("/run", `${dir}/var/run`);
    const seen: string[] = [];
    const fake: KernelAccess = {
      inspect: (p) => {
        seen.push(p);
        return Promise.resolve({ interfaces: [], routes: [] } as never);
      },
      setDefaultRoute: (p) => {
        seen.push(p);
        return Promise.resolve({} as never);
      },
    };
    const k = kernelInRoot(fake, dir);
    await k.inspect("/var/run/netns/cni-1");
    await k.setDefaultRoute("/proc/1/ns/net", {} as never);
    assert.deepEqual(seen, [`${dir}/run/netns/cni-1`, `${dir}/proc/1/ns/net`]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("with chrootDir the readiness file (a host path) is checked inside the root", async () => {
  const dir = await Deno.makeTempDir({ prefix: "mft-root-" });
  const { buildDeps } = await import("../../lib/multinet/wiring.ts");
  const { parseCniEnv } = await import("../../lib/cni/env.ts");
  const { cmdStatus } = await import("../../lib/multinet/verbs/gc.ts");
  try {
    const root = `${dir}/hostroot`;
    await Deno.mkdir(`${root}/run/flannel-r29`, { recursive: true });
    await Deno.mkdir(`${dir}/nads`);
    const conf = parseManifoldConf({
      ...base,
      clusterNetwork: `${dir}/absent.conflist`,
      chrootDir: root,
      readinessindicatorfile: "/run/flannel-r29/subnet.env",
      nadDir: `${dir}/nads`,
      cniDir: `${dir}/cache`,
    });
    const status = async () => {
      const deps = await buildDeps(
        conf,
        parseCniEnv({ CNI_COMMAND: "STATUS", CNI_PATH: "/opt/cni/bin" }),
        nullLogger,
        {
          processEnv: {},
        },
      );
      return await cmdStatus(deps).then(() => undefined, (e) => e);
    };
    // The host's flannel wrote it (below the root, as the daemon container sees the host):
    // ready. What fails next is the absent cluster network, not readiness.
    await Deno.writeTextFile(`${root}/run/flannel-r29/subnet.env`, "FLANNEL_NETWORK=x\n");
    const ready = await status();
    assert.ok(!(ready instanceof CniError && ready.code === 50), String(ready?.details ?? ready));
    await Deno.remove(`${root}/run/flannel-r29/subnet.env`);
    // Gone from the host's root: the default network is not ready (code 50).
    const missing = await status();
    assert.ok(missing instanceof CniError && missing.code === 50, String(missing));
    assert.match(missing.details, /\/hostroot\/run\/flannel-r29\/subnet\.env/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
