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
